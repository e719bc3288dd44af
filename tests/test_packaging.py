"""What a user installs: the sdist and wheel carry the license and ``py.typed``, ``pyref
--version`` answers, and without pyspark the Spark subcommands fail with a typed error
(a JSON document with ``--json``), not a traceback."""

from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import sys
import tarfile
import zipfile

import pytest

import pyref
from pyref.cli import main
from pyref.testing import write_seeds

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _build(hook: str, source: pathlib.Path, out: pathlib.Path) -> pathlib.Path:
    """Run setuptools' PEP 517 hook ``hook`` in ``source`` (a subprocess: it changes the
    working directory and imports the project's configuration)."""
    code = f"from setuptools import build_meta; print(build_meta.{hook}({str(out)!r}))"
    done = subprocess.run([sys.executable, "-c", code], cwd=source, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return out / done.stdout.strip().splitlines()[-1]


def test_sdist_and_wheel_carry_the_license_and_py_typed(tmp_path):
    """As `python -m build` does: the sdist from a copy of the tree, the wheel from the
    unpacked sdist (so a file the sdist forgets is missing from the wheel too)."""
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, tree / name)
    shutil.copytree(ROOT / "pyref", tree / "pyref", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    sdist = _build("build_sdist", tree, tmp_path)
    top = f"pyref_savepoint-{pyref.__version__}"
    with tarfile.open(sdist) as tar:
        names = set(tar.getnames())
        tar.extractall(tmp_path / "unpacked", filter="data")
    assert {f"{top}/LICENSE", f"{top}/pyref/py.typed", f"{top}/pyref/_proto/savepoint/v1/manifest_pb2.py"} <= names
    wheel = _build("build_wheel", tmp_path / "unpacked" / top, tmp_path)
    with zipfile.ZipFile(wheel) as whl:
        names = set(whl.namelist())
        metadata = whl.read(f"{top}.dist-info/METADATA").decode()
    assert {"pyref/py.typed", f"{top}.dist-info/licenses/LICENSE", "pyref/derived.py"} <= names
    assert "Apache License" in (ROOT / "LICENSE").read_text()
    for line in ("License-Expression: Apache-2.0", "License-File: LICENSE", "Classifier: Typing :: Typed",
                 "Classifier: Programming Language :: Python :: 3.13", "Requires-Python: >=3.10"):
        assert line in metadata.splitlines()


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"pyref {pyref.__version__} (savepoint format 1.2)\n"


SPARK_COMMANDS = [
    ["spark-rescale", "{sp}", "{target}", "-p", "3"],
    ["spark-flatten", "{sp}", "{target}"],
    ["change-max-parallelism", "{sp}", "{target}", "-m", "256"],
    ["migrate", "{sp}", "{target}", "--operator", "kafka-source", "--state", "offsets", "--serializer", "int64"],
    ["spark-import-flink", "{flink}", "{target}"],  # a Flink savepoint: the source is checked before Spark starts
]
FLINK_SAVEPOINT = pathlib.Path(__file__).parent.parent / "compat_tests/flink/corpus/2.3.0/hashmap/seeds/savepoint"
#: Runs the CLI as if pyspark were not installed: importing it raises ImportError, as it does
#: in the quick tox cells, which install no pyspark and run this test for real.
WITHOUT_PYSPARK = "import sys; sys.modules['pyspark'] = None; from pyref.cli import main; sys.exit(main(sys.argv[1:]))"


@pytest.mark.parametrize("argv", SPARK_COMMANDS, ids=lambda argv: argv[0])
def test_spark_commands_without_pyspark_are_a_typed_error(tmp_path, argv):
    write_seeds(tmp_path / "sp")
    argv = [a.format(sp=tmp_path / "sp", target=tmp_path / "target", flink=FLINK_SAVEPOINT) for a in argv]
    done = subprocess.run([sys.executable, "-c", WITHOUT_PYSPARK, *argv, "--json"], capture_output=True, text=True,
                          timeout=120)
    assert (done.returncode, done.stderr) == (9, "")
    report = json.loads(done.stdout)
    assert report["type"] == "MissingDependencyError" and report["exit_code"] == 9
    assert f"pyref {argv[0]} needs pyspark" in report["error"] and "pyref-savepoint[spark]" in report["error"]
    done = subprocess.run([sys.executable, "-c", WITHOUT_PYSPARK, *argv], capture_output=True, text=True, timeout=120)
    assert done.returncode == 9 and done.stdout == ""
    assert done.stderr.startswith(f"pyref: MissingDependencyError: pyref {argv[0]} needs pyspark")
    assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) == 1
    assert not (tmp_path / "target").exists()


def test_spark_command_arguments_are_checked_without_pyspark(tmp_path):
    """A wrong argument is still an invalid argument (2), not the missing pyspark."""
    write_seeds(tmp_path / "sp")
    done = subprocess.run([sys.executable, "-c", WITHOUT_PYSPARK, "migrate", str(tmp_path / "sp"),
                           str(tmp_path / "t"), "--operator", "o", "--state", "s", "--serializer", "map<int64>",
                           "--json"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and json.loads(done.stdout)["type"] == "InvalidArgumentError"
