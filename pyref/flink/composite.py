"""Splitting RocksDB-format composite keys and values into their parts.

A keyed-state key is ``key group | key | [key length] | namespace |
[namespace length] | [user key]``; the lengths are written (``writeVariableIntBytes``:
little-endian bytes until the rest is zero) only when the key and namespace
serializers are both variable-sized, i.e. Flink's ``getLength() < 0``. A
timer's key is ``key group | timestamp (sign-flipped, 8 bytes) | key |
namespace``. A LIST value is its elements joined by ``,``.

Splits are computed as spans relative to each cell. When the widths allow
(a fixed-width key, or a fixed-width last part) they come from numpy
arithmetic over all cells at once; otherwise each cell is walked with the
part's codec, which needs a type whose values can be delimited: a Kryo or
other opaque key can only be split when the parts after it have fixed width.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..errors import CorruptSavepointError, UnsupportedFormatError
from .datainput import DataInput
from .columns import column_buffers, gather_spans
from .serializers import FlinkType
from .values import Codec, Undelimited, codec_for

__all__ = ["split_keys", "map_scopes", "split_timer_keys", "split_list_values", "split_map_values", "variable_int_size"]

LIST_DELIMITER = ord(",")


def variable_int_size(value: int) -> int:
    """Bytes ``CompositeKeySerializationUtils.writeVariableIntBytes`` uses."""
    n = 1
    value >>= 8
    while value:
        n += 1
        value >>= 8
    return n


def _spans(column: pa.BinaryArray, starts: np.ndarray, ends: np.ndarray) -> pa.BinaryArray:
    offsets, data = column_buffers(column)
    base = offsets[:-1].astype(np.int64)
    return gather_spans(data, base + starts, ends - starts)


def _skip(codec: Codec, inp: DataInput, refusal: str, state: str) -> None:
    """Step over one value, or refuse with ``refusal`` when its type stores no length."""
    try:
        codec.skip(inp)
    except Undelimited:
        raise UnsupportedFormatError(refusal, state=state) from None


def _walk_parts(column: pa.BinaryArray, begin: np.ndarray, codecs: list[Codec], *, ambiguous: bool,
                state: str) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per cell and part read with ``codecs`` from ``begin``: (end of the part,
    start of what follows it); with ``ambiguous`` each part is followed by its
    length bytes, which are checked. One Python step per cell: the slow path."""
    offsets, data = column_buffers(column)
    raw = data.tobytes()
    bounds = [(np.empty(len(column), np.int64), np.empty(len(column), np.int64)) for _ in codecs]
    for i in range(len(column)):
        cell_start = int(offsets[i])
        inp = DataInput(raw, cell_start + int(begin[i]), int(offsets[i + 1]), state=state)
        for (ends, nexts), codec in zip(bounds, codecs):
            start = inp.pos
            _skip(codec, inp, f"cannot split a composite key: the {codec.type.describe()} part has no stored "
                  "length and is followed by variable-sized parts", state)
            ends[i] = inp.pos - cell_start
            if ambiguous:
                size = inp.pos - start
                stored = int.from_bytes(inp.read_bytes(variable_int_size(size), "composite key part length"),
                                        "little")
                if stored != size:
                    raise inp.corrupt(f"composite key part length {stored} does not match its {size} bytes")
            nexts[i] = inp.pos - cell_start
    return bounds


def _lengths(column: pa.BinaryArray) -> np.ndarray:
    offsets, _ = column_buffers(column)
    return np.diff(offsets).astype(np.int64)


def split_keys(keys: pa.BinaryArray, prefix: int, key_type: FlinkType, namespace_type: FlinkType,
               user_key: bool, state: str) -> dict[str, pa.BinaryArray]:
    """``key``, ``namespace`` and (MAP) ``user_key`` columns of composite keys."""
    n = len(keys)
    lengths = _lengths(keys)
    if n and lengths.min() < prefix:
        raise CorruptSavepointError("a key shorter than its key-group prefix", state=state)
    kc, nc = codec_for(key_type), codec_for(namespace_type)
    ambiguous = key_type.length < 0 and namespace_type.length < 0
    begin = np.full(n, prefix, np.int64)
    if not ambiguous and kc.width is not None:
        key_end = begin + kc.width
        ns_end = key_end + nc.width if nc.width is not None else (None if user_key else lengths)
        if ns_end is None:
            ns_end = _walk_parts(keys, key_end, [nc], ambiguous=False, state=state)[0][0]
        ns_begin = key_end
    elif not ambiguous and nc.width is not None and not user_key:
        ns_end = lengths
        key_end = ns_begin = lengths - nc.width
    else:
        (key_end, ns_begin), (ns_end, uk_begin) = _walk_parts(keys, begin, [kc, nc], ambiguous=ambiguous,
                                                                state=state)
        if not user_key and n and np.any(uk_begin != lengths):
            raise CorruptSavepointError("bytes left after the namespace of a composite key", state=state)
        result = {"key": _spans(keys, begin, key_end), "namespace": _spans(keys, ns_begin, ns_end)}
        if user_key:
            result["user_key"] = _spans(keys, uk_begin, lengths)
        return result
    # A fixed-width namespace taken from the end of a key shorter than it would end the key before its prefix.
    if n and (np.any(ns_end > lengths) or np.any(key_end > lengths) or np.any(key_end < begin)):
        raise CorruptSavepointError("a composite key shorter than its fixed-width parts", state=state)
    result = {"key": _spans(keys, begin, key_end), "namespace": _spans(keys, ns_begin, ns_end)}
    if user_key:
        result["user_key"] = _spans(keys, ns_end, lengths)
    elif n and np.any(ns_end != lengths):
        raise CorruptSavepointError("bytes left after the namespace of a composite key", state=state)
    return result


