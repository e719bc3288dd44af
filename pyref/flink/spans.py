"""Byte spans: building Arrow binary columns out of pieces of other buffers, one
numpy operation per column rather than a Python step per cell.

A :class:`Spans` is one byte run per row (a buffer, each row's start and
length in it). Transcoding Flink cells to pyref encodings is mostly cutting
spans (a cell without its length prefix), joining them row by row (a u32
length in front of a value, a flag byte, a timestamp) and reversing the bytes
of fixed-width numbers (Flink writes big-endian, pyref little-endian).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ..errors import UnsupportedFormatError
from .columns import column_buffers, gather_spans

__all__ = ["Spans", "join", "constant", "u32_le", "reversed_fixed"]


@dataclass(frozen=True)
class Spans:
    """Row ``i`` is ``buffer[starts[i]:starts[i] + lengths[i]]``."""

    buffer: np.ndarray
    starts: np.ndarray
    lengths: np.ndarray

    @classmethod
    def of(cls, column: pa.Array) -> Spans:
        """The cells of a binary column."""
        offsets, data = column_buffers(column)
        offsets = offsets.astype(np.int64)
        return cls(data, offsets[:-1], np.diff(offsets))

    def __len__(self) -> int:
        return len(self.starts)

    def cut(self, skip: np.ndarray | int, keep: np.ndarray | None = None) -> Spans:
        """Each row without its first ``skip`` bytes (and only ``keep`` bytes of the rest)."""
        starts = self.starts + skip
        return Spans(self.buffer, starts, self.lengths - skip if keep is None else np.asarray(keep, np.int64))

    def take(self, rows: np.ndarray) -> Spans:
        return Spans(self.buffer, self.starts[rows], self.lengths[rows])

    def where(self, mask: np.ndarray, other: Spans) -> Spans:
        """Row ``i`` of ``other`` where ``mask[i]``, else this one's."""
        buffer = np.concatenate([self.buffer, other.buffer])
        starts = np.where(mask, other.starts + len(self.buffer), self.starts)
        return Spans(buffer, starts, np.where(mask, other.lengths, self.lengths))

    def column(self) -> pa.BinaryArray:
        return gather_spans(self.buffer, self.starts, self.lengths)


def constant(values: np.ndarray | bytes, n: int, width: int) -> Spans:
    """Rows of ``width`` bytes each from ``values`` (n * width bytes, row-major), or the
    same bytes in every row."""
    if isinstance(values, (bytes, bytearray)):
        return Spans(np.frombuffer(bytes(values), np.uint8), np.zeros(n, np.int64), np.full(n, width, np.int64))
    buffer = np.ascontiguousarray(values).view(np.uint8).reshape(-1)
    return Spans(buffer, np.arange(n, dtype=np.int64) * width, np.full(n, width, np.int64))


def u32_le(values: np.ndarray) -> Spans:
    """A u32 little-endian per row (pyref's frame length, list count)."""
    values = np.asarray(values, np.int64)
    if len(values) and int(values.max()) > 0xFFFFFFFF:
        raise UnsupportedFormatError("a value longer than 4 GiB cannot be framed")
    return constant(values.astype("<u4"), len(values), 4)


def join(*parts: Spans) -> pa.BinaryArray:
    """Row ``i`` of the result is row ``i`` of every part, concatenated in order."""
    n = len(parts[0])
    if len(parts) == 1:
        return parts[0].column()
    widths = [int(p.lengths.max()) if n else 0 for p in parts]
    if n and sum(widths) * n <= 2 * sum(int(p.lengths.sum()) for p in parts):
        return _padded_join(parts, widths)
    sizes = np.cumsum([0] + [len(p.buffer) for p in parts[:-1]])
    buffer = np.concatenate([p.buffer for p in parts])
    starts = np.stack([p.starts + base for p, base in zip(parts, sizes)], axis=1).reshape(-1)
    lengths = np.stack([p.lengths for p in parts], axis=1).reshape(-1)
    pieces = gather_spans(buffer, starts, lengths)
    # The pieces lie back to back in row order: every row starts at its first piece.
    offsets = np.frombuffer(pieces.buffers()[1], np.int32)[: len(parts) * n + 1: len(parts)]
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(np.ascontiguousarray(offsets)),
                                                  pieces.buffers()[2]])


def _padded_join(parts: tuple[Spans, ...], widths: list[int]) -> pa.BinaryArray:
    """:func:`join` of parts whose rows are about as long as their longest: each part's rows cut at
    its longest width (one row gather, no index per byte), the bytes past each row's length masked
    out. The caller bounds the padding to the bytes joined."""
    n = len(parts[0])
    rows = np.empty((n, sum(widths)), np.uint8)
    keep = np.empty(rows.shape, bool)
    at = 0
    for part, width in zip(parts, widths):
        if width:
            buffer = part.buffer
            if int((part.starts + width).max()) > len(buffer):  # a short row near the end: pad the buffer
                buffer = np.concatenate([buffer, np.zeros(width, np.uint8)])
            rows[:, at:at + width] = np.lib.stride_tricks.sliding_window_view(buffer, width)[part.starts]
            keep[:, at:at + width] = np.arange(width) < part.lengths[:, None]
        at += width
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(sum(p.lengths for p in parts), out=offsets[1:])
    if offsets[-1] >= 2**31:
        raise UnsupportedFormatError("a state column over 2 GiB in one key-group range")
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets.astype(np.int32)),
                                                  pa.py_buffer(rows[keep])])


def reversed_fixed(spans: Spans, widths: tuple[int, ...]) -> np.ndarray:
    """Rows of exactly ``sum(widths)`` bytes, each field of the given widths with its bytes
    reversed (big-endian numbers to little-endian): an (n, sum(widths)) uint8 matrix.
    The caller has checked every row's length."""
    width = sum(widths)
    if not len(spans):
        return np.zeros((0, width), np.uint8)
    # One row gather from a sliding-window view: no index per byte.
    rows = np.lib.stride_tricks.sliding_window_view(spans.buffer, width)[spans.starts]
    out = np.empty_like(rows)
    at = 0
    for w in widths:
        out[:, at:at + w] = rows[:, at:at + w][:, ::-1]
        at += w
    return out
