"""The Flink export without a JVM: the bytes against what real Flink wrote (the corpus),
serializer mapping and transcoding, typed refusals, and the atomic commit.

Real Flink restoring exports is proven by compat_tests/flink/test_flink_export.py.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import struct

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyref import Savepoint, SavepointWriter, TtlConfig
from pyref.cli import main as cli
from pyref.errors import CorruptSavepointError, InvalidArgumentError, UnsupportedFormatError
from pyref.flink import FlinkSavepoint, export_savepoint, import_flink, operator_id_of_uid
from pyref.flink.metadata import parse_metadata
from pyref.flink.to_flink import (
    VOID_NAMESPACE,
    FlinkSerializer,
    flink_serializer,
    list_serializer,
    map_serializer,
    timer_serializer,
    ttl_serializer,
)
from pyref.flink.transcode import transcoder
from pyref.flink.values import decode_column
from pyref.flink.writer import export as export_module
from pyref.flink.writer.metadata import checkpoint_properties, metadata_version
from pyref.key_groups import assign_to_key_group
from pyref.redistribution import DistributionMode
from pyref.serializers import (
    Boolean,
    Bytes,
    Enum,
    Float64,
    Int32,
    Int64,
    Json,
    ListOf,
    MapOf,
    Nullable,
    Opaque,
    String,
    Tuple,
)
from pyref.testing import SEED_COUNTS, write_seeds

CORPUS = pathlib.Path(__file__).resolve().parents[2] / "compat_tests/flink/corpus"
FLINK_SEEDS = CORPUS / "2.3.0/hashmap/seeds/savepoint"
KEYED_KINDS = CORPUS / "2.3.0/hashmap/keyed-kinds/savepoint"


def operator(metadata, uid):
    return next(op for op in metadata.operators if op.operator_id == operator_id_of_uid(uid))


# -- the bytes Flink writes -------------------------------------------------------------------


@pytest.mark.parametrize("version", ["1.13.6", "1.14.6", "1.15.4", "1.16.3", "1.17.2", "1.20.3", "2.0.2", "2.3.0"])
def test_seeds_export_has_the_bytes_flink_wrote(tmp_path, version):
    """The seeds exported for a Flink release next to the seeds that release wrote itself (the
    corpus): the same _metadata version, operator ids, operator-state streams (Flink 1.13 to
    1.17's older operator-state header included), keyed-backend metadata and key groups; per key
    group the same records (Flink's heap backend orders a key group's keys by hash, pyref by
    its chunks), and a whole keyed stream byte for byte where the orders agree."""
    flink_seeds = CORPUS / version / "hashmap/seeds/savepoint"
    write_seeds(tmp_path / "seeds")
    export_savepoint(tmp_path / "seeds", tmp_path / "flink", flink_version=version)
    ours = parse_metadata((tmp_path / "flink/_metadata").read_bytes())
    flinks = parse_metadata((flink_seeds / "_metadata").read_bytes())
    assert ours.version == flinks.version
    for uid in ("kafka-source", "url-counter"):
        mine, theirs = operator(ours, uid), operator(flinks, uid)
        assert (mine.operator_id, mine.parallelism, mine.max_parallelism) == (
            theirs.operator_id, theirs.parallelism, theirs.max_parallelism)
        for a, b in zip(mine.subtasks, theirs.subtasks):
            if b.managed_operator_state is not None:
                assert a.managed_operator_state.stream.data == b.managed_operator_state.stream.data
                assert a.managed_operator_state.states == b.managed_operator_state.states
            if b.managed_keyed_state is not None:
                ka, kb = a.managed_keyed_state, b.managed_keyed_state
                assert [o > 0 for o in ka.offsets] == [o > 0 for o in kb.offsets]
                first = min(o for o in kb.offsets if o)
                assert ka.stream.data[:first] == kb.stream.data[:first]  # proxy: key serializer, meta info
    first_keyed = operator(ours, "url-counter").subtasks[0].managed_keyed_state
    assert first_keyed.stream.data == operator(flinks, "url-counter").subtasks[0].managed_keyed_state.stream.data
    with FlinkSavepoint.open(tmp_path / "flink", uids=["url-counter"]) as sp, \
            FlinkSavepoint.open(flink_seeds, uids=["url-counter"]) as flink:
        ours_rows = sp.operator("url-counter").keyed_state("count").to_arrow().sort_by("key")
        flink_rows = flink.operator("url-counter").keyed_state("count").to_arrow().sort_by("key")
        assert ours_rows.equals(flink_rows)


def row_snapshot(savepoint, state="row"):
    """The value serializer snapshot of the types case's keyed state ``state``."""
    with FlinkSavepoint.open(savepoint, uids=["types"]) as sp:
        info, _ = next(sp.operator("types").keyed_subtasks()).states[state]
    return info.serializers["VALUE_SERIALIZER"].snapshot


def test_a_row_serializer_of_flink_1_14_is_exported_for_1_13_as_1_13_wrote_it(tmp_path):
    """Flink 1.14's RowSerializerSnapshot (outer version 4) has a RowKind flag that 1.13 would read
    as the nested snapshots' magic: the 1.14.6 types case imported and exported for 1.13 names its
    Row state with the snapshot Flink 1.13.6 wrote itself (version 3), and for 1.14 with 1.14's."""
    case = CORPUS / "1.14.6/hashmap/types"
    import_flink(case / "savepoint", tmp_path / "imported", uids=["types", "types-source", "types-source-filter"])
    for version in ("1.13.6", "1.14.6"):
        export_savepoint(tmp_path / "imported", tmp_path / version, flink_version=version)
        assert row_snapshot(tmp_path / version) == row_snapshot(CORPUS / version / "hashmap/types/savepoint"), version
    assert row_snapshot(tmp_path / "1.13.6", "tuple3") == row_snapshot(case / "savepoint", "tuple3")  # no Row: as kept


def kept_row(flag: int) -> ListOf:
    """A pyref list whose element serializer keeps Flink 1.14.6's Row snapshot (RowKind flag ``flag``)."""
    row = row_snapshot(CORPUS / "1.14.6/hashmap/types/savepoint")
    at = row.index(struct.pack(">ii", 911108, 4)) + 8  # the flag after the composite magic and outer version 4
    element = String().snapshot()
    element.engine.engine, element.engine.class_name = "flink", "Row"
    element.engine.snapshot = row[:at] + bytes([flag]) + row[at + 1:]

    class Kept(String):
        def snapshot(self):
            return element

    return ListOf(Kept())


def test_a_row_serializer_inside_a_list_is_rewritten_for_1_13_and_one_without_row_kind_refused():
    ours = flink_serializer(kept_row(1).snapshot(), "w", release=(1, 13))
    flinks = FlinkSerializer.parse(row_snapshot(CORPUS / "1.13.6/hashmap/types/savepoint"), "w")
    assert ours.snapshot == list_serializer(flinks, "w").snapshot and ours.type.children[0].row_kind
    assert flink_serializer(kept_row(0).snapshot(), "w", release=(1, 14)).type.children[0].row_kind is False
    with pytest.raises(UnsupportedFormatError, match="carry no RowKind"):
        flink_serializer(kept_row(0).snapshot(), "w", release=(1, 13))


def test_default_serializer_snapshots_are_flinks():
    """The default mapping writes, byte for byte, the snapshots Flink 2.3 wrote for the same
    types (the corpus's keyed-kinds case): Long, String, List and Map states, Tuple2, TTL
    wrappers, timer queues, the void namespace and the key serializer."""
    with FlinkSavepoint.open(KEYED_KINDS) as sp:
        sub = next(sp.operator("keyed-kinds").keyed_subtasks())
    stored = {name: info.serializers["VALUE_SERIALIZER"].snapshot for name, (info, _) in sub.states.items()}
    string, long = flink_serializer(String().snapshot(), "s"), flink_serializer(Int64().snapshot(), "l")
    assert sub.key_type.snapshot == string.snapshot
    assert stored["count"] == long.snapshot
    assert stored["history"] == list_serializer(string, "h").snapshot
    assert stored["buckets"] == map_serializer(string, flink_serializer(Nullable(Int64()).snapshot(), "b",
                                                                        nulls_handled=True), "b").snapshot
    assert stored["count-sum"] == flink_serializer(Tuple(Int64(), Int64()).snapshot(), "c").snapshot
    assert stored["ttl-last"] == ttl_serializer(string, "t").snapshot
    assert stored["ttl-nums"] == list_serializer(ttl_serializer(long, "t"), "t").snapshot
    assert stored["_timer_state/event_user-timers"] == timer_serializer(string, VOID_NAMESPACE, "t").snapshot
    namespaces = {info.serializers["NAMESPACE_SERIALIZER"].snapshot for info, _ in sub.states.values()
                  if "NAMESPACE_SERIALIZER" in info.serializers}
    assert namespaces == {VOID_NAMESPACE.snapshot}


def test_checkpoint_properties_are_javas():
    """The Java serialization of CheckpointProperties, built field by field, is the one Flink
    wrote for its stop-with-savepoint; the export's own differs only in name and action."""
    flink = parse_metadata((FLINK_SEEDS / "_metadata").read_bytes()).properties
    assert checkpoint_properties("Suspend Savepoint", "SUSPEND") == flink
    ours = checkpoint_properties()
    assert b"\x00\tSavepoint~r" in ours and ours.endswith(b"t\x00\x04NONE") and b"CANONICAL" in ours


@pytest.mark.parametrize("version, expected", [("1.13.6", 3), ("1.14.6", 3), ("1.15", 3), ("1.16.3", 4), ("1.17", 4), ("1.20.3", 4), ("2.0", 5), ("2.0.2", 5), ("2.1", 6),
                                               ("2.3.0", 6)])
def test_metadata_version_per_flink_release(tmp_path, version, expected):
    write_seeds(tmp_path / "seeds")
    export_savepoint(tmp_path / "seeds", tmp_path / "flink", flink_version=version)
    metadata = parse_metadata((tmp_path / "flink/_metadata").read_bytes())
    assert metadata.version == expected
    uids = {op.uid for op in metadata.operators}
    assert uids == ({"kafka-source", "url-counter"} if expected >= 5 else {None})


@pytest.mark.parametrize("version", ["3.0", "1.12", "2", "2.3.x", "1.20.3.1"])
def test_unknown_flink_versions_are_refused(tmp_path, version):
    write_seeds(tmp_path / "seeds")
    with pytest.raises(InvalidArgumentError, match="not one this exporter writes"):
        export_savepoint(tmp_path / "seeds", tmp_path / "flink", flink_version=version)
    assert not (tmp_path / "flink").exists()


# -- values ----------------------------------------------------------------------------------

scalars = st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(max_size=300), st.binary(max_size=20))
SERIALIZERS = {int: Int64(), str: String(), bytes: Bytes()}


