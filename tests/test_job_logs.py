"""Job logs are capped and rotated, and the tail reads across the rotation boundary."""

from __future__ import annotations

import re
import sys

from local_testing import Profile, make_backend, make_job, phase_is, wait_for  # noqa: F401

from jupyter_quota.backends.local import logtail
from jupyter_quota.swiftlog import parse_log

MIB = 1024 * 1024


def test_tail_reads_across_the_rotation_boundary(tmp_path):
    path = tmp_path / "output.log"
    text = "".join(f"line {i}\n" for i in range(30))
    # Oldest first: output.log.2, output.log.1, output.log; a line is cut at each boundary.
    (tmp_path / "output.log.2").write_text(text[:50])
    (tmp_path / "output.log.1").write_text(text[50:101])
    path.write_text(text[101:])
    assert logtail.tail(path, 25) == "".join(f"line {i}\n" for i in range(5, 30))
    assert logtail.tail(path, 100) == text  # all of it, the cut lines joined again
    assert logtail.last_line(path) == "line 29"
    capped = logtail.tail(path, 100, max_bytes=120)
    assert capped.endswith("line 29\n") and capped.startswith("line ") and len(capped) <= 120


def test_a_job_writing_50_mib_keeps_at_most_the_cap_on_disk_and_its_tail(make_backend):
    backend, profile = make_backend(log_max_bytes=MIB, log_backups=2), Profile()
    size = 50 * MIB
    progress = "{'loss': 1.25, 'global_step/max_steps': '7/10', 'elapsed_time': '3s'}"
    job = make_job("chatty", "--fill", str(size), progress)  # "args: <progress>" comes first
    backend.submit(profile, job, owner="alice")
    job = wait_for(backend, profile, "chatty", phase_is("Succeeded", "Failed"), timeout=180)
    assert job["phase"] == "Succeeded"
    directory = make_backend.state_dir / "jobs" / profile.namespace / "chatty"
    logs = {p.name: p.stat().st_size for p in directory.iterdir() if p.name.startswith("output.log")}
    assert set(logs) <= {"output.log", "output.log.1", "output.log.2"}
    assert all(s <= MIB for s in logs.values()) and sum(logs.values()) <= 3 * MIB

    last_fill = size // 100 - 1
    end = ["ready", "exiting with 0"]  # what fake_trainer prints after the fill
    assert backend.logs(profile, "chatty", 3).splitlines() == [f"fill {last_fill:09d} {'x' * 84}", *end]
    # More lines than output.log holds: the tail goes on into output.log.1, line for line.
    in_current = (directory / "output.log").read_bytes().count(b"\n")
    tail = backend.logs(profile, "chatty", in_current + 50).splitlines()
    numbers = [int(m.group(1)) for m in map(re.compile(r"fill (\d+) x+$").match, tail[:-2])]
    assert len(numbers) == in_current + 48 and tail[-2:] == end
    assert numbers == list(range(last_fill - len(numbers) + 1, last_fill + 1))


def test_progress_is_parsed_from_a_tail_that_spans_rotated_files(make_backend, tmp_path):
    backend, profile = make_backend(log_max_bytes=64 * 1024, log_backups=1), Profile()
    # 60,030 bytes of noise, then 200 progress dicts of about 80 bytes: the 64 KiB boundary
    # falls inside the progress lines.
    lines = [
        f"{{'loss': {2 - s / 100:.2f}, 'global_step/max_steps': '{s}/200', 'elapsed_time': '{s}s'}}"
        for s in range(1, 201)
    ]
    script = tmp_path / "progress.py"
    script.write_text(f"for _ in range(30):\n    print('x' * 2000)\nprint({chr(10).join(lines)!r})\n")
    backend.submit(profile, make_job("steps", command=[sys.executable, str(script)]), owner="alice")
    wait_for(backend, profile, "steps", phase_is("Succeeded"), timeout=60)
    directory = make_backend.state_dir / "jobs" / profile.namespace / "steps"
    assert b"'global_step/max_steps': '1/200'" in (directory / "output.log.1").read_bytes()
    progress = parse_log(backend.logs(profile, "steps", 200))
    assert progress.steps == list(range(1, 201)) and progress.fraction == 1.0
