"""Chunk payloads: Arrow binary layout, validated before use."""

from __future__ import annotations

import pyarrow as pa
import pytest

from pyref import CorruptSavepointError
from pyref.chunk import decode_chunk, encode_chunk


def test_worked_example_bytes():
    # spec/format.md §7.5: two rows, two columns.
    payload = encode_chunk([pa.array([b"", b"xyz"]), pa.array([b"22", b"333"])])
    assert payload.hex() == "02000000020000000000000000000000030000000000000002000000050000007879" "7a3232333333"


def test_sliced_columns_are_rebased():
    keys = pa.array([b"ab", b"", b"xyz"]).slice(1)
    values = pa.array([b"1", b"22", b"333"]).slice(1)
    decoded = decode_chunk(encode_chunk([keys, values]), expected_rows=2, expected_columns=2)
    assert [c.to_pylist() for c in decoded] == [[b"", b"xyz"], [b"22", b"333"]]


def test_empty_rows_allowed():
    decoded = decode_chunk(encode_chunk([pa.array([], pa.binary())]), expected_rows=0, expected_columns=1)
    assert decoded[0].to_pylist() == []


@pytest.mark.parametrize("mutate,match", [
    (lambda p: p[:7], "shorter than the 8-byte header"),
    (lambda p: p[:12], "offset tables need"),
    (lambda p: p[:-1], "follow the offsets"),
    (lambda p: p + b"x", "follow the offsets"),
    (lambda p: p[:8] + b"\x01" + p[9:], "first offset is not 0"),
    (lambda p: p[:12] + b"\x09" + p[13:], "offsets decrease"),
])
def test_malformed_payloads(mutate, match):
    payload = encode_chunk([pa.array([b"ab", b"c"])])
    with pytest.raises(CorruptSavepointError, match=match):
        decode_chunk(mutate(payload), expected_rows=2, expected_columns=1)


def test_header_must_agree_with_manifest():
    payload = encode_chunk([pa.array([b"ab"])])
    with pytest.raises(CorruptSavepointError, match="manifest says 2 x 1"):
        decode_chunk(payload, expected_rows=2, expected_columns=1)


def test_a_chunked_column_encodes_as_its_pieces_joined():
    """The writer hands a key group's rows from several adds as one chunked column: the
    payload is the one its concatenation gives (sliced, empty and string pieces; a large
    binary column)."""
    keys = pa.array([b"k1", b"", b"key-three", b"k4", b"k5"])
    values = pa.array(["α", "b", "", "dé", "e"])
    key_pieces = [keys.slice(0, 2), keys.slice(2, 0), keys.slice(2, 2), keys.slice(4)]
    value_pieces = [values.slice(0, 1), values.slice(1, 3), pa.array([], pa.string()), values.slice(4)]
    chunked = [pa.chunked_array(key_pieces, pa.binary()),
               pa.chunked_array([p.cast(pa.string()) for p in value_pieces], pa.string())]
    assert encode_chunk(chunked) == encode_chunk([keys, values])
    assert encode_chunk([keys.cast(pa.large_binary()).slice(1), chunked[1].slice(1)]) == \
        encode_chunk([keys.slice(1), values.slice(1)])
    assert decode_chunk(encode_chunk(chunked), expected_rows=5, expected_columns=2)[1].to_pylist() == \
        [v.encode() for v in values.to_pylist()]
    with pytest.raises(ValueError, match="differ in length"):
        encode_chunk([pa.chunked_array(key_pieces[:1], pa.binary()), values])
