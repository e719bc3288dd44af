"""Flink SQL state (the table runtime's RowData serializers) read, imported and exported.

The fixtures under data/sql are real canonical savepoints of compat_tests/flink's SQL job
(jobs/SqlJob.java at parallelism 1: group aggregates, one with COUNT(DISTINCT) and TIMESTAMP /
DECIMAL accumulators, TUMBLE and HOP window aggregates and a legacy GROUP BY TUMBLE with pending
windows, a join under STATE_TTL, an interval join, deduplication (also of rows with ARRAY and MAP
columns), Top-N (also over an updating input: a SortedMap), COLLECT, ARRAY_AGG, MAX over an
updating input, an OVER aggregation and a MATCH_RECOGNIZE: flink-cep's operator over RowData
events), one of Flink 2.3.0 (HashMap backend) and one of 1.20.3 (RocksDB), state inlined in
``_metadata`` (gzipped here: its Java-serialized types repeat). Made by the flink tier's harness:
``harness.run_sql_many(version, [harness.SqlRun(out, backend=backend, parallelism=1)])``, then
``gzip -9n`` of ``out/savepoint/_metadata``."""

from __future__ import annotations

import decimal
import gzip
import pathlib

import pytest

from compat_tests.flink.sql import TTL_DEFAULT, expected_state_types, keyed_contents, state_types
from pyref.cli import main as pyref_cli
from pyref.errors import CorruptSavepointError, UnsupportedFormatError
from pyref.flink import FlinkSavepoint, export_savepoint, import_flink
from pyref.flink.datainput import DataInput
from pyref.flink.java_stream import JAVA_STREAM_MAGIC, skip_java_stream
from pyref.flink.serializers import at_position, looks_like_versioned_snapshot, read_versioned_snapshot
from pyref.flink.values import TimeWindow, codec_for, decode_cell
from pyref.testing.flink_bytes import LONG, composite, i32, i64, map_snapshot, snapshot, utf

DATA = pathlib.Path(__file__).resolve().parent / "data" / "sql"
FIXTURES = {"2.3.0": DATA / "2.3.0-hashmap", "1.20.3": DATA / "1.20.3-rocksdb"}
VERSIONS = sorted(FIXTURES)
_T = "org.apache.flink.table.runtime.typeutils."
# Spelled here as Flink's sources spell them, not taken from pyref: a typo there must fail here.
ROW_DATA, STRING_DATA, TIMESTAMP_DATA, DECIMAL_DATA, EXTERNAL = (
    f"{_T}{outer}${snapshot_class}" for outer, snapshot_class in (
        ("RowDataSerializer", "RowDataSerializerSnapshot"), ("StringDataSerializer", "StringDataSerializerSnapshot"),
        ("TimestampDataSerializer", "TimestampDataSerializerSnapshot"),
        ("DecimalDataSerializer", "DecimalSerializerSnapshot"), ("ExternalSerializer", "ExternalSerializerSnapshot")))
COUNT_WINDOW = "org.apache.flink.table.runtime.operators.window.CountWindow$Serializer$CountWindowSerializerSnapshot"
ARRAY_DATA, MAP_DATA, SORTED_MAP, LINKED_LIST = (f"{_T}{name}" for name in (
    "ArrayDataSerializer$ArrayDataSerializerSnapshot", "MapDataSerializer$MapDataSerializerSnapshot",
    "SortedMapSerializerSnapshot", "LinkedListSerializer$LinkedListSerializerSnapshot"))


def metadata(version: str) -> bytes:
    return gzip.decompress((FIXTURES[version] / "_metadata.gz").read_bytes())


@pytest.fixture(scope="module")
def savepoints(tmp_path_factory) -> dict[str, pathlib.Path]:
    """Each fixture as a savepoint directory."""
    paths = {}
    for version in VERSIONS:
        paths[version] = tmp_path_factory.mktemp(f"sql-{version}")
        (paths[version] / "_metadata").write_bytes(metadata(version))
    return paths


@pytest.mark.parametrize("version", VERSIONS)
def test_sql_state_has_row_types_from_the_field_serializers(version, savepoints):
    assert state_types(savepoints[version]) == expected_state_types(version)
    assert pyref_cli(["verify", str(savepoints[version])]) == 0