def column_of(serializer, values):
    return pa.array([serializer.encode(v) for v in values], pa.binary())


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(), max_size=30), st.lists(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=4), max_size=10),
       st.lists(st.dictionaries(st.text(max_size=5), st.none() | st.integers(-(2**31), 2**31 - 1), max_size=4),
                max_size=8),
       st.lists(st.tuples(st.text(max_size=8), st.floats(allow_nan=False), st.none() | st.text(max_size=4)), max_size=8))
def test_transcoded_values_read_back_in_flinks_encoding(strings, lists, maps, tuples):
    """Every value pyref encodes, transcoded to the Flink serializer of the default mapping,
    decodes (with the Flink reader) to itself: strings of every length and plane, lists,
    maps with null values, tuples with a nullable field."""
    cases = [(String(), strings), (ListOf(Int64()), lists), (MapOf(String(), Nullable(Int32())), maps),
             (Tuple(String(), Float64(), Nullable(String())), tuples), (Nullable(String()), strings + [None])]
    for serializer, values in cases:
        target = flink_serializer(serializer.snapshot(), "test").type
        flink = transcoder(serializer, target, "test")(column_of(serializer, values))
        decoded = decode_column(target, flink)
        assert [tuple(v) if isinstance(v, tuple) else v for v in decoded] == values, serializer


