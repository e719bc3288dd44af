"""nullable, tuple, list, map: framing, exact bytes, round trips, corrupt input, snapshots."""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pyref._proto.savepoint.v1 import serializer_pb2
from pyref.errors import CorruptSavepointError, InvalidArgumentError
from pyref.serializers import (
    MAX_NESTING_DEPTH,
    MAX_TUPLE_FIELDS,
    Boolean,
    Bytes,
    Float64,
    Int32,
    Int64,
    Json,
    ListOf,
    MapOf,
    Nullable,
    Serializer,
    String,
    Tuple,
    decode_framed,
    encode_framed,
    serializer_from_snapshot,
)
from serializer_spec_tables import spec_hex_examples

Snap = serializer_pb2.SerializerSnapshot


URL_COUNT = Tuple(String(), Int32(), names=("url", "n"))

# (section, serializer, value, hex) -- the examples of spec/serializers.md §3.7-§3.10.
EXAMPLES = [
    ("3.7", Nullable(Int32()), None, "00"),
    ("3.7", Nullable(Int32()), 7, "01 07 00 00 00"),
    ("3.7", Nullable(String()), "a", "01 61"),
    ("3.8", URL_COUNT, ("a", 5), "01 00 00 00 61 05 00 00 00"),
    ("3.8", Tuple(Int32(), Int64()), (1, 2), "01 00 00 00 02 00 00 00 00 00 00 00"),
    ("3.9", ListOf(Int64()), [1, 2], "02 00 00 00 01 00 00 00 00 00 00 00 02 00 00 00 00 00 00 00"),
    ("3.9", ListOf(String()), ["a", "bc"], "02 00 00 00 01 00 00 00 61 02 00 00 00 62 63"),
    ("3.9", ListOf(Int32()), [], "00 00 00 00"),
    (
        "3.10",
        MapOf(String(), Int64()),
        {"a": 1, "b": -1},
        "02 00 00 00 01 00 00 00 61 01 00 00 00 00 00 00 00 01 00 00 00 62 ff ff ff ff ff ff ff ff",
    ),
    (
        "3.10",
        MapOf(Int32(), Nullable(String())),
        {1: None, 2: "x"},
        "02 00 00 00 01 00 00 00 01 00 00 00 00 02 00 00 00 02 00 00 00 01 78",
    ),
]


@pytest.mark.parametrize("section, ser, value, hexstr", EXAMPLES)
def test_spec_example_bytes(section, ser, value, hexstr):
    assert ser.encode(value).hex(" ") == hexstr
    assert ser.decode(bytes.fromhex(hexstr)) == value
    assert hexstr in spec_hex_examples(section)


@pytest.mark.parametrize("section", ["3.7", "3.8", "3.9", "3.10"])
def test_every_spec_example_is_checked(section):
    assert spec_hex_examples(section) == {h for s, _, _, h in EXAMPLES if s == section}


def test_fixed_widths():
    assert Tuple(Int32(), Int64()).fixed_width == 12
    assert Tuple(Tuple(Boolean(), Int32()), Float64()).fixed_width == 13
    assert Tuple(Int32(), String()).fixed_width is None
    assert Nullable(Int32()).fixed_width is None
    assert ListOf(Int32()).fixed_width is None
    assert MapOf(Int32(), Int32()).fixed_width is None


def test_framing_helpers():
    assert encode_framed(Int32(), 1) == b"\x01\x00\x00\x00"
    assert encode_framed(String(), "ab") == b"\x02\x00\x00\x00ab"
    data = encode_framed(String(), "ab") + encode_framed(Int64(), 9)
    v, pos = decode_framed(String(), data)
    assert (v, pos) == ("ab", 6)
    assert decode_framed(Int64(), data, pos) == (9, 14)
    with pytest.raises(CorruptSavepointError):
        decode_framed(Int64(), data, 7)


def test_nested_fixed_tuple_is_not_prefixed_inside_a_list():
    ser = ListOf(Tuple(Int32(), Boolean()))
    assert ser.encode([(1, True)]) == b"\x01\x00\x00\x00" + b"\x01\x00\x00\x00\x01"


# -- round trips --------------------------------------------------------------------

