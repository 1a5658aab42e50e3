"""The example notebook in a real JupyterLab and Chromium, its job run as a pod on a real node.

The lab server runs the quota service in kube-backend mode against the test cluster with its real
node (``tests/kube/kubenode.py``: containerd, a kubelet, the job image with torch and ms-swift).
The team's profile names the image, the node's label and taint, a LimitRange (the pod's requests
and limits) and a hostPath volume: the lab's root folder, mounted in the pods at the same path,
so the tiny model the notebook builds in ``./tiny-demo`` is where ``swift sft`` in the pod looks.

The notebook (``examples/quota_and_swift_sft.ipynb`` up to its section 6, which is for the hub
demo, one cell at a time) is opened and run with Run All, twice, as a user would. Each run's
job must end Succeeded as a pod on the node, and the widget must plot its 20 losses. The loss
plot's screenshot is ``kube-notebook-loss-plot.png`` and the pods' names, node, requests and
limits are in ``kube-notebook.json``, both in the UI test output folder (``$JUPYTER_QUOTA_TEST_OUTPUT/ui``).
"""

from __future__ import annotations

import getpass
import json
import sys
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "kube"))
import kubecluster  # noqa: E402
import kubenode  # noqa: E402

from jupyter_quota.backends.kube import apply_profiles  # noqa: E402
from jupyter_quota.profiles import TeamProfile  # noqa: E402

pytestmark = [pytest.mark.ui, pytest.mark.slow]

EXAMPLE = ROOT / "examples" / "quota_and_swift_sft.ipynb"
FIGURE = ".jp-OutputArea .bqplot.figure"
#: The notebook's job logs 20 steps (``--max_steps 20 --logging_steps 1``).
STEPS = 20
LIMIT_RANGE = {
    "limits": [
        {
            "type": "Container",
            "default": {"cpu": "2", "memory": "3Gi"},
            "defaultRequest": {"cpu": "500m", "memory": "2Gi"},
        }
    ]
}


@pytest.fixture(scope="module")
def node_cluster(request):
    return kubecluster.node_or_fail(request.config)


def _notebook(path: Path) -> None:
    """The example up to its section 6 (the hub demo's shared-GPU part, run by hand as ann)."""
    nb = json.loads(EXAMPLE.read_text())
    cut = next(i for i, c in enumerate(nb["cells"]) if "".join(c["source"]).startswith("## 6."))
    nb["cells"] = nb["cells"][:cut]
    path.write_text(json.dumps(nb))


def test_the_example_notebook_runs_its_job_as_a_pod_on_the_node_twice(
    node_cluster, start_lab, open_page, chromium_browser, ui_output_dir, tmp_path
):
    kube = node_cluster.kube()
    namespace = f"jq-nb-{uuid.uuid4().hex[:6]}"
    home = tmp_path / "lab"
    home.mkdir()
    root = home / "root"  # made by start_lab; the pods mount it at the same path
    profile = {
        "team": "nb",
        "namespace": namespace,
        "users": [getpass.getuser()],
        "hard": {"requests.nvidia.com/gpu": "2"},
        "limitRange": LIMIT_RANGE,
        "gpuModel": "A100 80GB",
        "gpuMemory": "80Gi",
        "image": kubenode.JOB_IMAGE,
        "nodeSelector": dict(kubecluster.REAL_NODE_LABEL),
        "tolerations": [
            {**{k: kubecluster.REAL_NODE_TAINT[k] for k in ("key", "value", "effect")}, "operator": "Equal"}
        ],
        "volumes": [{"name": "work", "mountPath": str(root), "hostPath": {"path": str(root), "type": "Directory"}}],
    }
    apply_profiles([TeamProfile(**profile)], kube)
    kubecluster.wait_quota_status(kube, namespace)
    extra = [
        "c.JupyterQuota.backend = 'kube'",
        f"c.JupyterQuota.profiles = [{profile!r}]",
        f"c.JupyterQuota.kube_config_file = {str(node_cluster.kubeconfig)!r}",
        "c.JupyterQuota.kube_in_cluster = 'false'",
        "c.JupyterQuota.job_command = ['swift', 'sft']",
        f"c.JupyterQuota.job_image = {kubenode.JOB_IMAGE!r}",
        "c.JupyterQuota.job_image_pull_policy = 'Never'",
        # no token on this server: the kernel's POSTs (the magics) need no XSRF cookie either
        "c.ServerApp.disable_check_xsrf = True",
    ]
    records = []
    try:
        with start_lab(home, "jupyter-lab-kube.log", extra) as server:
            root.chmod(0o777)
            _notebook(root / "quota_and_swift_sft.ipynb")
            with open_page(chromium_browser, server) as lab:
                page = lab.page
                for run in (1, 2):  # Run All, then Run All again
                    name = _run_all(page, lab, ui_output_dir, run)
                    records.append(_pod_record(kube, namespace, name))
                    assert not lab.errors, lab.errors
        (ui_output_dir / "kube-notebook.json").write_text(json.dumps(records, indent=1))
        print(f"\nkube notebook: {json.dumps(records)}")
        assert records[0]["job"] != records[1]["job"]
        for record in records:
            assert record["node"] == kubenode.NODE_NAME
            assert record["image"] == kubenode.JOB_IMAGE
            # the LimitRange's defaults, and the notebook's --gpus 0 as the request states it
            assert record["requests"] == {"cpu": "500m", "memory": "2Gi", "nvidia.com/gpu": "0"}, record
            assert record["limits"] == {"cpu": "2", "memory": "3Gi", "nvidia.com/gpu": "0"}, record
            assert record["exitCode"] == 0
    finally:
        try:
            kube.delete(f"/api/v1/namespaces/{namespace}")
        except Exception:  # noqa: BLE001 - gone already
            pass


