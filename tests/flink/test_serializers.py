"""Serializer snapshots parsed into types, and values decoded with them."""

from __future__ import annotations

import decimal
import struct

import pyarrow as pa
import pytest
from pyref.testing.flink_bytes import (
    INT,
    LONG,
    STRING,
    TIME_WINDOW,
    VOID_NS,
    composite,
    enum_snapshot,
    i32,
    i64,
    keyed_state_meta,
    list_snapshot,
    map_snapshot,
    meta_info,
    pojo_snapshot,
    proxied,
    snapshot,
    string_value,
    timer_snapshot,
    ttl_snapshot,
    tuple_snapshot,
    utf,
)

from pyref.errors import CorruptSavepointError
from pyref.flink.datainput import DataInput
from pyref.flink.meta_info import BACKEND_STATE_TYPES, looks_like_meta_info, read_meta_info, unreadable_async_state
from pyref.flink.serializers import (
    MAX_SNAPSHOT_DEPTH,
    at_position,
    looks_like_versioned_snapshot,
    read_serializer_snapshot,
)
from pyref.flink.values import (
    TimeWindow,
    Timer,
    TtlValue,
    codec_for,
    decode_cell,
    decode_column,
)


def parse(data: bytes, follow=None):
    inp = DataInput(proxied(data))
    result = read_serializer_snapshot(inp, follow or at_position(len(proxied(data))))
    assert inp.at_end()
    return result


def test_simple_types_and_lengths() -> None:
    assert (parse(snapshot(LONG)).kind, parse(snapshot(LONG)).length) == ("int64", 8)
    assert (parse(snapshot(STRING)).kind, parse(snapshot(STRING)).length) == ("string", -1)
    # VoidNamespace reports length 0 although it writes one byte: fixed for key composition.
    assert parse(snapshot(VOID_NS)).length == 0
    assert parse(snapshot(TIME_WINDOW)).length == 16


def test_composites_keep_exact_snapshot_bytes() -> None:
    data = tuple_snapshot([snapshot(LONG), snapshot(STRING)])
    t = parse(data)
    assert t.describe() == "tuple<int64,string>" and t.type_name == "org.apache.flink.api.java.tuple.Tuple2"
    assert t.snapshot == data and t.length == -1
    assert parse(tuple_snapshot([snapshot(LONG), snapshot(INT)])).length == 12
    assert parse(map_snapshot(snapshot(STRING), list_snapshot(snapshot(LONG)))).describe() == "map<string,list<int64>>"
    assert parse(ttl_snapshot(snapshot(LONG))).length == 16
    assert parse(timer_snapshot(snapshot(STRING), snapshot(TIME_WINDOW))).describe() == "timer<string,time-window>"


def test_pojo_enum_nullable_row() -> None:
    pojo = parse(pojo_snapshot("org.x.Event", [("id", snapshot(LONG)), ("name", snapshot(STRING))]))
    assert (pojo.kind, pojo.type_name, pojo.field_names) == ("pojo", "org.x.Event", ("id", "name"))
    color = parse(enum_snapshot("org.x.Color", ["RED", "GREEN"]))
    assert (color.symbols, color.length) == (("RED", "GREEN"), 4)
    nullable = parse(composite("org.apache.flink.api.java.typeutils.runtime.NullableSerializer$NullableSerializerSnapshot",
                               [snapshot(LONG)], i32(8), 2))
    assert (nullable.padding, nullable.length) == (8, 9)
    row = parse(composite("org.apache.flink.api.java.typeutils.runtime.RowSerializer$RowSerializerSnapshot",
                          [snapshot(LONG), snapshot(STRING)], b"\x01", 4))
    assert row.row_kind and row.describe() == "row<int64,string>"


def test_unknown_snapshot_is_kept_opaque_and_delimited_by_what_follows() -> None:
    # A user's snapshot with an unparseable body, nested in a tuple and followed by a Long.
    user = snapshot("com.acme.MySerializer$Snap", 5, b"\x00\x13\x00\x07whatever-bytes")
    data = tuple_snapshot([user, snapshot(LONG)])
    t = parse(data)
    assert t.children[0].kind == "opaque" and t.children[0].snapshot == user
    assert t.children[1].kind == "int64"


