"""The canonical value encoding: the writer's view (values) and the reader's view
(stored bytes) agree, and the encoding is the documented one."""

from __future__ import annotations

import math

import pytest

from compat_tests.canonical import canonical_text, first_difference, json_from_bytes, json_from_value
from compat_tests.generate_goldens import cart_serializer, carts
from pyref import serializers as s

CASES = [
    (s.Int32(), -(2**31), -(2**31)),
    (s.Int64(), 2**63 - 1, "9223372036854775807"),
    (s.Float64(), 1.5, "3ff8000000000000"),
    (s.Float64(), -0.0, "8000000000000000"),
    (s.Float64(), math.inf, "7ff0000000000000"),
    (s.Boolean(), True, True),
    (s.String(), "𝄞ü", "𝄞ü"),
    (s.Bytes(), b"\x00\xff", "00ff"),
    (s.Nullable(s.Int64()), None, None),
    (s.Nullable(s.Int64()), 5, "5"),
    (s.Tuple(s.String(), s.Nullable(s.Int32()), names=("a", "b")), ("x", None), ["x", None]),
    (s.ListOf(s.ListOf(s.Int64())), [[1], []], [["1"], []]),
    (s.MapOf(s.String(), s.Float64()), {"z": 0.0, "a": -0.0}, [["z", "0000000000000000"], ["a", "8000000000000000"]]),
    (s.Json(), {"b": [1, None]}, '{"b":[1,null]}'),
]


@pytest.mark.parametrize(("serializer", "value", "expected"), CASES, ids=lambda x: repr(x)[:30])
def test_value_encoding(serializer, value, expected):
    assert json_from_value(serializer, value) == expected
    assert json_from_bytes(serializer, serializer.encode(value)) == expected


def test_protobuf_values_are_their_stored_bytes():
    serializer, _ = cart_serializer()
    for cart in carts():
        data = serializer.encode(cart)
        assert json_from_bytes(serializer, data) == json_from_value(serializer, cart) == data.hex()


def test_nan_bits_are_kept():
    import struct

    nan = struct.unpack(">d", bytes.fromhex("7ff8000000000123"))[0]
    assert json_from_bytes(s.Float64(), s.Float64().encode(nan)) == "7ff8000000000123"


def test_comparison_is_type_exact():
    assert canonical_text({"a": 1}) != canonical_text({"a": 1.0})
    assert canonical_text({"a": 1}) != canonical_text({"a": True})
    assert canonical_text({"b": 1, "a": [2]}) == canonical_text({"a": [2], "b": 1})
    assert first_difference({"a": [1, 2]}, {"a": [1, "2"]}) == '$.a[1]: expected 2, got "2"'


def test_dump_of_a_savepoint_without_state_checks_its_bases(tmp_path):
    """spec/format.md §5.10: a dump makes the checks before reading even when the savepoint has
    no operator, so a shallow savepoint whose listed base is missing is refused (a clean-room
    reader found pyref's dump returning it)."""
    from compat_tests.canonical import dump_savepoint
    from pyref import CorruptSavepointError
    from pyref._proto.savepoint.v1 import manifest_pb2 as pb
    from pyref.manifest import encode_manifest

    manifest = pb.Manifest(savepoint_id="3f2a6c1e-8b4d-4e7a-9c05-1d2e3f405162", required_features=["external-bases"])
    manifest.bases.add(directory="base", savepoint_id="11111111-1111-1111-1111-111111111111")
    (tmp_path / "derived").mkdir()
    (tmp_path / "derived" / "_manifest").write_bytes(encode_manifest(manifest))
    with pytest.raises(CorruptSavepointError, match="'base' is missing"):
        dump_savepoint(tmp_path / "derived", [1], canonical_version=2)
