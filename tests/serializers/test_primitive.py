"""int32, int64, float64, boolean, string, bytes: exact bytes, round trips, vectorised paths."""

from __future__ import annotations

import math
import struct

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pyref.errors import CorruptSavepointError, InvalidArgumentError
from pyref.serializers import Boolean, Bytes, Float64, Int32, Int64, String
from serializer_spec_tables import spec_hex_examples

# (section, serializer, value, hex) -- the examples of spec/serializers.md §3.1-§3.6.
EXAMPLES = [
    ("3.1", Int32(), 1, "01 00 00 00"),
    ("3.1", Int32(), -2, "fe ff ff ff"),
    ("3.2", Int64(), -2, "fe ff ff ff ff ff ff ff"),
    ("3.2", Int64(), 1_000_000, "40 42 0f 00 00 00 00 00"),
    ("3.3", Float64(), 1.5, "00 00 00 00 00 00 f8 3f"),
    ("3.3", Float64(), -0.0, "00 00 00 00 00 00 00 80"),
    ("3.4", Boolean(), True, "01"),
    ("3.4", Boolean(), False, "00"),
    ("3.5", String(), "héllo", "68 c3 a9 6c 6c 6f"),
    ("3.6", Bytes(), b"\x00\xff", "00 ff"),
]


@pytest.mark.parametrize("section, ser, value, hexstr", EXAMPLES)
def test_spec_example_bytes(section, ser, value, hexstr):
    assert ser.encode(value).hex(" ") == hexstr
    decoded = ser.decode(bytes.fromhex(hexstr))
    if isinstance(value, float):
        assert struct.pack("<d", decoded) == struct.pack("<d", value)
    else:
        assert decoded == value and type(decoded) is type(value)
    assert hexstr in spec_hex_examples(section)


@pytest.mark.parametrize("section", ["3.1", "3.2", "3.3", "3.4", "3.5", "3.6"])
def test_every_spec_example_is_checked(section):
    assert spec_hex_examples(section) == {h for s, _, _, h in EXAMPLES if s == section}


def test_empty_string_and_bytes():
    assert String().encode("") == b"" and String().decode(b"") == ""
    assert Bytes().encode(b"") == b"" and Bytes().decode(b"") == b""


def test_fixed_widths_and_arrow_types():
    assert [s.fixed_width for s in (Int32(), Int64(), Float64(), Boolean(), String(), Bytes())] == [
        4, 8, 8, 1, None, None,
    ]
    assert [s.arrow_type() for s in (Int32(), Int64(), Float64(), Boolean(), String(), Bytes())] == [
        pa.int32(), pa.int64(), pa.float64(), pa.bool_(), pa.string(), pa.binary(),
    ]


# -- scalar round trips -------------------------------------------------------


@given(st.integers(-(2**31), 2**31 - 1))
def test_int32_round_trip(v):
    b = Int32().encode(v)
    assert b == struct.pack("<i", v) and Int32().decode(b) == v


@given(st.integers(-(2**63), 2**63 - 1))
def test_int64_round_trip(v):
    b = Int64().encode(v)
    assert b == struct.pack("<q", v) and Int64().decode(b) == v


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_float64_round_trip_keeps_bits(v):
    b = Float64().encode(v)
    assert b == struct.pack("<d", v)
    assert struct.pack("<d", Float64().decode(b)) == b


@given(st.booleans())
def test_boolean_round_trip(v):
    assert Boolean().decode(Boolean().encode(v)) is v


@given(st.text())
def test_string_round_trip(v):
    b = String().encode(v)
    assert b == v.encode("utf-8") and String().decode(b) == v


@given(st.binary())
def test_bytes_round_trip(v):
    assert Bytes().decode(Bytes().encode(v)) == v


def test_decode_accepts_memoryview_bytearray_and_arrow_buffers():
    assert Int64().decode(memoryview(b"\x01" + b"\x00" * 7)) == 1
    assert String().decode(bytearray(b"ab")) == "ab"
    arr = Int32().encode_array([7, 8])
    assert Int32().decode(arr[1].as_buffer()) == 8
    with pytest.raises(InvalidArgumentError):
        String().decode("not bytes")


