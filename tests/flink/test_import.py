"""Importing Flink savepoints made by hand (pyref.testing.flink_bytes): the type mapping
and its engine snapshots, whole-column transcoding against cell-by-cell transcoding,
places the data replans (a null String, a lone surrogate, a POJO subclass), key-group
checks, batches, naming, the refusals and the atomic commit."""

from __future__ import annotations

import pathlib
import struct

import numpy as np
import pyarrow as pa
import pytest
from pyref.testing.flink_bytes import (
    LONG,
    P,
    STRING,
    TIME_WINDOW,
    enum_snapshot,
    i32,
    i64,
    inline_handle,
    key_group_section,
    keyed_proxy,
    keyed_state_meta,
    keyed_stream,
    list_snapshot,
    map_snapshot,
    metadata,
    operator,
    pojo_snapshot,
    relative_handle,
    savepoint_keyed_handle,
    snapshot,
    string_value,
    subtask,
    ttl_snapshot,
    tuple_snapshot,
    utf,
)

from compat_tests.canonical import canonical_text, dump_savepoint
from pyref import Savepoint, SavepointWriter, TtlConfig
from pyref.errors import CorruptSavepointError, InvalidArgumentError, UnsupportedFormatError
from pyref.flink import operator_id_of_uid
from pyref.flink.datainput import DataInput
from pyref.flink.from_flink import Demotion, map_type
from pyref.flink.importer import import_flink
from pyref.flink.serializers import read_versioned_snapshot
from pyref.flink.spans import Spans
from pyref.key_groups import assign_to_key_group
from pyref.serializers import Int64

KRYO = "org.apache.flink.api.java.typeutils.runtime.kryo.KryoSerializerSnapshot"
POJO_CLASS = "org.example.Page"
MAX_P = 128


def _type(snap: bytes):
    return read_versioned_snapshot(DataInput(snap), lambda inp: inp.at_end())


def _kryo(type_class: str = "org.example.Blob") -> bytes:
    return snapshot(KRYO, 2, utf(type_class) + i32(0) + i32(0) + i32(0))


def _pojo() -> bytes:
    return pojo_snapshot(POJO_CLASS, [("url", snapshot(STRING)), ("views", snapshot(LONG))])


def _pojo_value(url: str | None, views: int | None) -> bytes:
    out = b"\x02"
    out += b"\x01" if url is None else b"\x00" + string_value(url)
    out += b"\x01" if views is None else b"\x00" + i64(views)
    return out


def _column(cells: list[bytes]) -> Spans:
    return Spans.of(pa.array(cells, pa.binary()))


# -- the type mapping ---------------------------------------------------------------------


@pytest.mark.parametrize("snap, label", [
    (snapshot(LONG), "int64"),
    (snapshot(STRING), "string"),
    (snapshot(P + "ShortSerializer$ShortSerializerSnapshot"), "int16"),
    (snapshot(P + "CharSerializer$CharSerializerSnapshot"), "char"),
    (snapshot("org.apache.flink.api.common.typeutils.base.array.LongPrimitiveArraySerializer$"
              "LongPrimitiveArraySerializerSnapshot"), "list<int64>"),
    (tuple_snapshot([snapshot(STRING), snapshot(LONG)]), "tuple<string,int64>"),
    (list_snapshot(snapshot(STRING)), "list<string>"),
    (map_snapshot(snapshot(STRING), snapshot(LONG)), "map<string,nullable<int64>>"),
    (map_snapshot(snapshot(P + "DoubleSerializer$DoubleSerializerSnapshot"), snapshot(LONG)), "opaque"),
    (_pojo(), "nullable<tuple<nullable<string>,nullable<int64>>>"),
    (enum_snapshot("org.example.Color", ["RED", "GREEN"]), "enum"),
    (snapshot(TIME_WINDOW), "time-window"),
    (_kryo(), "opaque"),
    (snapshot(P + "BigIntSerializer$BigIntSerializerSnapshot"), "opaque"),
    (tuple_snapshot([snapshot(LONG), _kryo()]), "opaque"),
])
def test_mapping_keeps_flinks_snapshot_bytes(snap: bytes, label: str) -> None:
    flink = _type(snap)
    serializer = map_type(flink).serializer
    snapshot_ = serializer.snapshot()

    def labelled(s) -> str:
        return s.serializer_id + (f"<{','.join(labelled(c) for c in s.nested)}>" if s.nested else "")

    assert labelled(snapshot_) == label
    # Flink's exact snapshot, to be written back by an exporter byte for byte (spec/serializers.md §2.4).
    assert (snapshot_.engine.engine, snapshot_.engine.class_name, snapshot_.engine.snapshot) == (
        "flink", flink.class_name, snap)
    assert serializer == map_type(flink).serializer and serializer == type(serializer).from_snapshot(snapshot_)