def map_scopes(keys: pa.BinaryArray, prefix: int, key_type: FlinkType, namespace_type: FlinkType,
               state: str) -> pa.BinaryArray:
    """The scope (key-group prefix, key, namespace) of each MAP state composite key: the key
    without its user key."""
    user_keys = split_keys(keys, prefix, key_type, namespace_type, True, state)["user_key"]
    return _spans(keys, np.zeros(len(keys), np.int64), _lengths(keys) - _lengths(user_keys))


def split_timer_keys(keys: pa.BinaryArray, prefix: int, key_type: FlinkType, namespace_type: FlinkType,
                     state: str) -> dict[str, pa.Array]:
    """``timestamp`` (int64), ``key`` and ``namespace`` of timer queue entries."""
    n = len(keys)
    lengths = _lengths(keys)
    if n and lengths.min() < prefix + 8:
        raise CorruptSavepointError("a timer shorter than its key-group prefix and timestamp", state=state)
    offsets, data = column_buffers(keys)
    at = offsets[:-1].astype(np.int64) + prefix
    raw = data[at[:, None] + np.arange(8)] if n else np.zeros((0, 8), np.uint8)
    stamps = (np.ascontiguousarray(raw).view(">u8").reshape(-1) ^ np.uint64(1 << 63)).astype(np.uint64)
    timestamps = pa.array(stamps.view(np.int64), pa.int64())
    kc, nc = codec_for(key_type), codec_for(namespace_type)
    begin = np.full(n, prefix + 8, np.int64)
    if kc.width is not None:
        key_end = begin + kc.width
    elif nc.width is not None:
        key_end = lengths - nc.width
    else:
        key_end = _walk_parts(keys, begin, [kc], ambiguous=False, state=state)[0][0]
    if n and (np.any(key_end > lengths) or np.any(key_end < begin)):  # (a fixed namespace taken from the end)
        raise CorruptSavepointError("a timer shorter than its key and namespace", state=state)
    return {"timestamp": timestamps, "key": _spans(keys, begin, key_end), "namespace": _spans(keys, key_end, lengths)}


def split_map_values(values: pa.BinaryArray, state: str) -> tuple[pa.BinaryArray, np.ndarray]:
    """MAP state values: (value bytes after the null flag, is-null mask)."""
    offsets, data = column_buffers(values)
    lengths = np.diff(offsets)
    if len(values) and lengths.min() < 1:
        raise CorruptSavepointError("an empty MAP state value (no null flag)", state=state)
    flags = data[offsets[:-1]] if len(values) else np.zeros(0, np.uint8)
    if np.any(flags > 1):
        raise CorruptSavepointError("a MAP state value's null flag is neither 0 nor 1", state=state)
    n = len(values)
    return _spans(values, np.ones(n, np.int64), lengths.astype(np.int64)), flags == 1


def split_list_values(values: pa.BinaryArray, element: FlinkType, state: str) -> tuple[np.ndarray, pa.BinaryArray]:
    """LIST state values into elements: (row of each element, element bytes)."""
    offsets, data = column_buffers(values)
    lengths = np.diff(offsets).astype(np.int64)
    codec = codec_for(element)
    n = len(values)
    if codec.width is not None:
        w = codec.width
        counts = (lengths + 1) // (w + 1)
        if n and np.any(counts * (w + 1) - 1 != lengths):
            raise CorruptSavepointError(f"a LIST value's length is not a multiple of its {w}-byte elements",
                                        state=state)
        rows = np.repeat(np.arange(n), counts)
        first = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64) if n else np.zeros(0, np.int64)
        index_in_row = np.arange(len(rows)) - np.repeat(first, counts)
        starts = offsets[:-1].astype(np.int64)[rows] + index_in_row * (w + 1)
        if len(rows):
            delims = starts[index_in_row > 0] - 1
            if np.any(data[delims] != LIST_DELIMITER):
                raise CorruptSavepointError("LIST elements are not separated by ','", state=state)
        return rows, gather_spans(data, starts, np.full(len(rows), w, np.int64))
    raw = data.tobytes()
    rows_out: list[int] = []
    element_starts: list[int] = []
    ends: list[int] = []
    for i in range(n):
        inp = DataInput(raw, int(offsets[i]), int(offsets[i + 1]), state=state)
        while True:
            start = inp.pos
            _skip(codec, inp, f"LIST elements of {element.describe()} cannot be told apart: the type has no "
                  "stored length; read the whole list value bytes instead", state)
            rows_out.append(i)
            element_starts.append(start)
            ends.append(inp.pos)
            if inp.at_end():
                break
            if inp.read_ubyte("list delimiter") != LIST_DELIMITER:
                raise inp.corrupt("LIST elements are not separated by ','", inp.pos - 1, 1)
    starts_a = np.array(element_starts, np.int64)
    return np.array(rows_out, np.int64), gather_spans(data, starts_a, np.array(ends, np.int64) - starts_a)
