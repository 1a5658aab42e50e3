"""``%quota`` and ``%swift_sft`` in a kernel of a user's server under the hub: the magics call their
own server, which forwards to the quota service; nothing in them knows about the hub."""

from __future__ import annotations

import json

from hub_kernel import run_in_kernel

MARK = "RESULT:"
CODE = r"""
import json
from IPython import get_ipython
from IPython.utils.capture import capture_output
ip = get_ipython()
ip.run_line_magic("load_ext", "jupyter_quota")
with capture_output() as shown:
    ip.run_line_magic("quota", "")
balance = shown.stdout + "".join(o.data.get("text/plain", "") for o in shown.outputs)
with capture_output():
    job = ip.run_line_magic(
        "swift_sft", "--gpus 1 --name hub-magic --model Qwen/Qwen2.5-0.5B-Instruct --dataset d.jsonl --max_steps 2"
    )
final = job.wait(timeout=120, interval=0.2)
print("RESULT:" + json.dumps({"balance": balance, "name": job.name, "final": final, "logs": job.logs()}))
"""


def test_quota_and_swift_sft_in_anns_kernel_go_through_her_server_to_the_service(servers):
    hub = servers
    stdout = run_in_kernel(hub, "ann", CODE)
    lines = [line for line in stdout.splitlines() if line.startswith(MARK)]
    assert len(lines) == 1, stdout
    result = json.loads(lines[0][len(MARK) :])
    assert "team-alpha (team alpha)" in result["balance"] and "team-beta" not in result["balance"]
    assert result["name"].startswith("hub-magic-") and result["final"] == "Succeeded", result
    assert "--max_steps 2" in result["logs"]
    # the job is in the service's one ledger: cat, ann's teammate, sees it through her own server
    r = hub.quota("cat", "GET", f"/namespaces/team-alpha/jobs/{result['name']}")
    assert r.status_code == 200 and r.json()["owner"] == "ann", r.text