def test_kryo_with_java_serialized_registration_is_resynchronised() -> None:
    kryo = "org.apache.flink.api.java.typeutils.runtime.kryo.KryoSerializerSnapshot"
    body = utf("org.x.Blob") + i32(1) + utf("org.x.Blob") + utf("org.x.Blob") + i32(2) + b"\xac\xed\x00\x05junk"
    body += i32(0) + i32(0)
    t = parse(snapshot(kryo, 2, body))
    assert (t.kind, t.type_name) == ("kryo", "org.x.Blob")
    plain = parse(snapshot(kryo, 2, utf("org.x.Blob") + i32(0) + i32(0) + i32(0)))
    assert plain.kind == "kryo" and plain.is_opaque


def test_bad_snapshots() -> None:
    with pytest.raises(CorruptSavepointError, match="proxy version"):
        read_serializer_snapshot(DataInput(i32(1) + snapshot(LONG)), at_position(0))
    with pytest.raises(CorruptSavepointError, match="not a Java class name"):
        parse(snapshot("not a class!"))
    with pytest.raises(CorruptSavepointError, match="magic"):
        parse(snapshot(P_LIST, 3, i32(7) + i32(1)))
    # An opaque snapshot with nothing valid after it cannot be delimited.
    with pytest.raises(CorruptSavepointError, match="cannot find the end"):
        read_serializer_snapshot(DataInput(proxied(snapshot("com.acme.S", 1, b"zz"))), looks_like_versioned_snapshot)


@pytest.mark.parametrize("wrap", [list_snapshot, lambda s: map_snapshot(snapshot(STRING), s),
                                  lambda s: pojo_snapshot("a.P", [("f", s)])], ids=["list", "map", "pojo"])
def test_snapshot_nesting_is_bounded(wrap) -> None:
    """Fuzzing found it: snapshots nested a few hundred deep raised RecursionError
    (and kept a copy of the bytes per level: quadratic memory)."""
    deepest = snapshot(LONG)
    for _ in range(MAX_SNAPSHOT_DEPTH - 1):
        deepest = wrap(deepest)
    assert parse(deepest).kind in ("list", "map", "pojo")
    for levels in (1, 2000):
        too_deep = deepest
        for _ in range(levels):
            too_deep = wrap(too_deep)
        with pytest.raises(CorruptSavepointError, match=f"nested more than {MAX_SNAPSHOT_DEPTH} levels"):
            parse(too_deep)


def test_probes_for_what_follows_an_opaque_snapshot_decode_no_strings(monkeypatch) -> None:
    """Found by fuzzing: the search for an opaque snapshot's end decoded, at every position,
    the string whose length it found there (up to 64 KiB): quadratic, seconds per read of
    60 KB of _metadata."""
    import pyref.flink.datainput as datainput

    monkeypatch.setattr(datainput, "decode_modified_utf8", lambda raw: pytest.fail("a probe decoded a string"))
    assert looks_like_meta_info(DataInput(keyed_state_meta("\u00e9" * 20000, "VALUE", snapshot(LONG))))
    assert not looks_like_meta_info(DataInput(utf("s") + i32(0) + i32(1) + utf("K" * 60000)))
    assert not looks_like_versioned_snapshot(DataInput(utf("\u00e9" * 500) + i32(1)))


P_LIST = "org.apache.flink.api.common.typeutils.base.ListSerializerSnapshot"


def _value(type_bytes: bytes, data: bytes):
    return decode_cell(codec_for(parse(type_bytes)), data)


