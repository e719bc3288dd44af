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

from dataclasses import dataclass, field

import numpy as np

from ..errors import CorruptSavepointError, UnsupportedFormatError
from .compression import decode_framed
from .datainput import DataInput
from .meta_info import StateMetaInfo, looks_like_meta_info, read_state_meta_infos
from .serializers import FlinkType, Follow, at_position, read_serializer_snapshot

__all__ = [
    "KeyedBackendMeta",
    "read_keyed_backend_meta",
    "walk_key_groups",
    "KeyGroupSection",
    "WalkResult",
    "section_bytes",
    "check_key_group_prefix",
]

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
    states = read_state_meta_infos(inp, at_position(proxy_end))
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


def _be32(buf: np.ndarray, pos: np.ndarray) -> np.ndarray:
    b = buf[pos[:, None] + np.arange(4)].astype(np.int64)
    value = (b[:, 0] << 24) | (b[:, 1] << 16) | (b[:, 2] << 8) | b[:, 3]
    return np.where(value >= 2**31, value - 2**32, value)


class _Lanes:
    """The walk state of every section (lane) at once."""

    def __init__(self, buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, sections: list[KeyGroupSection]):
        self.buf, self.ends, self.sections = buf, ends, sections
        self.pos = starts.copy()
        self.state = np.full(len(starts), -1, np.int64)
        self.need_state = np.ones(len(starts), bool)
        self.active = np.ones(len(starts), bool)
        self.out: list[tuple[np.ndarray, ...]] = []

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

    def step(self, lanes: np.ndarray) -> None:
        """Advance ``lanes`` by one state-id switch (when due) and one pair."""
        buf, pos, ends = self.buf, self.pos, self.ends
        due = lanes[self.need_state[lanes]]
        if len(due):
            p = pos[due]
            self.check(due, p + 2 > ends[due], "truncated: state id expected", p, 2)
            sid = (buf[p].astype(np.int64) << 8) | buf[p + 1]
            done = sid == END_OF_KEY_GROUP
            self.check(due, done & (p + 2 != ends[due]), "bytes after the end-of-key-group mark", p, 2)
            self.active[due[done]] = False
            self.state[due] = sid
            pos[due] = p + 2
            self.need_state[due] = False
            lanes = lanes[self.active[lanes]]
            if not len(lanes):
                return
        p = pos[lanes]
        end = ends[lanes]
        self.check(lanes, p + 4 > end, "truncated: key length expected", p, 4)
        klen = _be32(buf, p)
        self.check(lanes, (klen < 1) | (p + 8 + klen > end), "bad key length", p, 4)
        kstart = p + 4
        vpos = kstart + klen
        vlen = _be32(buf, vpos)
        self.check(lanes, (vlen < 0) | (vpos + 4 + vlen > end), "bad value length", vpos, 4)
        flag = (buf[kstart] & _META_FOLLOWS) != 0
        self.out.append((lanes, self.state[lanes].copy(), kstart, klen, vpos + 4, vlen))
        pos[lanes] = vpos + 4 + vlen
        self.need_state[lanes] = flag


def walk_key_groups(sections: list[KeyGroupSection]) -> WalkResult:
    """Find every (state id, key, value) pair of ``sections``; checks the
    framing (lengths within bounds, a state id before the first pair and
    after each flagged pair, the end mark exactly at each section's end)."""
    lengths = np.array([len(s.data) for s in sections], np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    buf = np.frombuffer(b"".join(bytes(s.data) for s in sections), np.uint8) if sections else np.zeros(0, np.uint8)
    lanes = _Lanes(buf, starts, starts + lengths, sections)
    # Vector steps while many key groups are still open; the stragglers one by one.
    active = np.flatnonzero(lanes.active)
    while len(active) >= 8:
        lanes.step(active)
        active = np.flatnonzero(lanes.active)
    for lane in active.tolist():
        one = np.array([lane])
        while lanes.active[lane]:
            lanes.step(one)
    if lanes.out:
        cols = [np.concatenate([o[i] for o in lanes.out]) for i in range(6)]
    else:
        cols = [np.zeros(0, np.int64) for _ in range(6)]
    order = np.argsort(cols[2], kind="stable")  # key starts: stream order
    section, state, kstart, klen, vstart, vlen = (c[order] for c in cols)
    return WalkResult(buf, section, state, kstart, klen, vstart, vlen, starts)


def section_bytes(buffer, start: int, end: int, offsets: dict[int, int], compressed: bool,
                  name: str, handle_index: int, state: str | None = None) -> list[KeyGroupSection]:
    """Cut a keyed stream ``buffer[start:end]`` into key-group sections:
    ``offsets`` maps key group -> offset within the stream (non-zero ones)."""
    ordered = sorted(offsets.items(), key=lambda kv: kv[1])
    sections = []
    for i, (key_group, offset) in enumerate(ordered):
        stop = ordered[i + 1][1] if i + 1 < len(ordered) else end - start
        if not 0 < offset <= stop <= end - start:
            raise CorruptSavepointError(f"key group {key_group}: offset {offset} outside the stream of "
                                        f"{end - start} bytes", path=name, byte_range=(start, end))
        if compressed:
            data = decode_framed(buffer, start + offset, start + stop, path=name, state=state)
        else:
            data = memoryview(buffer)[start + offset:start + stop]
        sections.append(KeyGroupSection(key_group, handle_index, data, (name, start + offset)))
    return sections


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
