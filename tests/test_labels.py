"""Each label and annotation key, and each reason code, is spelled in one module only.

``jupyter_quota/labels.py`` names the keys and ``jupyter_quota/reasons.py`` the reason codes; every
other module uses the constants. Read from the source: any string in code (docstrings are prose and
are skipped) that is one of the keys, or a key under our prefix or Kubernetes' label prefixes, is a
second spelling; so is a reason code written as a ``reason`` (the same words can mean other things,
e.g. the quota scope ``Terminating``, so only a ``reason`` counts).
"""

from __future__ import annotations

import ast
from pathlib import Path

from jupyter_quota import labels, reasons

PACKAGE = Path(labels.__file__).resolve().parent
#: Prefixes of label and annotation keys (ours, and the Kubernetes ones we read or write).
KEY_PREFIXES = (labels.PREFIX, "app.kubernetes.io/", "batch.kubernetes.io/", "kubernetes.io/limit-")


def constants(module) -> dict[str, str]:
    return {name: value for name, value in vars(module).items() if name.isupper() and isinstance(value, str)}


def code_strings(path: Path):
    """(line, text) of every string constant in ``path`` that is not a docstring."""
    tree = ast.parse(path.read_text(), str(path))
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node.lineno, node.value


def spelled_again(home, values: set[str], prefixes: tuple[str, ...] = ()) -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == Path(home.__file__).resolve():
            continue
        for line, text in code_strings(path):
            if text in values or (prefixes and text.startswith(prefixes)):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {text!r}")
    return found


def test_the_constants_modules_name_what_the_package_uses():
    keys = constants(labels)
    assert {"MANAGED_BY", "TEAM", "USER", "JOB", "OWNER", "ARGS", "JOB_NAME", "CONTROLLER_UID"} <= set(keys)
    assert {"CANCELLED", "EXCEEDED_QUOTA", "LIMIT_RANGE_VIOLATION", "FAILED_CREATE"} <= set(constants(reasons))
    assert len(set(keys.values())) == len(keys), "two label constants share a key"


def test_every_label_and_annotation_key_comes_from_the_labels_module():
    # label values (what a key is set to) are words other parts use too: the Prometheus label and
    # the event named "endpoint" are not the ``kind`` label's value
    values = {v for name, v in constants(labels).items() if name not in ("MANAGED_BY_VALUE", "KIND_ENDPOINT")}
    assert spelled_again(labels, values, KEY_PREFIXES) == []


def reasons_spelled_again(path: Path, values: set[str]) -> list[str]:
    """``reason="X"`` and ``reason = "X"`` in ``path`` with X one of ``values``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (isinstance(node, ast.keyword) and node.arg == "reason") or (
            isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "reason" for t in node.targets)
        ):
            value = node.value
        else:
            continue
        if isinstance(value, ast.Constant) and value.value in values:
            found.append(f"{path.name}:{node.lineno}: {value.value!r}")
    return found


def test_every_reason_code_comes_from_the_reasons_module():
    values = set(constants(reasons).values())
    home = Path(reasons.__file__).resolve()
    assert [
        hit for path in sorted(PACKAGE.rglob("*.py")) if path != home for hit in reasons_spelled_again(path, values)
    ] == []


def test_the_check_finds_a_key_spelled_outside_the_labels_module(tmp_path):
    """The scan sees a key in code, and skips one in a docstring."""
    module = tmp_path / "m.py"
    module.write_text(
        '"""Docs may name jupyter-quota/team."""\nKEY = "jupyter-quota/team"\n'
        'SELECTOR = f"app.kubernetes.io/managed-by={1}"\n'
    )
    assert [text for _, text in code_strings(module)] == ["jupyter-quota/team", "app.kubernetes.io/managed-by="]
    module.write_text(
        'raise AdmissionDenied("no", reason="ExceededQuota")\nreason = "Cancelled"\nscope = "Terminating"\n'
    )
    assert sorted(reasons_spelled_again(module, set(constants(reasons).values()))) == [
        "m.py:1: 'ExceededQuota'",
        "m.py:2: 'Cancelled'",
    ]
