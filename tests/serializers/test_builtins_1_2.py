"""The built-in serializers of format 1.2 (spec/serializers.md §3.13-§3.20): exact
bytes, the byte patterns a reader must reject, snapshots, compatibility, Arrow paths."""

from __future__ import annotations

import enum
import struct

import numpy as np
import pyarrow as pa
import pytest

from pyref._proto.savepoint.v1 import serializer_pb2
from pyref.errors import CorruptSavepointError, InvalidArgumentError, UnsupportedFormatError
from pyref.serializers import (
    Char,
    Compatibility,
    Enum,
    Float32,
    GlobalWindow,
    Int8,
    Int16,
    Int64,
    ListOf,
    MapOf,
    Opaque,
    TimeWindow,
    Window,
    migrate_array,
    resolve_compatibility,
    serializer_from_snapshot,
)
from serializer_spec_tables import spec_hex_examples

COLORS = Enum(["RED", "GREEN", "BLUE"])
KRYO = Opaque("flink", "org.apache.flink.api.java.typeutils.runtime.kryo.KryoSerializerSnapshot", b"\x00\x05kryo")

# (section, serializer, value, hex): every example of the spec's tables.
EXAMPLES = [
    ("3.13", Int8(), 1, "01"),
    ("3.13", Int8(), -2, "fe"),
    ("3.14", Int16(), 300, "2c 01"),
    ("3.14", Int16(), -2, "fe ff"),
    ("3.15", Float32(), 1.5, "00 00 c0 3f"),
    ("3.15", Float32(), -0.0, "00 00 00 80"),
    ("3.16", Char(), "é", "e9 00"),
    ("3.16", Char(), "\ud800", "00 d8"),
    ("3.17", COLORS, "RED", "00 00 00 00"),
    ("3.17", COLORS, "BLUE", "02 00 00 00"),
    ("3.18", TimeWindow(), Window(0, 60000), "00 00 00 00 00 00 00 00 60 ea 00 00 00 00 00 00"),
    ("3.18", TimeWindow(), Window(1735689600000, 1735689660000), "00 7c 29 1f 94 01 00 00 60 66 2a 1f 94 01 00 00"),
    ("3.19", GlobalWindow(), None, "00"),
    ("3.20", KRYO, b"\x01\x02\x03", "01 02 03"),
]


@pytest.mark.parametrize("section, ser, value, hexstr", EXAMPLES, ids=lambda x: str(x)[:20])
def test_spec_example_bytes(section, ser, value, hexstr):
    assert ser.encode(value).hex(" ") == hexstr
    decoded = ser.decode(bytes.fromhex(hexstr))
    if isinstance(value, float):
        assert struct.pack("<f", decoded) == struct.pack("<f", value)
    else:
        assert decoded == value
    assert hexstr in spec_hex_examples(section)


@pytest.mark.parametrize("section", ["3.13", "3.14", "3.15", "3.16", "3.17", "3.18", "3.19", "3.20"])
def test_every_spec_example_is_checked(section):
    assert spec_hex_examples(section) == {h for s, _, _, h in EXAMPLES if s == section}


@pytest.mark.parametrize("ser, data, what", [
    (Int8(), b"", "exactly 1"),
    (Int16(), b"\x01", "exactly 2"),
    (Float32(), b"\x00" * 8, "exactly 4"),
    (Char(), b"\x00\x00\x00", "exactly 2"),
    (COLORS, b"\x03\x00\x00\x00", "ordinal 3 outside the 3 symbols"),
    (COLORS, b"\xff\xff\xff\xff", "ordinal -1"),
    (COLORS, b"\x00\x00", "exactly 4"),
    (TimeWindow(), b"\x00" * 15, "exactly 16"),
    (GlobalWindow(), b"\x01", "0x00"),
    (GlobalWindow(), b"\x00\x00", "0x00"),
])
def test_readers_reject(ser, data, what):
    with pytest.raises(CorruptSavepointError, match=what):
        ser.decode(data)
    with pytest.raises(CorruptSavepointError):
        ser.decode_array(pa.array([data], pa.binary()))


def test_writers_refuse_values_outside_the_type():
    for ser, value in [(Int8(), 128), (Int16(), -(2**15) - 1), (Float32(), 1e300), (Char(), "ab"), (Char(), "😀"),
                       (COLORS, "PINK"), (TimeWindow(), (1,)), (TimeWindow(), (0, 2**63)), (GlobalWindow(), 0)]:
        with pytest.raises(InvalidArgumentError):
            ser.encode(value)
    with pytest.raises(InvalidArgumentError, match="PINK"):
        COLORS.encode_array(pa.array(["RED", "PINK"]))
    with pytest.raises(InvalidArgumentError, match="binary32"):
        Float32().encode_array([3.5e38])


def test_float32_keeps_every_bit_pattern_on_the_array_path():
    bits = np.array([0x7FC00123, 0xFFC00000, 0x80000000, 0x00000001, 0x7F800000], np.uint32)
    encoded = Float32().encode_array(pa.array(bits.view(np.float32), pa.float32()))
    assert np.frombuffer(b"".join(encoded.to_pylist()), "<u4").tolist() == bits.tolist()
    decoded = Float32().decode_array(encoded)
    assert decoded.to_numpy().view(np.uint32).tolist() == bits.tolist()


