"""The README's settings-by-subsystem table lists every ``JupyterQuota`` setting exactly once,
and nothing that is not one: the docs and ``config.py`` cannot drift apart."""

from __future__ import annotations

import re
from pathlib import Path

from jupyter_quota.config import JupyterQuota

README = Path(__file__).resolve().parent.parent / "README.md"


def table_rows() -> list[str]:
    text = README.read_text()
    start = text.index("<!-- settings-by-subsystem")
    rows = []
    for line in text[start:].splitlines()[1:]:
        if not line.startswith("|"):
            break
        rows.append(line)
    return rows[2:]  # the header and its rule


def test_every_setting_is_listed_once_under_its_subsystem():
    listed = [name for row in table_rows() for name in re.findall(r"`(\w+)`", row.split("|")[2])]
    traits = JupyterQuota.class_trait_names(config=True)
    assert sorted(listed) == sorted(set(listed)), "a setting is listed twice"
    assert set(listed) == set(traits), {
        "missing": sorted(set(traits) - set(listed)),
        "not a setting": sorted(set(listed) - set(traits)),
    }
    assert len(table_rows()) >= 10
