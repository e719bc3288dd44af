"""Finding a heap checkpoint state block's entries without a DataInput per value.

The heap backend writes a state's entries back to back with no lengths (:mod:`pyref.flink.heap`),
so each must be stepped over. For the types most state holds that step is arithmetic on the
bytes: a fixed-width value (numbers, a TimeWindow, a Tuple of fixed fields) is its width; a POJO
of fixed fields is a fixed width once its flags byte (2: exactly the POJO's class) and each field's
null flag (0) are as expected; a Flink ``String`` whose ``StringValue`` length (length + 1) fits in
one varint byte and whose chars are ASCII (each one byte) takes exactly that byte's value in
bytes. An entry's layout is a list of such parts: a block of entries without strings is one
numpy reshape, one with strings a small Python loop recording where each string starts, and the
rows are cut out of the block's bytes as Arrow columns (:mod:`pyref.flink.spans`).

The walk assumes first and checks after, all at once: every string's length byte is 1..127 and its
chars ASCII, every POJO flag as assumed, every LIST length >= 0, every MAP null flag 0 or 1, the
block inside its key group. When anything does not hold (a null or non-ASCII string, a POJO
subclass, hostile bytes) the walk gives up and the block is read by the per-entry path, whose
rows are the same and whose errors name the first bad byte. Work stays bounded by the bytes: a
block's entry count is at most its bytes, a map's size at most the bytes left.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from .columns import gather_spans
from .serializers import FlinkType
from .spans import Spans, constant, join
from .values import codec_for

__all__ = ["BlockWalker", "block_walker"]

_INT = struct.Struct(">i")
_POJO_EXACT = 2  # the POJO flags byte of a value of exactly the POJO's class, not null
#: Fewer entries than this are not worth the numpy set-up: the per-entry path reads them.
_MIN_ENTRIES = 16
_ASCII_LIMIT = 0x80


@dataclass(frozen=True)
class _Fixed:
    """``width`` bytes whose ``checks`` (offset, byte) must hold."""

    width: int
    checks: tuple[tuple[int, int], ...] = ()


_STRING = "string"  # a StringValue of ASCII chars and a one-byte length
_Part = _Fixed | str
#: Each entry's columns, where the block ends and, for LIST and MAP, where each entry's length
#: is and where each map entry starts.
_Walked = tuple[np.ndarray, int, tuple[np.ndarray, np.ndarray] | None]


def _parts(type_: FlinkType) -> list[_Part] | None:
    """The layout of a value of ``type_``, or None when it has no arithmetic one."""
    width = codec_for(type_).width
    if width is not None:
        return [_Fixed(width)]
    kind = type_.kind
    if kind == "string":
        return [_STRING]
    children: list[list[_Part] | None] = []
    if kind == "pojo":  # flags, then per field its null flag and the field
        children.append([_Fixed(1, ((0, _POJO_EXACT),))])
        for field in type_.children:
            children += [[_Fixed(1, ((0, 0),))], _parts(field)]
    elif kind in ("tuple", "ttl"):
        children += [_parts(c) for c in type_.children]
    elif kind == "timer":  # flipped timestamp, key, namespace
        children.append([_Fixed(8)])
        children += [_parts(c) for c in type_.children]
    else:
        return None
    out: list[_Part] = []
    for child in children:
        if child is None:
            return None
        out += child
    return _merged(out)


def _merged(parts: list[_Part]) -> list[_Part]:
    """Adjacent fixed parts as one."""
    out: list[_Part] = []
    for part in parts:
        if isinstance(part, _Fixed) and out and isinstance(out[-1], _Fixed):
            last = out[-1]
            out[-1] = _Fixed(last.width + part.width, last.checks + tuple((o + last.width, b) for o, b in part.checks))
        else:
            out.append(part)
    return out


class _Head:
    """The segments (namespace, key[, value]) an entry starts with, as steps: each step a fixed
    advance then a string. Column ``j`` of an entry is where step ``j`` starts; column ``K``
    (K steps) where the fixed bytes after the last string start. Every segment edge is a
    column plus an offset."""

    def __init__(self, segments: list[list[_Part]]) -> None:
        self.advances: list[int] = []
        self.checks: list[tuple[int, int, int]] = []  # (column, offset, byte)
        self.edges: list[tuple[int, int]] = [(0, 0)]  # (column, offset) of each segment's end, after its start
        offset = 0
        for segment in segments:
            for part in segment:
                if isinstance(part, _Fixed):
                    self.checks += [(len(self.advances), offset + o, b) for o, b in part.checks]
                    offset += part.width
                else:
                    self.advances.append(offset)
                    offset = 0
            self.edges.append((len(self.advances), offset))
        self.tail = offset

    @property
    def width(self) -> int | None:
        """The entry head's width when it holds no string."""
        return None if self.advances else self.tail