def test_string_lengths_take_as_many_varint_bytes_as_flink_writes():
    """``StringValue`` lengths of 1, 2 and 3 varint bytes, ASCII (whole columns) and not (per row)."""
    values = ["x" * 126, "x" * 127, "x" * 20000, "é" * 200, "\u4e2d" * 3, "", None]
    target = flink_serializer(String().snapshot(), "test").type
    flink = transcoder(Nullable(String()), target, "test")(column_of(Nullable(String()), values))
    assert [len(v) for v in flink.to_pylist()] == [127, 129, 20003, 2 + 400, 1 + 9, 1, 1]
    assert decode_column(target, flink) == values


def test_an_engine_snapshot_is_written_back_and_its_values_pass(tmp_path):
    """A serializer imported from Flink keeps Flink's snapshot (engine): the export writes that
    snapshot byte for byte, and opaque values (Kryo here) as their bytes."""
    with FlinkSavepoint.open(KEYED_KINDS) as flink:
        op = flink.operator("keyed-kinds")
        blob = op.keyed_state("blob")
        snapshot = blob.value_type.snapshot
        rows = blob.to_arrow(raw=True)
        keys = decode_column(op.key_type, rows.column("key").combine_chunks())
        values = rows.column("value").combine_chunks()
    kryo = Opaque("flink", blob.value_type.class_name, snapshot)
    with SavepointWriter(str(tmp_path / "sp")) as w:
        w.add_operator("keyed-kinds", parallelism=3, max_parallelism=1000,
                       key_serializer=String()).keyed_state("blob", kryo).add(keys, values.to_pylist())
    export_savepoint(tmp_path / "sp", tmp_path / "flink", flink_version="2.3")
    with FlinkSavepoint.open(tmp_path / "flink") as sp:
        exported = sp.operator("keyed-kinds").keyed_state("blob")
        assert exported.value_type.snapshot == snapshot
        back = exported.to_arrow(raw=True)
        assert sorted(zip(decode_column(exported.key_type, back.column("key").combine_chunks()),
                          back.column("value").to_pylist())) == sorted(zip(keys, values.to_pylist()))


def test_the_last_row_of_a_key_wins_and_empty_lists_are_left_out(tmp_path):
    with SavepointWriter(str(tmp_path / "sp")) as w:
        op = w.add_operator("op", parallelism=1, key_serializer=String())
        value = op.keyed_state("value", Int64())
        value.add(["a", "b"], [1, 2])
        value.add(["a"], [3])
        lists = op.keyed_state("list", String(), kind="list")
        lists.add(["a", "b", "c"], [["x"], [], ["y", "z"]])
        lists.add(["c"], [["w"]])
    export_savepoint(tmp_path / "sp", tmp_path / "flink", flink_version="1.20")
    with FlinkSavepoint.open(tmp_path / "flink", uids=["op"]) as sp:
        op = sp.operator("op")
        assert {k: op.keyed_state("value").get(k) for k in "ab"} == {"a": 3, "b": 2}
        assert dict(op.keyed_state("list").items()) == {"a": ["x"], "c": ["w"]}
        assert sorted(k for k, _ in op.keyed_state("list").items()) == ["a", "c", "c"]  # both rows of c, in order


