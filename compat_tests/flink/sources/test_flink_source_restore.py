"""Real Flink restores a NumberSequenceSource from a savepoint whose split start pyref moved,
and emits from the new start: the corpus's operator-state savepoint is imported, its sequence
split (the next number the job's truth records) moved to 500 with ``pyref set-source-position``, both exported with
``export-flink``, and a job with the corpus job's source (same uid) restores each.

Every release of the corpus restores it (its own operator-state case): 2.3.0 in the ``flink`` tier, the others in
the ``slow`` sweep.

Marked ``flink``: needs Java 17 and the Flink jars (cached in ``PYREF_FLINK_CACHE``, or ``PYREF_FLINK_DOWNLOAD=1``)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess

import pytest

from compat_tests.flink import harness, jars
from compat_tests.flink.generate import CORPUS
from pyref.cli import main
from pyref.flink import export_savepoint, import_flink
from pyref.flink.sources import NumberSequenceSplit, source_splits
from pyref.reader import Savepoint

pytestmark = pytest.mark.flink

DOWNLOAD = os.environ.get("PYREF_FLINK_DOWNLOAD") == "1"

HERE = pathlib.Path(__file__).resolve().parent
FIRST = 5  # numbers taken after each restore
QUICK_VERSION = "2.3.0"
VERSIONS = [v if v == QUICK_VERSION else pytest.param(v, marks=pytest.mark.slow) for v in jars.FLINK_VERSIONS]


def emitted_after_restore(version: str, savepoints: list[pathlib.Path], tmp: pathlib.Path) -> dict[str, list[int]]:
    """The first numbers the restored source emits, per savepoint (one JVM, a mini cluster each)."""
    reason = harness.flink_available(version, download=DOWNLOAD)
    if reason:
        pytest.skip(reason)
    lib = jars.ensure_lib(version, download=DOWNLOAD)
    classes = tmp / "classes"
    subprocess.run([harness.java_home_bin("javac"), "--release", "11", "-nowarn", "-cp", str(lib / "*"), "-d",
                    str(classes), str(HERE / "restore" / "SequenceRestore.java")], check=True, timeout=300)
    keys = harness.config_keys(version)
    (tmp / "log4j2.properties").write_text(harness.LOG4J.format(path=tmp / "flink.log"), encoding="utf-8")
    proc = subprocess.run([harness.java_home_bin("java"), *harness.JVM_OPTIONS,
                           f"-Dlog4j.configurationFile={tmp / 'log4j2.properties'}", "-cp",
                           f"{classes}{os.pathsep}{lib / '*'}", "org.pyref.flink.sources.SequenceRestore",
                           keys.restore_path, keys.ignore_unclaimed, str(FIRST), *(p.as_uri() for p in savepoints)],
                          capture_output=True, text=True, timeout=600)
    lines = [line.split(" ") for line in proc.stdout.splitlines() if line.startswith("PYREF-SEQUENCE ")]
    assert len(lines) == len(savepoints), proc.stderr[-4000:]
    return {uri: [int(n) for n in numbers.split(",")] for _, uri, numbers in lines}


@pytest.mark.parametrize("version", VERSIONS)
def test_restored_source_emits_from_the_moved_start(version, tmp_path):
    case = CORPUS / version / "hashmap" / "operator-state" / "savepoint"
    imported, moved = tmp_path / "imported", tmp_path / "moved"
    import_flink(str(case), str(imported), uids=["sequence-source"])  # 1.x stores no uids: the job's
    truth = json.loads((case.parent / "truth.json").read_text(encoding="utf-8"))
    (recorded,), = truth["operators"]["sequence-source"]["operator_state"]["SourceReaderState"]["decoded"]
    held = source_splits(Savepoint.open(imported).operator("sequence-source"))
    assert held is not None and held.splits() == [NumberSequenceSplit("1", recorded["from"], recorded["to"])]
    assert main(["set-source-position", str(imported), str(moved), "sequence-source", "--sequence-start",
                 "1=500"]) == 0
    exported = {}
    for name, savepoint in (("as-saved", imported), ("moved", moved)):
        exported[name] = tmp_path / f"flink-{name}"
        export_savepoint(savepoint, exported[name], flink_version=version, operators=["sequence-source"])
    emitted = emitted_after_restore(version, list(exported.values()), tmp_path)
    assert emitted == {exported["as-saved"].as_uri(): list(range(recorded["from"], recorded["from"] + FIRST)),
                       exported["moved"].as_uri(): [500, 501, 502, 503, 504]}