int32s = st.integers(-(2**31), 2**31 - 1)
int64s = st.integers(-(2**63), 2**63 - 1)

NESTED = [
    (Nullable(Int64()), st.none() | int64s),
    (Tuple(String(), Int32(), names=("url", "n")), st.tuples(st.text(), int32s)),
    (Tuple(Int32(), Tuple(Boolean(), Bytes())), st.tuples(int32s, st.tuples(st.booleans(), st.binary()))),
    (ListOf(Nullable(String())), st.lists(st.none() | st.text(), max_size=8)),
    (ListOf(ListOf(Int32())), st.lists(st.lists(int32s, max_size=4), max_size=4)),
    (MapOf(String(), ListOf(Float64())), st.dictionaries(st.text(), st.lists(st.floats(allow_nan=False), max_size=3), max_size=5)),
    (
        MapOf(Tuple(Int64(), String()), Nullable(Tuple(Boolean(), Json()))),
        st.dictionaries(
            st.tuples(int64s, st.text()),
            st.none() | st.tuples(st.booleans(), st.lists(st.integers(-5, 5), max_size=2)),
            max_size=4,
        ),
    ),
    (Tuple(Nullable(Int32()), ListOf(Bytes()), MapOf(Int32(), String())),
     st.tuples(st.none() | int32s, st.lists(st.binary(), max_size=3), st.dictionaries(int32s, st.text(), max_size=3))),
]


@pytest.mark.parametrize("ser, strategy", NESTED, ids=lambda x: repr(x)[:40])
def test_nested_round_trip_scalar_and_vectorised(ser, strategy):
    @given(st.lists(strategy, max_size=6))
    def check(values):
        for v in values:
            assert ser.decode(ser.encode(v)) == v
        encoded = ser.encode_array(values)
        assert encoded.to_pylist() == [ser.encode(v) for v in values]
        decoded = ser.decode_array(encoded)
        assert decoded.type == ser.arrow_type()
        # Whole-buffer paths (tuples, nullable) give what the value-by-value path gives.
        assert decoded.equals(Serializer.decode_array(ser, encoded))
        assert ser.decode_array(encoded.slice(1)).equals(decoded.slice(1))
        # and back from the Arrow representation
        assert ser.encode_array(decoded).equals(encoded)

    check()


def test_map_keeps_insertion_order():
    ser = MapOf(String(), Int32())
    value = {"z": 1, "a": 2, "m": 3}
    assert list(ser.decode(ser.encode(value))) == ["z", "a", "m"]


def test_arrow_types():
    assert URL_COUNT.arrow_type() == pa.struct([("url", pa.string()), ("n", pa.int32())])
    assert Tuple(Int32(), Bytes()).arrow_type() == pa.struct([("f0", pa.int32()), ("f1", pa.binary())])
    assert Nullable(Int64()).arrow_type() == pa.int64()
    assert ListOf(String()).arrow_type() == pa.list_(pa.string())
    assert MapOf(String(), Int64()).arrow_type() == pa.map_(pa.string(), pa.int64())


def test_decode_array_to_arrow():
    values = [("a", 1), ("b", 2)]
    arr = URL_COUNT.decode_array(URL_COUNT.encode_array(values))
    assert arr.to_pylist() == [{"url": "a", "n": 1}, {"url": "b", "n": 2}]
    n = Nullable(Int32())
    assert n.decode_array(n.encode_array([1, None, 3])).to_pylist() == [1, None, 3]
    m = MapOf(String(), Int64())
    assert m.decode_array(m.encode_array([{"a": 1}, {}])).to_pylist() == [[("a", 1)], []]


def test_tuple_accepts_lists_and_mappings():
    assert URL_COUNT.encode(["a", 5]) == URL_COUNT.encode(("a", 5))
    assert URL_COUNT.encode({"n": 5, "url": "a"}) == URL_COUNT.encode(("a", 5))
    assert isinstance(URL_COUNT.decode(URL_COUNT.encode(("a", 5))), tuple)


# -- bad values and construction -------------------------------------------------------


