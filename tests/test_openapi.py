"""The OpenAPI file is valid, documents every route, every documented route exists, and what a
real server answers matches the schemas (strictly: no key the spec does not name)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from openapi_contract import assert_matches
from openapi_spec_validator import validate

import jupyter_quota
from jupyter_quota.handlers import ROUTES
from jupyter_quota.jobspec import REQUEST_FIELDS

SPEC = Path(jupyter_quota.__file__).parent / "openapi.yaml"
VERBS = ("get", "post", "put", "delete", "patch")


def load_spec() -> dict:
    return yaml.safe_load(SPEC.read_text())


def implemented() -> set[tuple[str, str]]:
    """(method, path template) pairs the handlers serve, path parameters as ``{}``."""
    pairs = set()
    for path, handler in ROUTES:
        template = re.sub(r"\(\[\^/\]\+\)|\(\.\+\)", "{}", path)  # a segment, or a path (the proxy's)
        for verb in VERBS:
            if verb in vars(handler):
                pairs.add((verb, template))
    return pairs


def documented(spec: dict) -> set[tuple[str, str]]:
    pairs = set()
    for path, item in spec["paths"].items():
        template = re.sub(r"\{[^}]+\}", "{}", path)
        pairs.update((verb, template) for verb in VERBS if verb in item)
    return pairs


def test_spec_is_valid_openapi():
    validate(load_spec())


def test_every_route_is_documented_and_every_documented_route_exists():
    spec = load_spec()
    assert implemented() - documented(spec) == set(), "routes missing from openapi.yaml"
    assert documented(spec) - implemented() == set(), "openapi.yaml documents routes that do not exist"


def test_every_operation_documents_its_errors():
    for path, item in load_spec()["paths"].items():
        for verb in VERBS:
            if (verb in item and verb != "get") or (verb == "get" and "{" in path and verb in item):
                codes = set(item[verb]["responses"])
                assert codes & {"400", "403", "404"}, (verb, path, codes)


def test_the_job_request_documents_every_field_a_job_takes():
    documented_fields = set(load_spec()["components"]["schemas"]["JobRequest"]["properties"])
    assert documented_fields == set(REQUEST_FIELDS)


def test_spec_ships_in_the_package():
    assert SPEC.is_file()


async def test_real_responses_match_their_schemas(api):
    reads = [
        ("NamespaceList", ("namespaces",)),
        ("Balance", ("namespaces", "team-alpha", "balance")),
        ("JobList", ("namespaces", "team-alpha", "jobs")),
        ("Identity", ("identity",)),
        ("Inventory", ("inventory",)),
        ("ModelList", ("models",)),
    ]
    for schema, path in reads:
        status, body = await api("GET", *path)
        assert status == 200, (path, body)
        assert_matches(schema, body)
    args = ["--model", "Qwen/Qwen2.5-7B-Instruct", "--tuner_type", "full", "--max_length", "2048"]
    status, body = await api("POST", "estimate", body={"args": args, "gpus": 2})
    assert status == 200, body
    assert_matches("Estimate", body)
    status, body = await api("POST", "namespaces", "team-alpha", "plan", body={"args": args})
    assert status == 200, body
    assert_matches("PlanResult", body)
    assert body["recommended"]["changes"], "a plan that changes nothing checks no PlanChange"
    status, body = await api("POST", "namespaces", "team-alpha", "jobs", body={"args": ["--model", "x"], "gpus": 1})
    assert status == 201, body
    assert_matches("Job", body)
    status, body = await api("GET", "namespaces", "team-alpha", "jobs", body["name"], "logs")
    assert status == 200, body
    assert_matches("JobLogs", body)
    status, body = await api("DELETE", "namespaces", "team-alpha", "jobs", body["name"])
    assert status == 200, body
    assert_matches("Job", body)


def test_a_body_with_a_key_the_spec_does_not_name_fails_the_check():
    import pytest

    with pytest.raises(AssertionError, match="peak_bytes_per_gpu"):
        assert_matches(
            "Breakdown",
            {
                "weights": 1,
                "gradients": 0,
                "optimizer": 0,
                "activations": 0,
                "logits": 0,
                "overhead": 0,
                "peak_bytes_per_gpu": 1,
            },
        )


def test_every_authenticated_operation_documents_its_403():
    """Every route answers 403 to a caller without credentials (jupyter-server's answer: refused,
    with what to send), so every operation must say so (issue 25, item 11)."""
    missing = [
        (verb, path)
        for path, item in load_spec()["paths"].items()
        for verb in VERBS
        if verb in item and "403" not in item[verb]["responses"]
    ]
    assert missing == []


def test_the_month_pattern_refuses_what_the_server_refuses():
    pattern = re.compile(
        next(p for p in load_spec()["paths"]["/chargeback"]["get"]["parameters"] if p["name"] == "month")["schema"][
            "pattern"
        ]
    )
    for month in ("0000-01", "2026-13", "2026-00", "1620-32", "9999-12", "", "\uff12\uff10\uff12\uff16-\uff11\uff11"):
        assert not pattern.search(month), month
    for month in ("0001-01", "2026-11", "9999-11"):
        assert pattern.search(month), month
