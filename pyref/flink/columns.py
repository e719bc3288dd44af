"""Arrow binary columns cut out of byte buffers without a loop per cell."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..errors import UnsupportedFormatError

__all__ = ["gather_spans", "column_buffers"]


def gather_spans(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray, *,
                 clear_top_bit: bool = False) -> pa.BinaryArray:
    """The byte spans ``buf[starts[i]:starts[i]+lengths[i]]`` as one Arrow
    binary array, without a loop per span: the bytes are gathered with one
    index per byte, a bounded batch of spans at a time. ``clear_top_bit``
    clears the top bit of each span's first byte (Flink's "meta data
    follows" flag on keys)."""
    starts = np.asarray(starts, np.int64)
    lengths = np.asarray(lengths, np.int64)
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    total = int(offsets[-1])
    if total >= 2**31:
        raise UnsupportedFormatError("a state column over 2 GiB in one key-group range")
    if len(lengths) and total and np.all(lengths == lengths[0]):
        # Spans of one width: one row gather from a sliding-window view, no per-byte index.
        windows = np.lib.stride_tricks.sliding_window_view(buf, int(lengths[0]))
        data = np.ascontiguousarray(windows[starts]).reshape(-1)
        return _binary(data, offsets, lengths, clear_top_bit)
    data = np.empty(total, np.uint8)
    first = 0
    while first < len(lengths):
        # Batches of about _GATHER_BYTES bytes bound the index arrays.
        last = max(int(np.searchsorted(offsets, offsets[first] + _GATHER_BYTES, side="right")) - 1, first + 1)
        last = min(last, len(lengths))
        begin, stop = int(offsets[first]), int(offsets[last])
        if stop > begin:
            shift = np.repeat(starts[first:last] - offsets[first:last], lengths[first:last])
            data[begin:stop] = buf[shift + np.arange(begin, stop)]
        first = last
    return _binary(data, offsets, lengths, clear_top_bit)


def _binary(data: np.ndarray, offsets: np.ndarray, lengths: np.ndarray, clear_top_bit: bool) -> pa.BinaryArray:
    if clear_top_bit and data.size:
        data[offsets[:-1][lengths > 0]] &= 0x7F
    return pa.Array.from_buffers(pa.binary(), len(lengths),
                                 [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)])


_GATHER_BYTES = 1 << 23


def column_buffers(column: pa.BinaryArray) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, data) of a binary array without nulls, offsets relative to ``data``."""
    if column.null_count:
        raise UnsupportedFormatError("binary column with nulls")
    buffers = column.buffers()
    offsets = np.frombuffer(buffers[1], dtype=np.int32)[column.offset:column.offset + len(column) + 1]
    data = np.frombuffer(buffers[2], dtype=np.uint8) if buffers[2] is not None else np.zeros(0, np.uint8)
    return offsets, data
