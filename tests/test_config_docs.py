"""The README's settings-by-subsystem table lists every ``JupyterQuota`` setting exactly once,
under the subsystem that declares it: the docs and the code cannot drift apart. Old names work."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

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


def test_each_subsystem_declares_the_settings_its_row_lists():
    """A row naming a settings class lists exactly that class's own traits; the rows naming
    ``config.py`` list exactly what ``JupyterQuota`` declares itself."""
    shared = set()
    for row in table_rows():
        where, names = row.split("|")[1], set(re.findall(r"`(\w+)`", row.split("|")[2]))
        declared = re.search(r"`([\w/]+)\.py`(?:: `(\w+)`)?", where)
        assert declared, row
        module, cls_name = declared.groups()
        if cls_name is None:
            assert module == "config", row
            shared |= names
            continue
        cls = getattr(importlib.import_module("jupyter_quota." + module.replace("/", ".")), cls_name)
        assert issubclass(JupyterQuota, cls), f"JupyterQuota is not composed of {cls_name}"
        assert set(cls.class_own_traits(config=True)) == names, row
    assert set(JupyterQuota.class_own_traits(config=True)) == shared


def test_an_old_config_name_still_sets_a_subsystem_setting_and_its_checks_still_run():
    from traitlets.config import Config

    config = Config()
    config.JupyterQuota.max_open_increases = 7
    config.JupyterQuota.kube_watch_scope = "cluster"
    config.JupyterQuota.stalled_job_action = "cancel"
    quota = JupyterQuota(config=config)
    assert (quota.max_open_increases, quota.kube_watch_scope, quota.stalled_job_action) == (7, "cluster", "cancel")
    with pytest.raises(ValueError, match=r"JupyterQuota\.max_open_increases must be more than 0"):
        JupyterQuota(config=Config({"JupyterQuota": {"max_open_increases": 0}}))
    with pytest.raises(ValueError, match="not a valid Kueue name"):
        JupyterQuota(config=Config({"JupyterQuota": {"kueue_queue": "Team_Queue"}}))


def test_the_readme_lists_every_recommendations_setting():
    """``c.Recommendations.*`` is its own section: the README's settings line names each trait."""
    from jupyter_quota.service.recommendations import Recommendations

    text = README.read_text()
    start = text.index("Settings (`c.Recommendations.*`):")
    paragraph = text[start : text.index("\n\n", start)]
    listed = set(re.findall(r"`(\w+)` \(", paragraph))
    assert listed == set(Recommendations.class_own_traits(config=True))


@pytest.mark.parametrize(
    ("setting", "value", "message"),
    [
        ("working_hours", "9-18", r'Recommendations\.working_hours must be "HH:MM-HH:MM", 24-hour'),
        ("working_days", ["Mon", "Caturday"], r'Recommendations\.working_days: unknown day "Caturday"'),
        ("working_timezone", "Mars/Base", r"Recommendations\.working_timezone must be an IANA timezone name"),
    ],
)
def test_working_hours_that_do_not_parse_are_refused_at_start_naming_the_setting(setting, value, message):
    from traitlets.config import Config

    from jupyter_quota.service.recommendations import Recommendations

    with pytest.raises(ValueError, match=message):
        Recommendations(JupyterQuota(config=Config({"Recommendations": {setting: value}})), None, None)
    every_hour = Recommendations(JupyterQuota(config=Config({"Recommendations": {"working_hours": ""}})), None, None)
    assert every_hour.settings.working is None
