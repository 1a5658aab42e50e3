"""The OpenAPI file is valid, documents every route, and every documented route exists."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
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
        template = re.sub(r"\(\[\^/\]\+\)", "{}", path)
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
