"""Keep the hub service's start-up objects out of the cyclic garbage collector's full passes.

The service starts with about 120,000 objects the collector tracks (jupyter-server, tornado,
traitlets, the kubernetes client, the team profiles) that live as long as the process. CPython's
full collection walks every one of them; on these 2 cores one took 138-180 ms with the IO loop held,
every balance read of a hub waiting behind it (``benchmarks/open_loop_bench.py``, issue 23).
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