# -- transcoding --------------------------------------------------------------------------


STRINGS = ["", "a", "plain ascii", "x" * 127, "y" * 128, "z" * 20000, "é", "naïve", "日本語", "emoji-\U0001F600",
           "nul\x00inside", "\x7f"]


def test_strings_transcode_whole_and_cell_by_cell_alike() -> None:
    mapped = map_type(_type(snapshot(STRING)))
    cells = _column([string_value(s) for s in STRINGS])
    whole = mapped.column(cells, "s")
    assert whole.to_pylist() == [s.encode("utf-8") for s in STRINGS]
    assert mapped.cells(cells, np.arange(len(STRINGS)), "s").equals(whole)


def test_fixed_width_values_and_tuples_are_byte_swapped() -> None:
    cases = [(snapshot(LONG), [i64(v) for v in (0, -1, 2**63 - 1)], [0, -1, 2**63 - 1]),
             (snapshot(P + "DoubleSerializer$DoubleSerializerSnapshot"),
              [struct.pack(">d", v) for v in (0.5, -0.0)], [0.5, -0.0]),
             (snapshot(P + "BooleanSerializer$BooleanSerializerSnapshot"), [b"\x00", b"\x01"], [False, True]),
             (tuple_snapshot([snapshot(LONG), snapshot(P + "IntSerializer$IntSerializerSnapshot")]),
              [i64(7) + i32(-8)], [(7, -8)]),
             (snapshot(TIME_WINDOW), [i64(10) + i64(20)], [(10, 20)])]
    for snap, cells, values in cases:
        mapped = map_type(_type(snap))
        out = mapped.column(_column(cells), "s")
        assert [mapped.serializer.decode(b) for b in out.to_pylist()] == values
        assert mapped.cells(_column(cells), np.arange(len(cells)), "s").equals(out)


@pytest.mark.parametrize("snap, cell, problem", [
    (snapshot(P + "BooleanSerializer$BooleanSerializerSnapshot"), b"\x02", "boolean byte"),
    (enum_snapshot("org.example.Color", ["RED"]), i32(3), "ordinal 3"),
    (snapshot(LONG), b"\x00" * 7, "7 bytes"),
    (snapshot(STRING), b"\x05ab", "truncated"),
    # Found by fuzzing: a last char cut after its first varint byte passed as ASCII, so the
    # import wrote bytes that are not UTF-8.
    (snapshot(STRING), b"\x03a\xc3", "truncated"),
    (snapshot(STRING), b"\x02\x80", "truncated"),
])
def test_corrupt_cells_are_typed_errors(snap: bytes, cell: bytes, problem: str) -> None:
    with pytest.raises(CorruptSavepointError, match=problem):
        map_type(_type(snap)).column(_column([cell]), "op/state")


def test_the_data_decides_nullable_and_opaque_places() -> None:
    strings = _type(list_snapshot(snapshot(STRING)))
    with_null = i32(2) + string_value("a") + string_value(None)
    with pytest.raises(Demotion) as caught:
        map_type(strings).column(_column([with_null]), "s")
    assert caught.value.kind == "nullable"
    nullable = map_type(strings, nullable_strings=True)
    assert nullable.serializer.decode(nullable.column(_column([with_null]), "s")[0].as_py()) == ["a", None]
    lone = bytes([2, 0x80, 0xB0, 0x03])  # one UTF-16 unit, 0xD800: a lone surrogate
    with pytest.raises(Demotion, match="surrogate") as caught:
        map_type(_type(snapshot(STRING))).column(_column([lone]), "s")
    assert caught.value.kind == "opaque"
    pojo = map_type(_type(_pojo()))
    with pytest.raises(Demotion, match="subclass") as caught:
        pojo.column(_column([b"\x04" + utf("org.example.SubPage")]), "s")
    assert caught.value.kind == "opaque"
    values = pojo.column(_column([_pojo_value("/a", 3), b"\x01", _pojo_value(None, 5)]), "s").to_pylist()
    assert [pojo.serializer.decode(v) for v in values] == [("/a", 3), None, (None, 5)]
    opaque = map_type(_type(snapshot(STRING)), opaque=True)
    assert opaque.column(_column([lone]), "s").to_pylist() == [lone]


# -- a savepoint made by hand ---------------------------------------------------------------


def _key(kg: int, key: str) -> bytes:
    """A composite key: key group, key, the void namespace."""
    return bytes([kg]) + string_value(key) + b"\x00"


