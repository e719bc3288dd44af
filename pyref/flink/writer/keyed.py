"""Keyed state and timers of one subtask in Flink's canonical savepoint format
(``FullSnapshotAsyncWriter``), which the HashMap and RocksDB backends both restore;
the inverse of :mod:`pyref.flink.keyed`.

The stream: the ``KeyedBackendSerializationProxy`` (int version 6, boolean
"compressed" (false), the key serializer snapshot, a short count of states and
their meta info: the keyed states, then a priority queue per timer service and time
domain, ``_timer_state/event_<name>`` or ``_timer_state/processing_<name>``), then,
for every key group of the subtask's range that holds anything, at the offset the
handle records for it: per state a short state id and its (int length, key, int
length, value) pairs, the top bit of the first key byte set on the last pair before
the next state id or the end mark ``0xFFFF``.

A key is RocksDB's composite key: the key group (one byte up to max parallelism
128, else two, big-endian), the key, [its length when key and namespace are both
variable-sized], the namespace (``VoidNamespace``'s byte 0 outside windows), [its
length], and for MAP state the user key. Values: the value (VALUE, REDUCING,
AGGREGATING); the elements joined by ``,`` (LIST; a key with an empty list has no
state in Flink and is left out); a null flag and the value (MAP, one pair per
entry). Under TTL each value, element or map value starts with its last-access
time (a long). A timer's key is the key group, its timestamp with the sign bit
flipped (a long), the key and the namespace; its value is empty.

Rows are read from pyref's chunks a batch of key groups at a time and turned into
these pairs a column at a time (:mod:`pyref.flink.transcode`, :mod:`pyref.flink.rows`).
A key written twice in a key group keeps pyref's order, so the last row wins in
Flink as it does in pyref.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ...errors import CorruptSavepointError, UnsupportedFormatError
from ...key_groups import KeyGroupRange, KeyType, compute_key_groups
from ...keys import key_type_of
from ...reader import KeyedStateView, OperatorView
from ...serializers import Nullable, Serializer, serializer_from_snapshot
from ...serializers.base import binary_input, binary_parts, fixed_width_values
from ...timers import TimerServiceView
from ...ttl import split_timestamps
from ..columns import gather_spans
from ..keyed import TIMER_PREFIX
from ..rows import Part, be_bytes, constant, from_bytes, join_rows, lengths, variable_ints, with_empty_rows
from ..to_flink import (
    VOID_NAMESPACE,
    FlinkSerializer,
    flink_serializer,
    list_serializer,
    map_serializer,
    timer_serializer,
    ttl_serializer,
)
from ..transcode import split_nullable, transcoder
from .meta_info import keyed_meta_info, timer_meta_info

__all__ = ["KeyedExport"]

PROXY_VERSION = 6
END_OF_KEY_GROUP = b"\xff\xff"
_DOMAIN_PREFIX = {"event_time": "event_", "processing_time": "processing_"}
_FLINK_KINDS = {"value": "VALUE", "list": "LIST", "map": "MAP", "reducing": "REDUCING", "aggregating": "AGGREGATING"}
#: Raw chunk bytes of the key groups read and transcoded at once.
BATCH_BYTES = 32 << 20


@dataclass
class Records:
    """Flink's (key, value) pairs of one state, row ``i`` the ``i``-th (int length, key,
    int length, value), in key-group order, the last pair of each key group flagged."""

    pairs: pa.Array
    key_groups: np.ndarray


def _part_lengths(part: Part) -> np.ndarray:
    """Every row's length in ``part`` (int64)."""
    return np.full(len(part), part.shape[1], np.int64) if isinstance(part, np.ndarray) else lengths(part)


def _records(key_groups: np.ndarray, key_parts: list[Part], value_parts: list[Part]) -> Records:
    """``key_parts[0]`` is the key-group prefix: the first key byte of a key group's last
    pair gets its top bit ("meta data follows": a state id or the end mark comes next)."""
    rows = len(key_groups)
    key_length = sum((_part_lengths(p) for p in key_parts), np.zeros(rows, np.int64))
    value_length = sum((_part_lengths(p) for p in value_parts), np.zeros(rows, np.int64))
    prefix = key_parts[0]
    last = np.flatnonzero(np.diff(key_groups, append=-1) != 0)
    prefix[last, 0] |= 0x80
    pairs = join_rows([be_bytes(key_length, 4), *key_parts, be_bytes(value_length, 4), *value_parts], rows)
    return Records(pairs, key_groups)


