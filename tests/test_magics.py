"""``%quota`` and ``%swift_sft``: arguments, help, translation, and calls to a real server."""

from __future__ import annotations

import importlib.util
import re
import time

import pytest
from IPython.core.error import UsageError
from IPython.display import display
from IPython.utils.capture import capture_output
from quota_testing import ipython_shell
from server_process import ServerProcess, wait_phase
from test_swiftlog import REAL_TAIL

from jupyter_quota.magics import QuotaMagics, ServerNotFound
from jupyter_quota.magics.client import ApiError, QuotaClient, connect, pick_server
from jupyter_quota.magics.display import balance_html, balance_text
from jupyter_quota.magics.follow import Job, screen_lines
from jupyter_quota.magics.magics import split_arguments, translation_text
from jupyter_quota.swift import parse_sft_args

GENERATED = "[bcdfghjklmnpqrstvwxz2456789]{5}"  # Kubernetes' generateName suffix
TUTORIAL = (
    "swift sft --model_type qwen-vl-chat --sft_type qlora --dtype bnb_nf4 --dataset my_custom_data "
    "--batch_size 2 --use_flash_attn true --output_dir ./finetuned-model"
)


@pytest.fixture(scope="module")
def ip():
    return ipython_shell()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("magics-server")
    process = ServerProcess(root / "state", root).start()
    yield process
    process.stop()


@pytest.fixture
def magics(ip, server):
    """A fresh QuotaMagics on the shell, talking to the real server (ms-swift's check off: slow)."""

    def connect_fn():
        return QuotaClient(f"http://127.0.0.1:{server.port}/", server.token, "test")

    instance = QuotaMagics(shell=ip, connect_fn=connect_fn)
    instance.check_argv = False
    ip.register_magics(instance)
    yield instance
    ip.register_magics(QuotaMagics(shell=ip, connect_fn=_no_server))


def _no_server():
    return connect(cwd="/nonexistent", environ={}, servers=[], ppid=-1)


# -- help and arguments ---------------------------------------------------------------------------
def test_help_lists_the_options_and_the_swift_arguments(ip):
    text = ip.object_inspect_text("%swift_sft")
    for expected in (
        "%swift_sft [--namespace NS] [--gpus N] [--dry-run] [--as-is]",
        "--name NAME",
        "SWIFT_SFT_ARGS",
        "--sft_type qlora",
        "job.wait()",
        "NAME-xxxxx",
    ):
        assert expected in text
    assert "%quota [namespace]" in ip.object_inspect_text("%quota")


def test_split_arguments_takes_the_magic_options_anywhere():
    ours, theirs = split_arguments(
        "--gpus 2 swift sft --model m --dry_run --namespace=team-a",
        "# the data\n--dataset a.jsonl b.jsonl \\\n  --name my-job\n--as-is\n",
    )
    assert ours == ["--gpus", "2", "--dry-run", "--namespace", "team-a", "--name", "my-job", "--as-is"]
    assert theirs == ["swift", "sft", "--model", "m", "--dataset", "a.jsonl", "b.jsonl"]
    assert split_arguments("--model m -- --name x")[1] == ["--model", "m", "--name", "x"]
    with pytest.raises(UsageError, match="takes no value"):
        split_arguments("--dry-run=yes --model m")
    with pytest.raises(UsageError, match="needs a value"):
        split_arguments("--model m --namespace")


def test_tutorial_command_translation_is_printed_in_full():
    text = translation_text(parse_sft_args(TUTORIAL.split()))
    assert text.splitlines()[0] == "Translated from older ms-swift names:"
    for note in (
        "--sft_type qlora -> --tuner_type lora --quant_method bnb --quant_bits 4",
        "--dtype bnb_nf4 -> --quant_method bnb --quant_bits 4 --bnb_4bit_quant_type nf4",
        "--batch_size -> --per_device_train_batch_size",
        "--use_flash_attn true -> --attn_impl flash_attn",
        "--model_type qwen-vl-chat -> --model Qwen/Qwen-VL-Chat",
    ):
        assert note in text
    assert text.splitlines()[-1] == (
        "  swift sft --model Qwen/Qwen-VL-Chat --tuner_type lora --quant_method bnb --quant_bits 4 "
        "--bnb_4bit_quant_type nf4 --per_device_train_batch_size 2 --attn_impl flash_attn "
        "--dataset my_custom_data --output_dir ./finetuned-model"
    )


