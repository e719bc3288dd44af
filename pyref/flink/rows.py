"""Rows of bytes built from parts, a whole column at a time: what the Flink writer
uses to turn pyref's columns into Flink's records without a Python loop per row.

A *part* is an Arrow binary column (row ``i`` contributes its ``i``-th value) or a
fixed-width block, a ``(rows, width)`` uint8 array. :func:`join_rows` lays the parts
of every row side by side with Arrow's ``binary_join_element_wise``.
"""

from __future__ import annotations

from typing import Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..serializers.base import binary_parts

__all__ = ["Part", "binary", "lengths", "join_rows", "be_bytes", "varints", "variable_ints", "constant",
           "with_empty_rows", "from_bytes"]

Part = Union[pa.Array, np.ndarray]


def binary(block: np.ndarray) -> pa.Array:
    """A ``(rows, width)`` block as a binary column (no copy of a contiguous block)."""
    rows, width = block.shape
    offsets = np.arange(rows + 1, dtype=np.int64) * width
    data = np.ascontiguousarray(block).reshape(-1)
    if offsets[-1] < 2**31:
        return pa.Array.from_buffers(pa.binary(), rows, [None, pa.py_buffer(offsets.astype(np.int32)),
                                                         pa.py_buffer(data)])
    return pa.Array.from_buffers(pa.large_binary(), rows, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def from_bytes(data: np.ndarray, offsets: np.ndarray) -> pa.Array:
    """A binary column of ``data`` cut at ``offsets`` (int64, ``rows + 1``, from 0)."""
    rows = len(offsets) - 1
    if offsets[-1] < 2**31:
        return pa.Array.from_buffers(pa.binary(), rows, [None, pa.py_buffer(offsets.astype(np.int32)),
                                                         pa.py_buffer(data)])
    return pa.Array.from_buffers(pa.large_binary(), rows, [None, pa.py_buffer(offsets.astype(np.int64)),
                                                           pa.py_buffer(data)])


def lengths(column: pa.Array) -> np.ndarray:
    """Every row's length (int64)."""
    offsets, _ = binary_parts(column)
    return np.diff(offsets).astype(np.int64)


def join_rows(parts: list[Part], rows: int) -> pa.Array:
    """Every row's parts, side by side, as one binary column."""
    columns = [binary(p) if isinstance(p, np.ndarray) else p for p in parts]
    if not columns or rows == 0:
        return pa.array([], pa.binary())
    # The empty separator is made here, not at import: pa.scalar imports pandas where it is
    # installed, which the command line must not pay for before it runs an export.
    if sum(c.nbytes for c in columns) >= 2**31:
        columns = [c.cast(pa.large_binary()) for c in columns]
        return pc.binary_join_element_wise(*columns, pa.scalar(b"", pa.large_binary()))
    columns = [c.cast(pa.binary()) if c.type != pa.binary() else c for c in columns]
    return pc.binary_join_element_wise(*columns, pa.scalar(b"", pa.binary()))


def be_bytes(values: np.ndarray, width: int) -> np.ndarray:
    """Integers as ``(rows, width)`` big-endian bytes (two's complement)."""
    dtype = {1: ">u1", 2: ">u2", 4: ">u4", 8: ">u8"}[width]
    unsigned = np.asarray(values).astype(np.int64).astype(np.uint64) & np.uint64((1 << (8 * width)) - 1)
    return unsigned.astype(dtype).view(np.uint8).reshape(-1, width)


def _packed(groups: np.ndarray, size: np.ndarray) -> pa.Array:
    """Row ``i``: the first ``size[i]`` bytes of ``groups[i]``."""
    keep = np.arange(groups.shape[1])[None, :] < size[:, None]
    offsets = np.zeros(len(size) + 1, np.int64)
    np.cumsum(size, out=offsets[1:])
    return from_bytes(groups[keep], offsets)


def _bytes_beyond(values: np.ndarray, bits: np.ndarray) -> np.ndarray:
    """How many of the thresholds ``1 << bits`` every value reaches (int64)."""
    return (values[:, None] >= (np.int64(1) << bits)[None, :]).sum(axis=1, dtype=np.int64)


def varints(values: np.ndarray, present: np.ndarray | None = None) -> pa.Array:
    """Non-negative ints as 7-bit groups, least significant first, the top bit set on
    every byte but the last (Flink's ``StringValue`` lengths); rows outside the mask
    ``present`` are empty."""
    values = np.asarray(values, np.int64)
    size = 1 + _bytes_beyond(values, 7 * np.arange(1, 5))
    groups = (values[:, None] >> (7 * np.arange(5))) & 0x7F
    more = np.arange(5)[None, :] < (size[:, None] - 1)
    if present is not None:
        size = np.where(present, size, 0)
    return _packed((groups | (more << 7)).astype(np.uint8), size)


def variable_ints(values: np.ndarray) -> pa.Array:
    """``CompositeKeySerializationUtils.writeVariableIntBytes`` of every value: its
    little-endian bytes up to the last non-zero one (at least one byte)."""
    values = np.asarray(values, np.int64)
    size = 1 + _bytes_beyond(values, 8 * np.arange(1, 4))
    return _packed(values.astype("<u4").view(np.uint8).reshape(-1, 4), size)


def constant(value: bytes, present: np.ndarray) -> pa.Array:
    """``value`` in the rows of the mask ``present``, nothing in the others."""
    size = present.astype(np.int64) * len(value)
    return _packed(np.tile(np.frombuffer(value, np.uint8), (len(present), 1)), size)


def with_empty_rows(column: pa.Array, present: np.ndarray) -> pa.Array:
    """``column``'s rows in the positions of the mask ``present``, empty rows elsewhere."""
    offsets, data = binary_parts(column)
    full = np.zeros(len(present), np.int64)
    full[present] = np.diff(offsets)
    ends = np.zeros(len(present) + 1, np.int64)
    np.cumsum(full, out=ends[1:])
    start = int(offsets[0]) if len(column) else 0
    return from_bytes(data[start:start + int(ends[-1])], ends)
