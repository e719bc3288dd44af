"""df.write.format("savepoint"): bootstrap, add and replace one state, atomically; options and
columns checked before any task runs; a failed write leaves the savepoint as it was."""

from __future__ import annotations

import os
import pathlib
import re

import pytest

from pyref import InvalidArgumentError, Savepoint, rescale
from pyref.inspection import verify
from pyref.testing import SEED_COUNTS, write_seeds

pytestmark = pytest.mark.spark


def _files(path) -> set[str]:
    data = os.path.join(path, "data")
    return set(os.listdir(data)) if os.path.isdir(data) else set()


def _write(df, **options):
    writer = df.write.format("savepoint").option("operator", "counter").option("fileBytes", "4096").option("inlineBytes", "0")
    for key, value in options.items():
        writer = writer.option(key, value)
    return writer


def test_bootstrap_add_and_replace(spark, tmp_path):
    path = str(tmp_path / "sp")
    counts = spark.createDataFrame([(f"/p/{i}", i) for i in range(500)], "key string, value long").repartition(3)
    _write(counts, state="count", keySerializer="string", valueSerializer="int64", parallelism="2",
           chunkBytes="1024").mode("append").save(path)
    sp = Savepoint.open(path)
    assert verify(sp).ok and sp.operator("counter").parallelism == 2
    assert dict(sp.operator("counter").keyed_state("count").items()) == {f"/p/{i}": i for i in range(500)}
    first_files = _files(path)
    assert first_files

    tags = spark.createDataFrame([("/a", "x", 1), ("/a", "y", 2)], "key string, user_key string, value int")
    _write(tags, state="tags", kind="map", valueSerializer="int32", userKeySerializer="string").mode("append").save(
        path)
    offsets = spark.createDataFrame([(0, 5), (1, 6)], "subtask int, value long")
    _write(offsets, state="offsets", stateType="list", valueSerializer="int64").mode("append").save(path)

    fewer = spark.createDataFrame([(f"/p/{i}", -i) for i in range(20)], "key string, value long")
    _write(fewer, state="count", valueSerializer="int64").mode("overwrite").save(path)
    sp = Savepoint.open(path)
    op = sp.operator("counter")
    assert verify(sp).ok and not verify(sp).warnings
    assert dict(op.keyed_state("count").items()) == {f"/p/{i}": -i for i in range(20)}
    assert op.keyed_state("tags").get("/a") == {"x": 1, "y": 2}
    assert [list(op.list_state("offsets").partition(i)) for i in range(2)] == [[5], [6]]
    assert not first_files & _files(path)  # the replaced state's files are gone


def test_refusals_leave_the_savepoint_as_it_was(spark, tmp_path):
    path = str(tmp_path / "sp")
    counts = spark.createDataFrame([(f"/p/{i}", i) for i in range(50)], "key string, value long")
    _write(counts, state="count", keySerializer="string", valueSerializer="int64", parallelism="2").mode(
        "append").save(path)
    before, files = Savepoint.open(path).manifest.savepoint_id, _files(path)
    with pytest.raises(Exception, match="state exists; write with mode\\('overwrite'\\)"):
        _write(counts, state="count", valueSerializer="int64").mode("append").save(path)
    with pytest.raises(Exception, match="unknown option 'valueserialiser'.*valid options: path, operator"):
        _write(counts, state="count", valueSerialiser="int64").mode("overwrite").save(path)
    with pytest.raises(Exception, match="columns \\['url', 'value'\\] are not this state's \\['key', 'value'\\]"):
        _write(counts.withColumnRenamed("key", "url"), state="count", valueSerializer="int64").mode(
            "overwrite").save(path)
    with pytest.raises(Exception, match="unknown serializer id 'long'"):
        _write(counts, state="count", valueSerializer="long").mode("overwrite").save(path)
    # a task fails (a value int32 cannot hold): nothing is committed, no file is left
    big = spark.createDataFrame([(f"/p/{i}", 1 << 40) for i in range(50)], "key string, value long")
    with pytest.raises(Exception):
        _write(big, state="count", valueSerializer="int32", chunkBytes="64").mode("overwrite").save(path)
    assert Savepoint.open(path).manifest.savepoint_id == before and _files(path) == files


