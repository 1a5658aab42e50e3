"""The handle ``%swift_deploy`` returns: an endpoint, its phase, its URL, an ``openai`` client for
it, and stop."""

from __future__ import annotations

import time
import urllib.parse

#: phases in which an endpoint still moves on by itself
WAITING = ("Pending", "Starting")
#: phases of an endpoint that no longer runs
ENDED = ("Stopped", "Failed")


class Endpoint:
    """An endpoint of the server (``GET .../endpoints/{name}``), refreshed on :meth:`refresh`."""

    def __init__(self, client, namespace: str, name: str, info: dict, interval: float = 2.0):
        self.client = client
        self.namespace = namespace
        self.name = name
        self.info = info
        self.interval = interval

    @property
    def phase(self) -> str:
        return self.info["phase"]

    @property
    def models(self) -> list[str]:
        return list(self.info.get("models") or [])

    @property
    def url(self) -> str:
        """The absolute URL of its OpenAI-compatible API, through the Jupyter server."""
        return urllib.parse.urljoin(self.client.server_url, self.info["url"])

    def refresh(self) -> Endpoint:
        self.info = self.client.endpoint(self.namespace, self.name)
        return self

    def wait(self, timeout: float | None = None, progress=None) -> str:
        """Refresh until the endpoint is Ready, Stopped or Failed (or ``timeout`` s); its phase.
        ``progress(info)`` is called on each change of phase."""
        deadline = None if timeout is None else time.monotonic() + timeout
        seen = None
        while True:
            if self.phase != seen and progress is not None:
                progress(self.info)
            seen = self.phase
            if self.phase not in WAITING or (deadline is not None and time.monotonic() >= deadline):
                return self.phase
            time.sleep(self.interval)
            self.refresh()

    def openai(self, **kwargs):
        """An ``openai.OpenAI`` client for the endpoint, signed in with this server's token."""
        import openai

        return openai.OpenAI(base_url=self.url, api_key=self.client.token or "none", **kwargs)

    def stop(self, timeout: float | None = 120.0) -> Endpoint:
        """Stop it and wait (at most ``timeout`` s; None: not at all) until its process has
        exited and its quota is back."""
        self.info = self.client.delete_endpoint(self.namespace, self.name)
        deadline = None if timeout is None else time.monotonic() + timeout
        while deadline is not None and self.phase not in ENDED and time.monotonic() < deadline:
            time.sleep(self.interval)
            self.refresh()
        return self

    def __repr__(self) -> str:
        text = f"Endpoint {self.namespace}/{self.name}: {self.phase}"
        if self.models:
            text += f", serving {', '.join(self.models)} at {self.url}"
        if self.info.get("message"):
            text += f" ({self.info.get('reason', '')}: {self.info['message']})"
        return text