@pytest.mark.parametrize(
    "ser, value, fragment",
    [
        (URL_COUNT, ("a",), "1 items for 2 fields"),
        (URL_COUNT, ("a", "b"), "tuple field 1 (n): int32 serializer cannot encode a value of type str"),
        (URL_COUNT, {"url": "a"}, "not the field names"),
        (URL_COUNT, "ab", "type str"),
        (ListOf(Int32()), [1, "x"], "list element 1"),
        (ListOf(Int32()), "12", "type str"),
        (MapOf(String(), Int32()), {"a": None}, "map value 0"),
        (MapOf(String(), Int32()), [("a", 1), ("a", 2)], "duplicate key"),
        (MapOf(String(), Int32()), 5, "type int"),
        (Nullable(Int32()), "x", "int32"),
    ],
)
def test_bad_values(ser, value, fragment):
    with pytest.raises(InvalidArgumentError) as e:
        ser.encode(value)
    assert fragment in str(e.value)


def test_construction_rules():
    with pytest.raises(InvalidArgumentError):
        Tuple()
    with pytest.raises(InvalidArgumentError):
        Tuple(Int32(), Int32(), names=("a", "a"))
    with pytest.raises(InvalidArgumentError):
        Tuple(Int32(), names=("a", "b"))
    with pytest.raises(InvalidArgumentError):
        Tuple(Int32(), names=("",))
    # a name UTF-8 cannot encode (a lone surrogate) is no protobuf string: refused here, by name,
    # not as a UnicodeEncodeError when the snapshot is written (format.md §4.5 E1)
    with pytest.raises(InvalidArgumentError, match="valid Unicode text"):
        Tuple(Int32(), names=("\ud800",))
    with pytest.raises(InvalidArgumentError):
        Tuple(Int32(), "not a serializer")
    with pytest.raises(InvalidArgumentError):
        Tuple(*([Int32()] * (MAX_TUPLE_FIELDS + 1)))
    with pytest.raises(InvalidArgumentError):
        Nullable(Nullable(Int32()))
    for bad_key in (Float64(), ListOf(Int32()), Json(), Tuple(Int32(), Float64())):
        with pytest.raises(InvalidArgumentError):
            MapOf(bad_key, Int32())
    MapOf(Tuple(Int32(), Nullable(String())), Int32())  # allowed
    ser = Int32()
    for _ in range(MAX_NESTING_DEPTH - 1):
        ser = ListOf(ser)
    assert ser.depth == MAX_NESTING_DEPTH
    with pytest.raises(InvalidArgumentError):
        ListOf(ser)


# -- corrupt input ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "ser, hexstr, fragment",
    [
        (Nullable(Int32()), "", "nullable: missing null flag at offset 0"),
        (Nullable(Int32()), "02 00 00 00 00", "null flag 0x02 is neither 0x00 nor 0x01 at offset 0"),
        (Nullable(Int32()), "00 00", "1 trailing bytes after the null flag at offset 1"),
        (Nullable(Int32()), "01 07 00 00", "int32: expected exactly 4 bytes, got 3 at offset 1"),
        (Nullable(Int32()), "01 07 00 00 00 00", "got 5"),
        (URL_COUNT, "01 00 00 00 61 05 00 00", "int32: truncated value: need 4 bytes, 3 remain at offset 5"),
        (URL_COUNT, "01 00 00 00 61 05 00 00 00 ff", "tuple: 1 trailing bytes after the last field at offset 9"),
        (URL_COUNT, "05 00 00 00 61", "string: length prefix 5 exceeds the 1 remaining bytes at offset 0"),
        (URL_COUNT, "01 00 00", "string: truncated length prefix: need 4 bytes, 3 remain at offset 0"),
        (URL_COUNT, "01 00 00 00 ff 05 00 00 00", "string: invalid UTF-8 (invalid start byte) at offset 4"),
        (ListOf(Int64()), "", "list: truncated element count"),
        (ListOf(Int64()), "ff ff ff ff", "list: element count 4294967295 needs at least 34359738360 bytes but only 0 remain at offset 0"),
        (ListOf(Int64()), "02 00 00 00" + " 00" * 15, "needs at least 16 bytes but only 15 remain"),
        (ListOf(String()), "02 00 00 00 00 00 00 00 00 00 00", "needs at least 8 bytes but only 7 remain"),
        (ListOf(Int32()), "01 00 00 00 01 00 00 00 00", "list: 1 trailing bytes after the last element at offset 8"),
        (ListOf(Boolean()), "01 00 00 00 07", "boolean: byte 0x07 is neither 0x00 nor 0x01 at offset 4"),
        (MapOf(String(), Int32()), "ff ff ff 7f", "map: entry count 2147483647"),
        (MapOf(Int32(), Int32()), "02 00 00 00 01 00 00 00 02 00 00 00 01 00 00 00 03 00 00 00", "map: duplicate key 1 at offset 12"),
        (MapOf(Int32(), Int32()), "01 00 00 00 01 00 00 00 02 00 00 00 00", "map: 1 trailing bytes after the last entry at offset 12"),
        (MapOf(Int32(), Nullable(Int32())), "01 00 00 00 01 00 00 00 01 00 00 00 05", "nullable: null flag 0x05"),
    ],
)
def test_corrupt(ser, hexstr, fragment):
    with pytest.raises(CorruptSavepointError) as e:
        ser.decode(bytes.fromhex(hexstr))
    assert fragment in str(e.value)