def test_a_key_column_of_another_kind_of_type_is_refused(spark, tmp_path):
    """A key column is cast to the key serializer's type only within a kind (Spark's long to
    int32): long keys written to a string-keyed operator were stored as "1", "2"... and a key
    beyond the key type's range raised pyarrow's ArrowInvalid, naming no state."""
    from pyref.spark import typed_errors

    path = str(tmp_path / "sp")
    counts = spark.createDataFrame([("/a", 1)], "key string, value long")
    _write(counts, state="count", keySerializer="string", valueSerializer="int64", parallelism="2").mode(
        "append").save(path)
    before = Savepoint.open(path).manifest.savepoint_id
    numbers = spark.createDataFrame([(1, 5)], "key long, value long")
    with pytest.raises(InvalidArgumentError, match=r"key column is of type int64; keys of string .*state=counter/count"), \
            typed_errors():
        _write(numbers, state="count", valueSerializer="int64").mode("overwrite").save(path)
    assert Savepoint.open(path).manifest.savepoint_id == before
    big = spark.createDataFrame([(5_000_000_000, 5)], "key long, value long")
    with pytest.raises(InvalidArgumentError, match=r"does not fit the int32 key serializer"), typed_errors():
        _write(big, operator="ints", state="n", keySerializer="int32", valueSerializer="int64",
               parallelism="2").mode("append").save(path)
    _write(numbers, operator="ints", state="n", keySerializer="int32", valueSerializer="int64",
           parallelism="2").mode("append").save(path)  # long to int32: within a kind
    assert dict(Savepoint.open(path).operator("ints").keyed_state("n").items()) == {1: 5}


def test_readme_overwrite_example_runs(spark, tmp_path):
    """The README's df.write example, as written, replaces a state of an operator the savepoint has."""
    from pyref.spark import read_state  # imports pyspark: only where Spark runs

    path = str(tmp_path / "sp-1")
    write_seeds(path)
    readme = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    block = re.search(r'```python\n([^`]*?\.write\.format\("savepoint"\)\.mode\("overwrite"\)[^`]*)```', readme).group(1)
    counts = read_state(spark, path, "url-counter", "count")
    exec(compile(block.replace("/savepoints/sp-1", path), "README.md", "exec"), {"counts": counts})
    state = Savepoint.open(path).operator("url-counter").keyed_state("count")
    assert dict(state.items()) == {url: n * 10 for url, n in SEED_COUNTS.items()}


def test_replacing_a_state_of_a_base_is_refused_before_any_task(spark, tmp_path):
    from pyspark.errors import AnalysisException  # the driver's planning error, not a task's PythonException

    path = str(tmp_path / "sp")
    write_seeds(path, inline_bytes=0)
    rescale(path, str(tmp_path / "sp3"), 3)  # a shallow savepoint on sp's data files
    counts = spark.createDataFrame([("/a", 1)], "key string, value long")
    with pytest.raises(AnalysisException, match=r"is the base of .*sp3.*SavepointBuilder\(\.\.\., force=True\)") as refused:
        _write(counts, state="count", valueSerializer="int64").mode("overwrite").save(path)
    assert "--force" not in str(refused.value)  # df.write has no such option


def test_overwrite_keeps_the_replaced_states_ttl_namespace_and_kind(spark, tmp_path):
    """Replacing a TTL or windowed state (a Flink import's, say) keeps its TTL, namespace and
    kind: it was written without them, and the export was a state Flink refuses to restore."""
    from pyspark.sql import functions as F

    from pyref import SavepointWriter, TtlConfig
    from pyref.serializers import Int64, String, TimeWindow
    from pyref.serializers.window import Window

    path = str(tmp_path / "sp")
    ttl = TtlConfig(7 * 86_400_000, "on_read_and_write")
    with SavepointWriter(path) as w:
        op = w.add_operator("counter", parallelism=2, key_serializer=String())
        op.keyed_state("last-seen", Int64(), ttl=ttl).add(["a", "b"], [1, 2], ttl_timestamps=[100, 200])
        op.keyed_state("per-window", Int64(), kind="reducing", namespace_serializer=TimeWindow()).add(
            ["a", "b"], [3, 4], namespaces=[Window(0, 10), Window(10, 20)])

    def read(state):
        return spark.read.format("savepoint").option("operator", "counter").option("state", state).load(path)

    seen = read("last-seen").drop("key_group")
    _write(seen.withColumn("value", seen.value + 10), state="last-seen", valueSerializer="int64").mode(
        "overwrite").save(path)
    windows = read("per-window").drop("key_group")
    _write(windows.withColumn("value", windows.value * 2), state="per-window", valueSerializer="int64").mode(
        "overwrite").save(path)
    op = Savepoint.open(path).operator("counter")
    assert op.keyed_state("last-seen").ttl == ttl
    assert op.keyed_state("last-seen").get("b", with_ttl=True) == (12, 200)
    windowed = op.keyed_state("per-window")
    assert windowed.info.kind == "reducing" and windowed.get("b", namespace=Window(10, 20)) == 8
    with pytest.raises(Exception, match="columns \\['key', 'value'\\] are not this state's "
                                        "\\['key', 'value', 'ttl_timestamp'\\]"):
        _write(seen.select("key", F.lit(1).alias("value")), state="last-seen", valueSerializer="int64").mode(
            "overwrite").save(path)