def test_small_streams_go_inline_and_large_ones_to_files(tmp_path):
    write_seeds(tmp_path / "seeds", windowed=True)
    everything_inline = export_savepoint(tmp_path / "seeds", tmp_path / "inline", flink_version="2.3")
    assert (everything_inline.state_files, os.listdir(tmp_path / "inline")) == (0, ["_metadata"])
    in_files = export_savepoint(tmp_path / "seeds", tmp_path / "files", flink_version="2.3", inline_bytes=0)
    names = sorted(os.listdir(tmp_path / "files"))
    assert in_files.inline_handles == 0 and len(names) == in_files.state_files + 1 == 7
    metadata = parse_metadata((tmp_path / "files/_metadata").read_bytes())
    streams = [h.stream for op in metadata.operators for s in op.subtasks
               for h in (s.managed_operator_state, s.managed_keyed_state) if h is not None]
    assert {s.kind for s in streams} == {"relative-file"}
    assert sorted(s.location for s in streams) == [n for n in names if n != "_metadata"]
    with FlinkSavepoint.open(tmp_path / "files") as sp:
        assert dict(sp.operator("url-counter").keyed_state("count").items()) == SEED_COUNTS


def test_export_at_another_parallelism_cuts_key_groups_and_redistributes_list_state(tmp_path):
    write_seeds(tmp_path / "seeds")
    expected = Savepoint.open(tmp_path / "seeds").restore_plan(4)
    export_savepoint(tmp_path / "seeds", tmp_path / "flink", flink_version="2.3", parallelism={"kafka-source": 4,
                                                                                            "url-counter": 3})
    with FlinkSavepoint.open(tmp_path / "flink") as sp:
        offsets = sp.operator("kafka-source").list_state("offsets")
        assert [offsets.partition(i) for i in range(4)] == [
            list(expected.subtask("kafka-source", i).list_state("offsets")) for i in range(4)] == [[100], [101], [200],
                                                                                                 [201]]
        counter = sp.operator("url-counter")
        assert [s.managed_keyed_state.key_groups for s in counter.state.subtasks] == [range(0, 43), range(43, 86),
                                                                                      range(86, 128)]
        assert dict(counter.keyed_state("count").items()) == SEED_COUNTS


# -- what Flink cannot take: refused before anything is written -------------------------------


def refusal(tmp_path, build, error, match, **options):
    """Build a savepoint, export it, expect ``error``; nothing may be left at the target."""
    case = tmp_path / f"case-{len(os.listdir(tmp_path))}"
    with SavepointWriter(str(case / "sp")) as w:
        build(w)
    with pytest.raises(error, match=match) as caught:
        export_savepoint(case / "sp", case / "flink", flink_version="2.3", **options)
    assert not (case / "flink").exists()
    return caught.value


def keyed(serializer, values, **kwargs):
    def build(w):
        w.add_operator("op", parallelism=1, key_serializer=String()).keyed_state("s", serializer, **kwargs).add(
            [f"k{i}" for i in range(len(values))], values)
    return build


@pytest.mark.parametrize("serializer, values, match", [
    (Json(), [{"a": 1}], "json has no Flink counterpart"),
    (Enum(["RED", "GREEN"]), ["RED"], "names the Java enum class"),
    (Tuple(*[Int32()] * 26), [tuple(range(26))], "at most 25 fields"),
    (Opaque("spark", "SomeSerializer", b"x"), [b"x"], "'spark' engine"),
    (ListOf(Json()), [[1]], "json has no Flink counterpart"),
])
def test_a_serializer_without_flink_counterpart_is_refused(tmp_path, serializer, values, match):
    error = refusal(tmp_path, keyed(serializer, values), UnsupportedFormatError, match)
    assert error.state == "op/s"


def test_a_user_defined_serializer_is_refused(tmp_path):
    from pyref.serializers import register_serializer, unregister_serializer

    class Point(Bytes):
        serializer_id = "com.example.Point"

        @classmethod
        def from_snapshot(cls, snapshot):
            return cls()

    register_serializer(Point)
    try:
        refusal(tmp_path, keyed(Point(), [b"p"]), UnsupportedFormatError, "user-defined serializer")
    finally:
        unregister_serializer("com.example.Point")


def test_a_null_where_the_flink_serializer_has_none_is_refused(tmp_path):
    """A nullable value whose kept Flink snapshot (Long) writes no null: refused when a null comes."""
    engine = flink_serializer(Int64().snapshot(), "x").snapshot
    nullable = Nullable(Int64())
    snapshot = nullable.snapshot()
    snapshot.engine.engine, snapshot.engine.class_name, snapshot.engine.snapshot = "flink", "Long", engine

    class Kept(Nullable):
        def snapshot(self):
            return snapshot

    error = refusal(tmp_path, keyed(Kept(Int64()), [1, None]), UnsupportedFormatError, "a null value where Flink's")
    assert error.state == "op/s (value)"


def test_an_engine_snapshot_that_does_not_fit_the_serializer_is_refused(tmp_path):
    engine = flink_serializer(Int64().snapshot(), "x").snapshot
    snapshot = String().snapshot()
    snapshot.engine.engine, snapshot.engine.class_name, snapshot.engine.snapshot = "flink", "Long", engine

    class Mislabelled(String):
        def snapshot(self):
            return snapshot

    refusal(tmp_path, keyed(Mislabelled(), ["a"]), UnsupportedFormatError, "does not match the Flink serializer")