def test_bad_swift_arguments_are_one_line_not_a_traceback(magics, ip):
    with pytest.raises(UsageError, match="expected a whole number"):
        ip.run_line_magic("swift_sft", "--dry-run --model Qwen/Qwen2.5-7B-Instruct --batch_size two")
    with pytest.raises(UsageError, match="--model is required"):
        ip.run_line_magic("swift_sft", "--dry-run --dataset x")
    with pytest.raises(UsageError, match="argument --gpus: invalid int value"):
        ip.run_line_magic("swift_sft", "--gpus many --model m")


# -- finding the server ---------------------------------------------------------------------------
def test_no_server_says_how_to_fix(ip):
    with pytest.raises(ServerNotFound) as info:
        _no_server()
    assert "no running Jupyter server was found" in info.value.message
    assert "JUPYTER_QUOTA_URL" in info.value.message and "jupyter server extension enable" in info.value.message
    ip.register_magics(QuotaMagics(shell=ip, connect_fn=_no_server))
    with pytest.raises(UsageError, match="cannot find its Jupyter server"):
        ip.run_line_magic("quota", "")


def test_server_is_found_from_jupyterhub_then_runtime_files():
    hub = connect(environ={"JUPYTERHUB_SERVICE_URL": "http://0.0.0.0:8888/user/ada/", "JUPYTERHUB_API_TOKEN": "t"})
    assert hub.api_url == "http://127.0.0.1:8888/user/ada/quota/v1" and hub.token == "t"
    servers = [
        {"pid": 10, "url": "http://localhost:1/", "root_dir": "/srv"},
        {"pid": 11, "url": "http://localhost:2/", "root_dir": "/srv/ada"},
        {"pid": 12, "url": "http://localhost:3/", "root_dir": "/other"},
    ]
    assert pick_server(servers, "/srv/ada/project", ppid=1)["pid"] == 11  # the deepest root
    assert pick_server(servers, "/srv/ada/project", ppid=12)["pid"] == 12  # the kernel's parent wins
    assert pick_server(servers, "/elsewhere", ppid=1) is None
    found = connect(cwd="/srv/ada", environ={}, servers=[{**servers[1], "token": "abc"}], ppid=1)
    assert found.server_url == "http://localhost:2/" and found.token == "abc"


def test_namespace_default_asks_to_choose_among_several(ip):
    class TwoTeams:
        def namespaces(self):
            return [{"name": "team-alpha"}, {"name": "team-beta"}]

    magics = QuotaMagics(shell=ip, connect_fn=TwoTeams)
    with pytest.raises(UsageError, match=r"several namespaces; choose one with --namespace NS.*team-alpha, team-beta"):
        magics.choose_namespace(TwoTeams(), None)
    assert magics.choose_namespace(TwoTeams(), "team-beta") == "team-beta"


# -- against a real server ------------------------------------------------------------------------
def test_quota_shows_the_balance(magics, ip):
    with capture_output() as out:
        ip.run_line_magic("quota", "")
    text = out.stdout + "".join(o.data.get("text/plain", "") for o in out.outputs)
    assert "team-alpha (team alpha)" in text
    assert "requests.nvidia.com/gpu" in text and "0 of 2 used, 2 left" in text
    with pytest.raises(UsageError, match="team-beta"):
        ip.run_line_magic("quota", "team-beta")  # not the user's: the API's 403 message


def test_dry_run_of_the_tutorial_command_plans_and_submits_nothing(magics, ip, server):
    with capture_output() as out:
        assert ip.run_line_magic("swift_sft", "--dry-run " + TUTORIAL) is None
    shown = out.stdout + "".join(o.data.get("text/plain", "") for o in out.outputs)
    assert "--sft_type qlora -> --tuner_type lora --quant_method bnb --quant_bits 4" in shown
    assert "Recommended: QLoRA 4-bit, 1 GPU" in shown
    assert "Dry run: nothing submitted" in shown
    assert any("text/html" in o.data and "Recommended:" in o.data["text/html"] for o in out.outputs)
    assert server.call("GET", "/namespaces/team-alpha/jobs") == (200, {"jobs": [], "metadata": {}})


