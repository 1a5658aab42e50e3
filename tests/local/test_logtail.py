"""Reading the end of a job's log (``logtail``)."""

from __future__ import annotations

from jupyter_quota.backends.local import logtail


def test_tail_reads_the_end_of_a_big_log_and_caps_bytes(tmp_path):
    path = tmp_path / "output.log"
    path.write_text("".join(f"line {i}\n" for i in range(200_000)))
    assert logtail.tail(path, 3) == "line 199997\nline 199998\nline 199999\n"
    assert logtail.tail(path, 0) == ""
    capped = logtail.tail(path, 10**9, max_bytes=1000)
    assert len(capped) <= 1000 and capped.endswith("line 199999\n")
    assert capped.startswith("line ")  # a cut first line is dropped, not shown half
    assert logtail.tail(tmp_path / "missing.log", 10) == ""
    (tmp_path / "short.log").write_text("a\nb")
    assert logtail.tail(tmp_path / "short.log", 5) == "a\nb"