def test_overwrite_keeps_the_replaced_states_type_unless_state_type_is_given(spark, tmp_path):
    """'stateType' defaults to the replaced state's type: a list state written over without it was refused
    for its columns (or, had they been key and value, replaced by a keyed state Flink refuses to restore). A
    broadcast state, which df.write does not write, is replaced only when 'stateType' says by what."""
    from pyref import SavepointWriter
    from pyref.redistribution import DistributionMode
    from pyref.serializers import Int64, String

    path = str(tmp_path / "sp")
    with SavepointWriter(path) as w:
        op = w.add_operator("counter", parallelism=2, key_serializer=String())
        op.list_state("offsets", Int64(), DistributionMode.UNION).add(0, [5])
        op.broadcast_state("rules", String(), Int64()).add_all(["r"], [1])
    offsets = spark.createDataFrame([(0, 6), (1, 7)], "subtask int, value long")
    _write(offsets, state="offsets").mode("overwrite").save(path)
    state = Savepoint.open(path).operator("counter").list_state("offsets")
    assert state.mode == DistributionMode.UNION and [list(state.partition(i)) for i in (0, 1)] == [[6], [7]]
    rules = spark.createDataFrame([("r", 2)], "key string, value long")
    with pytest.raises(Exception, match="broadcast state, which df.write does not write: give option 'stateType'"):
        _write(rules, state="rules", valueSerializer="int64").mode("overwrite").save(path)
    assert Savepoint.open(path).operator("counter").broadcast_state_names == ["rules"]
    listed = spark.createDataFrame([(0, 2)], "subtask int, value long")
    _write(listed, state="rules", stateType="list", valueSerializer="int64").mode("overwrite").save(path)
    op = Savepoint.open(path).operator("counter")
    assert (op.broadcast_state_names, list(op.list_state("rules").partition(0))) == ([], [2])


def test_overwrite_keeps_the_replaced_states_serializer_snapshot_and_distribution(spark, tmp_path):
    """Replacing a state keeps its serializer's snapshot with the engine's own (a Flink import's
    POJO, which an export writes back as Flink's POJO, not as a Tuple the job never declared),
    when valueSerializer is left out or the same, and a list state's distribution mode."""
    from pyref import SavepointWriter
    from pyref.redistribution import DistributionMode
    from pyref.serializers import Int64, Nullable, String, Tuple

    path = str(tmp_path / "sp")
    pojo = Nullable(Tuple(Nullable(Int64()), Nullable(String()), names=("amount", "item"))).with_engine(
        "flink", "org.apache.flink.api.java.typeutils.runtime.PojoSerializer$PojoSerializerSnapshot", b"pojo")
    with SavepointWriter(path) as w:
        op = w.add_operator("counter", parallelism=2, key_serializer=String())
        op.keyed_state("last", pojo).add(["a", "b"], [(1, "x"), (2, "y")])
        op.list_state("offsets", Int64(), DistributionMode.UNION).add(0, [5])
        op.keyed_state("tags", Int64(), kind="map", user_key_serializer=String().with_engine(
            "flink", "org.apache.flink.api.common.typeutils.base.StringSerializer$StringSerializerSnapshot",
            b"string")).add(["a"], [1], ["x"])

    def read(state):
        return spark.read.format("savepoint").option("operator", "counter").option("state", state).load(path)

    label = "nullable<tuple<amount:nullable<int64@v1>@v1,item:nullable<string@v1>@v1>@v2>@v1"
    for options in ({}, {"valueSerializer": label}):
        last = read("last").drop("key_group")
        _write(last.where("key = 'b'"), state="last", **options).mode("overwrite").save(path)
        state = Savepoint.open(path).operator("counter").keyed_state("last")
        assert state.proto.value_serializer.engine.snapshot == b"pojo", options
        assert dict(state.items()) == {"b": (2, "y")}
    _write(read("offsets").select("subtask", "value"), state="offsets", stateType="list").mode("overwrite").save(path)
    tags = read("tags").drop("key_group")
    _write(tags.withColumn("value", tags.value + 1), state="tags").mode("overwrite").save(path)  # its kind, serializers
    tags = Savepoint.open(path).operator("counter").keyed_state("tags")
    assert tags.get("a") == {"x": 2} and tags.proto.user_key_serializer.engine.snapshot == b"string"
    offsets = Savepoint.open(path).operator("counter").list_state("offsets")
    assert offsets.mode == DistributionMode.UNION and offsets.proto.element_serializer.serializer_id == "int64"
