"""``jupyter_quota/ticker.py``: the one periodic loop every timer runs on.

Each test waits on events (the pass counter, a fake wait that records what it was asked), never
on a sleep racing the machine: the periods here are an hour unless the test is about time passing.
"""

from __future__ import annotations

import logging
import threading

import pytest

from jupyter_quota.ticker import Ticker

HOUR = 3600.0
TIMEOUT = 30.0  # the most a test waits for a pass that must come; a slow CI machine takes well under


@pytest.fixture
def tickers():
    made = []
    yield made
    for ticker in made:
        ticker.close()


def test_the_first_pass_runs_at_start_and_a_wake_runs_another_at_once(tickers):
    ticker = Ticker(lambda: None, HOUR, name="test-wake")
    tickers.append(ticker)
    ticker.start()
    assert ticker.wait_passes(1, TIMEOUT)
    ticker.wake()  # the period is an hour: only the wake can bring the second pass
    assert ticker.wait_passes(2, TIMEOUT)
    assert ticker.passes == 2


def test_a_wake_during_a_pass_runs_one_more_right_after_it(tickers):
    inside, release = threading.Event(), threading.Event()

    def work():
        if not release.is_set():
            inside.set()
            release.wait(TIMEOUT)

    ticker = Ticker(work, HOUR, name="test-wake-during")
    tickers.append(ticker)
    ticker.start()
    assert inside.wait(TIMEOUT)
    ticker.wake()
    release.set()
    assert ticker.wait_passes(2, TIMEOUT)


def test_the_period_and_the_delay_the_work_asks_for_bound_each_wait():
    """The wait after a pass is the period, or the work's delay when sooner; never negative."""
    delays = [None, 2.5, 10_000.0, -3.0]
    events: list = []
    holder: list[Ticker] = []

    def work():
        events.append("pass")
        if not delays:
            holder[0].close()  # from its own thread: no join, and the loop ends here
            return None
        return delays.pop(0)

    def fake_wait(condition, timeout):
        events.append(timeout)

    ticker = Ticker(work, 60.0, name="test-period", wait=fake_wait)
    holder.append(ticker)
    ticker.start()
    assert ticker.wait_passes(5, TIMEOUT)
    ticker.close()
    assert events == ["pass", 60.0, "pass", 2.5, "pass", 60.0, "pass", 0.0, "pass"]
    assert ticker.passes == 5


def test_a_ticker_started_with_first_pass_now_false_waits_a_period_first():
    events: list = []
    holder: list[Ticker] = []

    def work():
        events.append("pass")
        holder[0].close()

    ticker = Ticker(work, 30.0, name="test-first-wait", first_pass_now=False, wait=lambda c, t: events.append(t))
    holder.append(ticker)
    ticker.start()
    assert ticker.wait_passes(1, TIMEOUT)
    ticker.close()
    assert events == [30.0, "pass"]


def test_passes_come_one_period_apart_without_a_wake(tickers):
    ticker = Ticker(lambda: None, 0.05, name="test-real-period")
    tickers.append(ticker)
    ticker.start()
    assert ticker.wait_passes(4, TIMEOUT)


def test_a_pass_that_raises_is_logged_and_the_loop_goes_on(tickers, caplog):
    calls = []

    def work():
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("disk full")

    log = logging.getLogger("test_ticker")
    ticker = Ticker(work, HOUR, name="test-raises", log=log)
    tickers.append(ticker)
    with caplog.at_level(logging.ERROR, logger="test_ticker"):
        ticker.start()
        assert ticker.wait_passes(1, TIMEOUT)
        ticker.wake()
        assert ticker.wait_passes(2, TIMEOUT)
    failed = [r for r in caplog.records if "a pass of test-raises failed" in r.getMessage()]
    assert len(failed) == 1 and failed[0].exc_info[0] is RuntimeError
    assert len(calls) == 2


def test_close_ends_the_pass_under_way_joins_and_no_pass_starts_after_it():
    inside, release = threading.Event(), threading.Event()

    def work():
        if ticker.passes == 1:  # the second pass holds until released
            inside.set()
            release.wait(TIMEOUT)

    ticker = Ticker(work, HOUR, name="test-close")
    ticker.start()
    assert ticker.wait_passes(1, TIMEOUT)
    ticker.wake()
    assert inside.wait(TIMEOUT)
    ticker.wake()  # a wake pending when close comes must not start a third pass
    ticker.close(timeout=0)  # closed while the pass runs (no wait for the thread yet)
    release.set()
    ticker.close()
    assert not ticker._thread.is_alive(), "close() returned before the loop's thread ended"
    assert ticker.passes == 2
    ticker.wake()
    ticker.start()  # a closed ticker stays closed
    assert ticker.passes == 2 and not ticker._thread.is_alive()


def test_close_before_start_and_twice_is_harmless():
    ticker = Ticker(lambda: None, HOUR, name="test-close-early")
    ticker.close()
    ticker.close()
    ticker.start()
    assert ticker.passes == 0 and ticker._thread is None


def test_a_shared_condition_notified_by_others_wakes_the_loop(tickers):
    """The kube usage recorder waits on the watch cache's ``changed``: a change runs a pass."""
    changed = threading.Condition()
    waiting = threading.Event()

    def wait(condition, timeout):
        waiting.set()  # with ``condition`` held: whoever takes it next finds the loop waiting
        condition.wait(timeout)

    ticker = Ticker(lambda: None, HOUR, name="test-condition", condition=changed, wait=wait)
    tickers.append(ticker)
    ticker.start()
    assert ticker.wait_passes(1, TIMEOUT)
    assert waiting.wait(TIMEOUT)
    with changed:
        changed.notify_all()
    assert ticker.wait_passes(2, TIMEOUT)


def test_a_period_of_zero_is_refused():
    with pytest.raises(ValueError, match="more than 0"):
        Ticker(lambda: None, 0, name="test-zero")
