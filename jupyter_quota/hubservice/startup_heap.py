"""Keep the hub service's start-up objects out of the cyclic garbage collector's full passes.

The service starts with about 120,000 objects the collector tracks (jupyter-server, tornado,
traitlets, the kubernetes client, the team profiles) that live as long as the process. CPython's
full collection walks every one of them, with the IO loop held and every balance read of a hub
waiting behind it: on 2 cores, an overloaded service's longest collection per 5 s was 148 ms at the
median and 231 ms at most, and 43 ms and 55 ms frozen (``benchmarks/open_loop_bench.py``, column
``gc max``; README, issue 23).
``gc.freeze()`` moves them into the permanent generation, which no collection walks, so a full
pass walks only what was made since: the objects of connections, subscriptions and answers.
What is frozen is never collected; a collection first frees start-up's garbage, and what start-up
keeps it keeps for the life of the process anyway.
"""

from __future__ import annotations

import gc

from ..handlers import OPTIMISATIONS


def freeze_startup_heap() -> int:
    """After start-up, before the IO loop runs: freeze what is alive (``OPTIMISATIONS["gc-freeze"]``).

    Returns how many objects were frozen (0 when the optimisation is off).
    """
    if not OPTIMISATIONS["gc-freeze"]:
        return 0
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
