"""Java DataInput and snappy framing on hand-made bytes, hostile ones included."""

from __future__ import annotations

import struct

import pytest
from pyref.testing.flink_bytes import framed, string_value, utf, varint

from pyref.errors import CorruptSavepointError
from pyref.flink.compression import decode_framed, decode_framed_indexed
from pyref.flink.datainput import DataInput, decode_modified_utf8


def test_big_endian_fixed_width_reads() -> None:
    inp = DataInput(struct.pack(">bhiqfd?", -3, -300, -70000, -(2**40), 1.5, -2.25, True))
    assert [inp.read_byte(), inp.read_short(), inp.read_int(), inp.read_long(), inp.read_float(),
            inp.read_double(), inp.read_bool()] == [-3, -300, -70000, -(2**40), 1.5, -2.25, True]
    assert inp.at_end()


def test_modified_utf8_nul_and_supplementary_characters() -> None:
    # Java writes NUL as C0 80 and U+1F600 as the 3-byte forms of its two surrogates.
    assert decode_modified_utf8(b"a\xc0\x80b") == "a\x00b"
    assert decode_modified_utf8(b"\xed\xa0\xbd\xed\xb8\x80") == "\U0001F600"
    assert DataInput(utf("état")).read_utf() == "état"


@pytest.mark.parametrize("text", ["", "ascii only", "ünïcödé", "\u4e2d\u6587", "\U0001F600 emoji", None])
def test_string_value_round_trip(text) -> None:
    inp = DataInput(string_value(text) + b"tail")
    assert inp.read_string_value() == text
    assert inp.read_bytes(4) == b"tail"


def test_truncation_names_the_byte_range() -> None:
    inp = DataInput(b"\x00\x00\x01", base=100, path="f")
    with pytest.raises(CorruptSavepointError) as err:
        inp.read_int("count")
    assert err.value.byte_range == (100, 104) and err.value.path == "f"


def test_hostile_lengths_are_refused_before_allocation() -> None:
    # A UTF length past the end, a string claiming 2**28 chars, a count of 2**31-1 items.
    with pytest.raises(CorruptSavepointError):
        DataInput(b"\xff\xffabc").read_utf()
    with pytest.raises(CorruptSavepointError):
        DataInput(varint(2**28) + b"abc").read_string_value()
    with pytest.raises(CorruptSavepointError):
        DataInput(struct.pack(">i", 2**31 - 1) + b"x" * 8).read_count("items", 1)
    with pytest.raises(CorruptSavepointError):
        DataInput(struct.pack(">i", -1)).read_count("items")
    with pytest.raises(CorruptSavepointError):  # a varint that never ends
        DataInput(b"\xff" * 10).read_varint()


def test_framed_snappy_round_trip_with_both_chunk_kinds() -> None:
    data = b"abc" * 50_000 + bytes(range(256)) * 10  # compressible, then incompressible-ish
    stream = framed(data, chunk=65536)
    assert decode_framed(stream, 0, len(stream)) == data
    restarted = stream + framed(b"second stream")  # a key group starts a new stream
    assert decode_framed(restarted, 0, len(restarted)) == data + b"second stream"


def test_framed_index_maps_chunk_starts_to_output_positions() -> None:
    first, second = framed(b"x" * 10), framed(b"y" * 20, header=False)
    out, index = decode_framed_indexed(first + second, 0, len(first) + len(second))
    assert out == b"x" * 10 + b"y" * 20
    assert index[len(first)] == 10 and index[len(first) + len(second)] == 30


@pytest.mark.parametrize("damage", ["crc", "truncated", "identifier", "reserved", "oversize"])
def test_damaged_frames_are_typed_errors(damage: str) -> None:
    stream = bytearray(framed(b"payload" * 100))
    if damage == "crc":
        stream[14] ^= 0xFF
    elif damage == "truncated":
        del stream[-3:]
    elif damage == "identifier":
        stream[5] = ord("X")
    elif damage == "reserved":
        stream[10] = 0x05
    else:  # a compressed chunk declaring more than 64 KiB of output
        block = varint(1 << 20) + b"\x00"
        stream = bytearray(b"\x00" + (4 + len(block)).to_bytes(3, "little") + b"\x00" * 4 + block)
    with pytest.raises(CorruptSavepointError) as err:
        decode_framed(bytes(stream), 0, len(stream), path="k")
    assert err.value.path == "k" and err.value.byte_range is not None
