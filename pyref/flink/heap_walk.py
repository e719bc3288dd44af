"""Finding a heap checkpoint state block's entries without a DataInput per value.

The heap backend writes a state's entries back to back with no lengths (:mod:`pyref.flink.heap`),
so each must be stepped over. For the types most state holds that step is arithmetic on the
bytes: a fixed-width value (numbers, a TimeWindow, a Tuple of fixed fields) is its width; a POJO
is its flags byte (2: exactly the POJO's class) and each field's null flag (0) around its fields;
a Flink ``String`` whose chars are ASCII (each one byte) is its varint length (length + 1) and
that many bytes less one. A value's layout is a list of such parts (Tuples, TTL values and timers
chain their fields'): a block of entries without strings, or whose entries are all as wide as
the first (ids of one format, one-element lists), is one numpy reshape; any other a small Python
loop noting where each string starts (and, for LIST and MAP, each element's or map entry's); the
rows are cut out of the block's bytes as Arrow columns (:mod:`pyref.flink.spans`).

The walk assumes first and checks after, all at once: every string not null (varint >= 1), its
chars ASCII, every POJO flag as assumed, every MAP null flag 0 or 1, the block inside its key
group (LIST and MAP lengths are checked as they are read: >= 0 and at most the bytes left).
When anything does not hold (a null or non-ASCII string, a POJO
subclass, hostile bytes) the walk gives up and the block is read by the per-entry path, whose
rows are the same and whose errors name the first bad byte. Work stays bounded by the bytes: a
block's entry count is at most its bytes, a map's size at most the bytes left.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field

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


_STRING = "string"  # a StringValue of ASCII chars
_Part = _Fixed | str


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
    return out


class _Layout:
    """Segments (an entry's namespace, key[, value]; a list element; a map key or value) as
    steps, each some fixed bytes then a string. Column ``j`` of a value is where step ``j``
    starts; column ``K`` (K steps) where the fixed bytes after the last string start, the value's
    end less ``tail``. Every segment edge is a column plus an offset."""

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
        """The width of every value when it holds no string."""
        return None if self.advances else self.tail

    def columns(self, marks: list[int] | np.ndarray, ends: np.ndarray) -> np.ndarray:
        """The columns of values ending at ``ends`` from the step starts a walk noted."""
        k = len(self.advances)
        columns = np.empty((len(ends), k + 1), np.int64)
        columns[:, :k] = np.asarray(marks, np.int64).reshape(len(ends), k)
        columns[:, k] = ends - self.tail
        return columns

    def holds(self, src: np.ndarray, columns: np.ndarray) -> bool:
        """Are the values at ``columns`` as assumed: every check, every string ASCII?"""
        return all(np.all(src[columns[:, c] + o] == b) for c, o, b in self.checks) and all(
            _string_widths(src, columns[:, j] + a) is not None for j, a in enumerate(self.advances))


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
    if not len(at):
        return np.zeros(0, np.int64)
    if int(at.max()) >= len(src):
        return None
    value = src[at].astype(np.int64)
    header = np.ones(len(at), np.int64)
    if int(value.max()) >= _ASCII_LIMIT:  # lengths of more than one varint byte (127 chars and up)
        header[:] = 0
        value[:] = 0
        open_ = np.ones(len(at), bool)  # still in the varint
        for i in range(5):
            where = at + i
            if not open_.any():
                break
            if int(where[open_].max()) >= len(src):
                return None
            b = np.where(open_, src[np.minimum(where, len(src) - 1)], 0).astype(np.int64)
            value |= (b & 0x7F) << (7 * i)
            ended = open_ & (b < _ASCII_LIMIT)
            header[ended] = i + 1
            open_ &= ~ended
        if open_.any():
            return None
    if value.min() < 1:
        return None
    starts = at + header
    ends = starts + value - 1
    high = int(ends.max())
    if high > len(src):
        return None
    chars = ends > starts
    if chars.any():  # the largest char byte of each string, one reduction over the bytes
        low = int(starts[chars].min())
        window = src[low:high + 1] if high < len(src) else np.append(src[low:high], np.uint8(0))
        bounds = np.stack([starts[chars], ends[chars]], axis=1).reshape(-1) - low
        if int(np.maximum.reduceat(window, bounds)[0::2].max()) >= _ASCII_LIMIT:
            return None
    return ends - at


def _steps_end(data: bytes, pos: int, advances: list[int], append: Callable[[int], None]) -> int:
    """Steps over a layout's steps from ``pos``: each one's fixed bytes and string, noting where each starts."""
    for advance in advances:
        append(pos)
        pos += advance
        b = data[pos]
        pos = pos + b if b < _ASCII_LIMIT else _string_end(data, pos)
    return pos


def _group_ends(starts: np.ndarray, sizes: np.ndarray, group_ends: np.ndarray) -> np.ndarray:
    """The end of each of back-to-back values grouped ``sizes`` a group (a list's elements, a
    map's entries): the next one's start, and its group's end for a group's last."""
    ends = np.empty_like(starts)
    ends[:-1] = starts[1:]
    held = sizes > 0
    ends[np.cumsum(sizes)[held] - 1] = group_ends[held]
    return ends


@dataclass
class _Walk:
    """Where a walk found things: each entry's head steps, where each entry's LIST or MAP length
    is, each list element's or map key's steps, each map entry's start and null flag, each
    present map value's steps; and where the block ends."""

    heads: list[int] | np.ndarray = field(default_factory=list)
    lengths: list[int] | np.ndarray = field(default_factory=list)
    inner: list[int] = field(default_factory=list)
    entries: list[int] = field(default_factory=list)
    flags: list[int] = field(default_factory=list)
    values: list[int] = field(default_factory=list)
    end: int = 0


class BlockWalker:
    """Rows of one state's block of a key group (int count, entries) without a per-entry
    decode: :meth:`rows` gives (keys, values, end) or None when the per-entry path must read it."""

    def __init__(self, kind: str, head: _Layout, inner: _Layout | None = None,
                 map_value: _Layout | None = None) -> None:
        self.kind = kind  # VALUE (one value per entry), TIMERS, LIST or MAP
        self.head = head  # namespace, key[, value]; a timer
        self.inner = inner  # a LIST's element, a MAP's user key
        self.map_value = map_value

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
            walk = self._uniform(data, src, first, stop, count) or self._walk(data, first, stop, count)
        except (IndexError, struct.error, _NotAssumed):  # e.g. stepped past the bytes
            return None
        if walk is None or walk.end > stop:
            return None
        head = self.head
        heads = np.asarray(walk.heads, np.int64)
        if self.kind in ("VALUE", "TIMERS"):
            if head.width is not None:
                starts = first + np.arange(count, dtype=np.int64) * head.width
            else:
                starts = heads[::len(head.advances)]
            head_columns = head.columns(heads, np.append(starts[1:], walk.end))
        else:
            head_columns = head.columns(heads, np.asarray(walk.lengths, np.int64))
        if not head.holds(src, head_columns):
            return None
        # The rows are cut from the block's own bytes: a join copies its parts' buffers.
        block = src[first:walk.end]
        edges = [head_columns[:, c] + (o - first) for c, o in head.edges]

        def spans(i: int, owners: np.ndarray | slice = slice(None)) -> Spans:
            return Spans(block, edges[i][owners], edges[i + 1][owners] - edges[i][owners])

        prefix = key_group.to_bytes(prefix_bytes, "big")
        if self.kind == "TIMERS":
            return join(constant(prefix, count, prefix_bytes), spans(0)), constant(b"", count, 0).column(), walk.end
        if self.kind == "VALUE":
            return join(constant(prefix, count, prefix_bytes), spans(1), spans(0)), spans(2).column(), walk.end
        lengths = np.array(walk.lengths, np.int64)
        sizes = _big_endian_ints(src, lengths)
        entry_ends = np.append(head_columns[1:, 0], walk.end)
        made = (self._list_rows(src, walk, lengths + 4, sizes, entry_ends) if self.kind == "LIST"
                else self._map_rows(src, walk, sizes, entry_ends))
        if made is None:
            return None
        owners, user_key, values = made
        keys = [constant(prefix, len(owners), prefix_bytes), spans(1, owners), spans(0, owners)]
        if user_key is not None:
            keys.append(Spans(block, user_key.starts - first, user_key.lengths))
        return join(*keys), values, walk.end

    def _uniform(self, data: bytes, src: np.ndarray, pos: int, stop: int, count: int) -> _Walk | None:
        """The walk when every entry is as wide as the first: each string as long as the first's,
        each LIST as long (of fixed-width elements) as the first's, as ids of one format and
        one-element lists make them. None when not, or for entries of strings in lists or maps."""
        one = self._walk(data, pos, stop, 1)
        if one is None or len(one.inner) or len(one.entries) or pos + count * (one.end - pos) > stop:
            return None
        width = one.end - pos
        starts = pos + np.arange(count, dtype=np.int64) * width
        heads = starts[:, None] + (np.array(one.heads, np.int64) - pos)
        strings = [heads[:, j] + advance for j, advance in enumerate(self.head.advances)]
        if any(src[at[-1]] != src[at[0]] for at in strings):  # the last entry's strings: most likely off
            return None
        for at in strings:
            widths = _string_widths(src, at)
            if widths is None or np.any(widths != widths[0]):
                return None
        lengths = starts + (one.lengths[0] - pos) if len(one.lengths) else np.zeros(0, np.int64)
        if len(lengths) and np.any(_big_endian_ints(src, lengths) != _big_endian_ints(src, lengths[:1])[0]):
            return None
        return _Walk(heads=heads.reshape(-1), lengths=lengths, end=pos + count * width)

    def _walk(self, data: bytes, pos: int, stop: int, count: int) -> _Walk | None:
        head = self.head
        if head.width is not None and self.kind in ("VALUE", "TIMERS"):  # every entry the same width: no walk
            return _Walk(end=pos + count * head.width)
        heads: list[int] = []
        walk = _Walk(heads=heads)
        advances, tail = head.advances, head.tail
        one = advances[0] if len(advances) == 1 else -1  # one string per entry (most keyed state): no call for it
        collection = self.kind in ("LIST", "MAP")
        inner, value = self.inner, self.map_value
        inner_advances, inner_tail, inner_width = (inner.advances, inner.tail, inner.width) if inner else ([], 0, 0)
        value_advances, value_tail = (value.advances, value.tail) if value is not None else ([], 0)
        lengths: list[int] = []
        walk.lengths = lengths
        append, add_length, add_inner = heads.append, lengths.append, walk.inner.append
        add_entry, add_flag, add_value = walk.entries.append, walk.flags.append, walk.values.append
        is_list = self.kind == "LIST"
        for _ in range(count):
            if one >= 0:
                append(pos)
                pos += one
                b = data[pos]
                pos = (pos + b if b < _ASCII_LIMIT else _string_end(data, pos)) + tail
            else:
                pos = _steps_end(data, pos, advances, append) + tail
            if not collection:
                continue
            add_length(pos)
            size = _INT.unpack_from(data, pos)[0]
            pos += 4
            if not 0 <= size <= stop - pos:  # bounds the walk by the bytes left
                return None
            if is_list and inner_width is not None:
                pos += size * inner_width
            elif is_list:
                for _ in range(size):
                    pos = _steps_end(data, pos, inner_advances, add_inner) + inner_tail
            else:
                for _ in range(size):
                    add_entry(pos)
                    if inner_advances:  # no call for a fixed key or value
                        pos = _steps_end(data, pos, inner_advances, add_inner)
                    pos += inner_tail
                    add_flag(pos)
                    pos += 1
                    if not data[pos - 1]:
                        if value_advances:
                            pos = _steps_end(data, pos, value_advances, add_value)
                        pos += value_tail
        walk.end = pos
        return walk

    # -- LIST and MAP rows --------------------------------------------------------------------

    def _list_rows(self, src: np.ndarray, walk: _Walk, firsts: np.ndarray, sizes: np.ndarray,
                   entry_ends: np.ndarray) -> tuple[np.ndarray, None, pa.BinaryArray] | None:
        """One row per non-empty list (its elements from ``firsts``): its elements joined by ``,``
        (as RocksDB's list state keeps them)."""
        element = self.inner
        assert element is not None
        total = int(sizes.sum())
        if element.width is not None:
            index = np.arange(total) - np.repeat(np.cumsum(sizes) - sizes, sizes)
            starts = np.repeat(firsts, sizes) + index * element.width
        else:
            starts = np.array(walk.inner[::len(element.advances)], np.int64)
        ends = _group_ends(starts, sizes, entry_ends)
        if not element.holds(src, element.columns(walk.inner, ends)):
            return None
        owners = np.flatnonzero(sizes)
        # Pieces: each element, then a delimiter (one byte after the block) but after a list's last.
        buffer = np.append(src, np.uint8(ord(",")))
        piece_starts = np.stack([starts, np.full(total, len(src))], axis=1).reshape(-1)
        delimiters = np.ones(total, np.int64)
        delimiters[np.cumsum(sizes)[owners] - 1] = 0
        pieces = gather_spans(buffer, piece_starts, np.stack([ends - starts, delimiters], axis=1).reshape(-1))
        bounds = np.append(0, np.cumsum(sizes[owners])) * 2
        offsets = np.frombuffer(pieces.buffers()[1], np.int32)[bounds]
        values = pa.Array.from_buffers(pa.binary(), len(owners), [None, pa.py_buffer(np.ascontiguousarray(offsets)),
                                                                  pieces.buffers()[2]])
        return owners, None, values

    def _map_rows(self, src: np.ndarray, walk: _Walk, sizes: np.ndarray,
                  entry_ends: np.ndarray) -> tuple[np.ndarray, Spans, pa.BinaryArray] | None:
        """One row per map entry: its user key after the composite key; its null flag and value."""
        key, value = self.inner, self.map_value
        assert key is not None and value is not None
        starts, flags_at = np.array(walk.entries, np.int64), np.array(walk.flags, np.int64)
        ends = _group_ends(starts, sizes, entry_ends)
        flags = src[flags_at]
        present = flags == 0
        if np.any(flags > 1) or not key.holds(src, key.columns(walk.inner, flags_at)) or not value.holds(
                src, value.columns(walk.values, ends[present])):
            return None
        owners = np.repeat(np.arange(len(sizes)), sizes)
        return owners, Spans(src, starts, flags_at - starts), gather_spans(src, flags_at, ends - flags_at)


def _big_endian_ints(src: np.ndarray, at: np.ndarray) -> np.ndarray:
    return np.lib.stride_tricks.sliding_window_view(src, 4)[at].copy().view(">i4").reshape(-1).astype(np.int64)


def block_walker(kind: str, namespace: FlinkType | None, key: FlinkType, value: FlinkType) -> BlockWalker | None:
    """The walker of a state's blocks: ``kind`` VALUE (or any state of one value per entry:
    REDUCING, AGGREGATING...), LIST, MAP or TIMERS (``value`` the timer); None when its types
    have no arithmetic layout. The caller keeps states whose key and namespace are both of
    variable size (their composite key carries their lengths) on the per-entry path."""
    if kind == "TIMERS":
        timer = _parts(value)
        return None if timer is None else BlockWalker(kind, _Layout([timer]))
    assert namespace is not None
    ns, k = _parts(namespace), _parts(key)
    if ns is None or k is None:
        return None
    if kind in ("LIST", "MAP"):
        children = [_parts(c) for c in value.children] if value.kind == kind.lower() else [None]
        if any(c is None for c in children):
            return None
        return BlockWalker(kind, _Layout([ns, k]), *(_Layout([c]) for c in children if c is not None))
    v = _parts(value)
    return None if v is None else BlockWalker("VALUE", _Layout([ns, k, v]))