class _NotAssumed(Exception):
    """The bytes are not as the walk assumes: the per-entry path reads the block."""


def _string_end(data: bytes, pos: int) -> int:
    """Where the StringValue at ``pos`` ends if its chars are ASCII: its length + 1 as a varint
    (at most 5 bytes, as :meth:`DataInput.read_varint`), then one byte per char."""
    value = shift = 0
    at = pos
    while True:
        b = data[at]
        at += 1
        value |= (b & 0x7F) << shift
        if b < _ASCII_LIMIT:
            return at + value - 1
        shift += 7
        if shift > 28:
            raise _NotAssumed


def _string_widths(src: np.ndarray, at: np.ndarray) -> np.ndarray | None:
    """The bytes of each StringValue at ``at`` (:func:`_string_end`), or None when one is null,
    longer than its bytes or not ASCII."""
    value = np.zeros(len(at), np.int64)
    header = np.zeros(len(at), np.int64)
    open_ = np.ones(len(at), bool)  # still in the varint
    for i in range(5):
        if not open_.any():
            break
        where = at + i
        if int(where[open_].max()) >= len(src):
            return None
        b = np.where(open_, src[np.minimum(where, len(src) - 1)], 0).astype(np.int64)
        value |= (b & 0x7F) << (7 * i)
        ended = open_ & (b < _ASCII_LIMIT)
        header[ended] = i + 1
        open_ &= ~ended
    if open_.any() or (len(at) and value.min() < 1):
        return None
    starts, ends = at + header, at + header + value - 1
    if not len(at):
        return header
    low, high = int(starts.min()), int(ends.max())
    if high > len(src):
        return None
    above = np.zeros(high - low + 1, np.int32)  # above[i]: bytes >= 0x80 in src[low:low + i]
    np.cumsum(src[low:high] >= _ASCII_LIMIT, out=above[1:])
    if np.any(above[ends - low] - above[starts - low]):
        return None
    return ends - at


def _head_end(data: bytes, pos: int, advances: list[int], append: Callable[[int], None]) -> int:
    """Steps over an entry's head: each step's fixed bytes and string, noting where each starts."""
    for advance in advances:
        append(pos)
        pos += advance
        b = data[pos]
        pos = pos + b if b < _ASCII_LIMIT else _string_end(data, pos)
    return pos


def _checked(src: np.ndarray, columns: np.ndarray, checks: list[tuple[int, int, int]]) -> bool:
    return all(np.all(src[columns[:, c] + o] == b) for c, o, b in checks)