def test_broadcast_mode_list_state_is_refused(tmp_path):
    def build(w):
        w.add_operator("op", parallelism=2).list_state("rules", Int64(), DistributionMode.BROADCAST).add(0, [1])
    refusal(tmp_path, build, UnsupportedFormatError, "BROADCAST mode")


def test_byte_string_keys_are_refused(tmp_path):
    def build(w):
        w.add_operator("op", parallelism=1, key_serializer=Bytes()).keyed_state("s", Int64()).add([b"k"], [1])
    refusal(tmp_path, build, UnsupportedFormatError, "cannot key by byte")


def test_a_keyed_state_named_like_flinks_timers_is_refused(tmp_path):
    def build(w):
        w.add_operator("op", parallelism=1, key_serializer=String()).keyed_state(
            "_timer_state/event_x", Int64()).add(["k"], [1])
    refusal(tmp_path, build, UnsupportedFormatError, "_timer_state/")


def test_a_parallelism_above_the_max_parallelism_is_refused(tmp_path):
    def build(w):
        w.add_operator("hashed", parallelism=1, max_parallelism=4, key_serializer=String()).keyed_state(
            "s", Int64()).add(["k"], [1])
        w.add_operator("pojo", parallelism=1, max_parallelism=4, key_serializer=String(),
                       key_groups="writer").keyed_state("s", Int64()).add(["k"], [1], key_groups=[0])
    refusal(tmp_path, build, InvalidArgumentError, "change-max-parallelism", operators=["hashed"], parallelism=5)
    refusal(tmp_path, build, InvalidArgumentError, "cannot change", operators=["pojo"], parallelism=5)

    def source(w):  # an imported source: writer-assigned, but no key groups to keep
        w.add_operator("source", parallelism=1, max_parallelism=4, key_groups="writer").list_state(
            "offsets", Int64()).add(0, [1])
    refusal(tmp_path, source, InvalidArgumentError, "change-max-parallelism", parallelism=5)


def test_a_max_parallelism_above_flinks_limit_is_refused(tmp_path):
    write_seeds(tmp_path / "seeds")
    source = Savepoint.open(tmp_path / "seeds")
    source.manifest.operators[1].max_parallelism = 65536  # beyond what a manifest may say: only in memory
    with pytest.raises(InvalidArgumentError, match="Flink's limit is 32768"):
        export_module.plan_export(source, "2.3")


def test_names_flink_cannot_write_are_refused(tmp_path):
    def long_uid(w):
        w.add_operator("op", parallelism=1, uid="u" * 70000).list_state("s", Int64()).add(0, [1])
    refusal(tmp_path, long_uid, InvalidArgumentError, "uid of operator 'op'.*at most 65535")

    def long_state(w):
        w.add_operator("op", parallelism=1).list_state("s" * 70000, Int64()).add(0, [1])
    refusal(tmp_path, long_state, InvalidArgumentError, "state name of op/")

    def same_id(w):
        w.add_operator("a", parallelism=1, uid="x").list_state("s", Int64()).add(0, [1])
        w.add_operator("b", parallelism=1, uid="x").list_state("s", Int64()).add(0, [1])
    refusal(tmp_path, same_id, InvalidArgumentError, "same Flink operator id")

    def short_id(w):
        w.add_operator("op", parallelism=1, engine_operator_id=b"\x01" * 8).list_state("s", Int64()).add(0, [1])
    refusal(tmp_path, short_id, InvalidArgumentError, "Flink's OperatorID has 16")


def test_unknown_operators_are_refused(tmp_path):
    write_seeds(tmp_path / "seeds")
    with pytest.raises(InvalidArgumentError, match="no such operators.*has kafka-source, url-counter"):
        export_savepoint(tmp_path / "seeds", tmp_path / "f", flink_version="2.3", operators=["nope"])
    with pytest.raises(InvalidArgumentError, match="not exported.*exported are url-counter"):
        export_savepoint(tmp_path / "seeds", tmp_path / "f", flink_version="2.3", operators=["url-counter"],
                         parallelism={"kafka-source": 2})
    result = export_savepoint(tmp_path / "seeds", tmp_path / "f", flink_version="2.3", operators=["url-counter"])
    assert [op["operator_id"] for op in result.operators] == ["url-counter"]


def test_operators_are_named_by_id_or_uid_and_a_typo_lists_both(tmp_path, capsys):
    with SavepointWriter(str(tmp_path / "sp")) as w:
        w.add_operator("by-uid", parallelism=1, max_parallelism=8, uid="kafka-source").list_state(
            "s", Int64()).add(0, [1])
        w.add_operator("plain", parallelism=1, max_parallelism=8).list_state("s", Int64()).add(0, [2])
    args = ["export-flink", str(tmp_path / "sp"), str(tmp_path / "flink"), "--flink-version", "2.3", "--json"]
    assert cli([*args, "--operator", "kafka-source=3", "--operator", "plain=2", "--only", "kafka-source",
                "--only", "plain"]) == 0
    assert [(op["operator_id"], op["parallelism"]) for op in json.loads(capsys.readouterr().out)["operators"]] == [
        ("by-uid", 3), ("plain", 2)]
    assert cli([*args, "--overwrite", "--operator", "kafka-sorce=3"]) == 2
    assert "not exported: ['kafka-sorce']; exported are by-uid (uid kafka-source), plain" in json.loads(
        capsys.readouterr().out)["error"]
    with pytest.raises(InvalidArgumentError, match="named twice"):
        export_savepoint(tmp_path / "sp", tmp_path / "flink", flink_version="2.3", overwrite=True,
                         parallelism={"kafka-source": 3, "by-uid": 2})


