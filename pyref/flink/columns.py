"""Arrow binary columns cut out of byte buffers without a loop per cell."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..errors import UnsupportedFormatError

__all__ = ["gather_spans", "column_buffers"]


def gather_spans(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> pa.BinaryArray:
    """The byte spans ``buf[starts[i]:starts[i]+lengths[i]]`` (ascending, not
    overlapping) as one Arrow binary array, without a loop per span."""
    lengths = lengths.astype(np.int64)
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if offsets[-1] >= 2**31:
        raise UnsupportedFormatError("a state column over 2 GiB in one key-group range")
    if len(starts) and offsets[-1] == buf.size and starts[0] == 0 and np.all(starts[1:] == offsets[1:-1]):
        data = buf
    else:
        marks = np.zeros(buf.size + 1, np.int8)
        np.add.at(marks, starts, 1)
        np.add.at(marks, starts + lengths, -1)
        data = buf[np.cumsum(marks[:-1], dtype=np.int8) > 0]
    return pa.Array.from_buffers(pa.binary(), len(lengths),
                                 [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)])


def column_buffers(column: pa.BinaryArray) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, data) of a binary array without nulls, offsets relative to ``data``."""
    if column.null_count:
        raise UnsupportedFormatError("binary column with nulls")
    buffers = column.buffers()
    offsets = np.frombuffer(buffers[1], dtype=np.int32)[column.offset:column.offset + len(column) + 1]
    data = np.frombuffer(buffers[2], dtype=np.uint8) if buffers[2] is not None else np.zeros(0, np.uint8)
    return offsets, data