def test_numpy_scalars_encode():
    assert Int64().encode(np.int64(5)) == Int64().encode(5)
    assert Float64().encode(np.float32(0.5)) == Float64().encode(0.5)
    assert Boolean().encode(np.bool_(True)) == b"\x01"


# -- vectorised paths -----------------------------------------------------------

PRIMITIVE_STRATEGIES = [
    (Int32(), st.integers(-(2**31), 2**31 - 1)),
    (Int64(), st.integers(-(2**63), 2**63 - 1)),
    (Float64(), st.floats(allow_nan=False)),
    (Boolean(), st.booleans()),
    (String(), st.text()),
    (Bytes(), st.binary()),
]


@pytest.mark.parametrize("ser, strategy", PRIMITIVE_STRATEGIES, ids=lambda x: repr(x)[:20])
def test_vectorised_matches_scalar(ser, strategy):
    @given(st.lists(strategy, max_size=50))
    def check(values):
        encoded = ser.encode_array(values)
        assert pa.types.is_binary(encoded.type)
        assert encoded.to_pylist() == [ser.encode(v) for v in values]
        decoded = ser.decode_array(encoded)
        assert decoded.equals(pa.array(values, type=ser.arrow_type()))
        # from an Arrow array of the serializer's type, too
        assert ser.encode_array(pa.array(values, type=ser.arrow_type())).equals(encoded)

    check()


def test_vectorised_float_nan_bits_preserved():
    raw = [struct.pack("<d", v) for v in (math.nan, -math.inf, -0.0)] + [
        bytes.fromhex("0100000000f0ff7f")  # a signalling NaN payload
    ]
    decoded = Float64().decode_array(pa.array(raw, type=pa.binary()))
    assert Float64().encode_array(decoded).to_pylist() == raw


@pytest.mark.parametrize(
    "ser, values",
    [
        (Int64(), [1, -2, 3, 4]),
        (Int32(), [1, -2, 3, 4]),
        (Float64(), [1.0, 2.5, -3.0, 4.0]),
        (Boolean(), [True, False, True, True]),
        (String(), ["a", "é", "", "xyz"]),
        (Bytes(), [b"a", b"", b"\x00", b"zz"]),
    ],
)
def test_vectorised_slices_chunks_and_large_types(ser, values):
    encoded = ser.encode_array(values)
    sliced = encoded.slice(1, 2)
    assert ser.decode_array(sliced).to_pylist() == values[1:3]
    large = encoded.cast(pa.large_binary())
    assert ser.decode_array(large).to_pylist() == values
    chunked = pa.chunked_array([encoded.slice(0, 1), encoded.slice(1)])
    assert ser.decode_array(chunked).to_pylist() == values
    typed = pa.array(values, type=ser.arrow_type())
    assert ser.encode_array(typed.slice(1, 2)).to_pylist() == [ser.encode(v) for v in values[1:3]]
    assert ser.encode_array(pa.chunked_array([typed])).equals(encoded)
    assert len(ser.decode_array(pa.array([], type=pa.binary()))) == 0
    assert len(ser.encode_array([])) == 0


def test_string_large_types():
    enc = String().encode_array(pa.array(["a", "bc"], type=pa.large_string()))
    assert enc.type == pa.large_binary() and enc.to_pylist() == [b"a", b"bc"]
    assert String().decode_array(enc).type == pa.large_string()


def test_int32_widening_input_is_range_checked():
    assert Int32().encode_array(np.array([1, 2], dtype=np.int64)).to_pylist() == [
        b"\x01\x00\x00\x00",
        b"\x02\x00\x00\x00",
    ]
    with pytest.raises(InvalidArgumentError):
        Int32().encode_array(np.array([2**40]))
    with pytest.raises(InvalidArgumentError):
        Int32().encode_array(pa.array([2**31], type=pa.int64()))


def test_vectorised_round_trip_of_a_million_values():
    """1M int64 and 1M 16-byte strings through the whole-buffer paths (throughput is
    measured by bench/core_bench.py, not asserted here)."""
    n = 1_000_000
    ints = pa.array(np.arange(n, dtype=np.int64) * 7919 - 5)
    rng = np.random.default_rng(0)
    chars = rng.integers(97, 123, size=16 * n, dtype=np.uint8)
    offsets = np.arange(0, 16 * n + 1, 16, dtype=np.int32)
    strings = pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(chars)])
    for ser, arr in ((Int64(), ints), (String(), strings)):
        decoded = ser.decode_array(ser.encode_array(arr))
        assert decoded.equals(arr)


