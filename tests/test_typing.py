"""The package type-checks as its users' code will: ``mypy`` (the ``dev`` extra) with the
configuration in pyproject.toml, strict on the public API and on examples/typed_usage.py, a
user's script against it. Skipped where mypy is not installed (the tox cells)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _mypy(*args: str) -> subprocess.CompletedProcess[str]:
    pytest.importorskip("mypy")
    return subprocess.run([sys.executable, "-m", "mypy", "--strict", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)


def test_the_package_and_a_users_script_pass_mypy_strict():
    result = _mypy()  # the files of [tool.mypy]: pyref and examples/typed_usage.py
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success: no issues found" in result.stdout


def test_the_public_api_has_real_types_not_any(tmp_path):
    """A script that misuses the API fails the check: the names it uses are typed, not Any."""
    script = tmp_path / "misuse.py"
    script.write_text(
        "from pyref import Savepoint\n"
        "from pyref.inspection import describe\n"
        "from pyref.spark import read_state\n"
        "sp = Savepoint.open('sp')\n"
        "count: int = sp.savepoint_id\n"
        "entries: str = sp.operator('op').keyed_state('s').info.entries\n"
        "bases: int = describe(sp).bases\n"
        "read_state(sp)\n"
    )
    result = _mypy(str(script))
    # A warm .mypy_cache reports the unchanged script under the tmp path of the run that cached it.
    lines = [line for line in result.stdout.splitlines() if Path(line.split(":")[0]).name == script.name]
    assert sorted({int(line.split(":")[1]) for line in lines}) == [5, 6, 7, 8], result.stdout


def test_the_users_script_runs(tmp_path):
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import typed_usage
    finally:
        sys.path.remove(str(ROOT / "examples"))
    result = typed_usage.main(tmp_path)
    assert result["hits"] == 3 and result["referrer"] == "/home" and result["verified"]
    assert result["offsets"] == [100, 101, 200, 201] and result["key_groups"] == (96, 127)
    assert result["subtask_3"] == [("/a", 3)] and result["rescaled"] == 4
    assert str(result["repr"]).startswith("<KeyedStateView url-counter/count [value] int64@v1: 2 entries")


def test_every_lazy_spark_name_is_visible_to_type_checkers():
    """pyref.spark resolves its names lazily (no pyspark import until used); its TYPE_CHECKING
    block must re-export each of them, or mypy sees the name as missing."""
    import pyref.spark

    source = (ROOT / "pyref" / "spark" / "__init__.py").read_text()
    assert [name for name in pyref.spark.__all__ if f" import {name} as {name}\n" not in source] == []