def _write(path: pathlib.Path, states: list[tuple[bytes, callable]], *, keys=("a", "b", "c", "d", "e"),
           wrong_group: str | None = None, parallelism: int = 2, properties: bytes | None = None) -> pathlib.Path:
    """One keyed operator ``proc`` (String keys, key groups by Flink's hash unless
    ``wrong_group``) with ``states``: (meta info, key -> [(user key or b"", value)])."""
    path.mkdir(parents=True)
    groups = {k: (assign_to_key_group(k, MAX_P, "string") + (k == wrong_group)) % MAX_P for k in keys}
    subtasks = []
    for index in range(parallelism):
        first, last = index * MAX_P // parallelism, (index + 1) * MAX_P // parallelism - 1
        sections = {}
        for kg in range(first, last + 1):
            runs = []
            for state_id, (_, rows) in enumerate(states):
                pairs = [(_key(kg, k) + tail, value) for k in sorted(keys) if groups[k] == kg for tail, value in rows(k)]
                if pairs:
                    runs.append((state_id, pairs))
            if runs:
                sections[kg] = key_group_section(runs)
        stream, offsets = keyed_stream(keyed_proxy(snapshot(STRING), [m for m, _ in states]), sections)
        (path / f"keyed-{index}").write_bytes(stream)
        handle = savepoint_keyed_handle(first, [offsets.get(kg, 0) for kg in range(first, last + 1)],
                                        relative_handle(f"keyed-{index}", len(stream)))
        subtasks.append(subtask(index, None, handle))
    op = operator(bytes.fromhex(operator_id_of_uid("proc")), parallelism, MAX_P, subtasks)
    (path / "_metadata").write_bytes(metadata([op], **({"properties": properties} if properties else {})))
    return path


def _counts(k: str) -> list[tuple[bytes, bytes]]:
    return [(b"", i64(sum(map(ord, k))))]


COUNT = (keyed_state_meta("count", "VALUE", snapshot(LONG)), _counts)


def test_import_names_operators_and_records_their_ids(tmp_path) -> None:
    source = _write(tmp_path / "flink", [COUNT])
    hex_id = operator_id_of_uid("proc")
    report = import_flink(source, tmp_path / "a")
    assert report.format_version == "1.0"  # nothing of format 1.2 used (uid and ids are informative): the old label
    unnamed = Savepoint.open(report.target).operators[0]
    assert (unnamed.operator_id, unnamed.uid, unnamed.engine_operator_id.hex()) == (hex_id, "", hex_id)
    by_uid = Savepoint.open(import_flink(source, tmp_path / "b", uids=["proc"]).target).operators[0]
    assert (by_uid.operator_id, by_uid.uid) == ("proc", "proc")
    renamed = Savepoint.open(import_flink(source, tmp_path / "c", uids={hex_id: "counter"}).target).operators[0]
    assert (renamed.operator_id, renamed.uid, renamed.engine_operator_id.hex()) == ("counter", "", hex_id)
    counts = renamed.keyed_state("count")
    assert dict(counts.items()) == {k: ord(k) for k in "abcde"}
    assert not renamed.writer_assigned_key_groups and counts.get("c") == ord("c")  # hashed: a point lookup


def test_a_key_in_the_wrong_key_group_is_refused(tmp_path) -> None:
    source = _write(tmp_path / "flink", [COUNT], wrong_group="c")
    with pytest.raises(CorruptSavepointError, match="'c' is stored in key group"):
        import_flink(source, tmp_path / "sp")
    assert not (tmp_path / "sp" / "_manifest").exists()


def test_batches_of_key_groups_write_the_same_savepoint(tmp_path) -> None:
    keys = [f"key-{i}" for i in range(300)]
    source = _write(tmp_path / "flink", [COUNT, (keyed_state_meta("seen", "LIST", list_snapshot(snapshot(STRING))),
                                                 lambda k: [(b"", b",".join(string_value(f"{k}/{j}") for j in range(3)))])],
                    keys=keys)
    whole = import_flink(source, tmp_path / "whole")
    small = import_flink(source, tmp_path / "small", batch_bytes=200)
    assert whole.rows == small.rows == 600
    dumps = [canonical_text(dump_savepoint(p, [1, 3], canonical_version=2)) for p in (whole.target, small.target)]
    assert dumps[0] == dumps[1]


