"""Reading savepoints with Spark: states as DataFrames, restore assignment, metadata."""

from __future__ import annotations

import struct

import pytest

from pyref import Savepoint, SavepointWriter
from pyref.inspection import describe
from pyref.redistribution import DistributionMode
from pyref.serializers import (Char, Int32, Int64, ListOf, MapOf, Serializer, String, Tuple, register_serializer,
                               unregister_serializer)
from pyref.spark.fragments import StateScan

pytestmark = pytest.mark.spark


@pytest.fixture(params=["format", "read_state"])
def read(request, spark):
    """A state as a DataFrame, through the data source or through :func:`read_state`:
    the two must give the same rows and columns for the same options."""

    def through_format(path, operator, state, **options):
        reader = spark.read.format("savepoint").option("operator", operator).option("state", state)
        for k, v in options.items():
            reader = reader.option(k, str(v).lower() if isinstance(v, bool) else str(v))
        return reader.load(str(path))

    def through_read_state(path, operator, state, **options):
        from pyref.spark import read_state

        return read_state(spark, path, operator, state, **options)

    return through_format if request.param == "format" else through_read_state


class Cents(Serializer):
    """A user-defined serializer Spark's Python workers never register."""

    serializer_id = "com.example.cents"

    def encode(self, value) -> bytes:
        return struct.pack("<q", value)

    def decode(self, data) -> int:
        return struct.unpack("<q", bytes(data))[0]

    @classmethod
    def from_snapshot(cls, snapshot):
        return cls()


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """Keyed value/list/map state, SPLIT/UNION/BROADCAST list state at parallelism 3,
    small chunks so states span several chunks and data files."""
    path = tmp_path_factory.mktemp("read") / "mixed"
    with SavepointWriter(str(path), chunk_bytes=512, file_bytes=4096, inline_bytes=0) as w:
        op = w.add_operator("op", parallelism=3, key_serializer=Int64())
        keys = list(range(400))
        op.keyed_state("value", String()).add(keys, [f"v{k}" for k in keys])
        op.keyed_state("list", Int32(), kind="list").add(keys[:50], [[k, k + 1] for k in keys[:50]])
        op.keyed_state("map", Int64(), kind="map", user_key_serializer=String()).add(
            [k // 3 for k in keys], [k for k in keys], [f"u{k}" for k in keys])
        for name, mode in (("split", DistributionMode.SPLIT_DISTRIBUTE), ("union", DistributionMode.UNION),
                           ("broadcast", DistributionMode.BROADCAST)):
            state = op.list_state(name, Int64(), mode)
            for subtask in range(3):
                broadcast = mode == DistributionMode.BROADCAST
                state.add(subtask, [7, 8] if broadcast else list(range(subtask * 100, subtask * 100 + 7 + subtask)))
    return path


def test_keyed_value_state_reads_decoded_as_the_core_does(read, mixed):
    df = read(mixed, "op", "value", fragment_bytes=1024)
    assert df.schema.simpleString() == "struct<key_group:int,key:bigint,value:string>"
    assert df.rdd.getNumPartitions() > 1  # partitions follow chunks
    expected = Savepoint.open(mixed).operator("op").keyed_state("value").to_arrow().to_pylist()
    assert sorted(tuple(r) for r in df.collect()) == sorted(tuple(r.values()) for r in expected)


def test_keyed_list_and_map_state(read, mixed):
    lists = read(mixed, "op", "list")
    assert lists.schema.simpleString() == "struct<key_group:int,key:bigint,value:array<int>>"
    assert {r.key: r.value for r in lists.collect()} == {k: [k, k + 1] for k in range(50)}
    maps = read(mixed, "op", "map")
    assert maps.columns == ["key_group", "key", "user_key", "value"]
    assert sorted((r.key, r.user_key, r.value) for r in maps.collect()) == sorted(
        (k // 3, f"u{k}", k) for k in range(400))


def test_raw_reads_stored_bytes_without_the_serializer(read, tmp_path):
    register_serializer(Cents)
    try:
        with SavepointWriter(str(tmp_path / "sp")) as w:
            w.add_operator("op", 1, key_serializer=String()).keyed_state("balance", Cents()).add(["a", "b"], [5, -7])
            w.add_operator("src", 1).list_state("offsets", Cents()).add(0, [1, 2])
    finally:
        unregister_serializer("com.example.cents")
    raw = read(tmp_path / "sp", "op", "balance", raw=True)
    assert raw.schema.simpleString() == "struct<key_group:int,key:binary,value:binary>"
    assert sorted((bytes(r.key), bytes(r.value)) for r in raw.collect()) == [
        (b"a", struct.pack("<q", 5)), (b"b", struct.pack("<q", -7))]
    listed = read(tmp_path / "sp", "src", "offsets", raw=True).collect()
    assert [bytes(r.value) for r in sorted(listed, key=lambda r: r["index"])] == [struct.pack("<q", v) for v in (1, 2)]
    with pytest.raises(Exception, match="not registered"):
        read(tmp_path / "sp", "op", "balance").collect()


@pytest.mark.parametrize("target", [2, 5])
def test_target_parallelism_agrees_with_the_restore_plan(read, mixed, target):
    plan = Savepoint.open(mixed).restore_plan(target)
    keyed = read(mixed, "op", "value", target_parallelism=target).collect()
    for sub in plan.subtasks("op"):
        assert sorted(r.key for r in keyed if r.subtask == sub.index) == sorted(k for k, _ in sub.keyed_state("value"))
    for name in ("split", "union", "broadcast"):
        rows = read(mixed, "op", name, target_parallelism=target).collect()
        for sub in plan.subtasks("op"):
            mine = sorted((r["index"], r.value) for r in rows if r.subtask == sub.index)
            assert [v for _, v in mine] == list(sub.list_state(name)), name
            assert [i for i, _ in mine] == list(range(len(mine)))


def test_list_state_without_target_is_as_stored(read, mixed):
    rows = read(mixed, "op", "split").collect()
    view = Savepoint.open(mixed).operator("op").list_state("split")
    for subtask in range(3):
        assert [r.value for r in sorted(rows, key=lambda r: r["index"]) if r.subtask == subtask] == list(
            view.partition(subtask))


def test_metadata_view_lists_every_state(spark, mixed, seeds):
    rows = {r.state: r for r in spark.read.format("savepoint-metadata").load(str(mixed)).collect()}
    info = describe(Savepoint.open(mixed)).operators[0]
    assert set(rows) == {s.name for s in info.states}
    value = rows["value"]
    assert (value.operator_id, value.parallelism, value.max_parallelism, value.key_serializer, value.state_type,
            value.kind, value.serializer, value.entries) == ("op", 3, 128, "int64@v1", "keyed", "value", "string@v1",
                                                             400)
    assert value.chunks == next(s.chunks for s in info.states if s.name == "value") > 1
    assert rows["union"].mode == "UNION" and rows["union"].entries == 7 + 8 + 9
    assert rows["map"].user_key_serializer == "string@v1"
    seeds_rows = spark.read.format("savepoint-metadata").load(str(seeds)).collect()
    assert {(r.operator_id, r.state, r.stored_bytes > 0) for r in seeds_rows} == {
        ("kafka-source", "offsets", True), ("url-counter", "count", True)}


def test_missing_options_name_what_there_is(spark, seeds):
    with pytest.raises(Exception, match="url-counter"):
        spark.read.format("savepoint").load(str(seeds)).collect()


def test_list_of_list_serializer_types(read, tmp_path):
    with SavepointWriter(str(tmp_path / "sp")) as w:
        w.add_operator("op", 2).list_state("batches", ListOf(String())).add(1, [["a"], [], ["b", "c"]])
    rows = read(tmp_path / "sp", "op", "batches").collect()
    assert [(r.subtask, r["index"], r.value) for r in rows] == [(1, 0, ["a"]), (1, 1, []), (1, 2, ["b", "c"])]


def test_char_keys_and_values_read_as_their_code_units(read, tmp_path):
    """Spark has no type for a char's Arrow uint16: its UTF-16 code unit reads as an int
    (the schema could not be built before), and a key selection takes the char or its code unit."""
    with SavepointWriter(str(tmp_path / "sp")) as w:
        op = w.add_operator("op", 2, key_serializer=Char())
        op.keyed_state("letters", ListOf(Char())).add(["A", "B", "\ud800"], [["x"], ["y", "z"], []])
        op.keyed_state("pairs", Tuple(Char(), MapOf(Char(), Char()))).add(["A"], [("q", {"k": "v"})])
    df = read(tmp_path / "sp", "op", "letters")
    assert df.schema.simpleString() == "struct<key_group:int,key:int,value:array<int>>"
    assert sorted((r.key, r.value) for r in df.collect()) == [(65, [120]), (66, [121, 122]), (0xD800, [])]
    assert [tuple(r.value) for r in read(tmp_path / "sp", "op", "pairs").collect()] == [(113, {107: 118})]
    from pyref.spark import read_state

    spark = df.sparkSession
    assert [r.key for r in read_state(spark, tmp_path / "sp", "op", "letters", keys=["B"]).collect()] == [66]
    assert [r.key for r in read_state(spark, tmp_path / "sp", "op", "letters", keys=[66]).collect()] == [66]


def test_char_code_units_in_nested_maps_cast_with_nulls_and_slices():
    """pyarrow 14 aborts the process casting a map (map<uint16,uint16> to Spark's map<int,int>):
    maps, and structs and lists holding them, are rebuilt from their cast children instead. Every
    slice: pyarrow 14's MapArray.from_arrays misread a slice's offsets (a struct's map column, cut
    where a null struct holds an empty map, failed validation), so they are copied first."""
    import pyarrow as pa

    from pyref.spark.datasource import _cast

    maps = pa.array([[(1, 2)], None, [(3, 4), (5, 6)], [(7, 8)]], type=pa.map_(pa.uint16(), pa.uint16()))
    structs = pa.StructArray.from_arrays([pa.array([1, 2, None, 4], pa.uint16()), maps], names=["c", "m"],
                                         mask=pa.array([False, False, False, True]))
    lists = pa.ListArray.from_arrays(pa.array([0, 1, None, 4]), structs)
    as_int = pa.map_(pa.int32(), pa.int32())
    struct_type = pa.struct([("c", pa.int32()), ("m", as_int)])
    built = pa.array([{"c": 1, "m": [(1, 2)]}, None, {"c": 3, "m": None}], pa.struct([("c", pa.uint16()),
                                                                                       ("m", maps.type)]))
    for array, target in [(maps, as_int), (structs, struct_type), (lists, pa.list_(struct_type)),
                          (built, struct_type)]:
        for part in [array.slice(i, n) for i in range(len(array) + 1) for n in range(len(array) - i + 1)]:
            cast = _cast(part, target)
            cast.validate(full=True)
            assert cast.type == target and cast.to_pylist() == part.to_pylist()


def test_a_state_with_a_timer_service_or_a_domain_is_refused(tmp_path):
    """The timer service was read and the state ignored; a domain without a timer service was ignored."""
    from pyref import InvalidArgumentError

    with SavepointWriter(str(tmp_path / "sp")) as w:
        op = w.add_operator("op", 2, key_serializer=String())
        op.keyed_state("count", Int64()).add(["a"], [1])
        op.timer_service("t", "event_time").add(["a"], [5])
    for options in ({"timer_service": "t"}, {"domain": "event_time"}):
        with pytest.raises(InvalidArgumentError, match="give the state, or a timer service .*not both"):
            StateScan.plan(str(tmp_path / "sp"), "op", "count", **options)
    assert StateScan.plan(str(tmp_path / "sp"), "op", None, timer_service="t", domain="event_time").fragments


def test_an_empty_state_reads_as_no_rows_with_its_columns(read, tmp_path):
    with SavepointWriter(str(tmp_path / "sp")) as w:
        op = w.add_operator("op", 2, key_serializer=String())
        op.keyed_state("nothing", Int64())
        op.list_state("none", Int64())
    keyed = read(tmp_path / "sp", "op", "nothing")
    assert keyed.schema.simpleString() == "struct<key_group:int,key:string,value:bigint>"
    assert keyed.collect() == []
    assert read(tmp_path / "sp", "op", "none").collect() == []


def test_read_state_runs_one_task_per_fragment(spark, mixed):
    from pyref.spark import read_state

    state = Savepoint.open(mixed).operator("op").proto.keyed_states[0]
    df = read_state(spark, mixed, "op", state.name, fragment_bytes=1024)
    assert df.rdd.getNumPartitions() == len(StateScan.plan(str(mixed), "op", state.name, fragment_bytes=1024).fragments)