class BlockWalker:
    """Rows of one state's block of a key group (int count, entries) without a per-entry
    decode: :meth:`rows` gives (keys, values, end) or None when the per-entry path must read it."""

    def __init__(self, kind: str, namespace: list[_Part], key: list[_Part], value: list[_Part] | None,
                 element: _Fixed | None, map_parts: tuple[_Part, _Part] | None) -> None:
        self.kind = kind
        # A timer's row is its element alone: the element is the one segment.
        self.head = _Head([value] if value is not None and kind == "TIMERS" else
                          [namespace, key] + ([value] if value is not None else []))
        self.element = element
        self.map_parts = map_parts

    def rows(self, data: bytes, pos: int, stop: int, key_group: int,
             prefix_bytes: int) -> tuple[pa.BinaryArray, pa.BinaryArray, int] | None:
        if pos + 4 > stop:
            return None
        count = _INT.unpack_from(data, pos)[0]
        first = pos + 4
        if not _MIN_ENTRIES <= count <= stop - first:
            return None
        src = np.frombuffer(data, np.uint8)
        try:
            walked = self._walk(data, first, stop, count)
        except (IndexError, struct.error, _NotAssumed):  # e.g. stepped past the bytes
            return None
        if walked is None:
            return None
        columns, end, extra = walked
        if end > stop or not _checked(src, columns, self.head.checks) or any(
                _string_widths(src, columns[:, j] + a) is None for j, a in enumerate(self.head.advances)):
            return None
        prefix = key_group.to_bytes(prefix_bytes, "big")
        # The rows are cut from the block's own bytes: a join copies its parts' buffers.
        src = src[first:end]
        edges = [columns[:, c] + (o - first) for c, o in self.head.edges]
        if self.kind == "TIMERS":
            element = Spans(src, edges[0], edges[1] - edges[0])
            return join(constant(prefix, count, prefix_bytes), element), constant(b"", count, 0).column(), end
        namespace = Spans(src, edges[0], edges[1] - edges[0])
        key = Spans(src, edges[1], edges[2] - edges[1])
        if self.kind == "VALUE":
            value = Spans(src, edges[2], edges[3] - edges[2])
            return join(constant(prefix, count, prefix_bytes), key, namespace), value.column(), end
        assert extra is not None
        at, user = extra[0] - first, extra[1] - first
        made = self._list_rows(src, at) if self.kind == "LIST" else self._map_rows(src, at, user)
        if made is None:
            return None
        owners, user_key, value = made
        parts = [constant(prefix, len(owners), prefix_bytes), key.take(owners), namespace.take(owners)]
        return join(*parts, *([user_key] if user_key is not None else [])), value, end

    # -- walks: where every entry's columns are -------------------------------------------

    def _walk(self, data: bytes, pos: int, stop: int, count: int) -> _Walked | None:
        head = self.head
        advances, tail = head.advances, head.tail
        if self.kind in ("VALUE", "TIMERS"):
            width = head.width
            if width is not None:  # every entry the same width: no walk
                end = pos + count * width
                return (pos + np.arange(count, dtype=np.int64) * width)[:, None], end, None
            marks: list[int] = []
            append = marks.append
            if len(advances) == 1:  # one string per entry (most keyed state): no call per entry
                advance = advances[0]
                for _ in range(count):
                    append(pos)
                    pos += advance
                    b = data[pos]
                    pos = (pos + b if b < _ASCII_LIMIT else _string_end(data, pos)) + tail
            else:
                for _ in range(count):
                    pos = _head_end(data, pos, advances, append) + tail
            append(pos)
            flat = np.array(marks, np.int64)
            k = len(advances)
            columns = np.empty((count, k + 1), np.int64)
            columns[:, :k] = flat[:-1].reshape(count, k)
            columns[:, k] = flat[k::k] - tail
            return columns, pos, None
        return self._walk_collections(data, pos, stop, count)

    def _walk_collections(self, data: bytes, pos: int, stop: int,
                          count: int) -> _Walked | None:
        """LIST and MAP entries: the head, then an int length and the elements."""
        head = self.head
        advances, tail = head.advances, head.tail
        k = len(advances)
        marks: list[int] = []  # per entry: each step's start, then where its length is
        append = marks.append
        user: list[int] = []  # MAP: where each map entry starts
        if self.kind == "LIST":
            assert self.element is not None
            width = self.element.width
            for _ in range(count):
                pos = _head_end(data, pos, advances, append) + tail
                append(pos)
                size = _INT.unpack_from(data, pos)[0]
                if size < 0:
                    return None
                pos += 4 + width * size
        else:
            assert self.map_parts is not None
            key_part, value_part = self.map_parts
            key_width = key_part.width if isinstance(key_part, _Fixed) else 0  # 0: a string
            value_width = value_part.width if isinstance(value_part, _Fixed) else 0
            add_user = user.append
            for _ in range(count):
                pos = _head_end(data, pos, advances, append) + tail
                append(pos)
                size = _INT.unpack_from(data, pos)[0]
                pos += 4
                if not 0 <= size <= stop - pos:  # bounds the loop by the bytes left
                    return None
                for _ in range(size):
                    add_user(pos)
                    pos = pos + key_width if key_width else _string_end(data, pos)
                    pos += 1
                    if not data[pos - 1]:
                        pos = pos + value_width if value_width else _string_end(data, pos)
        flat = np.array(marks, np.int64).reshape(count, k + 1)
        columns = flat.copy()
        columns[:, k] = flat[:, k] - tail
        return columns, pos, (flat[:, k], np.array(user, np.int64))

    # -- LIST and MAP rows --------------------------------------------------------------------

    def _list_rows(self, src: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, None, pa.BinaryArray] | None:
        """One row per non-empty list (its length at ``at``): its elements joined by ``,`` (as
        RocksDB's list state keeps them)."""
        assert self.element is not None
        sizes = _big_endian_ints(src, at)
        if np.any(sizes < 0):
            return None
        width = self.element.width
        owners = np.flatnonzero(sizes)
        sizes = sizes[owners]
        first = np.repeat(at[owners] + 4, sizes)
        index = np.arange(len(first)) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        starts = first + index * width
        if not all(np.all(src[starts + o] == b) for o, b in self.element.checks):
            return None
        cells = np.empty((len(starts), width + 1), np.uint8)
        cells[:, :width] = np.lib.stride_tricks.sliding_window_view(src, width)[starts]
        cells[:, width] = ord(",")
        keep = np.ones(len(starts), bool)
        keep[np.cumsum(sizes) - 1] = False  # no delimiter after a list's last element
        data = cells.reshape(-1)[np.repeat(keep, width + 1) | (np.arange(cells.size) % (width + 1) < width)]
        offsets = np.zeros(len(sizes) + 1, np.int64)
        np.cumsum(sizes * (width + 1) - 1, out=offsets[1:])
        values = pa.Array.from_buffers(pa.binary(), len(sizes), [None, pa.py_buffer(offsets.astype(np.int32)),
                                                                   pa.py_buffer(data)])
        return owners, None, values

    def _map_rows(self, src: np.ndarray, at: np.ndarray,
                  starts: np.ndarray) -> tuple[np.ndarray, Spans, pa.BinaryArray] | None:
        """One row per map entry (map sizes at ``at``, entries at ``starts``): the user key after the
        composite key; the null flag and the value."""
        assert self.map_parts is not None
        sizes = _big_endian_ints(src, at)
        key_part, value_part = self.map_parts
        key_lengths = _part_lengths(src, starts, key_part)
        if key_lengths is None:
            return None
        flags_at = starts + key_lengths
        flags = src[flags_at]
        if np.any(flags > 1):
            return None
        present = flags == 0
        value_lengths = np.zeros(len(starts), np.int64)
        value_at = flags_at[present] + 1
        lengths = _part_lengths(src, value_at, value_part)
        if lengths is None:
            return None
        value_lengths[present] = lengths
        owners = np.repeat(np.arange(len(sizes)), sizes)
        return owners, Spans(src, starts, key_lengths), gather_spans(src, flags_at, value_lengths + 1)