def test_as_is_shows_the_quota_refusal(magics, ip):
    with pytest.raises(UsageError, match=r"exceeded quota: team-quota, requested: requests.nvidia.com/gpu=3"):
        ip.run_line_magic("swift_sft", "--as-is --gpus 3 --model Qwen/Qwen2.5-0.5B-Instruct --dataset d")


def test_plan_that_cannot_fit_is_refused_before_submitting(magics, ip):
    with capture_output() as out, pytest.raises(UsageError, match="nothing fits team-alpha now"):
        ip.run_line_magic("swift_sft", "--model Qwen/Qwen3-235B-A22B --dataset d")
    assert "No plan fits now." in out.stdout + "".join(o.data.get("text/plain", "") for o in out.outputs)


def test_launch_returns_a_job_handle_that_follows_it(magics, ip, server):
    with capture_output():
        job = ip.run_cell_magic(
            "swift_sft", "--name magic-job", "--model Qwen/Qwen2.5-0.5B-Instruct\n--dataset d.jsonl --max_steps 3\n"
        )
    assert isinstance(job, Job) and re.fullmatch(f"magic-job-{GENERATED}", job.name) and magics.last_job is job
    assert job.wait(timeout=60, interval=0.2) == "Succeeded"
    assert job.status == "Succeeded"
    assert "--model Qwen/Qwen2.5-0.5B-Instruct --dataset d.jsonl --max_steps 3" in job.logs()
    assert job.name in repr(job)


def test_the_same_name_runs_again_as_a_prefix(magics, ip, server):
    """A notebook run twice: ``--name`` is a prefix, as Kubernetes' generateName is."""
    jobs = []
    for _ in range(2):
        with capture_output():
            jobs.append(ip.run_line_magic("swift_sft", "--name again --model Qwen/Qwen2.5-0.5B-Instruct --dataset d"))
        assert jobs[-1].wait(timeout=60, interval=0.2) == "Succeeded"
    assert jobs[0].name != jobs[1].name
    assert all(re.fullmatch(f"again-{GENERATED}", job.name) for job in jobs)


def test_an_out_of_memory_job_offers_the_next_plan_down(magics, ip, server):
    """fake_trainer ends as a GPU run that ran out of memory does (``--oom``); the widget's Retry
    button re-plans with that configuration known not to fit and submits the next plan down."""
    line = "--as-is --model Qwen/Qwen2.5-1.5B-Instruct --tuner_type full --dataset d --steps 1 --memory-gib 79.5 --oom"
    with capture_output():
        job = ip.run_line_magic("swift_sft", line)
    assert job.wait(timeout=60, interval=0.2) == "Failed"
    assert job.out_of_memory and job.info["message"].startswith("CUDA out of memory on A100 80GB: estimated")
    widget = job.widget
    job.refresh()
    assert widget.retry_button.layout.display == ""
    assert "measured 79.5 GiB, out of memory" in widget.stats.value

    widget.retry_button.click()
    retried = widget.retried_job
    assert retried is not None and widget.retried.children == (retried.widget.box,), job.error
    assert retried.name != job.name
    assert retried.info["args"] != job.info["args"]  # the next plan down, not the same again
    assert widget.retry_button.layout.display == "none"
    assert retried.wait(timeout=60, interval=0.2) in ("Succeeded", "Failed")


def test_retry_is_refused_for_a_job_that_did_not_run_out_of_memory(magics, ip, server):
    with capture_output():
        job = ip.run_line_magic("swift_sft", "--as-is --model Qwen/Qwen2.5-0.5B-Instruct --dataset d")
    assert job.wait(timeout=60, interval=0.2) == "Succeeded"
    assert not job.out_of_memory
    with pytest.raises(ApiError, match="did not run out of GPU memory"):
        job.retry()


# -- displays -------------------------------------------------------------------------------------
BALANCE = {
    "namespace": "team-alpha",
    "team": "alpha",
    "stale": False,
    "resources": {
        "limits.memory": {"hard": "128Gi", "used": "96Gi", "remaining": "32Gi"},
        "requests.nvidia.com/gpu": {"hard": "2", "used": "1", "remaining": "1"},
    },
}


