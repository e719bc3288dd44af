"""Reads that plan only the chunks their rows can be in: keys, key groups and subtasks given to
read_state, or Spark's filters pushed into format("savepoint") (pushFilters=true)."""

from __future__ import annotations

import contextlib
import io
import re

import pytest

from pyref import InvalidArgumentError, Savepoint, SavepointWriter
from pyref.key_groups import assign_to_key_group, operator_index_for_key_group
from pyref.serializers import Int32, String

pytestmark = pytest.mark.spark

KEYS = [f"/p/{i}" for i in range(2000)]


def _pushdown() -> bool:
    """Whether this pyspark pushes filters into Python data sources (4.1 and later)."""
    from pyspark.sql.datasource import DataSourceReader

    return hasattr(DataSourceReader, "pushFilters")


@pytest.fixture(scope="module")
def lookup(tmp_path_factory):
    """Small chunks and files, so that each key group's chunks are in a few files of their own."""
    path = tmp_path_factory.mktemp("pushdown") / "sp"
    with SavepointWriter(str(path), chunk_bytes=512, file_bytes=2048, inline_bytes=0, key_bounds=True) as w:
        w.add_operator("counter", parallelism=4, key_serializer=String()).keyed_state("count", Int32()).add(
            KEYS, list(range(len(KEYS))))
    return path


def _only_files_of(path, key: str) -> None:
    """Delete every data file that holds none of ``key``'s candidate chunks: a read that
    touched any other chunk would fail."""
    sp = Savepoint.open(path)
    chunks = sp.operator("counter").keyed_state("count").proto.chunks
    group = assign_to_key_group(key, 128, "string")
    wanted = {c.range.file for c in chunks if c.key_group == group}
    unwanted = [f for i, f in enumerate(sp.manifest.data_files) if i not in wanted]
    assert len(unwanted) > 10 * len(wanted)
    for f in unwanted:
        (path / f.path).unlink()


def test_point_lookup_reads_only_the_key_chunks(spark, lookup, tmp_path):
    import shutil

    from pyspark.sql import functions as F

    from pyref.spark import read_state

    copy = tmp_path / "sp"
    shutil.copytree(lookup, copy)
    _only_files_of(copy, "/p/7")
    assert [tuple(r) for r in read_state(spark, copy, "counter", "count", keys=["/p/7"]).select(
        "key", "value").collect()] == [("/p/7", 7)]
    with pytest.raises(Exception):  # the full read needs the deleted files
        read_state(spark, copy, "counter", "count").count()
    if not _pushdown():
        with pytest.raises(Exception, match="pushFilters' needs pyspark >= 4.1"):
            spark.read.format("savepoint").option("operator", "counter").option("state", "count").option(
                "pushFilters", "true").load(str(copy)).collect()
        return
    df = (spark.read.format("savepoint").option("operator", "counter").option("state", "count")
          .option("pushFilters", "true").load(str(copy)))
    query = df.where(F.col("key").isin("/p/7"))
    assert [r.value for r in query.collect()] == [7]
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown):
        query.explain("formatted")
    pushed = r"PushedFilters: \[(EqualTo\(key,/p/7\)|In\(key, \[/p/7\]\))\]"
    assert re.search(pushed, shown.getvalue()), shown.getvalue()


def test_key_group_and_subtask_selections(spark, lookup):
    from pyspark.sql import functions as F

    from pyref.spark import read_state

    groups = {k: assign_to_key_group(k, 128, "string") for k in KEYS}
    low = read_state(spark, lookup, "counter", "count", key_groups=range(10, 20))
    assert sorted(r.key for r in low.collect()) == sorted(k for k, g in groups.items() if 10 <= g < 20)
    at3 = read_state(spark, lookup, "counter", "count", target_parallelism=3, subtasks=[1])
    assert sorted(r.key for r in at3.collect()) == sorted(
        k for k, g in groups.items() if operator_index_for_key_group(128, 3, g) == 1)
    if not _pushdown():
        return  # pushFilters is refused there (test_point_lookup_reads_only_the_key_chunks)
    df = (spark.read.format("savepoint").option("operator", "counter").option("state", "count")
          .option("pushFilters", "true").option("targetParallelism", "3").load(str(lookup)))
    pushed = df.where((F.col("key_group") >= 10) & (F.col("key_group") < 20) & (F.col("subtask") == 0))
    assert sorted(r.key for r in pushed.collect()) == sorted(
        k for k, g in groups.items() if 10 <= g < 20 and operator_index_for_key_group(128, 3, g) == 0)


def test_unknown_options_and_wrong_schemas_are_refused_on_the_driver(spark, lookup):
    from pyspark.sql.types import StructType

    def reader():  # a DataFrameReader keeps its options: one each
        return spark.read.format("savepoint").option("operator", "counter")

    with pytest.raises(Exception, match="unknown option 'stat'.*valid options: path, operator, state"):
        reader().option("stat", "count").load(str(lookup)).collect()
    with pytest.raises(Exception, match="option 'targetParallelism' takes a whole number"):
        reader().option("state", "count").option("target_parallelism", "x").load(str(lookup)).collect()
    with pytest.raises(Exception, match="is not this state's"):
        reader().option("state", "count").schema(StructType.fromDDL("key string, value string")).load(
            str(lookup)).collect()
    assert reader().option("state", "count").option("targetParallelism", "2").load(str(lookup)).columns[-1] == \
        "subtask"


def test_raw_reads_take_no_keys(spark, lookup):
    from pyref.spark import read_state

    with pytest.raises(InvalidArgumentError, match="raw=True"):
        read_state(spark, lookup, "counter", "count", raw=True, keys=["/p/1"])
