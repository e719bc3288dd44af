"""Checkpoints of the changelog state backend and of ForSt on Spark (tests/flink/data/checkpoints):
one import task per state handle writes what the core import writes (a DSTL file both subtasks'
handles share; ForSt's DB files below shared/<op>/db/; states refused before materialization left
out), and a read of a state no reader decodes is refused as a read."""

from __future__ import annotations

import pathlib

import pytest

from pyref.errors import UnsupportedFormatError
from tests.flink.test_checkpoints import snapshot, truth
from tests.flink.test_new_backend_workflows import REFUSED_UNMATERIALIZED, UNMATERIALIZED
from tests.spark.test_spark_flink import assert_spark_import_is_the_core_import
from compat_tests.flink.imports import ttl_configs

pytestmark = pytest.mark.spark
GOLDEN = pathlib.Path(__file__).resolve().parents[2] / "compat_tests" / "golden" / "1.1" / "key-bounds-inline" / "savepoint"


@pytest.mark.parametrize(("case", "skipped"), [
    ("2.3.0-hashmap-changelog-churn-materialized-compressed", []),
    ("2.3.0-forst-incremental-async-state", []),
    ("2.0.2-forst-incremental-async-state", ["async-counter/by-parity"]),
    (UNMATERIALIZED, [*REFUSED_UNMATERIALIZED, "pojo-keys/blobs"]),
])
def test_spark_import_of_changelog_and_forst_checkpoints_writes_what_the_core_import_writes(
        spark, tmp_path: pathlib.Path, case: str, skipped: list[str]) -> None:
    expected = truth(case)
    options = {"uids": list(expected["operators"]), "ttl": ttl_configs(expected), "skip_states": skipped}
    assert_spark_import_is_the_core_import(spark, snapshot(case, tmp_path / "source"), options, tmp_path)


@pytest.mark.parametrize(("case", "operator", "state", "why"), [
    ("2.0.2-forst-incremental-async-state", "async-counter", "by-parity", "MAP state of the async state API written "
                                                                           "by Flink 2.0"),
    (UNMATERIALIZED, "long-keys", "max", "before its first materialization"),
])
def test_a_read_of_a_state_no_reader_decodes_is_refused_as_a_read(spark, tmp_path: pathlib.Path, case: str,
                                                                   operator: str, state: str, why: str) -> None:
    from pyref.spark import read_state

    source = snapshot(case, tmp_path)
    for raw in (False, True):
        with pytest.raises(UnsupportedFormatError, match=f"^cannot read {operator}/{state}: .*{why}") as err:
            read_state(spark, str(source), operator, state, raw=raw)
        assert "--skip-state" not in str(err.value) and err.value.state == state


def test_the_savepoint_data_source_reads_dstl_files_where_flink_wrote_them_only_when_allowed(
        spark, tmp_path: pathlib.Path) -> None:
    """A changelog checkpoint copied without its DSTL files, which lie where Flink wrote them (an
    absolute path outside it): ``allowExternalFiles`` reads them there, as read_flink_state's
    ``allow_external_files`` does; a pyref savepoint has no such files and refuses the option."""
    import shutil
    from urllib.parse import urlparse

    from pyref.errors import InvalidArgumentError
    from pyref.flink import FlinkSavepoint
    from pyref.flink.handles import ChangelogHandle, ChangeSetFiles
    from pyref.spark import read_flink_state
    from pyref.spark.datasource import _Options
    from tests.flink.test_changelog import dstl_files

    source = snapshot("2.3.0-hashmap-changelog-churn-materialized-compressed", tmp_path)
    with FlinkSavepoint.open(source) as sp:
        (where,) = {urlparse(stream.location).path for op in sp.operators for s in op.state.subtasks
                    if isinstance(s.managed_keyed_state, ChangelogHandle) for part in s.managed_keyed_state.changes
                    if isinstance(part, ChangeSetFiles) for stream, _ in part.change_sets if stream is not None}
    outside = pathlib.Path(where)
    top = pathlib.Path("/", *outside.parts[1:3])  # /tmp/pyref-flink-ckpt-...: the run that took the checkpoint
    if top.exists():
        pytest.skip(f"{top} exists on this machine; this test writes there")
    try:
        outside.parent.mkdir(parents=True)
        (dstl,) = dstl_files(source)
        shutil.move(dstl, outside)

        def load(**options: str):
            reader = spark.read.format("savepoint").option("operator", "churn").option("state", "latest")
            for key, value in options.items():
                reader = reader.option(key, value)
            return reader.load(str(source))

        with pytest.raises(Exception, match="lies outside the savepoint directory"):
            load().collect()
        rows = load(allowExternalFiles="true").collect()
        expected = read_flink_state(spark, str(source), "churn", "latest", allow_external_files=True).collect()
        assert rows and sorted(map(tuple, rows)) == sorted(map(tuple, expected))
    finally:
        shutil.rmtree(top, ignore_errors=True)
    assert _Options({"path": str(source), "operator": "churn", "allowexternalfiles": "true"}).allow_external_files
    with pytest.raises(InvalidArgumentError, match="option 'allowExternalFiles': for Flink savepoints"):
        _Options({"path": str(GOLDEN), "operator": "x", "allowExternalFiles": "true"})