def test_engine_operator_ids_and_uids_name_operators_as_flink_does(tmp_path):
    """The recorded OperatorID wins; else the uid is hashed as Flink hashes it (the corpus's
    truth has Flink's own id of the uid "kafka-source"); else the operator id is the uid."""
    truth = json.loads((FLINK_SEEDS.parent / "truth.json").read_text(encoding="utf-8"))
    with SavepointWriter(str(tmp_path / "sp")) as w:
        w.add_operator("by-id", parallelism=1, engine_operator_id=bytes(range(16))).list_state("s", Int64()).add(0, [1])
        w.add_operator("by-uid", parallelism=1, uid="kafka-source").list_state("s", Int64()).add(0, [1])
        w.add_operator("url-counter", parallelism=1).list_state("s", Int64()).add(0, [1])
    result = export_savepoint(tmp_path / "sp", tmp_path / "flink", flink_version="2.3")
    assert [(op["flink_operator_id"], op["uid"]) for op in result.operators] == [
        (bytes(range(16)).hex(), ""), (truth["operators"]["kafka-source"]["operator_id"], "kafka-source"),
        (truth["operators"]["url-counter"]["operator_id"], "url-counter")]


# -- all or nothing ---------------------------------------------------------------------------


def failing_after(monkeypatch, writes: int):
    """The keyed stream writer fails after ``writes`` keyed handles were written."""
    original = export_module.KeyedExport.write
    calls = {"n": 0}

    def write(self, stream, groups):
        calls["n"] += 1
        if calls["n"] > writes:
            stream.write(b"half a stream")
            raise OSError(28, "No space left on device")
        return original(self, stream, groups)

    monkeypatch.setattr(export_module.KeyedExport, "write", write)


def test_a_failed_export_leaves_nothing(tmp_path, monkeypatch):
    write_seeds(tmp_path / "seeds", windowed=True)
    failing_after(monkeypatch, 2)
    with pytest.raises(OSError):
        export_savepoint(tmp_path / "seeds", tmp_path / "flink", flink_version="2.3", inline_bytes=0)
    assert not (tmp_path / "flink").exists()


def test_a_failed_overwrite_keeps_the_previous_savepoint(tmp_path, monkeypatch):
    write_seeds(tmp_path / "seeds", windowed=True)
    export_savepoint(tmp_path / "seeds", tmp_path / "flink", flink_version="2.3", inline_bytes=0)
    before = {name: (tmp_path / "flink" / name).read_bytes() for name in os.listdir(tmp_path / "flink")}
    with pytest.raises(InvalidArgumentError, match="already exists"):
        export_savepoint(tmp_path / "seeds", tmp_path / "flink", flink_version="2.3")
    failing_after(monkeypatch, 3)
    with pytest.raises(OSError):
        export_savepoint(tmp_path / "seeds", tmp_path / "flink", flink_version="2.3", inline_bytes=0, overwrite=True)
    assert {name: (tmp_path / "flink" / name).read_bytes() for name in os.listdir(tmp_path / "flink")} == before


def test_a_failed_export_never_deletes_a_concurrent_exports_files(tmp_path, monkeypatch):
    """Two exports into one directory: the second publishes while the first is still writing,
    then the first fails. Its abort deletes its own state files only; the published savepoint
    keeps every file its _metadata names (an abort used to delete whatever had appeared since
    it began)."""
    from pyref.flink.writer.directory import ExportDirectory, StateStream

    write_seeds(tmp_path / "seeds", windowed=True)
    target = tmp_path / "flink"
    first = ExportDirectory(str(target))
    mine = StateStream(first.io, first.file_prefix, 0)
    mine.write(b"half of the first export")
    mine.close()
    export_savepoint(tmp_path / "seeds", target, flink_version="2.3", inline_bytes=0, overwrite=True)
    published = set(os.listdir(target))
    first.abort()
    assert set(os.listdir(target)) == published - {mine.name}
    with FlinkSavepoint.open(target) as sp:  # every state of the published export still reads
        assert all(list(op.keyed_state(name).items()) for op in sp.operators for name in op.keyed_state_names)