def test_corrupt_array_names_the_record():
    with pytest.raises(CorruptSavepointError) as e:
        ListOf(Int32()).decode_array(pa.array([b"\x00\x00\x00\x00", b"\x01\x00\x00\x00"]))
    assert str(e.value).startswith("record 1: list:")


@pytest.mark.parametrize("bad, message", [
    ("01 00 00 00 61 05 00 00 00 ff", "record 1: tuple: 1 trailing bytes after the last field at offset 9"),
    ("01 00 00 00 61 05 00 00", "record 1: int32: truncated value: need 4 bytes, 3 remain at offset 5"),
    ("05 00 00 00 61", "record 1: string: length prefix 5 exceeds the 1 remaining bytes at offset 0"),
    ("01 00 00 00 ff 05 00 00 00", "record 1: string: invalid UTF-8 (invalid start byte) at offset 4"),
])
def test_a_corrupt_tuple_in_a_column_is_named_by_record_and_offset(bad, message):
    """A tuple column is decoded field by field on whole buffers; a corrupt record still gets
    the value-by-value error, with its record number and byte offset."""
    good = URL_COUNT.encode(("a", 1))
    with pytest.raises(CorruptSavepointError) as e:
        URL_COUNT.decode_array(pa.array([good, bytes.fromhex(bad), good], pa.binary()))
    assert str(e.value) == message


def test_huge_count_is_refused_without_allocating():
    # 2**32-1 zero-width-looking elements: refused by the count check before any loop runs.
    with pytest.raises(CorruptSavepointError):
        ListOf(Tuple(Boolean())).decode(b"\xff\xff\xff\xff" + b"\x00" * 100)


# -- snapshots ------------------------------------------------------------------------


@pytest.mark.parametrize("ser", [s for _, s, _, _ in EXAMPLES] + [s for s, _ in NESTED], ids=repr)
def test_snapshot_round_trip(ser):
    restored = serializer_from_snapshot(ser.snapshot())
    assert restored == ser and repr(restored) == repr(ser)
    wire = Snap.FromString(ser.snapshot().SerializeToString())
    assert serializer_from_snapshot(wire) == ser


def test_tuple_snapshot_v2_has_names():
    snap = URL_COUNT.snapshot()
    assert (snap.serializer_id, snap.version) == ("tuple", 2)
    assert list(snap.field_names) == ["url", "n"]
    assert [c.serializer_id for c in snap.nested] == ["string", "int32"]
    assert list(Tuple(Int32(), Int32()).snapshot().field_names) == ["f0", "f1"]


def test_tuple_v1_snapshot_is_read_with_positional_names():
    v1 = Snap(serializer_id="tuple", version=1, nested=[String().snapshot(), Int32().snapshot()])
    ser = serializer_from_snapshot(v1)
    assert isinstance(ser, Tuple) and ser.names == ("f0", "f1") and ser.positional
    assert ser.decode(bytes.fromhex("01 00 00 00 61 05 00 00 00")) == ("a", 5)
    assert ser.arrow_type() == pa.struct([("f0", pa.string()), ("f1", pa.int32())])
    assert ser.snapshot().version == 2  # a writer writes the current version
    bad = Snap(serializer_id="tuple", version=1, nested=[Int32().snapshot()], field_names=["x"])
    with pytest.raises(CorruptSavepointError):
        serializer_from_snapshot(bad)