def test_balance_text_and_html():
    text = balance_text(BALANCE)
    assert text.splitlines()[1].startswith("  requests.nvidia.com/gpu  [##########..........]  1 of 2 used, 1 left")
    assert "[###############.....]  96Gi of 128Gi used, 32Gi left" in text
    html = balance_html(BALANCE)
    assert "<code>requests.nvidia.com/gpu</code>" in html and "width:75%" in html


class _LogClient:
    """Serves one job and a real ms-swift log tail."""

    def __init__(self, phase="Succeeded", log=REAL_TAIL):
        self.phase = phase
        self.log = log
        self.cancelled = False

    def job(self, namespace, name):
        return {
            "name": name,
            "namespace": namespace,
            "phase": self.phase,
            "createdAt": "2026-01-01T00:00:00Z",
            "startedAt": "2026-01-01T00:00:00Z",
            "finishedAt": "2026-01-01T00:00:16Z",
        }

    def logs(self, namespace, name, tail_lines=None):
        return self.log

    def cancel(self, namespace, name):
        self.cancelled = True
        self.phase = "Failed"
        return {**self.job(namespace, name), "reason": "Cancelled"}


def test_job_widget_gets_steps_losses_and_the_checkpoint():
    job = Job(_LogClient(), "team-alpha", "tiny")
    widget = job.widget
    job.refresh()
    assert (widget.progress.value, widget.progress.max, widget.progress.bar_style) == (3, 3, "success")
    assert (widget.loss_plot.x, widget.loss_plot.y) == ([1, 2, 3], [6.015, 6.009, 6.085])
    assert "step 3/3" in widget.stats.value and "elapsed 0:16" in widget.stats.value
    assert "checkpoint-3" in widget.stats.value and widget.cancel_button.disabled
    assert "last_model_checkpoint" in widget.log.value
    assert job.steps == [1, 2, 3] and job.checkpoint.endswith("checkpoint-3")


class _ElasticClient(_LogClient):
    """Serves a best-effort job that was preempted on borrowed GPUs and runs again."""

    def job(self, namespace, name):
        return {
            **super().job(namespace, name),
            "priority": "best-effort",
            "borrowed": True,
            "history": [
                {"event": "Borrowed", "at": "2026-01-01T00:00:00Z"},
                {"event": "Preempted", "at": "2026-01-01T00:00:09Z", "step": 2, "reason": "Reclaimed"},
                {"event": "Requeued", "at": "2026-01-01T00:00:10Z", "checkpoint": "/out/checkpoint-2"},
                {"event": "Resumed", "at": "2026-01-01T00:00:30Z", "checkpoint": "/out/checkpoint-2"},
            ],
        }


def test_job_widget_and_text_show_borrowing_preemption_requeue_and_resume():
    job = Job(_ElasticClient(phase="Running"), "team-alpha", "tiny")
    widget = job.widget
    job.refresh()
    shown = (
        "best-effort priority &middot; running on borrowed GPUs &middot; started on borrowed GPUs &middot; "
        "preempted at step 2 (Reclaimed) &middot; requeued, to resume from /out/checkpoint-2 &middot; "
        "resumed from /out/checkpoint-2"
    )
    assert shown in widget.header.value
    assert "preempted at step 2 (Reclaimed), requeued, to resume from /out/checkpoint-2" in str(job)


def test_best_effort_and_priority_options_reach_the_job(magics, ip, server):
    with capture_output():
        job = ip.run_line_magic(
            "swift_sft", "--best-effort --as-is --name be --model Qwen/Qwen2.5-0.5B-Instruct --dataset d"
        )
        high = ip.run_line_magic("swift_sft", "--priority high --as-is --model Qwen/Qwen2.5-0.5B-Instruct --dataset d")
    assert job.info["priority"] == "best-effort" and high.info["priority"] == "high"
    assert job.wait(timeout=60, interval=0.2) == "Succeeded" and high.wait(timeout=60, interval=0.2) == "Succeeded"
    with pytest.raises(UsageError, match="--best-effort and --priority high disagree"):
        ip.run_line_magic("swift_sft", "--best-effort --priority high --model Qwen/Qwen2.5-0.5B-Instruct")


def test_cancel_button_cancels():
    client = _LogClient(phase="Running")
    job = Job(client, "team-alpha", "tiny")
    job.refresh()
    assert not job.widget.cancel_button.disabled
    job.widget.cancel_button.click()
    assert client.cancelled and job.phase == "Failed" and "Cancelled" in job.widget.header.value