@pytest.mark.parametrize("overwrite", [False, True], ids=["new-directory", "over-a-savepoint"])
def test_of_two_exports_racing_for_one_directory_one_publishes_and_the_other_is_refused(tmp_path, monkeypatch,
                                                                                           overwrite):
    """Export B publishes while export A is writing: A must not replace B's _metadata (which
    would leave B's caller believing in a savepoint that is gone, and A's files orphaned); it
    is refused, deletes its own files and leaves B's savepoint whole."""
    from pyref.errors import ConcurrentWriteError
    from pyref.flink.writer.directory import ExportDirectory

    write_seeds(tmp_path / "seeds", windowed=True)
    target = tmp_path / "flink"
    if overwrite:
        export_savepoint(tmp_path / "seeds", target, flink_version="2.3", inline_bytes=0)
    real_commit = ExportDirectory.commit
    race = {"ran": False}

    def b_publishes_first(self, metadata, files):
        if not race["ran"]:
            race["ran"] = True
            race["b"] = export_savepoint(tmp_path / "seeds", target, flink_version="2.3", inline_bytes=0,
                                         overwrite=True)
            race["published"] = {name: (target / name).read_bytes() for name in os.listdir(target)
                                  if not name.startswith(self.file_prefix)}  # A's own files are not B's
        return real_commit(self, metadata, files)

    monkeypatch.setattr(ExportDirectory, "commit", b_publishes_first)
    with pytest.raises(ConcurrentWriteError, match="_metadata"):
        export_savepoint(tmp_path / "seeds", target, flink_version="2.3", inline_bytes=0, overwrite=overwrite)
    assert {name: (target / name).read_bytes() for name in os.listdir(target)} == race["published"]
    assert len(race["published"]) == race["b"].state_files + 1  # and its _metadata
    with FlinkSavepoint.open(target) as sp:
        assert dict(sp.operator("url-counter").keyed_state("count").items()) == SEED_COUNTS


def test_a_fifo_planted_as_metadata_before_the_commit_is_refused_not_waited_on(tmp_path):
    """The conditional commit compares what is there with what the export read: a FIFO put in
    place of _metadata meanwhile (reading it would block forever) is refused as not a regular
    file, and nothing is published over it."""
    from pyref.errors import CorruptSavepointError
    from pyref.flink.writer.directory import ExportDirectory

    target = tmp_path / "flink"
    directory = ExportDirectory(str(target))
    os.mkfifo(target / "_metadata")
    with pytest.raises(CorruptSavepointError, match="not a regular file"):
        directory.commit(b"never published", {})
    assert (target / "_metadata").is_fifo()


def test_a_metadata_write_that_landed_but_reported_failure_counts_as_published(tmp_path, monkeypatch):
    """An object store's PUT can land while its answer is lost: the export must see its own
    _metadata there and keep the state files it names, not abort and delete them."""
    from pyref.errors import StorageError
    from pyref.storage import LocalIO

    write_seeds(tmp_path / "seeds", windowed=True)
    real = LocalIO.replace_file

    def lands_then_fails(self, rel, data):
        real(self, rel, data)
        raise StorageError("the answer was lost", path=rel)

    monkeypatch.setattr(LocalIO, "replace_file", lands_then_fails)
    result = export_savepoint(tmp_path / "seeds", tmp_path / "flink", flink_version="2.3", inline_bytes=0)
    assert result.state_files > 0
    with FlinkSavepoint.open(tmp_path / "flink") as sp:
        assert all(list(op.keyed_state(name).items()) for op in sp.operators for name in op.keyed_state_names)


def test_metadata_is_published_last_and_atomically(tmp_path, monkeypatch):
    """A failure writing _metadata (the rename that publishes it) removes every state file; a
    successful overwrite then replaces the old savepoint and deletes its files."""
    write_seeds(tmp_path / "seeds", windowed=True)
    export_savepoint(tmp_path / "seeds", tmp_path / "flink", flink_version="2.3", inline_bytes=0)
    old = set(os.listdir(tmp_path / "flink"))
    real_replace = os.replace

    def broken_replace(src, dst):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError):
        export_savepoint(tmp_path / "seeds", tmp_path / "flink", flink_version="2.3", inline_bytes=0, overwrite=True)
    assert set(os.listdir(tmp_path / "flink")) == old
    monkeypatch.setattr(os, "replace", real_replace)
    export_savepoint(tmp_path / "seeds", tmp_path / "flink", flink_version="2.3", inline_bytes=0, overwrite=True)
    new = set(os.listdir(tmp_path / "flink"))
    assert new & old == {"_metadata"} and len(new) == len(old)
    with FlinkSavepoint.open(tmp_path / "flink") as sp:
        assert dict(sp.operator("url-counter").keyed_state("count").items()) == SEED_COUNTS


def test_a_pyref_savepoint_is_not_a_target(tmp_path):
    write_seeds(tmp_path / "seeds")
    with pytest.raises(InvalidArgumentError, match="holds a pyref savepoint"):
        export_savepoint(tmp_path / "seeds", tmp_path / "seeds", flink_version="2.3")


# -- command line -----------------------------------------------------------------------------


