"""Time windows: open at the right wall-clock hours, past midnight, across DST, and refused when malformed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jupyter_quota.errors import InvalidRequest
from jupyter_quota.profiles import TeamProfile
from jupyter_quota.windows import next_change, open_windows, parse_windows, window_extra

GPU = "requests.nvidia.com/gpu"
NIGHTS = {
    "name": "nights",
    "days": ["Mon", "Tue", "Wed", "Thu", "Fri"],
    "start": "20:00",
    "end": "08:00",
    "extra": {GPU: "2"},
}
WEEKEND = {"name": "weekend", "days": ["Sat", "Sun"], "start": "00:00", "end": "00:00", "extra": {GPU: "2"}}


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC) if "+" not in text else datetime.fromisoformat(text)


def names(profile, now) -> list[str]:
    return [w.name for w in open_windows(profile, now)]


def test_a_night_window_runs_past_midnight_into_the_next_day():
    p = TeamProfile(team="beta", windows=[NIGHTS])
    # 2026-11-30 is a Monday
    assert names(p, at("2026-11-30T19:59")) == []
    assert names(p, at("2026-11-30T20:00")) == ["nights"]
    assert names(p, at("2026-12-01T07:59")) == ["nights"]
    assert names(p, at("2026-12-01T08:00")) == []
    # Friday night's window ends on Saturday morning; none starts on Saturday
    assert names(p, at("2026-12-05T07:00")) == ["nights"]
    assert names(p, at("2026-12-05T21:00")) == []
    # Monday morning: Sunday starts no window
    assert names(p, at("2026-11-30T07:00")) == []


def test_weekend_days_join_into_one_stretch_and_extras_add_up():
    p = TeamProfile(team="beta", windows=[NIGHTS, WEEKEND])
    assert window_extra(p, at("2026-12-04T12:00")) == {}
    assert window_extra(p, at("2026-12-05T07:00")) == {GPU: "4"}  # Friday's night and Saturday
    assert window_extra(p, at("2026-12-05T12:00")) == {GPU: "2"}
    # Saturday and Sunday are one stretch: the next change is Monday 00:00, not Sunday 00:00
    assert next_change(p, at("2026-12-05T12:00")) == at("2026-12-07T00:00")
    assert next_change(p, at("2026-12-04T12:00")) == at("2026-12-04T20:00")


def test_next_change_is_none_without_windows_or_when_always_open():
    always = {
        "name": "always",
        "days": ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"],
        "start": "00:00",
        "end": "00:00",
        "extra": {GPU: "1"},
    }
    assert next_change(TeamProfile(team="a"), at("2026-12-01T00:00")) is None
    assert next_change(TeamProfile(team="a", windows=[always]), at("2026-12-01T00:00")) is None
    assert window_extra(TeamProfile(team="a", windows=[always]), at("2026-12-01T00:00")) == {GPU: "1"}


def test_a_window_keeps_its_local_hours_across_daylight_saving_changes():
    paris = {**NIGHTS, "days": ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"], "timezone": "Europe/Paris"}
    p = TeamProfile(team="beta", windows=[paris])
    # spring: 2026-03-29 02:00 CET becomes 03:00 CEST; 20:00 CET is 19:00 UTC, 08:00 CEST is 06:00 UTC (11 hours)
    assert next_change(p, at("2026-03-28T12:00")) == at("2026-03-28T19:00")
    assert next_change(p, at("2026-03-28T19:00")) == at("2026-03-29T06:00")
    # autumn: 2026-10-25 03:00 CEST becomes 02:00 CET; 20:00 CEST is 18:00 UTC, 08:00 CET is 07:00 UTC (13 hours)
    assert next_change(p, at("2026-10-24T12:00")) == at("2026-10-24T18:00")
    assert names(p, at("2026-10-25T06:59")) == ["nights"]
    assert next_change(p, at("2026-10-24T18:00")) == at("2026-10-25T07:00")


def test_a_start_in_the_spring_forward_gap_is_read_with_the_offset_before_the_change():
    gap = {
        "name": "gap",
        "days": ["Sun"],
        "start": "02:30",
        "end": "04:00",
        "timezone": "Europe/Paris",
        "extra": {GPU: "1"},
    }
    p = TeamProfile(team="beta", windows=[gap])
    # 02:30 does not exist on 2026-03-29 in Paris; fold=0 reads it as CET (+01:00): 01:30 UTC, 03:30 CEST
    assert next_change(p, at("2026-03-29T00:00")) == at("2026-03-29T01:30")
    assert next_change(p, at("2026-03-29T01:30")) == at("2026-03-29T02:00")  # 04:00 CEST


def test_a_naive_time_is_refused():
    with pytest.raises(ValueError, match="aware"):
        open_windows(TeamProfile(team="a", windows=[NIGHTS]), datetime(2026, 12, 1))


@settings(max_examples=60, deadline=None)
@given(
    st.datetimes(min_value=datetime(2026, 1, 1), max_value=datetime(2027, 12, 31)),
    st.sampled_from(["UTC", "Europe/Paris", "America/New_York", "Australia/Lord_Howe"]),
)
def test_the_open_set_holds_until_next_change_and_differs_there(naive, tz):
    p = TeamProfile(team="beta", windows=[{**NIGHTS, "timezone": tz}, {**WEEKEND, "timezone": tz}])
    now = naive.replace(tzinfo=UTC)
    change = next_change(p, now)
    assert change is not None and now < change <= now + timedelta(days=3)
    before = names(p, now)
    assert names(p, change - timedelta(microseconds=1)) == before
    assert names(p, change) != before


@pytest.mark.parametrize(
    "window, words",
    [
        ({**NIGHTS, "start": "8pm"}, 'windows[0].start must be a 24-hour time "HH:MM"'),
        ({**NIGHTS, "end": "24:00"}, "windows[0].end must be a 24-hour time"),
        ({**NIGHTS, "days": ["Monday"]}, 'windows[0].days: unknown day "Monday"'),
        ({**NIGHTS, "days": []}, "windows[0].days must be a non-empty list"),
        ({**NIGHTS, "timezone": "Mars/Olympus"}, "windows[0].timezone must be an IANA timezone name"),
        ({**NIGHTS, "timezone": "../../etc/passwd"}, "windows[0].timezone must be an IANA timezone name"),
        # a folder of the zone database, and a name too long for a file: once OSErrors (500s)
        ({**NIGHTS, "timezone": "America"}, "windows[0].timezone must be an IANA timezone name"),
        ({**NIGHTS, "timezone": "Etc"}, "windows[0].timezone must be an IANA timezone name"),
        ({**NIGHTS, "timezone": "x" * 300}, "windows[0].timezone must be an IANA timezone name"),
        ({**NIGHTS, "timezone": "zone.tab"}, "windows[0].timezone must be an IANA timezone name"),
        (
            {**NIGHTS, "extra": {GPU: "0.5"}},
            'windows[0].extra[requests.nvidia.com/gpu]: Invalid value: "0.5": GPUs are whole',
        ),
        ({**NIGHTS, "extra": {"gpus": "1"}}, "must be a standard resource for quota"),
        ({**NIGHTS, "onClose": "kill"}, 'windows[0].onClose must be "finish" or "preempt"'),
        ({**NIGHTS, "every": "day"}, 'windows[0]: unknown field(s) "every"'),
        ({**NIGHTS, "name": ""}, "windows[0].name must be a non-empty string"),
    ],
)
def test_bad_windows_are_refused_naming_the_field(window, words):
    with pytest.raises(InvalidRequest) as e:
        TeamProfile(team="x", windows=[window])
    assert words in e.value.message and e.value.message.startswith("profile 'x': ")


def test_a_window_that_is_not_an_object_is_refused():
    with pytest.raises(InvalidRequest, match=r"windows\[0\] must be an object"):
        parse_windows(["nights"])
    with pytest.raises(InvalidRequest, match="windows must be a list"):
        parse_windows("nights")


def test_two_windows_with_one_name_are_refused():
    with pytest.raises(InvalidRequest, match="used twice"):
        TeamProfile(team="x", windows=[NIGHTS, NIGHTS])


@pytest.mark.parametrize(
    "fields, words",
    [
        (
            {"borrowingLimit": {GPU: "-1"}},
            'borrowingLimit[requests.nvidia.com/gpu]: Invalid value: "-1": must be greater',
        ),
        ({"lendingLimit": {GPU: "1.5"}}, 'lendingLimit[requests.nvidia.com/gpu]: Invalid value: "1.5": GPUs are whole'),
        ({"priorityClasses": {"urgent": "x"}}, 'priorityClasses[urgent]: unknown priority "urgent"'),
        ({"priorityClasses": {"high": "Not_A_Name"}}, "priorityClasses[high] must be a PriorityClass name"),
    ],
)
def test_bad_borrowing_lending_and_priority_classes_are_refused(fields, words):
    with pytest.raises(InvalidRequest) as e:
        TeamProfile(team="x", **fields)
    assert words in e.value.message


def test_elastic_fields_round_trip_in_the_profile_json():
    fields = {
        "windows": [NIGHTS],
        "borrowingLimit": {GPU: "2"},
        "lendingLimit": {GPU: "1"},
        "priorityClasses": {"high": "team-high", "best-effort": "scavenger"},
    }
    data = TeamProfile(team="x", **fields).to_json()
    assert {k: data[k] for k in fields} == fields


def test_a_timeline_answers_as_open_windows_and_next_change_do_across_daylight_saving():
    from jupyter_quota.windows import Timeline

    p = TeamProfile(
        team="beta",
        windows=[
            {**NIGHTS, "timezone": "Europe/Paris"},
            {**WEEKEND, "timezone": "Europe/Paris"},
            {
                **NIGHTS,
                "name": "late",
                "days": ["Wed"],
                "start": "18:00",
                "end": "23:00",
                "timezone": "America/New_York",
            },
        ],
    )
    since, until = (
        datetime(2026, 10, 20, 5, 7, tzinfo=UTC),
        datetime(2026, 11, 6, tzinfo=UTC),
    )  # Paris and New York change
    timeline = Timeline(p, since, until)
    now, checked = since, 0
    while now < until:
        t = int(now.timestamp())
        assert timeline.open_at(t) == tuple(names(p, now)), now
        expected = next_change(p, now)
        if expected is not None and expected < until:
            assert timeline.next_change(t) == int(expected.timestamp()), now
            checked += 1
        now += timedelta(minutes=17)
    assert checked > 1000