class _CompositeKey:
    """Builds composite keys: key group, key, [length], namespace, [length], [user key]."""

    def __init__(self, prefix_bytes: int, key: FlinkSerializer, key_source: Serializer, namespace: FlinkSerializer,
                 namespace_source: Serializer | None, where: str) -> None:
        self.prefix_bytes = prefix_bytes
        self.key = transcoder(key_source, key.type, f"{where} (key)")
        self.namespace = (transcoder(namespace_source, namespace.type, f"{where} (namespace)")
                          if namespace_source is not None else None)
        # CompositeKeySerializationUtils writes lengths only when both parts vary in size.
        self.ambiguous = key.type.length < 0 and namespace.type.length < 0

    def namespace_part(self, rows: int, column: pa.Array | None) -> Part:
        if column is None:
            return np.zeros((rows, 1), np.uint8)  # VoidNamespace writes one 0 byte
        assert self.namespace is not None  # a namespace column comes from a state with a namespace serializer
        return self.namespace(column)

    def parts(self, key_groups: np.ndarray, key: pa.Array, namespace: Part, between: Sequence[Part] = ()) -> list[Part]:
        """``between``: what comes between the key group and the key (a timer's timestamp)."""
        key = self.key(key)
        parts = [be_bytes(key_groups, self.prefix_bytes), *between, key]
        if self.ambiguous:
            return parts + [variable_ints(lengths(key)), namespace, variable_ints(_part_lengths(namespace))]
        return parts + [namespace]


class _State:
    """A state of the keyed backend: its Flink name and meta info, where its rows are, and
    how a batch of them becomes Flink's pairs."""

    name: str
    meta: bytes
    view: KeyedStateView | TimerServiceView

    def records(self, key_groups: np.ndarray, columns: list[pa.Array]) -> Records:
        raise NotImplementedError


def _split_lists(column: pa.Array, width: int | None, where: str) -> tuple[np.ndarray, pa.Array]:
    """pyref LIST cells (u32 count, framed elements: fixed ``width`` or a u32 length
    first) as the element count of every row and the elements, row by row."""
    offsets, data = binary_parts(binary_input(column, "list"))
    offsets = offsets.astype(np.int64)
    starts, ends, rows = offsets[:-1], offsets[1:], len(column)
    if rows and np.any(ends - starts < 4):
        raise CorruptSavepointError("a LIST value shorter than its element count", state=where)
    counts = _u32(data, starts)
    if width is not None:
        if np.any(ends - starts != 4 + counts * width):
            raise CorruptSavepointError(f"a LIST value is not its count of {width}-byte elements", state=where)
        index = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
        element_starts = np.repeat(starts + 4, counts) + index * width
        return counts, gather_spans(data, element_starts, np.full(len(element_starts), width, np.int64))
    # Variable-sized elements: walk every row at once, one element per step.
    position, remaining = starts + 4, counts.copy()
    found_rows, found_starts, found_lengths = [], [], []
    while True:
        active = np.flatnonzero(remaining > 0)
        if not len(active):
            break
        at = position[active]
        if np.any(at + 4 > ends[active]):
            raise CorruptSavepointError("a LIST element's length runs past its value", state=where)
        size = _u32(data, at)
        if np.any(at + 4 + size > ends[active]):
            raise CorruptSavepointError("a LIST element runs past its value", state=where)
        found_rows.append(active)
        found_starts.append(at + 4)
        found_lengths.append(size)
        position[active] = at + 4 + size
        remaining[active] -= 1
    if np.any(position != ends):
        raise CorruptSavepointError("bytes after the last element of a LIST value", state=where)
    if not found_rows:
        return counts, pa.array([], pa.binary())
    order = np.argsort(np.concatenate(found_rows), kind="stable")  # row by row, elements in order
    return counts, gather_spans(data, np.concatenate(found_starts)[order], np.concatenate(found_lengths)[order])