def test_places_the_data_replans_are_found_in_one_pass(tmp_path) -> None:
    names = (keyed_state_meta("names", "VALUE", list_snapshot(snapshot(STRING))),
             lambda k: [(b"", i32(2) + string_value(k) + string_value(None if k == "d" else k * 2))])
    tags = (keyed_state_meta("tags", "MAP", map_snapshot(snapshot(STRING), snapshot(LONG))),
            lambda k: [(string_value("t"), b"\x01" if k == "b" else b"\x00" + i64(1))])
    source = _write(tmp_path / "flink", [COUNT, names, tags])
    report = import_flink(source, tmp_path / "sp", uids=["proc"], inline_bytes=0)  # every chunk in a file
    assert report.attempts == 2  # both places in one pass, then the import
    assert sorted(report.demotions) == ["proc/names:value -> nullable", "proc/tags:map_null -> nullable"]
    op = Savepoint.open(tmp_path / "sp").operators[0]
    assert op.keyed_state("names").get("d") == ["d", None] and op.keyed_state("names").get("a") == ["a", "aa"]
    assert op.keyed_state("tags").get("b") == {"t": None} and op.keyed_state("tags").get("c") == {"t": 1}
    # The first attempt's files went with it.
    assert sorted(f"data/{p.name}" for p in (tmp_path / "sp" / "data").iterdir()) == sorted(
        f.path for f in Savepoint.open(tmp_path / "sp").manifest.data_files)


def test_ttl_state_needs_a_configuration(tmp_path) -> None:
    meta = keyed_state_meta("last", "VALUE", ttl_snapshot(snapshot(STRING)))
    source = _write(tmp_path / "flink", [COUNT, (meta, lambda k: [(b"", i64(1000 + ord(k)) + string_value(k))])])
    with pytest.raises(InvalidArgumentError, match="proc/last"):
        import_flink(source, tmp_path / "sp", uids=["proc"])
    with pytest.raises(InvalidArgumentError, match="names no state under TTL: proc/nope"):
        import_flink(source, tmp_path / "sp", uids=["proc"], ttl={"proc/nope": TtlConfig(5)},
                     ttl_default=TtlConfig(5))
    import_flink(source, tmp_path / "sp", uids=["proc"], ttl={"proc/last": TtlConfig(60_000, "on_read_and_write")})
    last = Savepoint.open(tmp_path / "sp").operators[0].keyed_state("last")
    assert last.ttl == TtlConfig(60_000, "on_read_and_write")
    assert last.get("b", with_ttl=True) == ("b", 1000 + ord("b"))


def test_unsplittable_list_state_is_refused_unless_skipped(tmp_path) -> None:
    meta = keyed_state_meta("blobs", "LIST", list_snapshot(_kryo()))
    source = _write(tmp_path / "flink", [COUNT, (meta, lambda k: [(b"", b"\x01\x02,\x03")])])
    with pytest.raises(UnsupportedFormatError, match="blobs.*without lengths"):
        import_flink(source, tmp_path / "sp", uids=["proc"])
    report = import_flink(source, tmp_path / "sp", uids=["proc"], skip_states=["proc/blobs"])
    assert report.operators[0]["skipped"] == ["blobs"]
    assert Savepoint.open(tmp_path / "sp").operators[0].keyed_state_names == ["count"]


def test_whole_opaque_cells_keep_flinks_bytes(tmp_path) -> None:
    meta = keyed_state_meta("blob", "VALUE", tuple_snapshot([_kryo(), snapshot(LONG)]))
    source = _write(tmp_path / "flink", [(meta, lambda k: [(b"", k.encode() * 3 + i64(1))])])
    import_flink(source, tmp_path / "sp")
    blob = Savepoint.open(tmp_path / "sp").operators[0].keyed_state("blob")
    assert blob.value_serializer.serializer_id == "opaque" and blob.get("e") == b"eee" + i64(1)


def test_raw_keyed_state_is_refused(tmp_path) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    stream = b"opaque timers"
    raw_handle = savepoint_keyed_handle(0, [0] * MAX_P, inline_handle(stream))
    (raw / "_metadata").write_bytes(metadata([operator(bytes(16), 1, MAX_P, [subtask(0, None, None, raw_handle)])]))
    with pytest.raises(UnsupportedFormatError, match="raw"):
        import_flink(raw, tmp_path / "sp")


def test_a_failed_import_leaves_the_previous_savepoint(tmp_path) -> None:
    target = tmp_path / "sp"
    with SavepointWriter(str(target)) as w:
        w.add_operator("old", 1).list_state("offsets", Int64()).add(0, [1, 2])
    before = sorted(p.name for p in (target / "data").iterdir()) if (target / "data").exists() else []
    source = _write(tmp_path / "flink", [(keyed_state_meta("count", "VALUE", snapshot(LONG)),
                                          lambda k: [(b"", i64(1) if k != "e" else b"\x00" * 5)])])
    with pytest.raises(CorruptSavepointError, match="5 bytes"):
        import_flink(source, target, overwrite=True)
    assert [op.operator_id for op in Savepoint.open(target).operators] == ["old"]
    after = sorted(p.name for p in (target / "data").iterdir()) if (target / "data").exists() else []
    assert after == before