def _run_all(page, lab, ui_output_dir: Path, run: int) -> str:
    """Run the notebook's cells; return its job's name once the widget showed it Succeeded."""
    try:
        page.evaluate(
            """async ([path, rerun]) => {
                const app = window.jupyterapp;
                const panel = await app.commands.execute('docmanager:open', {path, factory: 'Notebook'});
                await panel.context.ready;
                await panel.sessionContext.ready;
                const kernel = panel.sessionContext.session?.kernel;
                if (rerun && kernel) {
                    // Restart & Run All, as a user reruns it. Only once the kernel's connection has
                    // its first reply: a restart while the fresh socket is still handshaking races
                    // in jupyter-server (a v1 frame read as the legacy format, 'Canceled future for
                    // kernel_info_request' in the console)
                    await kernel.info;
                    await panel.sessionContext.restartKernel();
                }
                await app.commands.execute('notebook:clear-all-cell-outputs');
                app.commands.execute('notebook:run-all-cells');  // followed below, not awaited
            }""",
            ["quota_and_swift_sft.ipynb", run > 1],
        )
        # job.wait() prints the end phase; the notebook's last cell is the quota's refusal
        page.locator(".jp-OutputArea-output", has_text="'Succeeded'").first.wait_for(timeout=900_000)
        page.locator(".jp-OutputArea-output", has_text="exceeded quota").first.wait_for(timeout=120_000)
        figure = page.locator(FIGURE).first
        page.wait_for_function(
            f"""(n) => document.querySelector('{FIGURE}')?.querySelectorAll('.object_grp').length === n""",
            arg=STEPS,
            timeout=60_000,
        )
        assert figure.locator(".mainheading").text_content() == "training loss"
        figure.scroll_into_view_if_needed()
        shot = "kube-notebook-loss-plot.png" if run == 1 else "kube-notebook-loss-plot-rerun.png"
        figure.screenshot(path=ui_output_dir / shot)
        text = "\n".join(page.locator(".jp-OutputArea").all_inner_texts())
        submitted = [line for line in text.splitlines() if "Submitted " in line]
        assert submitted, text[-3000:]
        return submitted[-1].split("Submitted ", 1)[1].split("/", 1)[1].split()[0].rstrip(".:,")
    except Exception:
        page.screenshot(path=ui_output_dir / f"kube-notebook-failure-{run}.png")
        print("notebook output:", page.locator(".jp-OutputArea").all_inner_texts(), lab.errors)
        raise


def _pod_record(kube, namespace: str, name: str) -> dict:
    pods = kube.get(f"/api/v1/namespaces/{namespace}/pods", labelSelector=f"job-name={name}")["items"]
    assert len(pods) == 1, [p["metadata"]["name"] for p in pods]
    pod = pods[0]
    container = pod["spec"]["containers"][0]
    terminated = pod["status"]["containerStatuses"][0]["state"].get("terminated") or {}
    assert pod["status"]["phase"] == "Succeeded", pod["status"]
    return {
        "job": name,
        "pod": pod["metadata"]["name"],
        "node": pod["spec"]["nodeName"],
        "image": container["image"],
        "requests": container["resources"].get("requests", {}),
        "limits": container["resources"].get("limits", {}),
        "startTime": pod["status"].get("startTime"),
        "finishedAt": terminated.get("finishedAt"),
        "exitCode": terminated.get("exitCode"),
    }
