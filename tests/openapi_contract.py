"""Check a REST body against its schema in ``jupyter_quota/openapi.yaml``, strictly.

Strict: an object may hold only the keys its schema names (unless the schema says
``additionalProperties``), so a key the spec does not document, a snake_case one among them, fails
here instead of reaching the generated TypeScript types (``src/api.gen.ts``) as a guess.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path

import yaml
from openapi_schema_validator import OAS30Validator

import jupyter_quota

SPEC = Path(jupyter_quota.__file__).parent / "openapi.yaml"


def assert_matches(schema: str, body) -> None:
    """Fail with every mismatch between ``body`` and ``components.schemas[schema]``."""
    validator = OAS30Validator({"$ref": f"#/components/schemas/{schema}", "components": _strict_components()})
    errors = sorted(validator.iter_errors(body), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{'/'.join(map(str, e.absolute_path)) or '(body)'}: {e.message}" for e in errors)


@functools.lru_cache(maxsize=1)
def _strict_components() -> dict:
    components = copy.deepcopy(yaml.safe_load(SPEC.read_text())["components"])
    _close(components["schemas"])
    return components


def _close(node) -> None:
    if isinstance(node, dict):
        if "properties" in node and "additionalProperties" not in node:
            node["additionalProperties"] = False
        if node.get("nullable") is True and "allOf" in node and "type" not in node:
            # `{allOf: [X], nullable: true}`: openapi-typescript reads it as `X | null`; OAS 3.0.3 ties
            # nullable to a `type` beside it, so the validator would refuse null: say it outright
            node["anyOf"] = [{"allOf": node.pop("allOf")}, {"enum": [None]}]
        for value in node.values():
            _close(value)
    elif isinstance(node, list):
        for value in node:
            _close(value)