@pytest.mark.parametrize("version", VERSIONS)
def test_legacy_window_namespaces_and_distinct_views_decode(version, savepoints):
    """The table runtime's TimeWindow namespaces split from the RowData keys; COUNT(DISTINCT)'s
    MapView holds each distinct key (StringData bytes) with its count."""
    with FlinkSavepoint.open(savepoints[version]) as savepoint:
        states = {(name, op.keyed_state(name).namespace_type.kind): op.keyed_state(name)
                  for op in savepoint.operators for name in op.keyed_state_names}
        windows = [item[1] for item in states["window-aggs", "time-window"].items()]
        distinct = [item for name, state in states.items() if name == ("distinctAcc_0", "void-namespace")
                    for item in state.items()]
    assert windows and all(isinstance(w, TimeWindow) and w.end - w.start == 4000 and w.start % 4000 == 0
                           for w in windows)
    assert {key for _, key, _ in distinct} == {i32(2) + f"k{i}".encode() for i in range(6)}
    assert all(isinstance(count, int) and count >= 1 for _, _, count in distinct)


@pytest.mark.parametrize("version", VERSIONS)
def test_import_and_export_keep_rowdata_keys_values_and_key_groups_exactly(version, savepoints, tmp_path):
    import_flink(savepoints[version], tmp_path / "pyref", ttl_default=TTL_DEFAULT)
    assert pyref_cli(["verify", str(tmp_path / "pyref")]) == 0
    export_savepoint(tmp_path / "pyref", tmp_path / "flink", flink_version=version)
    original = keyed_contents(savepoints[version])
    assert sum(map(len, original.values())) > 150
    assert keyed_contents(tmp_path / "flink") == original


@pytest.mark.parametrize("version", VERSIONS)
def test_one_parallelism_for_the_job_leaves_its_non_parallel_operators_at_one(version, savepoints, tmp_path):
    """The planner makes a global Top-N and its sink non-parallel (max parallelism 1): -p 3 was
    refused for the whole job by plan, rescale and export-flink; Flink keeps such operators at 1."""
    with FlinkSavepoint.open(savepoints[version]) as sp:
        single = {op.operator_id for op in sp.operators if op.max_parallelism == 1}
    assert single and pyref_cli(["plan", str(savepoints[version]), "-p", "3"]) == 0
    import_flink(savepoints[version], tmp_path / "pyref", ttl_default=TTL_DEFAULT)
    assert pyref_cli(["rescale", str(tmp_path / "pyref"), str(tmp_path / "p3"), "-p", "3"]) == 0
    assert pyref_cli(["export-flink", str(tmp_path / "p3"), str(tmp_path / "flink"), "--flink-version", version,
                      "-p", "3"]) == 0
    with FlinkSavepoint.open(tmp_path / "flink") as exported:
        assert {op.operator_id: op.parallelism for op in exported.operators if op.operator_id in single} == dict.fromkeys(
            single, 1)
        assert {op.parallelism for op in exported.operators if op.operator_id not in single} == {3}
    assert pyref_cli(["verify", str(tmp_path / "flink")]) == 0
    rows = {name: len(rows) for name, rows in keyed_contents(savepoints[version]).items()}
    assert {name: len(rows) for name, rows in keyed_contents(tmp_path / "flink").items()} == rows  # subtasks moved


@pytest.mark.parametrize("version", VERSIONS)
def test_collections_of_sql_rows_keep_their_bytes_and_split(version, savepoints):
    """Top-N over an updating input keeps a SortedMap per key: each sort key (a RowData) with its
    row count; deduplicated rows hold ARRAY and MAP columns (in the BinaryRowData bytes)."""
    with FlinkSavepoint.open(savepoints[version]) as savepoint:
        states = {(name, op.keyed_state(name).stored_type.describe()): list(op.keyed_state(name).items())
                  for op in savepoint.operators for name in op.keyed_state_names}
    (key, sorted_map), = states["sorted-map", "sorted-map<row-data<int64,string-data>,int64>"]
    assert key == i32(8) + bytes(8)  # the global Top-N's key: a row of no fields
    assert sorted(sorted_map.values()) == [1] * 6  # (count, key): distinct sort keys, the string inline
    assert sorted(row[20:22] for row in sorted_map) == [f"k{i}".encode() for i in range(6)]
    rows = states["deduplicate-state", "row-data<string-data,timestamp-data(3),array-data(BigIntType),"
                                       "map-data(CharType,BigIntType)>"]
    assert len(rows) == 6 and all(int.from_bytes(value[:4], "big") == len(value) - 4 for _, value in rows)


