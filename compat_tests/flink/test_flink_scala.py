"""Real Flink restores pyref's export of a Scala API job's savepoint to exactly the job's truth.

The committed Flink 1.16.3 RocksDB savepoint of the scala job (tests/flink/data/scala: the Scala
API's serializers, flink-scala) is imported into pyref and exported for Flink 1.20.3 (the newest
release with the Scala API, and one the flink tier has the jars of; the slow sweep: every other 1.x
release, 1.13 and 1.14, whose Scala is 2.11, from the committed 1.14.6 savepoint), once as it was
(restored at parallelism 2 on RocksDB) and once rescaled by pyref to 3 subtasks (restored at 3 on
the HashMap backend): every subtask of the restored job must read back the values of the truth,
so the Scala serializers' snapshots (with the cbfCode Flink compiles on restore) and their values
came back byte for byte.

Marked ``flink`` (Java 17 and the Flink jars with flink-scala: cached, or PYREF_FLINK_DOWNLOAD=1).
"""

from __future__ import annotations

import json
import os
import pathlib

import pytest

from compat_tests.flink import harness, jars
from compat_tests.flink.truth import restore_differences
from pyref import rescale
from pyref.flink import export_savepoint, import_flink

pytestmark = pytest.mark.flink

DOWNLOAD = os.environ.get("PYREF_FLINK_DOWNLOAD") == "1"
QUICK_VERSION = "1.20.3"
#: Flink 2.0 removed the Scala API.
VERSIONS = [v if v == QUICK_VERSION else pytest.param(v, marks=pytest.mark.slow)
            for v in jars.FLINK_VERSIONS if harness.release(v) < (2, 0)]
DATA = pathlib.Path(__file__).resolve().parents[2] / "tests" / "flink" / "data" / "scala"
RESCALED = 3


def case_of(version: str) -> pathlib.Path:
    """The committed savepoint of the release's Scala: 2.11 up to Flink 1.14, 2.12 since 1.15."""
    return DATA / ("1.14.6-rocksdb" if harness.release(version) <= (1, 14) else "1.16.3-rocksdb")


@pytest.mark.parametrize("version", VERSIONS)
def test_flink_restores_the_export_of_scala_state_to_its_truth(version, tmp_path):
    reason = harness.flink_available(version, download=DOWNLOAD)
    if reason:
        pytest.skip(reason)
    case = case_of(version)
    truth = json.loads((case / "truth.json").read_text(encoding="utf-8"))
    import_flink(case / "savepoint", tmp_path / "pyref")
    export_savepoint(tmp_path / "pyref", tmp_path / "export", flink_version=version)
    rescale(tmp_path / "pyref", tmp_path / f"pyref-{RESCALED}", RESCALED)
    export_savepoint(tmp_path / f"pyref-{RESCALED}", tmp_path / f"export-{RESCALED}", flink_version=version)
    spec = harness.job_spec_from_truth(truth, own_parallelism=False)
    dumps = harness.restore_and_dump_many(version, [
        harness.RestoreRequest(tmp_path / "export", spec, 2, backend="rocksdb"),
        harness.RestoreRequest(tmp_path / f"export-{RESCALED}", spec, RESCALED, backend="hashmap")],
        download=DOWNLOAD)
    for dump in dumps:
        assert restore_differences(truth, dump) == []
    restored = dumps[1]["operators"]["scala"]["keyed_state"]
    assert {e["subtask"] for e in restored["map"]["entries"]} == set(range(RESCALED))
    assert sum(len(s["entries"]) for s in restored.values()) == 16 * 12  # 16 keys, 12 states