def test_value_decoding() -> None:
    assert _value(snapshot(LONG), i64(-5)) == -5
    assert _value(snapshot(STRING), string_value("héllo")) == "héllo"
    assert _value(tuple_snapshot([snapshot(LONG), snapshot(STRING)]), i64(1) + string_value("a")) == (1, "a")
    pojo = pojo_snapshot("org.x.E", [("id", snapshot(LONG)), ("name", snapshot(STRING))])
    assert _value(pojo, b"\x02" + b"\x00" + i64(3) + b"\x01") == {"id": 3, "name": None}
    assert _value(pojo, b"\x01") is None
    assert _value(list_snapshot(snapshot(LONG)), i32(2) + i64(1) + i64(2)) == [1, 2]
    assert _value(map_snapshot(snapshot(STRING), snapshot(LONG)),
                  i32(2) + string_value("a") + b"\x00" + i64(1) + string_value("b") + b"\x01") == {"a": 1, "b": None}
    assert _value(enum_snapshot("org.x.C", ["RED", "GREEN"]), i32(1)) == "GREEN"
    assert _value(snapshot(TIME_WINDOW), i64(0) + i64(1000)) == TimeWindow(0, 1000)
    assert _value(ttl_snapshot(snapshot(LONG)), i64(99) + i64(7)) == TtlValue(99, 7)
    stored = (5 + 2**63) - 2**64  # 5 with its sign bit flipped, as a signed long
    assert _value(timer_snapshot(snapshot(STRING), snapshot(VOID_NS)),
                  i64(stored) + string_value("k") + b"\x00") == Timer(5, "k", None)
    bigdec = "org.apache.flink.api.common.typeutils.base.BigDecSerializer$BigDecSerializerSnapshot"
    assert _value(snapshot(bigdec), i32(4 + 2) + (1234).to_bytes(2, "big") + i32(2)) == decimal.Decimal("12.34")
    row = composite("org.apache.flink.api.java.typeutils.runtime.RowSerializer$RowSerializerSnapshot",
                    [snapshot(LONG), snapshot(STRING)], b"\x01", 4)
    # Mask bits: 2 for the row kind, then one null flag per field (field 1 null).
    assert _value(row, bytes([0b00010000]) + i64(4)) == ("+I", (4, None))
    assert _value(row, bytes([0b11000000]) + i64(4) + string_value("x")) == ("-D", (4, "x"))


def test_opaque_values_stay_bytes_and_cells_must_be_consumed() -> None:
    kryo = snapshot("org.apache.flink.api.java.typeutils.runtime.kryo.KryoSerializerSnapshot", 2,
                    utf("org.x.Blob") + i32(0) + i32(0) + i32(0))
    assert _value(kryo, b"\x01\x02\x03") == b"\x01\x02\x03"
    with pytest.raises(CorruptSavepointError, match="left after"):
        _value(snapshot(LONG), i64(1) + b"\x00")


def test_column_fast_paths_equal_the_per_value_path() -> None:
    strings = ["a", "", None, "xyz" * 40, "é"]
    column = pa.array([string_value(s) for s in strings], pa.binary())
    assert decode_column(parse(snapshot(STRING)), column) == strings
    ascii_only = pa.array([string_value(s) for s in strings[:4]], pa.binary())
    assert decode_column(parse(snapshot(STRING)), ascii_only) == strings[:4]
    longs = pa.array([i64(v) for v in (0, -1, 2**62)], pa.binary())
    assert decode_column(parse(snapshot(LONG)), longs) == [0, -1, 2**62]
    ttl = pa.array([i64(9) + i64(v) for v in (1, 2)], pa.binary())
    assert decode_column(parse(ttl_snapshot(snapshot(LONG))), ttl) == [TtlValue(9, 1), TtlValue(9, 2)]
    floats = pa.array([struct.pack(">d", v) for v in (1.5, -0.0)], pa.binary())
    assert decode_column(parse(snapshot("org.apache.flink.api.common.typeutils.base.DoubleSerializer$"
                                        "DoubleSerializerSnapshot")), floats) == [1.5, -0.0]


def test_invalid_dates_and_extreme_decimals() -> None:
    local_date = "org.apache.flink.api.common.typeutils.base.LocalDateSerializer$LocalDateSerializerSnapshot"
    assert _value(snapshot(local_date), i32(2024) + bytes([2, 29])) == __import__("datetime").date(2024, 2, 29)
    with pytest.raises(CorruptSavepointError, match="invalid local-date"):
        _value(snapshot(local_date), i32(2024) + bytes([13, 1]))
    bigdec = "org.apache.flink.api.common.typeutils.base.BigDecSerializer$BigDecSerializerSnapshot"
    huge = _value(snapshot(bigdec), i32(4 + 1) + b"\x07" + i32(-(2**31)))
    assert huge == decimal.Decimal((0, (7,), 2**31))


