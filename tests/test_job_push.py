"""The job widget follows its job by push (``GET /events``), not by polling the job route (issue 23).

Each test runs a real jupyter-server whose tornado ``log_function`` writes every request it
answered to a file, so the GETs are counted on the server's side. The job is a ``fake_trainer``
that logs two steps, waits for a file the test makes, then logs two more and ends.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest
from server_process import ServerProcess

from jupyter_quota.magics.client import QuotaClient
from jupyter_quota.magics.follow import Job

NAMESPACE = "team-alpha"
INTERVAL = 0.2  # the follower's interval: polling would read the job five times a second
LOG_READS = 15  # log reads to wait for while the job runs (three seconds of polling)

COUNTING = """
def _count(handler, _path={path!r}):
    with open(_path, "a") as f:
        f.write(f"{{handler.request.method}} {{handler.request.path}} {{handler.get_status()}}\\n")
c.ServerApp.tornado_settings = {{"log_function": _count}}
"""
#: the stream refused, as a proxy that holds no long requests open would (or a server without it)
REFUSING = """
import tornado.web
import jupyter_quota.handlers as _handlers
async def _refuse(self):
    raise tornado.web.HTTPError(503, "no event streams here")
_handlers.EventsHandler.get = _refuse
"""


def _server(root, refuse: bool) -> ServerProcess:
    root.mkdir()
    requests = root / "requests.log"
    config = COUNTING.format(path=str(requests)) + (REFUSING if refuse else "")
    process = ServerProcess(root / "state", root, extra_config=config).start()
    process.requests = requests
    return process


def _counts(server, name: str) -> Counter:
    """Requests the server answered, by kind: the job route, its log, the event stream."""
    counts: Counter = Counter()
    job = f"/quota/v1/namespaces/{NAMESPACE}/jobs/{name}"
    for line in server.requests.read_text().splitlines() if server.requests.exists() else []:
        method, path, status = line.split()
        if method == "GET" and path == job:
            counts["job"] += 1
        elif method == "GET" and path == job + "/logs":
            counts["logs"] += 1
        elif method == "GET" and path.endswith("/quota/v1/events"):
            counts[f"events {status}"] += 1
    return counts


def _eventually(check, what: str, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"{what} within {timeout:g} s")


def _follow_a_job(server, tmp_path, name: str) -> tuple[Job, Counter]:
    """Submit the job, follow it until it ran ``LOG_READS`` log reads, let it end, wait for it."""
    client = QuotaClient(f"http://127.0.0.1:{server.port}/", server.token, "test")
    release = tmp_path / f"release-{name}"
    args = ["--model", "m", "--steps", "2", "--more-steps", "2", "--until-file", str(release)]
    info = client.submit(NAMESPACE, {"args": args, "gpus": 1, "name": name})
    job = Job(client, NAMESPACE, info["name"], info, interval=INTERVAL).follow()
    try:
        _eventually(lambda: job.phase == "Running" and job.progress.step == 2, "the job runs at step 2")
        _eventually(lambda: _counts(server, job.name)["logs"] >= LOG_READS, f"{LOG_READS} log reads")
    finally:
        release.touch()
    assert job.wait(timeout=60) == "Succeeded"
    return job, _counts(server, job.name)


@pytest.fixture
def pushing(tmp_path):
    process = _server(tmp_path / "pushing", refuse=False)
    yield process
    process.stop()


@pytest.fixture
def refusing(tmp_path):
    process = _server(tmp_path / "refusing", refuse=True)
    yield process
    process.stop()


def test_a_followed_job_reaches_its_end_on_pushed_events_with_few_reads_of_its_route(pushing, tmp_path):
    job, counts = _follow_a_job(pushing, tmp_path, "pushed")
    # polling reads the job route once per log read; pushed, it is read once as the stream opens
    # (and again only every RESYNC_SECONDS, 30 s: longer than this job runs)
    assert counts["logs"] >= LOG_READS
    assert counts["job"] <= 2, counts
    assert not job.pushed  # the stream was closed at the end
    # what the widget shows is what polling showed: the end, and every step of the log
    assert job.progress.step == 4 and job.steps == [1, 2, 3, 4]
    assert "Succeeded" in job.widget.header.value and job.widget.progress.bar_style == "success"


def test_where_the_stream_is_refused_the_job_is_polled_to_its_end(refusing, tmp_path):
    job, counts = _follow_a_job(refusing, tmp_path, "polled")
    assert counts["events 503"] == 1  # asked once, refused: not asked again
    assert counts["job"] >= LOG_READS  # polled: the job with each log read
    assert job.progress.step == 4 and job.steps == [1, 2, 3, 4]
    assert "Succeeded" in job.widget.header.value
