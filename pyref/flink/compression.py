"""Flink's snapshot compression: xerial's ``SnappyFramedOutputStream``, which
writes the standard Snappy framing format (stream identifier ``ff 06 00 00
sNaPpY``, then chunks of at most 64 KiB, each with a masked CRC32C of its
uncompressed bytes).

Keyed state opens a new framed stream at each key group's offset; operator
state opens one stream after its (uncompressed) metadata and flushes it before
each element, so every recorded offset is a chunk boundary. Both are decoded
here, chunk by chunk, with the CRC of every chunk checked; the raw Snappy
blocks are decompressed by ``cramjam``.
"""

from __future__ import annotations

import cramjam

from ..checksum import crc32c
from ..errors import CorruptSavepointError

__all__ = ["STREAM_IDENTIFIER", "decode_framed", "decode_framed_indexed"]

STREAM_IDENTIFIER = b"\xff\x06\x00\x00sNaPpY"
_MAX_CHUNK_DATA = 65536  # the framing format's limit on uncompressed chunk data
_COMPRESSED = 0x00
_UNCOMPRESSED = 0x01
_PADDING = 0xFE
_IDENTIFIER = 0xFF


def _unmask(masked: int) -> int:
    rot = (masked - 0xA282EAD8) & 0xFFFFFFFF
    return ((rot >> 17) | (rot << 15)) & 0xFFFFFFFF


def _raw_length(block: bytes) -> int | None:
    """The uncompressed length a raw Snappy block declares (its varint prefix)."""
    result = shift = 0
    for i, b in enumerate(block[:5]):
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result
        shift += 7
    return None


def decode_framed(data: bytes | memoryview, start: int, end: int, *, base: int = 0,
                  path: str | None = None, state: str | None = None) -> bytes:
    """Uncompressed bytes of the framed Snappy chunks in ``data[start:end]``.

    The range must hold whole chunks; a stream identifier may appear before
    any of them (keyed state starts one per key group). ``base`` is the file
    offset of ``data[0]``, for errors.
    """
    return decode_framed_indexed(data, start, end, base=base, path=path, state=state)[0]


def decode_framed_indexed(data: bytes | memoryview, start: int, end: int, *, base: int = 0,
                          path: str | None = None, state: str | None = None) -> tuple[bytes, dict[int, int]]:
    """Like :func:`decode_framed`, with a map from the stream offset of each
    chunk (and of ``end``) to the position of its bytes in the output: offsets
    recorded after a flush are chunk starts."""
    out = bytearray()
    index: dict[int, int] = {}
    pos = start
    view = memoryview(data)

    def corrupt(reason: str, at: int, length: int) -> CorruptSavepointError:
        return CorruptSavepointError(f"snappy frame: {reason}", path=path, state=state,
                                     byte_range=(base + at, base + at + length))

    while pos < end:
        index.setdefault(pos, len(out))
        if pos + 4 > end:
            raise corrupt("truncated chunk header", pos, end - pos)
        kind = view[pos]
        length = view[pos + 1] | (view[pos + 2] << 8) | (view[pos + 3] << 16)
        body = pos + 4
        if body + length > end:
            raise corrupt(f"chunk of {length} bytes runs past the end", pos, end - pos)
        if kind == _IDENTIFIER:
            if bytes(view[pos:body + length]) != STREAM_IDENTIFIER:
                raise corrupt("bad stream identifier", pos, 4 + length)
        elif kind in (_COMPRESSED, _UNCOMPRESSED):
            if length < 4:
                raise corrupt("data chunk shorter than its checksum", pos, 4 + length)
            expected = _unmask(int.from_bytes(view[body:body + 4], "little"))
            payload = bytes(view[body + 4:body + length])
            if kind == _COMPRESSED:
                declared = _raw_length(payload)
                if declared is None or declared > _MAX_CHUNK_DATA:
                    raise corrupt(f"compressed chunk declares {declared} bytes (limit {_MAX_CHUNK_DATA})",
                                  pos, 4 + length)
                try:
                    payload = bytes(cramjam.snappy.decompress_raw(payload))
                except Exception as exc:  # cramjam raises its own DecompressionError
                    raise corrupt(f"invalid snappy block ({exc})", pos, 4 + length) from None
            elif len(payload) > _MAX_CHUNK_DATA:
                raise corrupt(f"uncompressed chunk of {len(payload)} bytes (limit {_MAX_CHUNK_DATA})",
                              pos, 4 + length)
            if crc32c(payload) != expected:
                raise corrupt("checksum mismatch", pos, 4 + length)
            out += payload
        elif kind == _PADDING or kind >= 0x80:
            pass  # padding and reserved skippable chunks carry nothing
        else:
            raise corrupt(f"reserved unskippable chunk type 0x{kind:02x}", pos, 4 + length)
        pos = body + length
    index.setdefault(end, len(out))
    return bytes(out), index
