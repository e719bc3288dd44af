"""Chunk payloads: rows of one state as columns of byte strings (spec/format.md §7).

A payload (the bytes after decompression) is::

    u32 row_count
    u32 column_count
    column_count x (row_count + 1) u32 offsets    (each column's own offsets, starting at 0)
    column 0 bytes, column 1 bytes, ...

all little-endian. Column ``c``'s row ``r`` is ``data_c[off_c[r]:off_c[r+1]]``. This
is exactly Arrow's binary layout, so a payload becomes ``pyarrow.BinaryArray``
columns without copying, and any run of rows can be sliced without decoding the
others.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from .codecs import MAX_RAW_LENGTH
from .errors import CorruptSavepointError

_HEADER = 8
_LE = sys.byteorder == "little"


def _column_parts(column: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, list[memoryview]]:
    """A binary column's offsets rebased to 0 (little-endian int32: never negative, so the
    same bytes as u32) and its data bytes as views, one per chunk of a chunked column: the
    pieces are joined by the payload's one copy."""
    pieces = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    offsets = np.zeros(sum(len(p) for p in pieces) + 1, dtype="<i4")  # little-endian, as stored
    data, row, total = [], 0, 0
    for piece in pieces:
        if pa.types.is_large_binary(piece.type) or pa.types.is_large_string(piece.type):
            piece = piece.cast(pa.binary() if pa.types.is_large_binary(piece.type) else pa.string())
        if not (pa.types.is_binary(piece.type) or pa.types.is_string(piece.type)):
            raise TypeError(f"chunk columns are binary, got {piece.type}")
        if piece.null_count:
            raise ValueError("chunk columns cannot hold nulls; nullable values are encoded by the serializer")
        n = len(piece)
        if not n:
            continue
        bufs = piece.buffers()
        own = np.frombuffer(bufs[1], dtype=np.int32, count=n + 1, offset=piece.offset * 4)
        start, end = int(own[0]), int(own[-1])
        if total + end - start > MAX_RAW_LENGTH:
            raise ValueError("chunk payload exceeds 2 GiB; lower the chunk size")
        if end > start:
            data.append(memoryview(bufs[2])[start:end])
        # Each piece continues where the previous one ended (payloads stay under 2 GiB: int32 holds them).
        np.add(own[1:], total - start, out=offsets[row + 1 : row + n + 1])
        row, total = row + n, total + end - start
    return offsets, data


def encode_chunk(columns: Sequence[pa.Array | pa.ChunkedArray]) -> bytes:
    """Serialise equal-length binary columns (a chunked column: its pieces in order) into
    one chunk payload, copying each byte once."""
    if not columns:
        raise ValueError("a chunk has at least one column")
    n = len(columns[0])
    parts = [_column_parts(c) for c in columns]
    if any(len(off) != n + 1 for off, _ in parts):
        raise ValueError("chunk columns differ in length")
    length = 8 + sum(4 * len(off) + sum(len(d) for d in data) for off, data in parts)
    if length > MAX_RAW_LENGTH:
        raise ValueError("chunk payload exceeds 2 GiB; lower the chunk size")
    header = np.array([n, len(columns)], dtype="<u4")
    return b"".join([header.data, *(off.data for off, _ in parts), *(d for _, data in parts for d in data)])


def decode_chunk(payload: bytes, *, expected_rows: int, expected_columns: int, path: str | None = None,
                 state: str | None = None) -> list[pa.BinaryArray]:
    """Parse and validate a payload into its binary columns (zero-copy views of ``payload``)."""

    def corrupt(reason: str) -> CorruptSavepointError:
        return CorruptSavepointError(f"malformed chunk payload: {reason}", path=path, state=state)

    size = len(payload)
    if size < _HEADER:
        raise corrupt(f"{size} bytes is shorter than the 8-byte header")
    rows, cols = (int(v) for v in np.frombuffer(payload, dtype="<u4", count=2))
    if rows != expected_rows or cols != expected_columns:
        raise corrupt(f"header says {rows} rows x {cols} columns, manifest says {expected_rows} x {expected_columns}")
    offsets_len = cols * (rows + 1) * 4
    if _HEADER + offsets_len > size:
        raise corrupt(f"offset tables need {offsets_len} bytes but only {size - _HEADER} follow the header")
    table = np.frombuffer(payload, dtype="<u4", count=cols * (rows + 1), offset=_HEADER).reshape(cols, rows + 1)
    if table[:, 0].any():
        raise corrupt("a column's first offset is not 0")
    if rows and (table[:, 1:] < table[:, :-1]).any():
        raise corrupt("offsets decrease")
    lengths = table[:, -1].astype(np.int64)
    data_start = _HEADER + offsets_len
    if data_start + int(lengths.sum()) != size:
        raise corrupt(f"columns hold {int(lengths.sum())} bytes but {size - data_start} follow the offsets")
    buf = pa.py_buffer(payload)
    out = []
    pos = data_start
    for c in range(cols):
        # Values fit int32: the payload is at most MAX_RAW_LENGTH bytes.
        offsets = table[c].view("<i4") if _LE else table[c].astype(np.int32)
        out.append(pa.BinaryArray.from_buffers(pa.binary(), rows, [None, pa.py_buffer(offsets), buf.slice(pos, int(lengths[c]))]))
        pos += int(lengths[c])
    return out
