#!/usr/bin/env bash
# Install what the jobs of the demo and of tests/e2e run, `swift sft`, into the venv: torch's CPU
# build first (2.13.0 lies on this machine kind's disk; a plain `torch` would fetch a multi-GB
# CUDA build), then ms-swift as pyproject.toml's [swift] extra pins it. Idempotent: nothing is
# installed when ms-swift is there already. Called by scripts/demo and scripts/test.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${JUPYTER_QUOTA_VENV:-.venv}"
PY="$VENV/bin/python"
[ -x "$PY" ] || { echo "no Python environment at $VENV: run scripts/setup first" >&2; exit 1; }
# Asked of the package metadata, not by importing it (that loads torch: tens of seconds).
if [ -x "$VENV/bin/swift" ] && "$PY" -c 'import importlib.metadata as m; m.version("ms-swift")' 2>/dev/null; then
  echo "==> ms-swift already installed in $VENV"
  exit 0
fi
# The [swift] extra's requirements, read from pyproject.toml (installing ".[swift]" would rebuild
# the extension for nothing).
swift_extra_text="$("$PY" -c 'import tomllib; print(*tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["swift"], sep="\n")')"
mapfile -t swift_extra <<<"$swift_extra_text"
echo "==> torch 2.13.0 (CPU build), then ms-swift (${swift_extra[*]}) into $VENV"
"$PY" -m pip install --quiet "torch==2.13.0"
"$PY" -m pip install --quiet "${swift_extra[@]}"
"$PY" -c "import swift.arguments" || { echo "ms-swift was installed but cannot be imported" >&2; exit 1; }
[ -x "$VENV/bin/swift" ] || { echo "ms-swift was installed but $VENV/bin/swift is missing" >&2; exit 1; }
echo "==> ms-swift installed in $VENV"