def _u32(data: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The little-endian u32 at every position ``at``."""
    return np.ascontiguousarray(data[at[:, None] + np.arange(4)]).view("<u4").reshape(-1).astype(np.int64)


def _timestamps(cells: pa.Array, where: str) -> tuple[np.ndarray, pa.Array]:
    """TTL cells: big-endian timestamps as Flink writes them, and the values."""
    stamps, values = split_timestamps(cells, where)
    return be_bytes(stamps, 8), values


class _KeyedState(_State):
    view: KeyedStateView

    def __init__(self, view: KeyedStateView, prefix_bytes: int, key: FlinkSerializer, key_source: Serializer,
                 release: tuple[int, int]) -> None:
        proto, where = view.proto, view.label
        self.name, self.view, self.kind, self.where = view.name, view, view.kind, where
        self.ttl = view.ttl is not None
        namespace = (flink_serializer(proto.namespace_serializer, where, release=release) if view.namespaced
                     else VOID_NAMESPACE)
        self.composite = _CompositeKey(prefix_bytes, key, key_source, namespace, view.namespace_serializer, where)
        self.value_source = view.value_serializer
        if self.kind == "map":
            user_key_source = view.user_key_serializer
            assert user_key_source is not None  # the reader resolves one for every MAP state
            user_key = flink_serializer(proto.user_key_serializer, where, release=release)
            self.user_key = transcoder(user_key_source, user_key.type, f"{where} (user key)")
            value = flink_serializer(proto.value_serializer, where, nulls_handled=True, release=release)
            self.nullable = isinstance(self.value_source, Nullable)
            source = self.value_source.inner if isinstance(self.value_source, Nullable) else self.value_source
            stored = map_serializer(user_key, ttl_serializer(value, where) if self.ttl else value, where)
        else:
            value = flink_serializer(proto.value_serializer, where, release=release)
            source = self.value_source
            cell = ttl_serializer(value, where) if self.ttl else value
            stored = list_serializer(cell, where) if self.kind == "list" else cell
        self.value = transcoder(source, value.type, f"{where} (value)")
        self.meta = keyed_meta_info(self.name, where, _FLINK_KINDS[self.kind], stored, namespace)

    def records(self, key_groups: np.ndarray, columns: list[pa.Array]) -> Records:
        key, *rest = columns
        namespace = rest.pop(0) if self.view.namespaced else None
        user_key = rest.pop(0) if self.kind == "map" else None
        value_parts, keep = self._values(rest[0])
        if keep is not None:
            mask = pa.array(keep)
            key_groups, key = key_groups[keep], key.filter(mask)
            namespace = namespace.filter(mask) if namespace is not None else None
        parts = self.composite.parts(key_groups, key, self.composite.namespace_part(len(key_groups), namespace))
        if user_key is not None:
            parts.append(self.user_key(user_key))
        return _records(key_groups, parts, value_parts)

    def _values(self, cells: pa.Array) -> tuple[list[Part], np.ndarray | None]:
        """The parts of every row's Flink value, and which rows stay (LIST: not empty)."""
        if self.kind == "list":
            return self._lists(cells)
        stamps = None
        if self.ttl:
            stamps, cells = _timestamps(cells, self.where)
        parts: list[Part] = [] if stamps is None else [stamps]
        if self.kind != "map":
            return parts + [self.value(cells)], None
        if self.nullable:
            nulls, inner = split_nullable(cells)
        else:
            nulls, inner = np.zeros(len(cells), bool), cells
        if self.ttl and nulls.any():
            raise UnsupportedFormatError("a null map value under TTL: Flink's TTL map values are never null",
                                         state=self.where)
        present = ~nulls
        encoded = self.value(inner.filter(pa.array(present)) if nulls.any() else inner)
        # MapState writes "is null", then the value if there is one.
        return [nulls.astype(np.uint8).reshape(-1, 1)] + parts + [with_empty_rows(encoded, present)], None

    def _lists(self, cells: pa.Array) -> tuple[list[Part], np.ndarray]:
        width = self.value_source.fixed_width
        if width is not None and self.ttl:
            width += 8
        counts, elements = _split_lists(cells, width, self.where)
        total = len(elements)
        index_in_row = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
        parts: list[Part] = [constant(b",", index_in_row > 0)]
        if self.ttl:
            stamps, elements = _timestamps(elements, self.where)
            parts.append(stamps)
        parts.append(self.value(elements))
        joined = join_rows(parts, total)
        offsets, data = binary_parts(joined)
        # Row r's value: its elements, back to back; rows without elements are left out.
        bounds = offsets.astype(np.int64)[np.concatenate([[0], np.cumsum(counts)])] if total else np.zeros(
            len(counts) + 1, np.int64)
        keep = counts > 0
        value = from_bytes(data[int(bounds[0]):int(bounds[-1])] if total else np.zeros(0, np.uint8),
                           np.concatenate([[0], (bounds[1:] - bounds[0])[keep]]))
        return [value], keep


class _TimerQueue(_State):
    view: TimerServiceView

    def __init__(self, view: TimerServiceView, prefix_bytes: int, key: FlinkSerializer, key_source: Serializer,
                 release: tuple[int, int]) -> None:
        self.view, where = view, view.label
        self.name = TIMER_PREFIX + _DOMAIN_PREFIX[view.domain] + view.name
        self.namespaced = view.namespace_serializer is not None
        namespace = (flink_serializer(view.proto.namespace_serializer, where, release=release) if self.namespaced
                     else VOID_NAMESPACE)
        self.composite = _CompositeKey(prefix_bytes, key, key_source, namespace, view.namespace_serializer, where)
        self.composite.ambiguous = False  # TimerSerializer writes key and namespace without lengths
        self.meta = timer_meta_info(self.name, where, timer_serializer(key, namespace, where))

    def records(self, key_groups: np.ndarray, columns: list[pa.Array]) -> Records:
        key, *rest = columns
        namespace = rest.pop(0) if self.namespaced else None
        stamps = fixed_width_values(binary_input(rest[0], "timestamp"), 8, "timestamp").view("<i8")
        flipped = be_bytes(stamps.astype(np.int64) ^ np.int64(-(2**63)), 8)  # MathUtils.flipSignBit
        rows = len(key_groups)
        parts = self.composite.parts(key_groups, key, self.composite.namespace_part(rows, namespace), [flipped])
        return _records(key_groups, parts, [])


def _hashes_bytes(key_type) -> bool:
    return key_type == "bytes" or (isinstance(key_type, tuple) and any(map(_hashes_bytes, key_type)))


def _flink_hash(op: OperatorView) -> KeyType | None:
    """The key hash Flink applies to the keys of an operator whose writer assigned the key
    groups (spec/format.md §7.12) but whose keys Flink hashes as spec/key-groups.md §3 does,
    so that the export can check them; None where the key groups are hashed (the reader
    checked them) or Flink's hash is not pyref's (opaque keys, byte arrays)."""
    if not op.writer_assigned_key_groups:
        return None
    try:
        key_type = key_type_of(op.proto.key_serializer)
    except UnsupportedFormatError:
        return None
    return None if _hashes_bytes(key_type) else key_type


class KeyedExport:
    """An operator's keyed state and timers as Flink keyed streams, one per subtask, for the
    Flink ``release`` (major, minor)."""

    def __init__(self, op: OperatorView, release: tuple[int, int]) -> None:
        proto = op.proto
        self.operator = op
        where = f"{op.operator_id} (key)"
        self.prefix_bytes = 1 if op.max_parallelism <= 128 else 2
        key = flink_serializer(proto.key_serializer, where, release=release)
        key_source = serializer_from_snapshot(proto.key_serializer)
        if not op.writer_assigned_key_groups and _hashes_bytes(key_type_of(proto.key_serializer)):
            raise UnsupportedFormatError("byte-string keys: Flink cannot key by byte[] (its hash is the array's "
                                         "identity) and would put them elsewhere than pyref's key groups",
                                         state=where)
        self.key_source = key_source
        self.flink_hash = _flink_hash(op)
        self.states: list[_State] = [
            _KeyedState(op.keyed_state(name), self.prefix_bytes, key, key_source, release)
            for name in op.keyed_state_names]
        self.states += [_TimerQueue(view, self.prefix_bytes, key, key_source, release) for view in op.timer_services]
        for state in self.states:
            if isinstance(state, _KeyedState) and state.name.startswith(TIMER_PREFIX):
                raise UnsupportedFormatError(f"a keyed state named {state.name!r}: Flink keeps its timers under "
                                             f"names starting {TIMER_PREFIX!r}", state=state.where)
        self.proxy = (struct.pack(">i?", PROXY_VERSION, False) + key.proxied + struct.pack(">h", len(self.states))
                      + b"".join(s.meta for s in self.states))

    def _batches(self, groups: KeyGroupRange) -> list[KeyGroupRange]:
        """The subtask's key groups cut into ranges of about :data:`BATCH_BYTES` of chunks."""
        weight = np.zeros(len(groups), np.int64)
        for state in self.states:
            chunks = state.view.chunks_in(groups)
            kgs = np.fromiter((c.key_group for c in chunks), np.int64, len(chunks))
            np.add.at(weight, kgs - groups.first, np.fromiter((c.raw_length for c in chunks), np.int64, len(chunks)))
        cut = np.cumsum(weight) // BATCH_BYTES
        starts = np.flatnonzero(np.diff(cut, prepend=-1)) + groups.first
        ends = np.append(starts[1:] - 1, groups.last)
        return [KeyGroupRange(int(a), int(b)) for a, b in zip(starts, ends)]

    def _read(self, state: _State, groups: KeyGroupRange) -> Records | None:
        chunks = state.view.chunks_in(groups)
        if not chunks:
            return None
        parts = list(state.view.read_encoded(chunks))
        key_groups = np.repeat([kg for kg, _ in parts], [len(cols[0]) for _, cols in parts]).astype(np.int64)
        columns = [pa.concat_arrays(c) for c in zip(*(cols for _, cols in parts))]
        if self.flink_hash is not None:
            self._check_flink_key_groups(state, key_groups, columns[0])
        return state.records(key_groups, columns)

    def _check_flink_key_groups(self, state: _State, key_groups: np.ndarray, keys: pa.Array) -> None:
        """Flink restores a key of a hashable type into the key group it hashes to and looks it
        up there: a writer-assigned key group that differs would hide the key from Flink."""
        assert self.flink_hash is not None
        shown = self.key_source.decode_array(keys)
        expected = compute_key_groups(shown, self.operator.max_parallelism, self.flink_hash)
        bad = np.flatnonzero(expected != key_groups)
        if bad.size:
            i = int(bad[0])
            raise UnsupportedFormatError(
                f"key {shown[i].as_py()!r} is in key group {int(key_groups[i])}, which its writer assigned, but "
                f"Flink hashes it to key group {int(expected[i])} and would never find it ({bad.size} rows "
                "differ): Flink takes keys of this type only in the key groups of their hash "
                "(spec/key-groups.md §3)", state=state.view.label)

    def write(self, stream, groups: KeyGroupRange) -> tuple[int, ...]:
        """Write the keyed stream of the subtask owning ``groups``; returns the offset of
        every key group's data in it (0: none)."""
        stream.write(self.proxy)
        offsets = np.zeros(len(groups), np.int64)
        for batch in self._batches(groups):
            records = [self._read(state, batch) for state in self.states]
            self._write_sections(stream, batch, records, offsets, groups.first)
        return tuple(int(o) for o in offsets)

    def _write_sections(self, stream, batch: KeyGroupRange, records: list[Records | None], offsets: np.ndarray,
                        first: int) -> None:
        wanted = np.arange(batch.first, batch.last + 1)
        # Per state: every wanted key group's first and end pair, the pairs' offsets and bytes.
        found: list[tuple[np.ndarray, np.ndarray, np.ndarray, memoryview] | None] = []
        for r in records:
            if r is None:
                found.append(None)
                continue
            pair_offsets, data = binary_parts(r.pairs)
            found.append((np.searchsorted(r.key_groups, wanted, "left"), np.searchsorted(r.key_groups, wanted, "right"),
                          pair_offsets.astype(np.int64), data.data))
        for i, key_group in enumerate(wanted.tolist()):
            pieces = []
            for state_id, f in enumerate(found):
                if f is None or f[0][i] == f[1][i]:
                    continue
                lows, highs, pair_offsets, pairs = f
                pieces += [struct.pack(">h", state_id), pairs[pair_offsets[lows[i]]:pair_offsets[highs[i]]]]
            if pieces:
                offsets[key_group - first] = stream.tell()
                for piece in pieces:
                    stream.write(piece)
                stream.write(END_OF_KEY_GROUP)