@pytest.mark.parametrize(
    "snap",
    [
        Snap(serializer_id="tuple", version=2),
        Snap(serializer_id="tuple", version=2, nested=[Int32().snapshot()]),  # no names
        Snap(serializer_id="tuple", version=2, nested=[Int32().snapshot()] * 2, field_names=["a", "a"]),
        Snap(serializer_id="tuple", version=2, nested=[Int32().snapshot()] * (MAX_TUPLE_FIELDS + 1),
             field_names=[f"f{i}" for i in range(MAX_TUPLE_FIELDS + 1)]),
        Snap(serializer_id="nullable", version=1),
        Snap(serializer_id="nullable", version=1, nested=[Nullable(Int32()).snapshot()]),
        Snap(serializer_id="list", version=1, nested=[Int32().snapshot()] * 2),
        Snap(serializer_id="map", version=1, nested=[Int32().snapshot()]),
        Snap(serializer_id="map", version=1, nested=[Float64().snapshot(), Int32().snapshot()]),
        Snap(serializer_id="list", version=1, nested=[Int32().snapshot()], field_names=["x"]),
    ],
)

def test_malformed_composite_snapshots(snap):
    with pytest.raises(CorruptSavepointError):
        serializer_from_snapshot(snap)


def test_tuple_field_limit_is_inclusive():
    ser = Tuple(*([Boolean()] * MAX_TUPLE_FIELDS))
    assert serializer_from_snapshot(ser.snapshot()) == ser
    assert ser.decode(ser.encode((True,) * MAX_TUPLE_FIELDS)) == (True,) * MAX_TUPLE_FIELDS


def test_snapshot_depth_limit():
    snap = Int32().snapshot()
    for _ in range(MAX_NESTING_DEPTH - 1):
        snap = Snap(serializer_id="list", version=1, nested=[snap])
    assert serializer_from_snapshot(snap).depth == MAX_NESTING_DEPTH
    deeper = Snap(serializer_id="list", version=1, nested=[snap])
    with pytest.raises(CorruptSavepointError) as e:
        serializer_from_snapshot(deeper)
    assert "deeper than 32" in str(e.value)


def test_deep_values_round_trip_at_the_limit():
    ser = Int32()
    value = 5
    for _ in range(MAX_NESTING_DEPTH - 1):
        ser, value = ListOf(ser), [value]
    assert ser.decode(ser.encode(value)) == value
    assert struct.unpack_from("<I", ser.encode(value))[0] == 1


def test_nullable_decode_array_on_whole_buffers_matches_the_value_path():
    """Nullable over a vectorised inner decodes flags and values as columns; a corrupt
    record still gets the value path's error, numbered among all the records."""
    import numpy as np
    import pyarrow as pa

    from pyref.errors import CorruptSavepointError
    from pyref.serializers import Float64, Int32, Nullable, String

    rng = np.random.default_rng(3)
    for inner, values in ((Int32(), [None if v % 3 == 0 else int(v) for v in rng.integers(-9, 9, 200)]),
                          (String(), [None if i % 4 == 1 else "é" * (i % 5) for i in range(200)]),
                          (Float64(), [])):
        s = Nullable(inner)
        encoded = s.encode_array(values)
        assert s.decode_array(encoded).to_pylist() == values
        assert s.decode_array(encoded.slice(7, 50)).to_pylist() == values[7:57]
    s = Nullable(String())
    good = s.encode_array(["a", None, "b"]).to_pylist()
    for bad, message in ((b"", "record 1: nullable: missing null flag"), (b"\x02a", "record 1: nullable: null flag"),
                         (b"\x00\x00", "record 1: nullable: 1 trailing bytes"), (b"\x01\xff", "record 1")):
        with pytest.raises(CorruptSavepointError, match=message):
            s.decode_array(pa.array([good[0], bad, good[2]], pa.binary()))
