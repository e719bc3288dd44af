"""Writing savepoints with Spark: bootstrap, edits, and the all-or-nothing commit."""

from __future__ import annotations

import os

import pytest

from pyref import InvalidArgumentError, Savepoint
from pyref.inspection import verify
from pyref.redistribution import DistributionMode
from pyref.serializers import Int32, Int64, String

pytestmark = pytest.mark.spark


def _files(path) -> set[str]:
    data = os.path.join(path, "data")
    return set(os.listdir(data)) if os.path.isdir(data) else set()


def _counts(spark, n=300):
    return spark.createDataFrame([(f"/page/{i}", i) for i in range(n)], "url string, hits long")


def _offsets(spark):
    return spark.createDataFrame([(0, 101, 1), (0, 100, 0), (1, 200, 0), (1, 201, 1), (2, 300, 0)],
                                 "subtask int, offset long, position int")


def test_bootstrap_round_trip(spark, tmp_path):
    from pyref.spark import SavepointBuilder

    target = tmp_path / "boot"
    with SavepointBuilder(spark, target) as b:
        b.add_operator("url-counter", 3, max_parallelism=64, key_serializer=String())
        b.add_keyed_state("url-counter", "count", _counts(spark), Int64(), key="url", value="hits")
        tags = spark.createDataFrame([("/a", "x", 1), ("/a", "y", 2), ("/b", "x", 3)], "k string, tag string, n int")
        b.add_keyed_state("url-counter", "tags", tags, Int32(), kind="map", user_key_serializer=String(), key="k",
                          user_key="tag", value="n")
        b.add_operator("kafka-source", 3)
        b.add_list_state("kafka-source", "offsets", _offsets(spark), Int64(), value="offset", order_by="position")
        b.add_list_state("kafka-source", "union", _offsets(spark), Int64(), DistributionMode.UNION, value="offset",
                         order_by="position")
    sp = Savepoint.open(target)
    report = verify(sp)
    assert report.ok and not report.warnings  # no stray files
    counter = sp.operator("url-counter")
    assert (counter.parallelism, counter.max_parallelism) == (3, 64)
    assert dict(counter.keyed_state("count").items()) == {f"/page/{i}": i for i in range(300)}
    assert counter.keyed_state("tags").get("/a") == {"x": 1, "y": 2}
    offsets = sp.operator("kafka-source").list_state("offsets")
    assert [list(offsets.partition(i)) for i in range(3)] == [[100, 101], [200, 201], [300]]
    assert sp.operator("kafka-source").list_state("union").mode is DistributionMode.UNION
    assert all(name.startswith("spark-") for name in _files(target))
    # and the core's restore of it reads every key where Flink would look for it
    plan = sp.restore_plan(2)
    restored = [k for sub in plan.subtasks("url-counter") for k, _ in sub.keyed_state("count")]
    assert sorted(restored) == sorted(f"/page/{i}" for i in range(300))


def test_spark_read_then_bootstrap_reproduces_a_core_savepoint(spark, seeds, tmp_path):
    from pyref.spark import SavepointBuilder

    def read(op, state):
        return spark.read.format("savepoint").option("operator", op).option("state", state).load(str(seeds))

    with SavepointBuilder(spark, tmp_path / "copy") as b:
        b.add_operator("kafka-source", 2)
        b.add_list_state("kafka-source", "offsets", read("kafka-source", "offsets"), Int64(), order_by="index")
        b.add_operator("url-counter", 2, key_serializer=String())
        b.add_keyed_state("url-counter", "count", read("url-counter", "count"), Int64())
    original, copy = Savepoint.open(seeds), Savepoint.open(tmp_path / "copy")
    for sp in (original, copy):
        assert sp.operator("kafka-source").list_state("offsets").element_counts() == [2, 2]
    assert dict(copy.operator("url-counter").keyed_state("count").items()) == dict(
        original.operator("url-counter").keyed_state("count").items())
    assert [list(copy.operator("kafka-source").list_state("offsets").partition(i)) for i in range(2)] == [
        [100, 101], [200, 201]]


def test_edit_is_shallow_and_keeps_unchanged_state(spark, seeds, tmp_path):
    from pyref.spark import SavepointBuilder

    target = tmp_path / "edited"
    with SavepointBuilder(spark, target, source=seeds) as b:
        b.rename_operator("kafka-source", "kafka-source-v2")
        b.add_operator("sessions", 2, key_serializer=String())
        b.add_keyed_state("sessions", "last-seen", _counts(spark, 20), Int64(), key="url", value="hits")
        b.add_keyed_state("url-counter", "count", _counts(spark, 5), Int64(), key="url", value="hits", replace=True)
        with pytest.raises(InvalidArgumentError, match="replace=True"):
            b.add_keyed_state("url-counter", "count", _counts(spark, 5), Int64(), key="url", value="hits")
    sp = Savepoint.open(target)
    assert verify(sp).ok
    assert [b.directory for b in sp.manifest.bases] == ["seeds"]
    assert [op.operator_id for op in sp.operators] == ["kafka-source-v2", "url-counter", "sessions"]
    assert [list(sp.operator("kafka-source-v2").list_state("offsets").partition(i)) for i in range(2)] == [
        [100, 101], [200, 201]]
    assert dict(sp.operator("url-counter").keyed_state("count").items()) == {f"/page/{i}": i for i in range(5)}
    assert len(dict(sp.operator("sessions").keyed_state("last-seen").items())) == 20
    # the replaced state's source files are no longer referenced
    assert all(f.base == 0 for f in sp.manifest.data_files if f.path.startswith("data/spark-"))

    with SavepointBuilder(spark, tmp_path / "smaller", source=target, copy=True) as b:
        b.remove_operator("sessions")
        b.remove_state("url-counter", "count")
    small = Savepoint.open(tmp_path / "smaller")
    assert not small.manifest.bases and verify(small).ok
    assert small.operator("url-counter").keyed_state_names == []
    assert not small.operator("url-counter").proto.HasField("key_serializer")
    assert [list(small.operator("kafka-source-v2").list_state("offsets").partition(i)) for i in range(2)] == [
        [100, 101], [200, 201]]


