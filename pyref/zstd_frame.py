"""The layout of the one Zstandard frame a ZSTD chunk holds (spec/format.md §7.3).

pyarrow's one-shot decompression accepts more than the format allows: several
concatenated frames, skippable frames, and any window size. The format asks for
exactly one frame and a bounded window, so that every reader gives the same answer
on the same bytes. Neither pyarrow nor cramjam exposes the frame header or where a
frame ends; both are fixed layouts of RFC 8878 §3.1.1 (frame header, then 3-byte
block headers that give each block's size), so this module walks them: one step per
block of up to 128 KiB, never per byte of content.
"""

from __future__ import annotations

import struct
from typing import Any

from .errors import CorruptSavepointError

ZSTD_MAGIC = 0xFD2FB528
#: Skippable frames have the magic numbers 0x184D2A50 ... 0x184D2A5F (RFC 8878 §3.1.2).
SKIPPABLE_MAGIC_MASK, SKIPPABLE_MAGIC = 0xFFFFFFF0, 0x184D2A50
#: Largest window a frame may need (spec/format.md §7.3, rule Z2): libzstd's default
#: decoding limit, which every frame its compressor writes without long-distance mode obeys.
MAX_WINDOW_SIZE = 1 << 27
_FCS_BYTES = (0, 2, 4, 8)  # by Frame_Content_Size_flag; flag 0 means 1 byte in a single-segment frame
_DICT_ID_BYTES = (0, 1, 2, 4)
_RLE_BLOCK, _RESERVED_BLOCK = 1, 3


def check_single_frame(stored: bytes | memoryview, **where: Any) -> None:
    """Raise :class:`CorruptSavepointError` unless ``stored`` is exactly one Zstandard frame
    (no skippable frame, nothing after it) that needs no dictionary and a window of at most
    :data:`MAX_WINDOW_SIZE` bytes. Content and checksum are the decompressor's to check."""
    pos, window = _header(stored, **where)
    if window > MAX_WINDOW_SIZE:
        raise CorruptSavepointError(f"zstd frame needs a window of {window} bytes, more than the format's "
                                    f"{MAX_WINDOW_SIZE} (rule Z2)", **where)
    has_checksum = stored[4] & 0x04
    last = False
    while not last:
        if pos + 3 > len(stored):
            raise CorruptSavepointError(f"zstd frame ends inside a block header at byte {pos}", **where)
        (header,) = struct.unpack_from("<I", bytes(stored[pos:pos + 3]) + b"\x00")
        last, block_type, size = header & 1, (header >> 1) & 3, header >> 3
        if block_type == _RESERVED_BLOCK:
            raise CorruptSavepointError(f"zstd block at byte {pos} has the reserved block type", **where)
        pos += 3 + (1 if block_type == _RLE_BLOCK else size)
    pos += 4 if has_checksum else 0
    if pos > len(stored):
        raise CorruptSavepointError(f"zstd frame is cut short: it needs {pos} bytes, the chunk has "
                                    f"{len(stored)}", **where)
    if pos < len(stored):
        raise CorruptSavepointError(f"{len(stored) - pos} bytes follow the zstd frame, which ends at byte {pos}: "
                                    "a chunk is exactly one frame (no second or skippable frame)", **where)


def _header(stored: bytes | memoryview, **where: Any) -> tuple[int, int]:
    """(offset of the first block, window size) of the frame header at the start of ``stored``."""
    if len(stored) < 5:
        raise CorruptSavepointError("zstd chunk is shorter than a frame header", **where)
    (magic,) = struct.unpack_from("<I", stored, 0)
    if magic & SKIPPABLE_MAGIC_MASK == SKIPPABLE_MAGIC:
        raise CorruptSavepointError("zstd chunk starts with a skippable frame; a chunk is exactly one frame", **where)
    if magic != ZSTD_MAGIC:
        raise CorruptSavepointError(f"zstd chunk does not start with the zstd magic number (found {magic:#010x})",
                                    **where)
    descriptor = stored[4]
    if descriptor & 0x08:
        raise CorruptSavepointError("zstd frame header has its reserved bit set", **where)
    single_segment = descriptor & 0x20
    fcs_bytes = _FCS_BYTES[descriptor >> 6] or (1 if single_segment else 0)
    dict_bytes = _DICT_ID_BYTES[descriptor & 0x03]
    pos = 5
    window = 0
    if not single_segment:
        if len(stored) < 6:
            raise CorruptSavepointError("zstd frame header is cut short", **where)
        exponent, mantissa = stored[5] >> 3, stored[5] & 0x07
        base = 1 << (10 + exponent)
        window = base + (base >> 3) * mantissa
        pos = 6
    if len(stored) < pos + dict_bytes + fcs_bytes:
        raise CorruptSavepointError("zstd frame header is cut short", **where)
    if int.from_bytes(stored[pos:pos + dict_bytes], "little"):
        raise CorruptSavepointError("zstd frame needs a dictionary; chunks are compressed without one", **where)
    pos += dict_bytes
    if single_segment:
        window = int.from_bytes(stored[pos:pos + fcs_bytes], "little") + (256 if fcs_bytes == 2 else 0)
    return pos + fcs_bytes, window
