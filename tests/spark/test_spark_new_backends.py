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