def test_job_widget_hides_cancel_once_the_job_ended():
    client = _LogClient(phase="Running")
    job = Job(client, "team-alpha", "tiny")
    job.refresh()
    assert job.widget.cancel_button.layout.display != "none"
    client.phase = "Succeeded"
    job.refresh()
    assert job.widget.cancel_button.layout.display == "none"


def test_job_widget_shows_a_users_cancel_as_cancelled_not_a_red_failed():
    client = _LogClient(phase="Running")
    job = Job(client, "team-alpha", "tiny")
    job.refresh()
    job.widget.cancel_button.click()
    client.job = lambda namespace, name: {
        **_LogClient.job(client, namespace, name),
        "phase": "Failed",
        "reason": "Cancelled",
        "message": "cancelled by ann",
    }
    job.refresh()
    header = job.widget.header.value
    assert ">Cancelled</span>" in header and "#d9534f" not in header
    assert job.widget.progress.bar_style != "danger"


def test_job_widget_gives_a_cpu_only_job_no_per_gpu_estimate():
    client = _LogClient(phase="Running")
    memory = {"estimatedGib": 3.1, "rangeGib": [2.8, 3.5], "measuredGib": None, "outOfMemory": False}
    client.job = lambda namespace, name: {**_LogClient.job(client, namespace, name), "gpus": 0, "memory": memory}
    job = Job(client, "team-alpha", "tiny")
    job.refresh()
    assert "per GPU" not in job.widget.stats.value
    client.job = lambda namespace, name: {**_LogClient.job(client, namespace, name), "gpus": 1, "memory": memory}
    job.refresh()
    assert "estimated 3.1 GiB (2.8-3.5) per GPU" in job.widget.stats.value


@pytest.mark.parametrize(
    "losses",
    [[5.912, 5.914, 5.913, 5.9135], [6.015, 6.009, 6.085], [6.0], [2.31, 0.42, 1.7], [0.0012, 0.0019], [120.0, 340.0]],
)
def test_loss_axis_ticks_read_distinct_and_cover_the_losses(losses):
    from jupyter_quota.magics.lossplot import loss_ticks

    ticks, tick_format = loss_ticks(losses)
    labels = [format(t, tick_format) for t in ticks]  # d3's "fixed" format reads as Python's
    assert len(set(labels)) == len(labels) >= 3, labels
    assert ticks[0] <= min(losses) and ticks[-1] >= max(losses)
    assert ticks == sorted(ticks)


def test_loss_plot_sets_its_own_loss_ticks():
    client = _LogClient(phase="Running")
    job = Job(client, "team-alpha", "tiny")
    job.refresh()
    plot = job.widget.loss_plot
    labels = [format(t, plot.y_axis.tick_format) for t in plot.y_axis.tick_values]
    assert len(set(labels)) == len(labels) and plot.y_scale.min <= min(plot.y) <= max(plot.y) <= plot.y_scale.max


def test_loss_plot_takes_new_steps_in_place_throttled():
    client = _LogClient(phase="Running", log=REAL_TAIL.split("\rTrain:  67%")[0])  # steps 1 and 2
    job = Job(client, "team-alpha", "tiny")
    plot = job.widget.loss_plot
    figure = plot.figure
    assert (plot.x, plot.y, figure.title) == ([], [], "loss: waiting for the first logged step")
    assert [a.label for a in figure.axes] == ["step", "loss"] and plot.points.tooltip.labels == ["step", "loss"]

    job.refresh()  # the first points go at once
    assert (plot.x, plot.y, figure.title) == ([1, 2], [6.015, 6.009], "training loss")
    assert list(plot.line.x) == [1, 2] and list(plot.line.y) == [6.015, 6.009]

    plot.min_interval = 3600  # step 3 arrives within the throttle's interval: held back...
    client.log = REAL_TAIL
    job.refresh()
    assert plot.x == [1, 2]
    plot.flush()  # ...until it is due
    assert (plot.x, plot.y) == ([1, 2, 3], [6.015, 6.009, 6.085])
    assert job.widget.box.children[2] is figure  # the same figure, new data

    plot.min_interval = 0.2  # a held-back update is sent when due, never dropped
    plot.update([1, 2, 3, 4], [6.015, 6.009, 6.085, 5.5])
    deadline = time.monotonic() + 60
    while plot.x != [1, 2, 3, 4] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (plot.x, plot.y) == ([1, 2, 3, 4], [6.015, 6.009, 6.085, 5.5])


