"""Run code in a user's kernel through the real hub: the Jupyter REST API, then the kernel's websocket."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid

import requests
from hub_process import HubProcess
from tornado.httpclient import HTTPRequest
from tornado.websocket import websocket_connect


def run_in_kernel(hub: HubProcess, user: str, code: str, timeout: float = 240) -> str:
    """Start a kernel in ``user``'s server (REST), run ``code`` over the kernel websocket, return stdout."""
    with kernel_of(hub, user) as execute:
        return execute(code, timeout)


@contextlib.contextmanager
def kernel_of(hub: HubProcess, user: str):
    """A kernel in ``user``'s server for several runs (a notebook's cells, with checks between):
    yields ``execute(code, timeout=240) -> stdout``; the kernel is deleted at the end."""
    headers = {"Authorization": f"token {hub.token(user)}"}
    api = f"{hub.url}/user/{user}/api/kernels"
    r = requests.post(api, headers=headers, json={"name": "python3"}, timeout=120)
    assert r.status_code == 201, r.text
    kernel = r.json()["id"]
    ws = api.replace("http://", "ws://") + f"/{kernel}/channels"

    def execute(code: str, timeout: float = 240) -> str:
        return asyncio.run(asyncio.wait_for(_execute(ws, headers, code), timeout))

    try:
        yield execute
    finally:
        requests.delete(f"{api}/{kernel}", headers=headers, timeout=60)


async def _execute(url: str, headers: dict, code: str) -> str:
    conn = await websocket_connect(HTTPRequest(url, headers=headers))
    msg_id = uuid.uuid4().hex
    conn.write_message(
        json.dumps(
            {
                "header": {
                    "msg_id": msg_id,
                    "msg_type": "execute_request",
                    "session": uuid.uuid4().hex,
                    "username": "",
                    "version": "5.3",
                    "date": "",
                },
                "parent_header": {},
                "metadata": {},
                "channel": "shell",
                "buffers": [],
                "content": {
                    "code": code,
                    "silent": False,
                    "store_history": False,
                    "user_expressions": {},
                    "allow_stdin": False,
                    "stop_on_error": True,
                },
            }
        )
    )
    out, replied, idle = [], False, False
    try:
        while not (replied and idle):
            raw = await conn.read_message()
            assert raw is not None, f"the kernel's websocket closed; output so far: {''.join(out)}"
            if isinstance(raw, bytes):
                continue  # a binary frame: a message with buffers (a widget's arrays, the loss plot's)
            msg = json.loads(raw)
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream":
                out.append(content["text"])
            elif kind == "error":
                raise AssertionError("the probe failed in the kernel:\n" + "\n".join(content["traceback"]))
            elif kind == "execute_reply":
                replied = True
            elif kind == "status" and content["execution_state"] == "idle":
                idle = True
    finally:
        conn.close()
    return "".join(out)