@pytest.mark.parametrize("ser, values", [
    (Int8(), [-128, 0, 127]),
    (Int16(), [-(2**15), 1, 2**15 - 1]),
    (Char(), ["a", "\u0000", "\uffff", "\udfff"]),
    (COLORS, ["BLUE", "RED", "BLUE"]),
    (TimeWindow(), [Window(0, 10), Window(-(2**63), 2**63 - 1), Window(5, 5)]),
    (GlobalWindow(), [None, None]),
    (KRYO, [b"", b"\x00\xff"]),
])
def test_array_paths_agree_with_the_scalar_ones(ser, values):
    encoded = ser.encode_array(values)
    assert encoded.to_pylist() == [ser.encode(v) for v in values]
    arrow = ser.decode_array(encoded)
    assert arrow.type == ser.arrow_type()
    assert [ser._from_arrow_value(v) for v in arrow.to_pylist()] == values
    assert ser.encode_array(arrow).to_pylist() == encoded.to_pylist()  # Arrow input encodes the same


def test_enum_takes_a_python_enum():
    class Color(enum.Enum):
        RED = 1
        GREEN = 2

    ser = Enum(Color)
    assert ser.symbols == ("RED", "GREEN") and ser.encode(Color.GREEN) == b"\x01\x00\x00\x00"


@pytest.mark.parametrize("ser", [Int8(), Int16(), Float32(), Char(), COLORS, TimeWindow(), GlobalWindow(), KRYO,
                                 MapOf(COLORS, ListOf(TimeWindow()))], ids=repr)
def test_snapshot_round_trip(ser):
    snap = serializer_pb2.SerializerSnapshot.FromString(ser.snapshot().SerializeToString())
    assert serializer_from_snapshot(snap) == ser


@pytest.mark.parametrize("snapshot, what", [
    (dict(serializer_id="enum", version=1), "at least one symbol"),
    (dict(serializer_id="enum", version=1, symbols=["A", "A"]), "distinct"),
    (dict(serializer_id="enum", version=1, symbols=["A", ""]), "non-empty"),
    (dict(serializer_id="int8", version=1, symbols=["A"]), "must not have symbols"),
    (dict(serializer_id="opaque", version=1), "must carry the engine"),
    (dict(serializer_id="opaque", version=1, engine=serializer_pb2.EngineSerializer(engine="flink")), "class name"),
    (dict(serializer_id="time-window", version=1, nested=[Int64().snapshot()]), "0 nested"),
])
def test_corrupt_snapshots(snapshot, what):
    with pytest.raises(CorruptSavepointError, match=what):
        serializer_from_snapshot(serializer_pb2.SerializerSnapshot(**snapshot))


def test_engine_serializer_is_informative_on_every_family():
    snap = Int8().snapshot()
    snap.engine.CopyFrom(serializer_pb2.EngineSerializer(engine="flink", class_name="ByteSerializerSnapshot"))
    assert serializer_from_snapshot(snap) == Int8()
    assert resolve_compatibility(snap, Int8()).kind is Compatibility.COMPATIBLE_AS_IS


def test_new_version_of_a_1_2_built_in_is_unsupported():
    with pytest.raises(UnsupportedFormatError, match="newer"):
        serializer_from_snapshot(serializer_pb2.SerializerSnapshot(serializer_id="time-window", version=2))


def test_enum_compatibility():
    old = COLORS.snapshot()
    assert resolve_compatibility(old, Enum(["RED", "GREEN", "BLUE", "PINK"])).kind is Compatibility.COMPATIBLE_AS_IS
    reordered = Enum(["BLUE", "RED", "GREEN"])
    assert resolve_compatibility(old, reordered).kind is Compatibility.COMPATIBLE_AFTER_MIGRATION
    migrated = migrate_array(COLORS, reordered, COLORS.encode_array(["RED", "BLUE"]))
    assert reordered.decode_array(migrated).to_pylist() == ["RED", "BLUE"]
    assert migrated.to_pylist() == [b"\x01\x00\x00\x00", b"\x00\x00\x00\x00"]
    result = resolve_compatibility(old, Enum(["RED", "GREEN"]))
    assert result.kind is Compatibility.INCOMPATIBLE and "BLUE" in result.reason


def test_opaque_compatibility_needs_the_identical_engine_serializer():
    old = KRYO.snapshot()
    assert resolve_compatibility(old, KRYO).kind is Compatibility.COMPATIBLE_AS_IS
    for other in (Opaque("flink", KRYO.class_name, b"other"), Opaque("flink", "x.Y", KRYO.engine_snapshot)):
        assert resolve_compatibility(old, other).kind is Compatibility.INCOMPATIBLE


def test_map_keys_of_the_new_types():
    for key in (Int8(), Int16(), Char(), COLORS, TimeWindow(), GlobalWindow(), KRYO):
        MapOf(key, Int8())
    with pytest.raises(InvalidArgumentError, match="not allowed"):
        MapOf(Float32(), Int8())
    bad = MapOf(Int8(), Int8()).snapshot()
    bad.nested[0].CopyFrom(Float32().snapshot())
    with pytest.raises(CorruptSavepointError, match="not allowed for keys"):
        serializer_from_snapshot(bad)


@pytest.mark.parametrize("make", [lambda: Enum(["ok", "a\ud800"]), lambda: Opaque("fl\ud800", "x.Y"),
                                  lambda: Opaque("flink", "")], ids=["enum-symbol", "opaque-engine", "opaque-class"])
def test_names_a_snapshot_stores_are_text(make):
    """Snapshot strings are protobuf strings: a lone surrogate is refused when the serializer is made."""
    with pytest.raises(InvalidArgumentError):
        make()
