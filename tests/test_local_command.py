"""A local job's command: found in the server's own environment first, or refused with what to do."""

from __future__ import annotations

import os
import sys

import pytest

from jupyter_quota.backends.local import command


def _script(path, mode=0o755):
    path.write_text("#!/bin/sh\necho hi\n")
    path.chmod(mode)
    return path


def test_the_servers_bin_comes_first_on_the_jobs_path():
    env = command.job_path({"PATH": "/usr/bin:/bin", "HOME": "/h"})
    dirs = env["PATH"].split(os.pathsep)
    assert dirs[0] == command.server_bin_dirs()[0] and os.path.dirname(sys.executable) in dirs
    assert dirs[-2:] == ["/usr/bin", "/bin"] and env["HOME"] == "/h"
    assert len(dirs) == len(set(dirs))


def test_a_bare_name_is_looked_up_on_the_path_given(tmp_path):
    _script(tmp_path / "trainer")
    assert command.resolve(["trainer", "--x"], str(tmp_path), "/") == [str(tmp_path / "trainer"), "--x"]


def test_a_relative_path_is_taken_from_the_jobs_working_directory(tmp_path):
    _script(tmp_path / "train.sh")
    assert command.resolve(["./train.sh"], "", str(tmp_path)) == [str(tmp_path / "train.sh")]


def test_a_missing_swift_says_to_install_ms_swift_into_the_servers_environment(tmp_path):
    with pytest.raises(command.CommandNotFound) as caught:
        command.resolve(["swift", "sft"], str(tmp_path), "/")
    message = str(caught.value)
    assert message.startswith("cannot run 'swift': not found in ")
    assert command.server_bin_dirs()[0] in message
    assert "pip install 'jupyter_quota[swift]'" in message and "JupyterQuota.job_command" in message


@pytest.mark.parametrize(
    "setup, why",
    [
        (lambda d: None, "no such file"),
        (lambda d: _script(d / "trainer", 0o644), "not executable"),
        (lambda d: (d / "trainer").mkdir(), "a directory"),
    ],
)
def test_a_path_that_cannot_run_says_why(tmp_path, setup, why):
    setup(tmp_path)
    with pytest.raises(command.CommandNotFound, match=f"cannot run '{tmp_path}/trainer': {why}"):
        command.resolve([str(tmp_path / "trainer")], "", "/")


def test_an_empty_command_is_refused():
    with pytest.raises(command.CommandNotFound, match="empty"):
        command.resolve([], "/usr/bin", "/")


def test_command_not_found_is_an_os_error_so_the_scheduler_records_start_error():
    assert issubclass(command.CommandNotFound, OSError)
