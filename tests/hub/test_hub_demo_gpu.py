"""The hub demo shows GPU sharing: the example notebook's "Share a GPU with your team" section,
run as ann in her own kernel, holds one of team alpha's GPUs, and cat, in hers, sees it in use;
the section's last cell gives it back.

The cells are the notebook's own (tag ``share-a-gpu``). The submit cell runs first with
``--dry-run``: the installed ms-swift's own parser must accept its arguments, as the real submit
checks them. The hub of tests/hub runs the fake trainer as the job command, so the job then gets
``--sleep 600`` to stay Running as the real, longer training would, with that check off (ms-swift
rightly refuses ``--sleep``: that refusal, unseen, was why the merged test once waited 240 s for
a job never submitted). Everything else is the demo's. When ann's cells end before her job runs,
the test fails at once with what they printed.
"""

from __future__ import annotations

import importlib.util
import json
import threading

import nbformat
from hub_kernel import run_in_kernel
from hub_process import wait_for
from quota_testing import ROOT

EXAMPLE = ROOT / "examples" / "quota_and_swift_sft.ipynb"
TAG = "share-a-gpu"
GPU = "requests.nvidia.com/gpu"
MARK = "RESULT:"
CHECKED = "DRY-RUN-DONE"
ACCEPTED = "own parser accepts the final arguments"


def section_cells() -> list[str]:
    nb = nbformat.read(EXAMPLE, as_version=4)
    return [c.source for c in nb.cells if c.cell_type == "code" and TAG in c.metadata.get("tags", [])]


def test_the_example_notebook_has_a_one_gpu_section_that_ends_by_cancelling():
    submit, show, cancel = section_cells()
    assert submit.startswith("gpu_job = %swift_sft --as-is --gpus 1 ")
    assert show == "%quota team-alpha"
    assert cancel == "gpu_job.cancel()"


def test_cat_sees_the_gpu_anns_notebook_job_holds_until_ann_cancels_it(servers, tmp_path):
    hub = servers
    submit, show, cancel = section_cells()
    looked = tmp_path / "cat-has-looked"
    anns_code = f"""
import json, os, pathlib, time
get_ipython().run_line_magic("load_ext", "jupyter_quota")
demo = pathlib.Path("tiny-demo").resolve()
{submit} --dry-run
print("{CHECKED}")
get_ipython().run_line_magic("config", "QuotaMagics.check_argv = False")  # ms-swift does not know --sleep
{submit} --sleep 600
deadline = time.monotonic() + 300
while not os.path.exists({str(looked)!r}):  # the test creates it once cat has looked
    assert time.monotonic() < deadline, "cat never looked"
    time.sleep(0.1)
{cancel}
print("{MARK}" + json.dumps({{"name": gpu_job.name, "final": gpu_job.wait(timeout=120, interval=0.2)}}))
"""
    outcome: dict = {}

    def ann():
        try:
            outcome["stdout"] = run_in_kernel(hub, "ann", anns_code, timeout=480)
        except BaseException as e:  # noqa: BLE001 - raised in the test's thread below
            outcome["error"] = e

    thread = threading.Thread(target=ann, daemon=True)
    thread.start()
    try:
        job = wait_for(
            "ann's one-GPU job Running", lambda: _running_gpu_job(hub) or _ended(thread, outcome), 240, hub.log
        )
        assert job["owner"] == "ann" and job["gpus"] == 1, job
        balance = hub.quota("cat", "GET", "/namespaces/team-alpha/balance")
        assert balance.status_code == 200, balance.text
        seen = balance.json()["resources"][GPU]
        assert (seen["used"], seen["remaining"]) == ("1", "1"), seen
        shown = run_in_kernel(hub, "cat", _captured(show))
        assert "1 of 2 used, 1 left" in shown, shown
    finally:
        looked.touch()
        thread.join(480)
        leftover = _running_gpu_job(hub)
        if leftover:  # ann's kernel did not get to cancel it
            hub.quota("ann", "DELETE", f"/namespaces/team-alpha/jobs/{leftover['name']}")
    if "error" in outcome:
        raise outcome["error"]
    printed = outcome["stdout"]
    dry_run = printed[: printed.index(CHECKED)]
    assert "Dry run: nothing submitted" in dry_run, printed
    if importlib.util.find_spec("swift") is not None:  # the kernel runs in this interpreter's environment
        assert ACCEPTED in dry_run, printed
    lines = [line for line in printed.splitlines() if line.startswith(MARK)]
    assert len(lines) == 1, printed
    result = json.loads(lines[0][len(MARK) :])
    assert result["name"] == job["name"] and result["final"] == "Failed", result
    after = hub.quota("cat", "GET", "/namespaces/team-alpha/balance").json()["resources"][GPU]
    assert after["used"] == "0", after


def _ended(thread: threading.Thread, outcome: dict) -> None:
    """Fail at once, with what her cells printed, when ann's code ended before her job ran."""
    if thread.is_alive():
        return None
    if "error" in outcome:
        raise AssertionError(f"ann's section failed before her job was Running: {outcome['error']}")
    raise AssertionError("ann's section ended before her job was Running; it printed:\n" + outcome["stdout"])


def _running_gpu_job(hub) -> dict | None:
    r = hub.quota("ann", "GET", "/namespaces/team-alpha/jobs")
    assert r.status_code == 200, r.text
    running = [j for j in r.json()["jobs"] if j["name"].startswith("tiny-demo-gpu-") and j["phase"] == "Running"]
    return running[0] if running else None


def _captured(cell: str) -> str:
    """Run a magic cell in the kernel and print what it displayed, as text."""
    return f"""
from IPython import get_ipython
from IPython.utils.capture import capture_output
ip = get_ipython()
ip.run_line_magic("load_ext", "jupyter_quota")
with capture_output() as shown:
    ip.run_cell({cell!r})
print(shown.stdout + "".join(o.data.get("text/plain", "") for o in shown.outputs))
"""
