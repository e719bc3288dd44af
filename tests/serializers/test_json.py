"""The json serializer: compact UTF-8 JSON text, strict decoding."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pyref.errors import CorruptSavepointError, InvalidArgumentError
from pyref.serializers import Json, ListOf, Nullable, serializer_from_snapshot
from serializer_spec_tables import spec_hex_examples

EXAMPLES = [
    ({"a": [1, True, None]}, "7b 22 61 22 3a 5b 31 2c 74 72 75 65 2c 6e 75 6c 6c 5d 7d"),
    ("é", "22 c3 a9 22"),
]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=20,
)


@pytest.mark.parametrize("value, hexstr", EXAMPLES)
def test_spec_example_bytes(value, hexstr):
    assert Json().encode(value).hex(" ") == hexstr
    assert Json().decode(bytes.fromhex(hexstr)) == value


def test_every_spec_example_is_checked():
    assert spec_hex_examples("3.12") == {h for _, h in EXAMPLES}


@given(json_values)
def test_round_trip(value):
    data = Json().encode(value)
    assert data == json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
    assert Json().decode(data) == value


@given(st.lists(json_values, max_size=5))
def test_vectorised(values):
    enc = Json().encode_array(values)
    assert enc.to_pylist() == [Json().encode(v) for v in values]
    dec = Json().decode_array(enc)
    assert dec.type == pa.string()
    assert [json.loads(t) for t in dec.to_pylist()] == values
    assert Json().encode_array(dec).equals(enc)


def test_accepts_any_valid_json_text():
    assert Json().decode(b' { "a" : 1 }\n') == {"a": 1}
    assert Json().decode("\"\\u00e9\"".encode()) == "é"


def test_nested_and_nullable():
    ser = ListOf(Nullable(Json()))
    assert ser.decode(ser.encode([None, {"k": [1]}])) == [None, {"k": [1]}]
    assert Json().arrow_type() == pa.string() and Json().fixed_width is None
    assert serializer_from_snapshot(Json().snapshot()) == Json()


@pytest.mark.parametrize(
    "data, fragment",
    [
        (b"", "invalid JSON (Expecting value) at offset 0"),
        (b"{\"a\":1", "invalid JSON"),
        (b"[1] x", "invalid JSON (Extra data) at offset 4"),
        (b"NaN", "NaN is not JSON"),
        (b"[Infinity]", "Infinity is not JSON"),
        (b"-Infinity", "is not JSON"),
        (b"\"\xff\"", "invalid UTF-8 (invalid start byte) at offset 1"),
        ("\ufeff1".encode(), "invalid JSON"),  # byte order mark
        ("\"é\" é".encode(), "at offset 5"),  # offsets count bytes, not characters
        (b"[" * 100_000, "nested deeper than 64 levels"),  # refused before the parser recurses (§3.12)
        (b"[" * 65 + b"]" * 65, "nested deeper than 64 levels"),
        (b'{"a":' * 65 + b"1" + b"}" * 65, "nested deeper than 64 levels"),
    ],
)

def test_corrupt(data, fragment):
    with pytest.raises(CorruptSavepointError) as e:
        Json().decode(data)
    assert fragment in str(e.value)
    assert str(e.value).startswith("json: ")


def test_nesting_limit_is_exact():
    """64 levels of arrays and objects read, 65 do not (spec/serializers.md §3.12); brackets in
    strings are text, not nesting. Writers refuse what readers would."""
    deepest = b'{"a":' * 32 + b"[" * 32 + b'"[[[{{{\\"["' + b"]" * 32 + b"}" * 32
    value = Json().decode(deepest)
    for _ in range(32):
        value = value["a"]
    for _ in range(31):
        value = value[0]
    assert value == ['[[[{{{"[']
    assert Json().decode(Json().encode(_nested_lists(64))) == _nested_lists(64)
    with pytest.raises(InvalidArgumentError, match="deeper than 64"):
        Json().encode(_nested_lists(65))


def _nested_lists(depth: int) -> list:
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


def test_corrupt_array_names_the_record():
    with pytest.raises(CorruptSavepointError) as e:
        Json().decode_array(pa.array([b"1", b"{"]))
    assert str(e.value).startswith("record 1: json:")


@pytest.mark.parametrize("value", [float("nan"), [float("inf")], {1j: 2}, object(), "\udc80", b"bytes"])
def test_bad_values(value):
    with pytest.raises(InvalidArgumentError) as e:
        Json().encode(value)
    assert "json serializer" in str(e.value)


def test_circular_value_refused():
    v: list = []
    v.append(v)
    with pytest.raises(InvalidArgumentError):
        Json().encode(v)
