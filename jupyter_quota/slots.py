"""A bounded pool for CPU-heavy request work: at most ``limit`` at once, the rest refused with 429.

Plan and estimate searches are pure Python and CPU-bound. Run on the shared default executor,
fifty of them queued ahead of every other route's work and held the GIL against the IO loop, so
balance reads waited hundreds of milliseconds. Here they get ``limit`` threads of their own, and
a request beyond the limit is refused at once rather than queued.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from .errors import TooManyRequests

#: Seconds a refused client is told to wait: a plan search takes tens of milliseconds.
RETRY_AFTER = 1


class WorkSlots:
    """``limit`` threads for one kind of work, and a count of the work in flight on them."""

    def __init__(self, limit: int, what: str, setting: str):
        self.limit = limit
        self.what = what
        self.setting = setting
        self._executor = ThreadPoolExecutor(max_workers=limit, thread_name_prefix="jupyter-quota-slot")
        self._in_flight = 0  # touched on the IO loop only

    async def run(self, fn, *args):
        """``fn(*args)`` on a slot's thread; ``TooManyRequests`` when every slot is busy."""
        if self._in_flight >= self.limit:
            raise TooManyRequests(
                f"busy: {self.limit} of {self.limit} {self.what} in progress, the most this server runs "
                f"at once ({self.setting}); retry in {RETRY_AFTER} s",
                retry_after=RETRY_AFTER,
            )
        loop = asyncio.get_running_loop()
        work = self._executor.submit(fn, *args)
        self._in_flight += 1
        # Freed when the thread is done, not when the awaiting request goes away.
        work.add_done_callback(lambda _: loop.call_soon_threadsafe(self._release))
        return await asyncio.wrap_future(work)

    def _release(self) -> None:
        self._in_flight -= 1
