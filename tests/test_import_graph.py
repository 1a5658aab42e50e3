"""``scripts/import_graph.py``: the package has no import cycle and no domain module imports a
backend; the script finds both when they are there (a package written for the test)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "import_graph.py"


def run(root) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), str(root)], capture_output=True, text=True, timeout=120)


def test_the_package_has_no_cycle_and_no_domain_module_imports_a_backend():
    result = run(ROOT)
    assert "import cycles: 0" in result.stdout, result.stdout
    assert "domain -> backend imports: 0" in result.stdout, result.stdout
    assert result.returncode == 0, result.stdout + result.stderr


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / "jupyter_quota" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def test_a_cycle_and_a_domain_module_importing_a_backend_fail_the_script(tmp_path):
    write(
        tmp_path,
        {
            "__init__.py": "",
            "quantity.py": "from .backends.base import Backend\n",  # domain -> backend
            "cli.py": "def main():\n    from . import increasecli\n",  # a lazy import counts
            "increasecli.py": "from .cli import main\n",
            "backends/__init__.py": "",
            "backends/base.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..service import x\n",
            "service/__init__.py": "from ..backends import base\n",
        },
    )
    result = run(tmp_path)
    assert result.returncode == 1
    assert "modules: 7" in result.stdout
    assert "cycle: cli <-> increasecli" in result.stdout
    assert "quantity (domain) -> backends.base (backends)" in result.stdout
    assert "domain -> backend imports: 1" in result.stdout
    assert "service" not in result.stdout.split("imports up the layers")[1].split("domain ->")[0].replace(
        "service <", ""
    ), "an import under TYPE_CHECKING is not an edge"


def test_an_upward_import_that_is_not_from_the_domain_is_listed_but_passes(tmp_path):
    write(
        tmp_path,
        {
            "__init__.py": "",
            "backends/__init__.py": "",
            "backends/local.py": "from ..service import façade\n",
            "service/__init__.py": "",
            "service/façade.py": "",
        },
    )
    result = run(tmp_path)
    assert "backends.local (backends) -> service" in result.stdout
    assert result.returncode == 0, result.stdout


def test_it_reads_the_sources_without_importing_them(tmp_path):
    write(tmp_path, {"__init__.py": "raise SystemExit('imported')\n", "times.py": "import os\n"})
    result = run(tmp_path)
    assert result.returncode == 0 and "modules: 2" in result.stdout
    assert os.path.exists(tmp_path / "jupyter_quota" / "times.py")