def test_the_job_without_a_widget_is_text_with_its_last_losses(ip):
    job = Job(_LogClient(), "team-alpha", "tiny").refresh()
    assert str(job) == (
        "job team-alpha/tiny: Succeeded, step 3/3, loss 6.085\nloss by step (last 3 of 3): 1: 6.015, 2: 6.009, 3: 6.085"
    )
    with capture_output() as out:  # a terminal IPython: no kernel, so no widget
        display(job)
    assert [o.data for o in out.outputs] == [{"text/plain": str(job)}]
    assert str(Job(_LogClient(), "team-alpha", "new")) == "job team-alpha/new: Pending"


def test_screen_lines_shows_what_a_terminal_shows():
    assert screen_lines("a\rb\rc\nd\n\n", 5) == "c\nd"


def test_ms_swift_parser_judges_the_final_arguments(magics, ip):
    if importlib.util.find_spec("swift") is None:
        pytest.skip("ms-swift is not installed")
    magics.check_argv = True
    with capture_output() as out:
        ip.run_line_magic("swift_sft", "--dry-run --model Qwen/Qwen2.5-0.5B-Instruct --dataset d")
    assert "own parser accepts the final arguments" in out.stdout
    with capture_output(), pytest.raises(UsageError, match=r"rejects the final arguments: .*--no_such_arg"):
        ip.run_line_magic("swift_sft", "--dry-run --model Qwen/Qwen2.5-0.5B-Instruct --dataset d --no_such_arg 1")


# -- the job list's pages -------------------------------------------------------------------------
def test_the_client_lists_every_job_across_pages_newest_first(tmp_path):
    """A server whose pages hold 2 jobs, with 5: ``jobs()`` follows ``continue`` to the end."""
    srv = ServerProcess(tmp_path / "state", tmp_path, "c.JupyterQuota.job_list_limit = 2\n").start()
    try:
        client = QuotaClient(f"http://127.0.0.1:{srv.port}/", srv.token, "test")
        namespace = client.namespaces()[0]["name"]
        submitted = []
        for i in range(5):  # one at a time, each ended before the next, so the quota never refuses one
            job = client.submit(namespace, {"name": f"paged-{i}", "args": ["--model", "m", "--dataset", "d"]})
            wait_phase(srv, namespace, job["name"], ("Succeeded",), timeout=60)
            submitted.append(job["name"])
        first = srv.call("GET", f"/namespaces/{namespace}/jobs")[1]
        assert len(first["jobs"]) == 2 and first["metadata"]["remainingItemCount"] == 3  # pages of 2 really

        jobs = client.jobs(namespace)

        assert sorted(job["name"] for job in jobs) == sorted(submitted)
        keys = [(job["createdAt"], job["name"]) for job in jobs]
        assert keys == sorted(keys, reverse=True)  # newest first, as the server orders one page
        assert [job["name"] for job in jobs[:2]] == [job["name"] for job in first["jobs"]]
    finally:
        srv.stop()


def test_quota_request_asks_for_an_increase_and_lists_it(magics, ip):
    with capture_output() as out:
        made = ip.run_line_magic("quota", 'request +1 gpu 2h "magic deadline"')
    assert made["phase"] == "Pending" and made["resources"] == {"requests.nvidia.com/gpu": "1"}
    assert made["hours"] == 2 and made["reason"] == "magic deadline" and made["namespace"] == "team-alpha"
    assert f"{made['name']} team-alpha: Pending: +1 requests.nvidia.com/gpu for 2 h" in out.stdout
    with capture_output() as out:
        ip.run_line_magic("quota", "requests")
    assert made["name"] in out.stdout and "magic deadline" in out.stdout
    with pytest.raises(UsageError, match="for how long"):
        ip.run_line_magic("quota", 'request +1 gpu "no duration"')
    with pytest.raises(UsageError, match="whole units"):  # the server's validation, one line
        ip.run_line_magic("quota", 'request +0.5 gpu 1h "half a GPU"')