def test_cli_export_flink(tmp_path, capsys):
    write_seeds(tmp_path / "seeds", windowed=True)
    assert cli(["export-flink", str(tmp_path / "seeds"), str(tmp_path / "f"), "--flink-version", "1.20", "-p", "4",
                "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["metadata_version"] == 4 and {op["parallelism"] for op in report["operators"]} == {4}
    assert cli(["export-flink", str(tmp_path / "seeds"), str(tmp_path / "g"), "--flink-version", "2.3",
                "--operator", "url-counter=3", "--only", "url-counter", "--only", "kafka-source"]) == 0
    out = capsys.readouterr().out
    assert "operator url-counter (uid url-counter) -> Flink operator f4f9c0eefd93440b1548190a4f48df5e: parallelism 3" \
        in out and "kafka-source" in out and "window-counter" not in out
    assert cli(["export-flink", str(tmp_path / "seeds"), str(tmp_path / "f"), "--flink-version", "1.20",
                "--json"]) == 2
    assert "already exists" in json.loads(capsys.readouterr().out)["error"]
    # -p 0 is refused, not taken as "no -p" (the savepoint's own parallelism)
    assert cli(["export-flink", str(tmp_path / "seeds"), str(tmp_path / "zero"), "--flink-version", "2.3",
                "-p", "0", "--json"]) == 2
    assert "parallelism must be a whole number >= 1" in json.loads(capsys.readouterr().out)["error"]
    assert not (tmp_path / "zero").exists()
    with SavepointWriter(str(tmp_path / "json")) as w:
        keyed(Json(), [1])(w)
    assert cli(["export-flink", str(tmp_path / "json"), str(tmp_path / "h"), "--flink-version", "2.3", "--json"]) == 5


def test_ttl_state_exports_its_timestamps(tmp_path):
    with SavepointWriter(str(tmp_path / "sp")) as w:
        op = w.add_operator("op", parallelism=1, key_serializer=String())
        op.keyed_state("v", Int64(), ttl=TtlConfig(1000)).add(["a", "b"], [1, 2], ttl_timestamps=[10, 20])
        op.keyed_state("m", String(), kind="map", user_key_serializer=Int32(), ttl=TtlConfig(1000)).add(
            ["a", "a"], ["x", "y"], [1, 2], ttl_timestamps=[5, 6])
    export_savepoint(tmp_path / "sp", tmp_path / "flink", flink_version="2.3")
    with FlinkSavepoint.open(tmp_path / "flink", uids=["op"]) as sp:
        op = sp.operator("op")
        assert sorted((k, tuple(v)) for k, v in op.keyed_state("v").items(with_ttl=True)) == [("a", (10, 1)),
                                                                                               ("b", (20, 2))]
        assert sorted((k, u, tuple(v)) for k, u, v in op.keyed_state("m").items(with_ttl=True)) == [
            ("a", 1, (5, "x")), ("a", 2, (6, "y"))]
        assert struct.unpack(">q", op.keyed_state("v").to_arrow(raw=True).column("value")[0].as_py()[:8])[0] in (10, 20)


def test_forbidden_bytes_of_fixed_width_fields_are_refused_at_any_tuple_depth():
    """A boolean byte above 1 or an enum ordinal outside its symbols is corrupt in a top-level
    value and in a tuple nested in a tuple alike: the whole-column transcoder checks every
    leaf field at its own bytes, not only the top-level fields."""
    nested = Tuple(Int32(), Tuple(Boolean(), Enum(["RED", "GREEN"])))
    # Flink's EnumSerializer names a Java class, which only an imported snapshot carries.
    target = flink_serializer(Tuple(Int32(), Tuple(Boolean(), Int32())).snapshot(), "test").type
    inner = target.children[1]
    enum = dataclasses.replace(inner.children[1], kind="enum", type_name="Color", symbols=("RED", "GREEN"))
    target = dataclasses.replace(target, children=(target.children[0],
                                                   dataclasses.replace(inner, children=(inner.children[0], enum))))
    transcode = transcoder(nested, target, "test")
    good = column_of(nested, [(7, (True, "GREEN")), (-1, (False, "RED"))])
    assert decode_column(target, transcode(good)) == [(7, (True, "GREEN")), (-1, (False, "RED"))]
    boolean_byte = nested.encode((7, (True, "RED")))[:4] + b"\x02" + b"\x00" * 4
    ordinal = nested.encode((7, (True, "RED")))[:5] + (5).to_bytes(4, "little")
    for bad, reason in [(boolean_byte, "boolean value byte above 1"), (ordinal, "enum ordinal outside its 2")]:
        with pytest.raises(CorruptSavepointError, match=reason) as info:
            transcode(pa.array([nested.encode((1, (False, "RED"))), bad], pa.binary()))
        assert info.value.state == "test"
    with pytest.raises(CorruptSavepointError, match="boolean value byte above 1"):
        transcoder(Boolean(), flink_serializer(Boolean().snapshot(), "test").type, "test")(pa.array([b"\x03"]))


def test_writer_assigned_key_groups_flink_would_not_find_are_refused(tmp_path):
    """Writer-assigned key groups (spec/format.md §7.12) of keys Flink hashes itself (a String):
    one the hash does not give would be restored where Flink never looks the key up."""
    def build(w, key_group):
        w.add_operator("op", parallelism=1, max_parallelism=8, key_serializer=String(),
                       key_groups="writer").keyed_state("s", Int64()).add(["a"], [1], key_groups=[key_group])
    hashed = assign_to_key_group("a", 8, "string")
    for key_group, fits in ((hashed, True), ((hashed + 1) % 8, False)):
        case = tmp_path / f"kg-{key_group}"
        with SavepointWriter(str(case / "sp")) as w:
            build(w, key_group)
        if fits:
            export_savepoint(case / "sp", case / "flink", flink_version="2.3")
            continue
        with pytest.raises(UnsupportedFormatError, match=f"Flink hashes it to key group {hashed}") as caught:
            export_savepoint(case / "sp", case / "flink", flink_version="2.3")
        assert caught.value.state == "op/s" and not (case / "flink").exists()