#: SqlJob's phase 1: its final watermark; key j's rows are seq 0 .. j+2 at 2000 * seq + 100 * j ms.
WATERMARK = 10_000


def match_recognize_state(path: pathlib.Path) -> dict[str, list]:
    """The MATCH_RECOGNIZE (CEP) operator's keyed states decoded, name -> items, and its event-time timers."""
    with FlinkSavepoint.open(path) as savepoint:
        op, = (op for op in savepoint.operators if "nfaStateName" in op.keyed_state_names)
        return {name: list(op.keyed_state(name).items()) for name in op.keyed_state_names} | {
            "timers": op.timers("watermark-callbacks", "event-time").to_arrow().to_pylist()}


def partition(key: bytes) -> str:
    """k of a BinaryRowData key (k): after its length and null bits, inline."""
    return key[12:14].decode()


def t_row(row: bytes) -> tuple[str, int, int]:
    """k, seq and rowtime of a BinaryRowData row of t (k, v, seq, s, rowtime): 8-byte fields after
    its length and null bits, little-endian, k inline."""
    field = [row[12 + 8 * i:20 + 8 * i] for i in range(5)]
    return field[0][:2].decode(), int.from_bytes(field[2], "little"), int.from_bytes(field[4], "little")


@pytest.mark.parametrize("version", VERSIONS)
def test_match_recognize_partial_matches_chain_back_to_rows_of_t(version, savepoints):
    """PATTERN (A B+ C) over seq mod 4 (A, B, B, C): at the watermark k0 has matched A B B, k1 a
    whole match, k2-k5 a match and then A; each partial match's nodes lead through the shared
    buffer's edges to the RowData events they matched."""
    state = match_recognize_state(savepoints[version])
    events = {}
    for key, event_id, lockable in state["sharedBuffer-events"]:
        events[key, event_id] = row = t_row(lockable.element)
        assert row[0] == partition(key) and row[2] == event_id.timestamp <= WATERMARK and lockable.ref_count == 1
    edges = {(key, node): lockable.element for key, node, lockable in state["sharedBuffer-entries-with-lockable-edges"]}
    pending = {}
    for key, nfa in state["nfaStateName"]:
        assert nfa.completed_matches == [] and [m.state for m in nfa.partial_matches].count("A") == 1
        for match in nfa.partial_matches:
            node, chain = match.previous, []
            while node is not None:
                chain.append((node.page, events[key, node.event_id][1]))
                (edge,) = edges[key, node]
                node = edge.element.target
            if chain:
                pending[partition(key)] = chain[::-1]
    assert pending == {"k0": [("A", 0), ("B", 1), ("B", 2)], **{f"k{j}": [("A", 4)] for j in range(2, 6)}}
    assert len(events) == len(edges) == 7  # every event buffered is a node of a partial match


@pytest.mark.parametrize("version", VERSIONS)
def test_match_recognize_rows_after_the_watermark_wait_in_its_queue(version, savepoints):
    state = match_recognize_state(savepoints[version])
    queued = {(partition(key), ts): [t_row(row) for row in rows] for key, ts, rows in state["eventQueuesStateName"]}
    assert queued == {(f"k{j}", 2000 * seq + 100 * j): [(f"k{j}", seq, 2000 * seq + 100 * j)]
                      for j in range(6) for seq in range(5, j + 3)}
    assert sorted(t["timestamp"] for t in state["timers"]) == sorted(ts for _, ts in queued)
    assert state["sharedBuffer-events-count"] == []  # counts before the watermark are dropped