def test_random_cells_decode_or_raise_typed_errors() -> None:
    import random

    from pyref.errors import SavepointError
    from pyref.flink.serializers import _SIMPLE

    rng = random.Random(3)
    types = [parse(snapshot(name)) for name in _SIMPLE]
    types += [parse(tuple_snapshot([snapshot(LONG), snapshot(STRING)])), parse(list_snapshot(snapshot(STRING))),
              parse(map_snapshot(snapshot(STRING), snapshot(LONG))), parse(enum_snapshot("org.x.C", ["A"])),
              parse(pojo_snapshot("org.x.E", [("id", snapshot(LONG)), ("name", snapshot(STRING))])),
              parse(composite("org.apache.flink.api.java.typeutils.runtime.RowSerializer$RowSerializerSnapshot",
                              [snapshot(LONG), snapshot(STRING)], b"\x01", 4))]
    for type_ in types:
        codec = codec_for(type_)
        for _ in range(200):
            cell = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 24)))
            try:
                decode_cell(codec, cell)
            except SavepointError:
                pass


#: Every backend type: what a single meta info is checked against here.
ALL_TYPES = frozenset(BACKEND_STATE_TYPES)


@pytest.mark.parametrize("user_key", [True, False], ids=["flink-2.1", "flink-2.0"])
def test_an_async_map_state_whose_values_are_maps_is_read_as_its_meta_info_says(user_key: bool) -> None:
    """KEY_VALUE_V2 names a MAP state's user value serializer: a value that is itself a Map is a
    MapSerializer, yet without USER_KEY_SERIALIZER (Flink 2.0) the user keys stay unreadable."""
    value = map_snapshot(snapshot(STRING), snapshot(LONG))
    serializers = {"NAMESPACE_SERIALIZER": snapshot(VOID_NS), "VALUE_SERIALIZER": value}
    if user_key:
        serializers["USER_KEY_SERIALIZER"] = snapshot(LONG)
    info = read_meta_info(DataInput(meta_info("m", 4, {"KEYED_STATE_TYPE": "MAP"}, serializers)), lambda inp: True,
                          ALL_TYPES, "states")
    if user_key:
        assert unreadable_async_state(info) is None
        state = info.serializers["VALUE_SERIALIZER"]
        assert state.kind == "map" and [c.kind for c in state.children] == ["int64", "map"]
    else:
        assert unreadable_async_state(info) is not None


@pytest.mark.parametrize("backend_type, options, serializers, error", [
    (3, {"KEYED_STATE_TYPE": "VALUE"}, {"VALUE_SERIALIZER": snapshot(LONG)}, "PRIORITY_QUEUE state 'm' has option"),
    (3, {}, {"NAMESPACE_SERIALIZER": snapshot(VOID_NS), "VALUE_SERIALIZER": snapshot(LONG)}, "unexpected serializer"),
    (0, {"OPERATOR_STATE_DISTRIBUTION_MODE": "SPLIT_DISTRIBUTE"},
     {"NAMESPACE_SERIALIZER": snapshot(VOID_NS), "VALUE_SERIALIZER": snapshot(LONG)}, "KEY_VALUE state 'm' has option"),
    (0, {"KEYED_STATE_TYPE": "MAP"}, {"NAMESPACE_SERIALIZER": snapshot(VOID_NS), "VALUE_SERIALIZER": snapshot(LONG),
                                      "USER_KEY_SERIALIZER": snapshot(LONG)}, "unexpected serializer"),
    (1, {"OPERATOR_STATE_DISTRIBUTION_MODE": "UNION"},
     {"KEY_SERIALIZER": snapshot(LONG), "VALUE_SERIALIZER": snapshot(LONG)}, "unexpected serializer"),
], ids=["queue-with-keyed-option", "queue-with-namespace", "keyed-with-operator-option", "classic-with-user-key",
        "operator-with-key"])
def test_a_meta_info_naming_what_another_backend_type_has_is_corrupt(
        backend_type: int, options: dict[str, str], serializers: dict[str, bytes], error: str) -> None:
    """A KEY_VALUE_V2 state whose backend type byte said PRIORITY_QUEUE read as timers (mutation found it)."""
    with pytest.raises(CorruptSavepointError, match=error):
        read_meta_info(DataInput(meta_info("m", backend_type, options, serializers)), lambda inp: True, ALL_TYPES,
                       "states")
