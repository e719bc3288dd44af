"""Keyed state in Flink's canonical savepoint format (``FullSnapshotAsyncWriter``),
which the HashMap and RocksDB backends both write.

One stream per subtask: first the ``KeyedBackendSerializationProxy`` (int
version 6, boolean "key groups compressed", the key serializer snapshot, a
short count of states and each state's meta info: UTF name, int backend state
type, string options such as ``KEYED_STATE_TYPE=MAP``, and named serializer
snapshots), then, at the offset the handle records for it, each key group
with data: [a new Snappy framed stream when compressed] a short state id, then
(int length, key bytes, int length, value bytes) pairs; the first key byte
gets its top bit set on the last pair before a new state id (short) or the
end-of-key-group mark ``0xFFFF``.

A key is RocksDB's composite key: the key group (1 byte when max parallelism
<= 128, else 2, big-endian), the serialized key, [its length when key and
namespace are both variable-sized], the namespace [and its length], and for
MAP state the user key. Values: the value (VALUE, REDUCING, AGGREGATING);
the elements joined by the byte ``,`` (LIST); a null flag and the value
(MAP, one pair per map entry); nothing for priority-queue (timer) state,
whose key holds the key group and the serialized element.

The pairs of every key group are found by walking all key groups at once
with numpy (one step advances every key group by one pair), so the cost per
pair is a few vector operations shared by all key groups, not a Python loop.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import numpy as np
import pyarrow as pa

from ..errors import CorruptSavepointError, UnsupportedFormatError
from .columns import gather_spans
from .compression import decode_framed
from .datainput import DataInput
from .meta_info import KEYED_STATE_TYPES, StateMetaInfo, looks_like_meta_info, read_state_meta_infos
from .serializers import FlinkType, Follow, at_position, read_serializer_snapshot

__all__ = [
    "TIMER_PREFIX",
    "TIMER_DOMAINS",
    "KeyedBackendMeta",
    "read_keyed_backend_meta",
    "walk_key_groups",
    "KeyGroupSection",
    "WalkResult",
    "section_bytes",
    "check_key_group_prefix",
    "KeyedRows",
    "KeyedSubtask",
    "read_keyed_subtask",
    "iter_keyed_subtask",
    "section_bounds",
]

#: Flink's timer queues are priority-queue states named ``_timer_state/`` + a domain prefix +
#: the timer service (``InternalTimeServiceManagerImpl``), event time first.
TIMER_PREFIX = "_timer_state/"
TIMER_DOMAINS = {"event_": "event-time", "processing_": "processing-time"}

KEYED_PROXY_VERSION = 6
END_OF_KEY_GROUP = 0xFFFF
_META_FOLLOWS = 0x80


def _looks_like_state_list(proxy_end: int) -> Follow:
    def follow(inp: DataInput) -> bool:
        count = inp.read_short("state count")
        if count == 0:
            return inp.pos == proxy_end
        return count > 0 and looks_like_meta_info(inp)

    return follow


@dataclass(frozen=True)
class KeyedBackendMeta:
    compressed: bool
    key_type: FlinkType
    states: list[StateMetaInfo]
    end: int  # stream position where the key-group data may begin


def read_keyed_backend_meta(inp: DataInput, proxy_end: int) -> KeyedBackendMeta:
    """The ``KeyedBackendSerializationProxy`` at the start of a keyed stream;
    ``proxy_end`` is where the data starts (the first key group's offset, or
    the end of the stream), used only to delimit opaque serializer snapshots."""
    start = inp.pos
    version = inp.read_int("keyed backend proxy version")
    if version != KEYED_PROXY_VERSION:
        raise UnsupportedFormatError(
            f"keyed backend metadata version {version}: only version {KEYED_PROXY_VERSION} (Flink 1.7 and "
            "later) is read", path=inp.path, byte_range=(inp.base + start, inp.base + start + 4))
    compressed = inp.read_bool("compression flag")
    key_type = read_serializer_snapshot(inp, _looks_like_state_list(proxy_end))
    states = read_state_meta_infos(inp, at_position(proxy_end), KEYED_STATE_TYPES, "a keyed backend's states")
    return KeyedBackendMeta(compressed, key_type, states, inp.pos)


# -- walking key groups ----------------------------------------------------


@dataclass(frozen=True)
class KeyGroupSection:
    """The bytes of one key group: ``data[start:end]`` (decompressed when the
    stream is compressed); ``origin`` names the file and offset for errors."""

    key_group: int
    handle: int  # index of the handle (subtask stream) it came from
    data: bytes | memoryview
    origin: tuple[str, int]


@dataclass
class WalkResult:
    """All pairs of the walked sections, in stream order: ``buffer`` holds
    every section back to back; per pair its section, state id, and the
    spans of its key and value in ``buffer``."""

    buffer: np.ndarray
    section: np.ndarray
    state: np.ndarray
    key_start: np.ndarray
    key_len: np.ndarray
    value_start: np.ndarray
    value_len: np.ndarray
    section_starts: np.ndarray = field(repr=False)


def _be32_view(buf: np.ndarray) -> np.ndarray:
    """``view[i]`` is the big-endian int32 at byte ``i`` of ``buf`` (an
    unaligned strided view: reading one is a single gather, no copy)."""
    if buf.size < 4:
        return np.zeros(0, ">i4")
    return np.ndarray(shape=(buf.size - 3,), dtype=">i4", buffer=buf, strides=(1,))


class _Lanes:
    """The walk state of every section (lane) at once."""

    def __init__(self, buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, sections: list[KeyGroupSection]):
        self.buf, self.ends, self.sections = buf, ends, sections
        self.be32 = _be32_view(buf)
        self.pos = starts.copy()
        self.state = np.full(len(starts), -1, np.int64)
        self.need_state = np.ones(len(starts), bool)
        self.active = np.ones(len(starts), bool)
        self.out = _Rows()
        self.lookahead = 8

    def fail(self, lane: int, reason: str, pos: int, length: int) -> CorruptSavepointError:
        section = self.sections[lane]
        local = pos - (self.ends[lane] - len(section.data))
        name, offset = section.origin
        return CorruptSavepointError(f"key group {section.key_group}: {reason}", path=name,
                                     byte_range=(offset + local, offset + local + length))

    def check(self, lanes: np.ndarray, bad: np.ndarray, reason: str, at: np.ndarray, length: int) -> None:
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise self.fail(int(lanes[i]), reason, int(at[i]), length)

    def switch_states(self, due: np.ndarray) -> None:
        """Read the state id (or the end mark) that follows a flagged pair."""
        buf, pos, ends = self.buf, self.pos, self.ends
        p = pos[due]
        self.check(due, p + 2 > ends[due], "truncated: state id expected", p, 2)
        sid = (buf[p].astype(np.int64) << 8) | buf[p + 1]
        done = sid == END_OF_KEY_GROUP
        self.check(due, done & (p + 2 != ends[due]), "bytes after the end-of-key-group mark", p, 2)
        self.active[due[done]] = False
        self.state[due] = sid
        pos[due] = p + 2
        self.need_state[due] = False

    def step(self, lanes: np.ndarray) -> np.ndarray:
        """Advance every lane of ``lanes`` by one pair, or by a run of pairs of
        the same size; returns the lanes still open."""
        due = self.need_state[lanes]
        if due.any():
            self.switch_states(lanes[due])
            lanes = lanes[self.active[lanes]]
            if not len(lanes):
                return lanes
        pos, end = self.pos[lanes], self.ends[lanes]
        last = len(self.be32) - 1
        klen = self.be32[np.minimum(pos, last)].astype(np.int64)
        kstart = pos + 4
        vpos = kstart + klen
        vlen = self.be32[np.clip(vpos, 0, last)].astype(np.int64)
        nxt = vpos + 4 + vlen
        if ((pos + 8 > end) | (klen < 1) | (vpos + 4 > end) | (vlen < 0) | (nxt > end)).any():
            # One combined test per step; the precise complaint only on failure.
            self.check(lanes, pos + 8 > end, "truncated: key and value lengths expected", pos, 8)
            self.check(lanes, (klen < 1) | (vpos + 4 > end), "bad key length", pos, 4)
            self.check(lanes, (vlen < 0) | (nxt > end), "bad value length", vpos, 4)
        size = nxt - pos
        flagged = self.buf[kstart] >= _META_FOLLOWS
        if self.lookahead > 1:
            runs = self._same_size_run(pos, end, size, klen, vlen, flagged)
        else:
            runs = np.ones(len(lanes), np.int64)
        # Every pair of a lane's run has this step's lengths: emit them all at once.
        index = np.arange(int(runs.max()))
        taken = index[None, :] < runs[:, None]
        starts = (pos[:, None] + index[None, :] * size[:, None])[taken]
        rows_lane = np.broadcast_to(lanes[:, None], taken.shape)[taken]
        row_klen = np.broadcast_to(klen[:, None], taken.shape)[taken]
        row_vlen = np.broadcast_to(vlen[:, None], taken.shape)[taken]
        self.out.append(rows_lane, self.state[rows_lane], starts + 4, row_klen, starts + 8 + row_klen, row_vlen)
        last_start = pos + (runs - 1) * size
        self.pos[lanes] = last_start + size
        self.need_state[lanes] = self.buf[last_start + 4] >= _META_FOLLOWS
        # Adapt how far ahead to look to how long the runs of equal-sized pairs are.
        mean = float(runs.mean())
        if mean > self.lookahead / 2:
            self.lookahead = min(self.lookahead * 2, _MAX_LOOKAHEAD)
        elif mean < self.lookahead / 4:
            self.lookahead = max(self.lookahead // 2, 1)
        return lanes

    def _same_size_run(self, pos: np.ndarray, end: np.ndarray, size: np.ndarray, klen: np.ndarray,
                       vlen: np.ndarray, flagged: np.ndarray) -> np.ndarray:
        """Per lane, how many pairs from ``pos`` on have the same key and value
        lengths as the first, up to the first flagged one (a state id follows
        it) and within the lookahead: pair i starts exactly at ``pos + i *
        size`` because every pair before it has that size."""
        index = np.arange(1, self.lookahead)
        starts = pos[:, None] + index[None, :] * size[:, None]
        fits = starts + size[:, None] <= end[:, None]
        last = len(self.be32) - 1
        same = (fits & (self.be32[np.minimum(starts, last)] == klen[:, None])
                & (self.be32[np.minimum(starts + 4 + klen[:, None], last)] == vlen[:, None]))
        flags = self.buf[np.minimum(starts + 4, len(self.buf) - 1)] >= _META_FOLLOWS
        # Pair i joins the run when it and every pair before it matched, and no earlier one was flagged.
        before_flagged = np.logical_or.accumulate(np.column_stack([flagged, flags[:, :-1]]), axis=1)
        joins = np.logical_and.accumulate(same & ~before_flagged, axis=1)
        return 1 + joins.sum(axis=1)

    def walk_one(self, lane: int) -> None:
        """One lane to its end with scalar reads (for the last few lanes)."""
        data = self.buf.data
        pos, end = int(self.pos[lane]), int(self.ends[lane])
        state = int(self.state[lane])
        need_state = bool(self.need_state[lane])
        rows: list[tuple[int, int, int, int, int]] = []
        unpack = _INT_PAIR.unpack_from
        while True:
            if need_state:
                if pos + 2 > end:
                    raise self.fail(lane, "truncated: state id expected", pos, 2)
                state = (data[pos] << 8) | data[pos + 1]
                pos += 2
                if state == END_OF_KEY_GROUP:
                    if pos != end:
                        raise self.fail(lane, "bytes after the end-of-key-group mark", pos - 2, 2)
                    break
            if pos + 8 > end:
                raise self.fail(lane, "truncated: key and value lengths expected", pos, 8)
            klen = unpack(data, pos)[0]
            vpos = pos + 4 + klen
            if klen < 1 or vpos + 4 > end:
                raise self.fail(lane, "bad key length", pos, 4)
            vlen = unpack(data, vpos)[0]
            nxt = vpos + 4 + vlen
            if vlen < 0 or nxt > end:
                raise self.fail(lane, "bad value length", vpos, 4)
            rows.append((state, pos + 4, klen, vpos + 4, vlen))
            need_state = data[pos + 4] >= _META_FOLLOWS
            pos = nxt
        self.active[lane] = False
        if rows:
            cols = np.array(rows, np.int64).T
            self.out.append(np.full(len(rows), lane, np.int64), *cols)


class _Rows:
    """Growable int64 columns of found pairs (appending small arrays per step
    and concatenating at the end would cost more than the walk)."""

    def __init__(self) -> None:
        self.size = 0
        self.data = np.empty((6, 1024), np.int64)

    def append(self, *cols: np.ndarray) -> None:
        n = len(cols[0])
        if self.size + n > self.data.shape[1]:
            grown = np.empty((6, max(2 * self.data.shape[1], self.size + n)), np.int64)
            grown[:, :self.size] = self.data[:, :self.size]
            self.data = grown
        for i, col in enumerate(cols):
            self.data[i, self.size:self.size + n] = col
        self.size += n

    def columns(self) -> list[np.ndarray]:
        return [self.data[i, :self.size] for i in range(6)]


_INT_PAIR = struct.Struct(">i")
_VECTOR_LANES = 16  # below this many open key groups, scalar reads are faster
_MAX_LOOKAHEAD = 256


def walk_key_groups(sections: list[KeyGroupSection]) -> WalkResult:
    """Find every (state id, key, value) pair of ``sections``; checks the
    framing (lengths within bounds, a state id before the first pair and
    after each flagged pair, the end mark exactly at each section's end)."""
    lengths = np.array([len(s.data) for s in sections], np.int64)
    starts = np.zeros(len(sections), np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    buf = (np.concatenate([np.frombuffer(s.data, np.uint8) for s in sections]) if sections
           else np.zeros(0, np.uint8))
    lanes = _Lanes(buf, starts, starts + lengths, sections)
    # Vector steps while many key groups are still open; the stragglers one by one.
    open_lanes = np.flatnonzero(lanes.active)
    while len(open_lanes) >= _VECTOR_LANES:
        open_lanes = lanes.step(open_lanes)
    for lane in np.flatnonzero(lanes.active).tolist():
        lanes.walk_one(lane)
    cols = lanes.out.columns()
    # Stream order: sections lie back to back and each one's pairs were found
    # in order, so a stable sort by section (a radix sort of small ints) suffices.
    order = np.argsort(cols[0].astype(np.uint16 if len(sections) <= 65536 else np.int64), kind="stable")
    section, state, kstart, klen, vstart, vlen = (c[order] for c in cols)
    return WalkResult(buf, section, state, kstart, klen, vstart, vlen, starts)


def section_bytes(buffer, start: int, end: int, offsets: dict[int, int], compressed: bool,
                  name: str, handle_index: int, state: str | None = None) -> list[KeyGroupSection]:
    """Cut a keyed stream ``buffer[start:end]`` into key-group sections:
    ``offsets`` maps key group -> offset within the stream (non-zero ones)."""
    return [_section(buffer, start, bounds, compressed, name, handle_index, state)
            for bounds in section_bounds(offsets, end - start, name, start)]


def batched_sections(bounds: list[tuple[int, int, int]],
                     batch_bytes: int | None) -> list[list[tuple[int, int, int]]]:
    """Consecutive key-group sections (:func:`section_bounds`) in runs of about ``batch_bytes``
    stored bytes each (None: one run), so a subtask is decoded a bounded run at a time."""
    runs: list[list[tuple[int, int, int]]] = [[]]
    for b in bounds:
        if runs[-1] and batch_bytes is not None and b[2] - runs[-1][0][1] > batch_bytes:
            runs.append([])
        runs[-1].append(b)
    return runs


def section_bounds(offsets: dict[int, int], length: int, name: str, start: int = 0, *,
                   from_start: bool = False) -> list[tuple[int, int, int]]:
    """(key group, offset, end offset) of every key group of a stream of ``length``
    bytes, in stream order: a key group ends where the next one starts. ``from_start``:
    the first may start at offset 0 (a raw stream has no head before its key groups)."""
    ordered = sorted(offsets.items(), key=lambda kv: kv[1])
    bounds = []
    for i, (key_group, offset) in enumerate(ordered):
        stop = ordered[i + 1][1] if i + 1 < len(ordered) else length
        if not (0 if from_start else 1) <= offset <= stop <= length:
            raise CorruptSavepointError(f"key group {key_group}: offset {offset} outside the stream of "
                                        f"{length} bytes", path=name, byte_range=(start, start + length))
        bounds.append((key_group, offset, stop))
    return bounds


def _section(buffer, start: int, bounds: tuple[int, int, int], compressed: bool, name: str, handle_index: int,
             state: str | None) -> KeyGroupSection:
    key_group, offset, stop = bounds
    data: bytes | memoryview
    if compressed:
        data = decode_framed(buffer, start + offset, start + stop, path=name, state=state)
    else:
        data = memoryview(buffer)[start + offset:start + stop]
    return KeyGroupSection(key_group, handle_index, data, (name, start + offset))


@dataclass(frozen=True)
class KeyedRows:
    """Raw rows of one keyed state, in stream order (ascending key group per
    subtask): composite ``keys`` and ``values`` as stored, the key group and
    the subtask that wrote each row."""

    subtasks: np.ndarray
    key_groups: np.ndarray
    keys: pa.BinaryArray
    values: pa.BinaryArray

    def runs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(key group, first row, end row) of each run of rows of one key group
        from one subtask, in row order: what an importer writes as one chunk."""
        change = np.flatnonzero((np.diff(self.key_groups) != 0) | (np.diff(self.subtasks) != 0)) + 1
        starts = np.concatenate([[0], change]).astype(np.int64) if len(self.key_groups) else np.zeros(0, np.int64)
        ends = np.append(starts[1:], len(self.key_groups))
        return self.key_groups[starts], starts, ends

    def select(self, mask: np.ndarray) -> KeyedRows:
        """The rows where ``mask`` (bool, one per row) is true, in order."""
        keep = pa.array(mask)
        return KeyedRows(self.subtasks[mask], self.key_groups[mask], self.keys.filter(keep), self.values.filter(keep))

    @staticmethod
    def concat(parts: list[KeyedRows]) -> KeyedRows:
        return KeyedRows(np.concatenate([p.subtasks for p in parts]), np.concatenate([p.key_groups for p in parts]),
                         pa.concat_arrays([p.keys for p in parts]), pa.concat_arrays([p.values for p in parts]))


@dataclass(frozen=True)
class KeyedSubtask:
    """Everything one subtask's keyed stream holds: the key type and, per
    state, its meta info and rows (states without rows included)."""

    subtask: int
    key_groups: range
    key_type: FlinkType
    states: dict[str, tuple[StateMetaInfo, KeyedRows]]

    def with_states(self, states: dict[str, tuple[StateMetaInfo, KeyedRows]]) -> KeyedSubtask:
        """This part with ``states`` added (timers read from another stream)."""
        return replace(self, states={**self.states, **states})


def read_keyed_subtask(buffer, start: int, end: int, subtask: int, key_groups: range, offsets: tuple[int, ...],
                       name: str, prefix_bytes: int) -> KeyedSubtask:
    """Parse one subtask's keyed stream ``buffer[start:end]`` whose key groups
    ``key_groups`` start at ``offsets`` (0: no data)."""
    return next(iter_keyed_subtask(buffer, start, end, subtask, key_groups, offsets, name, prefix_bytes))


def iter_keyed_subtask(buffer, start: int, end: int, subtask: int, key_groups: range, offsets: tuple[int, ...],
                       name: str, prefix_bytes: int, batch_bytes: int | None = None,
                       meta: KeyedBackendMeta | None = None) -> Iterator[KeyedSubtask]:
    """One subtask's keyed stream as runs of whole key groups of about ``batch_bytes``
    stored bytes each (None: one run), in stream order: what bounds an importer's
    memory by the batch, not by the subtask. Every run lists every state. ``meta``: the
    stream's head if already parsed."""
    present = {kg: o for kg, o in zip(key_groups, offsets) if o}
    if meta is None:
        proxy_end = start + (min(present.values()) if present else end - start)
        meta = read_keyed_backend_meta(DataInput(buffer, start, end, path=name), proxy_end)
    bounds = section_bounds(present, end - start, name, start)
    for run in batched_sections(bounds, batch_bytes):
        sections = [_section(buffer, start, b, meta.compressed, name, subtask, None) for b in run]
        yield KeyedSubtask(subtask, key_groups, meta.key_type, _states(meta, sections, subtask, prefix_bytes, name))
        if run:
            _release(buffer, start + run[0][1], start + run[-1][2])


def _release(buffer, begin: int, end: int) -> None:
    """Let the pages of a mapped file range go once read: they would otherwise stay in the
    process's resident set until the file is unmapped, growing it by the savepoint's size.
    Safe whatever still points there: the pages are read again from the file if used."""
    if isinstance(buffer, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED"):
        first = begin - begin % mmap.PAGESIZE
        buffer.madvise(mmap.MADV_DONTNEED, first, end - first)


def _states(meta: KeyedBackendMeta, sections: list[KeyGroupSection], subtask: int, prefix_bytes: int,
            name: str) -> dict[str, tuple[StateMetaInfo, KeyedRows]]:
    """The rows of every state of ``meta`` in ``sections``."""
    walk = walk_key_groups(sections)
    section_groups = np.array([s.key_group for s in sections], np.int64)
    check_key_group_prefix(walk, prefix_bytes, section_groups)
    if len(walk.state) and int(walk.state.max()) >= len(meta.states):
        raise CorruptSavepointError(f"key-group data refers to state id {int(walk.state.max())}, but the "
                                    f"metadata defines {len(meta.states)} states", path=name)
    order = np.argsort(walk.state, kind="stable")  # rows of each state, still in stream order
    bounds = np.searchsorted(walk.state[order], np.arange(len(meta.states) + 1))
    states = {}
    for state_id, info in enumerate(meta.states):
        rows = order[bounds[state_id]:bounds[state_id + 1]]
        # Flink sets the top bit of the first key byte of some pairs as a marker.
        keys = gather_spans(walk.buffer, walk.key_start[rows], walk.key_len[rows], clear_top_bit=True)
        values = gather_spans(walk.buffer, walk.value_start[rows], walk.value_len[rows])
        states[info.name] = (info, KeyedRows(np.full(len(rows), subtask, np.int64),
                                             section_groups[walk.section[rows]], keys, values))
    return states


def check_key_group_prefix(walk: WalkResult, prefix_bytes: int, key_groups: np.ndarray) -> None:
    """Every key must start with its section's key group (top bit cleared)."""
    buf, ks = walk.buffer, walk.key_start
    if not len(ks):
        return
    stored = (buf[ks] & 0x7F).astype(np.int64)
    if prefix_bytes == 2:
        short = walk.key_len < 2
        if short.any():
            raise CorruptSavepointError("a key shorter than its key-group prefix")
        stored = (stored << 8) | buf[ks + 1]
    expected = key_groups[walk.section]
    bad = np.flatnonzero(stored != expected)
    if len(bad):
        i = int(bad[0])
        raise CorruptSavepointError(f"a key of key group {int(expected[i])} is prefixed with key group "
                                    f"{int(stored[i])}")
