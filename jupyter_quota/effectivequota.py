"""A team's effective hard quota: its profile's ``hard`` plus what raises it for now.

What raises it (approved, unexpired increases; open time windows' extras) is decided elsewhere;
this only adds. ``QuotaService.effective_hard`` is the one place that gathers the extras.
"""

from __future__ import annotations

from collections.abc import Mapping

from .quantity import Quantity


def effective_hard(hard: Mapping[str, str], *extras: Mapping[str, str]) -> dict[str, str]:
    """``hard`` with each extra's quantities added, resource by resource.

    A resource the hard quota does not name is not limited at all, so an extra for it is ignored:
    adding it would create a limit where there was none.
    """
    total = {resource: Quantity(str(value)) for resource, value in hard.items()}
    for extra in extras:
        for resource, value in extra.items():
            if resource in total:
                total[resource] = total[resource] + Quantity(str(value))
    return {resource: str(value) for resource, value in total.items()}