def _big_endian_ints(src: np.ndarray, at: np.ndarray) -> np.ndarray:
    return np.lib.stride_tricks.sliding_window_view(src, 4)[at].copy().view(">i4").reshape(-1).astype(np.int64)


def _part_lengths(src: np.ndarray, at: np.ndarray, part: _Part) -> np.ndarray | None:
    """The length of the part at each of ``at``, or None when one is not as assumed."""
    if isinstance(part, _Fixed):
        if not all(np.all(src[at + o] == b) for o, b in part.checks):
            return None
        return np.full(len(at), part.width, np.int64)
    return _string_widths(src, at)


def _single(parts: list[_Part] | None) -> _Part | None:
    return parts[0] if parts is not None and len(parts) == 1 else None


def block_walker(kind: str, namespace: FlinkType | None, key: FlinkType, value: FlinkType) -> BlockWalker | None:
    """The walker of a state's blocks: ``kind`` VALUE (or any state of one value per entry:
    REDUCING, AGGREGATING...), LIST, MAP or TIMERS (``value`` the timer); None when its types
    have no arithmetic layout. The caller keeps states whose key and namespace are both of
    variable size (their composite key carries their lengths) on the per-entry path."""
    if kind == "TIMERS":
        timer = _parts(value)
        return None if timer is None else BlockWalker(kind, [], [], timer, None, None)
    assert namespace is not None
    ns, k = _parts(namespace), _parts(key)
    if ns is None or k is None:
        return None
    if kind == "LIST":
        element = _single(_parts(value.children[0])) if value.kind == "list" else None
        return BlockWalker(kind, ns, k, None, element, None) if isinstance(element, _Fixed) else None
    if kind == "MAP":
        if value.kind != "map":
            return None
        user_key, user_value = _single(_parts(value.children[0])), _single(_parts(value.children[1]))
        if user_key is None or user_value is None:
            return None
        return BlockWalker(kind, ns, k, None, None, (user_key, user_value))
    v = _parts(value)
    return None if v is None else BlockWalker("VALUE", ns, k, v, None, None)