def java_stream(class_name: str) -> bytes:
    """A real ObjectOutputStream of the table runtime (a LogicalType, DataType...) from the fixture."""
    data = metadata("2.3.0")
    start = data.rfind(JAVA_STREAM_MAGIC, 0, data.index(class_name.encode()))
    inp = DataInput(data, start)
    skip_java_stream(inp, "stream")
    return data[start:inp.pos]


def real_snapshots(class_name: str) -> list[bytes]:
    """Every versioned snapshot of ``class_name`` in the fixture, each with what follows it."""
    data, name = metadata("2.3.0"), utf(class_name)
    return [data[i:] for i in range(len(data)) if data.startswith(name, i)]


def real_snapshot(class_name: str) -> bytes:
    return real_snapshots(class_name)[0]


@pytest.mark.parametrize("class_name, described", [
    (ARRAY_DATA, {"array-data(BigIntType)"}),
    (MAP_DATA, {"map-data(CharType,BigIntType)", "map-data(IntType,IntType)"}),  # a MAP; a MULTISET
    (SORTED_MAP, {"sorted-map<row-data<int64,string-data>,int64>"}),
    (LINKED_LIST, {"linked-list<int64>"}),
])
def test_table_runtime_collection_snapshots_parse_exactly(class_name, described):
    """Each ends exactly where the next snapshot or state starts; cut short anywhere, a typed error."""
    found, ends = set(), []
    for data in real_snapshots(class_name):
        inp = DataInput(data)
        found.add(read_versioned_snapshot(inp, looks_like_versioned_snapshot).describe())
        ends.append(inp.pos)
        assert data[inp.pos:inp.pos + 2] in (b"\x00\x00", b"\x00\x01") or looks_like_versioned_snapshot(
            DataInput(data, inp.pos))
    assert found == described
    data, end = real_snapshot(class_name), ends[0]
    for cut in range(len(utf(class_name)) + 4, end):
        with pytest.raises(CorruptSavepointError):
            read_versioned_snapshot(DataInput(data[:cut]), at_position(cut))


@pytest.mark.parametrize("class_name, cell, value", [
    (ARRAY_DATA, i32(3) + b"arr", i32(3) + b"arr"),
    (MAP_DATA, i32(3) + b"map", i32(3) + b"map"),
    (SORTED_MAP, i32(2) + i32(2) + b"r1" + b"\x00" + i64(5) + i32(2) + b"r2" + b"\x01",
     {i32(2) + b"r1": 5, i32(2) + b"r2": None}),
    (LINKED_LIST, i32(3) + b"\x40" + i64(1) + i64(3), [1, None, 3]),
])
def test_table_runtime_collection_values_decode(class_name, cell, value):
    """ArrayData / MapData: their binary bytes after an int length; SortedMap: entries as Flink's
    Map writes them; LinkedList: a null mask (most significant bit first), then the elements."""
    data = real_snapshot(class_name)
    inp = DataInput(data)
    codec = codec_for(read_versioned_snapshot(inp, looks_like_versioned_snapshot))
    assert decode_cell(codec, cell) == value
    with pytest.raises(CorruptSavepointError, match="bytes left"):
        decode_cell(codec, cell + b"x")
    with pytest.raises(CorruptSavepointError):
        decode_cell(codec, cell[:-1])


def test_rowdata_snapshot_steps_over_the_java_types_to_its_field_serializers():
    body = i32(2) + java_stream("org.apache.flink.table.types.logical.VarCharType") + java_stream(
        "org.apache.flink.table.types.logical.BigIntType") + i32(1333245) + i32(1) + i32(2) + snapshot(
        STRING_DATA) + snapshot(LONG)
    data = snapshot(ROW_DATA, 3, body) + b"after"
    inp = DataInput(data)
    parsed = read_versioned_snapshot(inp, at_position(len(data) - 5))
    assert (parsed.describe(), parsed.snapshot, inp.pos) == ("row-data<string-data,int64>", data[:-5], len(data) - 5)
    # A row's value: its BinaryRowData length first, kept as Flink's bytes.
    cell = i32(3) + b"row"
    assert decode_cell(codec_for(parsed), cell) == cell
    with pytest.raises(CorruptSavepointError, match="bytes left"):
        decode_cell(codec_for(parsed), cell + b"x")
    # As many field serializers as field types, or the snapshot is corrupt.
    with pytest.raises(CorruptSavepointError, match="RowData serializer snapshot has 1 nested serializers, expected 2"):
        read_versioned_snapshot(DataInput(data.replace(i32(1333245) + i32(1) + i32(2), i32(1333245) + i32(1) + i32(1))),
                                at_position(len(data) - 5))


