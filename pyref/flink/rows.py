"""Rows of bytes built from parts, a whole column at a time: what the Flink
writer uses to turn pyref's columns into Flink's records without a Python loop
per row.

A *part* is either a fixed-width block (a ``(rows, width)`` uint8 array: every
row contributes ``width`` bytes) or :class:`Spans` (row ``i`` contributes
``data[starts[i]:starts[i] + lengths[i]]``). :func:`join_rows` lays the parts of
every row side by side; the bytes are moved with numpy gathers, a bounded number
of rows at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

import numpy as np
import pyarrow as pa

from ..serializers.base import binary_parts
from .columns import gather_spans

__all__ = ["Spans", "Part", "join_rows", "part_lengths", "be_bytes", "varints", "to_binary", "spans_to_binary", "variable_ints"]


@dataclass(frozen=True)
class Spans:
    """Row ``i`` is ``data[starts[i]:starts[i] + lengths[i]]``."""

    data: np.ndarray
    starts: np.ndarray
    lengths: np.ndarray

    @classmethod
    def of(cls, column: pa.Array) -> Spans:
        """The rows of a (large) binary column without nulls."""
        offsets, data = binary_parts(column)
        offsets = offsets.astype(np.int64)
        return cls(data, offsets[:-1], np.diff(offsets))

    @classmethod
    def constant(cls, value: bytes, rows: int, present: np.ndarray | None = None) -> Spans:
        """``value`` in every row (only in the rows of the mask ``present``)."""
        lengths = np.full(rows, len(value), np.int64)
        if present is not None:
            lengths[~present] = 0
        return cls(np.frombuffer(value, np.uint8), np.zeros(rows, np.int64), lengths)

    def __len__(self) -> int:
        return len(self.lengths)

    def take(self, rows: np.ndarray) -> Spans:
        return Spans(self.data, self.starts[rows], self.lengths[rows])

    def skip(self, count: int) -> Spans:
        """Every row without its first ``count`` bytes."""
        return Spans(self.data, self.starts + count, self.lengths - count)


Part = Union[np.ndarray, Spans]


def part_lengths(part: Part, rows: int) -> np.ndarray | int:
    return part.lengths if isinstance(part, Spans) else part.shape[1]


#: Bytes moved per gather: bounds the index arrays (16 bytes of index per byte moved).
_GATHER_BYTES = 1 << 22


def _scatter_spans(out: np.ndarray, at: np.ndarray, part: Spans) -> None:
    lengths = part.lengths
    ends = np.cumsum(lengths)
    first = 0
    while first < len(lengths):
        done = ends[first - 1] if first else 0
        last = max(int(np.searchsorted(ends, done + _GATHER_BYTES, side="right")), first + 1)
        rows = slice(first, last)
        span = lengths[rows]
        total = int(span.sum())
        if total:
            local = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(span) - span, span)
            out[np.repeat(at[rows], span) + local] = part.data[np.repeat(part.starts[rows], span) + local]
        first = last


def join_rows(parts: list[Part], rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Every row's parts, side by side: the bytes and the int64 row offsets (``rows + 1``)."""
    lengths = np.zeros(rows, np.int64)
    for part in parts:
        lengths += part_lengths(part, rows)
    offsets = np.zeros(rows + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    out = np.empty(int(offsets[-1]), np.uint8)
    at = offsets[:-1].copy()
    for part in parts:
        if isinstance(part, Spans):
            _scatter_spans(out, at, part)
            at += part.lengths
        elif part.shape[1]:
            width = part.shape[1]
            out[(at[:, None] + np.arange(width)).reshape(-1)] = part.reshape(-1)
            at += width
    return out, offsets


def be_bytes(values: np.ndarray, width: int) -> np.ndarray:
    """Integers as ``(rows, width)`` big-endian bytes (two's complement)."""
    dtype = {1: ">u1", 2: ">u2", 4: ">u4", 8: ">u8"}[width]
    unsigned = np.asarray(values).astype(np.int64).astype(np.uint64) & np.uint64((1 << (8 * width)) - 1)
    return unsigned.astype(dtype).view(np.uint8).reshape(-1, width)


def varints(values: np.ndarray) -> Spans:
    """Non-negative ints as 7-bit groups, least significant first, the top bit set on
    every byte but the last (Flink's ``StringValue`` lengths and characters)."""
    values = np.asarray(values, np.int64)
    size = 1 + sum((values >= (1 << (7 * k))).astype(np.int64) for k in range(1, 5))
    groups = (values[:, None] >> (7 * np.arange(5))) & 0x7F
    more = np.arange(5)[None, :] < (size[:, None] - 1)
    matrix = (groups | (more << 7)).astype(np.uint8)
    return Spans(matrix.reshape(-1), np.arange(len(values), dtype=np.int64) * 5, size)


def variable_ints(values: np.ndarray) -> Spans:
    """``CompositeKeySerializationUtils.writeVariableIntBytes`` of every value: its
    little-endian bytes up to the last non-zero one (at least one byte)."""
    values = np.asarray(values, np.int64)
    size = 1 + sum((values >= (1 << (8 * k))).astype(np.int64) for k in range(1, 4))
    matrix = values.astype("<u4").view(np.uint8).reshape(-1, 4)
    return Spans(matrix.reshape(-1), np.arange(len(values), dtype=np.int64) * 4, size)


def to_binary(data: np.ndarray, offsets: np.ndarray) -> pa.Array:
    """Joined rows as an Arrow binary column (large when beyond 2 GiB)."""
    rows = len(offsets) - 1
    if offsets[-1] < 2**31:
        return pa.Array.from_buffers(pa.binary(), rows, [None, pa.py_buffer(offsets.astype(np.int32)),
                                                         pa.py_buffer(data)])
    return pa.Array.from_buffers(pa.large_binary(), rows, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def spans_to_binary(spans: Spans) -> pa.Array:
    """:class:`Spans` gathered into an Arrow binary column."""
    return gather_spans(spans.data, spans.starts, spans.lengths)