# -- corrupt input ----------------------------------------------------------------


@pytest.mark.parametrize(
    "ser, data, fragment",
    [
        (Int32(), b"\x01\x02\x03", "expected exactly 4 bytes, got 3 at offset 0"),
        (Int32(), b"\x01\x00\x00\x00\x00", "expected exactly 4 bytes, got 5"),
        (Int64(), b"", "expected exactly 8 bytes, got 0"),
        (Int64(), b"\x00" * 9, "got 9"),
        (Float64(), b"\x00" * 7, "got 7"),
        (Boolean(), b"\x02", "byte 0x02 is neither 0x00 nor 0x01 at offset 0"),
        (Boolean(), b"\xff", "0xff"),
        (Boolean(), b"", "expected exactly 1 byte, got 0"),
        (Boolean(), b"\x01\x00", "got 2"),
        (String(), b"ab\xff", "invalid UTF-8 (invalid start byte) at offset 2"),
        (String(), b"\xc0\x80", "invalid UTF-8"),  # overlong NUL
        (String(), b"\xed\xa0\x80", "invalid UTF-8"),  # encoded surrogate
        (String(), b"x\xc3", "at offset 1"),  # truncated sequence
    ],
)
def test_corrupt_scalars(ser, data, fragment):
    with pytest.raises(CorruptSavepointError) as e:
        ser.decode(data)
    assert fragment in str(e.value)
    assert ser.serializer_id in str(e.value)


@pytest.mark.parametrize(
    "ser, records, fragment",
    [
        (Int64(), [b"\x00" * 8, b"\x00" * 7], "record 1 has 7 bytes, expected exactly 8"),
        (Int32(), [b"\x00" * 5], "record 0 has 5 bytes"),
        (Float64(), [b"\x00" * 8, b""], "record 1 has 0 bytes"),
        (Boolean(), [b"\x00", b"\x01", b"\x02"], "record 2 byte 0x02"),
        (Boolean(), [b"\x00\x00"], "record 0 has 2 bytes"),
        (String(), [b"ok", b"\xff"], "record 1 is invalid UTF-8"),
        (Int64(), [b"\x00" * 8, None], "record 1 is null"),
        (String(), [None], "record 0 is null"),
        (Bytes(), [b"", None], "record 1 is null"),
    ],
)
def test_corrupt_arrays(ser, records, fragment):
    with pytest.raises(CorruptSavepointError) as e:
        ser.decode_array(pa.array(records, type=pa.binary()))
    assert fragment in str(e.value)


def test_decode_array_needs_binary():
    with pytest.raises(InvalidArgumentError):
        Int64().decode_array(pa.array([1, 2]))
    with pytest.raises(InvalidArgumentError):
        Int64().decode_array([b"\x00" * 8])


# -- bad values -------------------------------------------------------------------


@pytest.mark.parametrize(
    "ser, value",
    [
        (Int32(), 2**31),
        (Int32(), -(2**31) - 1),
        (Int64(), 2**63),
        (Int32(), True),
        (Int64(), 1.0),
        (Int64(), "1"),
        (Int64(), None),
        (Float64(), "1.5"),
        (Float64(), True),
        (Float64(), 10**400),
        (Boolean(), 1),
        (Boolean(), None),
        (String(), b"bytes"),
        (String(), "lone \udc80 surrogate"),
        (Bytes(), "text"),
    ],
)
def test_bad_values_refused(ser, value):
    with pytest.raises(InvalidArgumentError) as e:
        ser.encode(value)
    assert ser.serializer_id in str(e.value)


@pytest.mark.parametrize(
    "ser, values",
    [
        (Int64(), [1, None]),
        (Int64(), [1.5]),
        (Int64(), [True]),
        (Int64(), [2**64]),
        (Int64(), pa.array([1.0])),
        (Int32(), ["1"]),
        (Float64(), ["x"]),
        (Boolean(), [1, 0]),
        (String(), [b"x"]),
        (String(), ["a", None]),
        (Bytes(), ["x"]),
        (Int64(), "12"),
    ],
)

def test_bad_arrays_refused(ser, values):
    with pytest.raises(InvalidArgumentError):
        ser.encode_array(values)