def parse(data: bytes, state: str | None = None):
    inp = DataInput(data, state=state)
    parsed = read_versioned_snapshot(inp, at_position(len(data)))
    assert inp.pos == len(data)
    return parsed


@pytest.mark.parametrize("body, described, cell, value", [
    (snapshot(TIMESTAMP_DATA, 1, i32(3)), "timestamp-data(3)", i64(10_500), 10_500_000_000),
    (snapshot(TIMESTAMP_DATA, 1, i32(6)), "timestamp-data(6)", i64(10_500) + i32(123), 10_500_000_123),
    (snapshot(DECIMAL_DATA, 3, i32(10) + i32(1)), "decimal-data(10,1)", i64(-525), decimal.Decimal("-52.5")),
    (snapshot(DECIMAL_DATA, 3, i32(38) + i32(2)), "decimal-data(38,2)", i32(2) + b"\x30\x39",
     decimal.Decimal("123.45")),
    (snapshot(COUNT_WINDOW), "count-window", i64(7), 7),
])
def test_table_runtime_scalar_snapshots_parse_exactly(body, described, cell, value):
    parsed = parse(body)
    assert parsed.describe() == described
    assert decode_cell(codec_for(parsed), cell) == value
    with pytest.raises(CorruptSavepointError, match="bytes left"):
        decode_cell(codec_for(parsed), cell + b"x")


def test_external_serializer_steps_over_its_java_data_type_to_the_internal_serializer():
    """The Java-serialized DataType names classes (StringData...) that look like snapshots:
    only the internal serializer's header ends it."""
    external = composite(EXTERNAL, [snapshot(STRING_DATA)], java_stream("org.apache.flink.table.types.AtomicDataType")
                         + b"\x01")
    parsed = parse(map_snapshot(external, composite(EXTERNAL, [snapshot(LONG)], java_stream(
        "org.apache.flink.table.types.AtomicDataType") + b"\x00")))
    assert parsed.describe() == "map<external<string-data>,external<int64>>"
    assert decode_cell(codec_for(parsed.children[0]), i32(2) + b"k1") == i32(2) + b"k1"
    assert decode_cell(codec_for(parsed.children[1]), i64(3)) == 3
    # Exactly one internal serializer (a fuzzed _metadata with none failed to unpack, untyped).
    for internals in ([], [snapshot(LONG)] * 2):
        with pytest.raises(CorruptSavepointError, match=f"ExternalSerializer serializer snapshot has {len(internals)} "
                                                        "nested serializers, expected 1"):
            parse(composite(EXTERNAL, internals, java_stream("org.apache.flink.table.types.AtomicDataType") + b"\x00"))


def test_an_unknown_table_runtime_snapshot_is_kept_opaque_or_refused_by_name():
    unknown = _T + "FutureSerializer$FutureSerializerSnapshot"
    # Plain bytes: its end is found, it stays opaque (exported as it was).
    plain = parse(map_snapshot(snapshot(unknown, 1, i32(7)), snapshot(LONG)))
    assert plain.children[0].describe() == f"opaque:{unknown}" and plain.children[0].snapshot == snapshot(
        unknown, 1, i32(7))
    # Java-serialized bytes: an end inside them would be a guess.
    with pytest.raises(UnsupportedFormatError, match="FutureSerializer") as refused:
        parse(map_snapshot(snapshot(unknown, 1, java_stream("org.apache.flink.table.types.logical.VarCharType")),
                           snapshot(LONG)), state="distinctAcc_0")
    assert refused.value.state == "distinctAcc_0"
    # Its end known (the last snapshot before the state data): kept opaque as it is.
    known = snapshot(unknown, 1, java_stream("org.apache.flink.table.types.logical.VarCharType"))
    assert parse(known).describe() == f"opaque:{unknown}"