def test_failed_task_leaves_the_previous_savepoint_and_no_files(spark, seeds, tmp_path):
    from pyref.spark import SavepointBuilder

    before = (seeds / "_manifest").read_bytes(), _files(seeds)
    rows = [(f"/page/{i}", 2**40 if i == 7 else i) for i in range(200)]  # one value does not fit int32
    bad = spark.createDataFrame(rows, "key string, value long")
    for target, overwrite in ((seeds, True), (tmp_path / "new", False)):
        with pytest.raises(Exception, match="int32"):
            with SavepointBuilder(spark, target, overwrite=overwrite) as b:
                b.add_operator("url-counter", 2, key_serializer=String())
                b.add_keyed_state("url-counter", "count", bad, Int32())
    assert ((seeds / "_manifest").read_bytes(), _files(seeds)) == before
    assert verify(Savepoint.open(seeds)).ok
    assert not (tmp_path / "new" / "_manifest").exists() and not _files(tmp_path / "new")


def test_files_of_lost_task_attempts_are_deleted_after_commit(spark, tmp_path):
    from pyref.spark import SavepointBuilder

    target = tmp_path / "sp"
    with SavepointBuilder(spark, target) as b:
        b.add_operator("op", 2, key_serializer=String())
        b.add_keyed_state("op", "count", _counts(spark, 10), Int64(), key="url", value="hits")
        os.makedirs(target / "data", exist_ok=True)
        # what a retried or speculative attempt whose result Spark dropped leaves behind
        (target / "data" / f"{b.job.file_prefix}lost-attempt.svd").write_bytes(b"partial")
        (target / "data" / "someone-else.svd").write_bytes(b"not ours")
    assert f"{b.job.file_prefix}lost-attempt.svd" not in _files(target)
    assert "someone-else.svd" in _files(target)


def test_the_duplicate_check_sees_repeats_within_and_across_a_tasks_batches():
    import pyarrow as pa

    from pyref.spark.duplicates import unique_rows

    def batches(*keys):
        return [pa.record_batch([pa.array([0] * len(k), pa.int32()), pa.array(k)], names=["key_group", "key"])
                for k in keys]

    assert sum(b.num_rows for b in unique_rows(["key"], "op/s", iter(batches(["a", "b"], [], ["c", "d"])))) == 4
    for repeated in (batches(["a", "b", "b", "c"]), batches(["a", "b"], [], ["b", "c"])):  # within, across
        with pytest.raises(InvalidArgumentError, match="two rows of key='b'"):
            list(unique_rows(["key"], "op/s", iter(repeated)))


def test_duplicate_keys_are_refused_or_resolved_as_asked(spark, tmp_path):
    from pyref.spark import SavepointBuilder

    rows = spark.createDataFrame([("a", 1, 10), ("b", 2, 10), ("a", 3, 30), ("c", 4, 10), ("a", 5, 20)],
                                 "k string, v long, t long")

    def build(name, **policy):
        with SavepointBuilder(spark, tmp_path / name) as b:
            b.add_operator("op", 2, max_parallelism=8, key_serializer=String())
            b.add_keyed_state("op", "s", rows, Int64(), key="k", value="v", **policy)
        return dict(Savepoint.open(tmp_path / name).operator("op").keyed_state("s").items())

    with pytest.raises(Exception, match="two rows of key='a'.*duplicates='last'"):  # from a task
        build("refused")
    assert not (tmp_path / "refused").exists() or not _files(tmp_path / "refused")
    assert build("last", duplicates="last", order_by="t") == {"a": 3, "b": 2, "c": 4}
    assert build("sum", duplicates="combine", combine="sum") == {"a": 9, "b": 2, "c": 4}
    tie = rows.union(spark.createDataFrame([("a", 6, 30)], "k string, v long, t long"))
    with pytest.raises(Exception, match="two rows of key='a'"):
        with SavepointBuilder(spark, tmp_path / "tie") as b:
            b.add_operator("op", 2, max_parallelism=8, key_serializer=String())
            b.add_keyed_state("op", "s", tie, Int64(), key="k", value="v", duplicates="last", order_by="t")
    with pytest.raises(InvalidArgumentError, match="order_by is needed by duplicates='last'"):
        build("bad", duplicates="last")
    # a map state's identity is (key, user key): one key's entries are not duplicates
    entries = spark.createDataFrame([("a", "x", 1), ("a", "y", 2)], "k string, u string, v int")
    with SavepointBuilder(spark, tmp_path / "map") as b:
        b.add_operator("op", 2, key_serializer=String())
        b.add_keyed_state("op", "m", entries, Int32(), kind="map", user_key_serializer=String(), key="k",
                          user_key="u", value="v")
    assert Savepoint.open(tmp_path / "map").operator("op").keyed_state("m").get("a") == {"x": 1, "y": 2}
