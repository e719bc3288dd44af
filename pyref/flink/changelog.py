"""Keyed state of the changelog state backend (``state.changelog.enabled``, Flink 1.15+): the
DSTL change-set format and applying its changes as Flink's restore does.

A subtask's ``ChangelogStateBackendHandle`` names the inner backend's last materialized snapshot
(a heap, savepoint-format or RocksDB native handle, read by their own readers; none before the
first materialization) and the changes made since, in order: kept in ``_metadata``
(``InMemoryChangelogStateHandle``, the ``memory`` storage: per change its int key group and bytes)
or in DSTL files (``ChangelogStateHandleStreamImpl``, the ``filesystem`` storage: (file, offset)
pairs). A DSTL file is a byte 1 (Snappy framed, as snapshot compression) or 0, then the stream
whose offsets the handle gives; at each offset one change set: int group count, per group int
change count, int key group, then per change int length and its bytes
(``StateChangeFormat``).

A change is an operation byte. In the common key group -1 it is ``METADATA`` (8; 9 in sources that
number ``REMOVE_FIRST_ELEMENT`` 8): int meta-info version, the ``StateMetaInfoSnapshot``, the TTL
config and default value (Java-serialized, not read), and last the short state id and the byte
backend state type. Any other is a data change: short state id, for key/value state the key and
namespace (the scope), then the operation's data; changes of key groups outside the handle's range
are skipped, as ``ChangelogBackendLogApplier`` skips them.

Applying (``*StateChangeApplier``, on the heap's semantics) gives the rows every other reader gives
(RocksDB's composite keys, LIST elements joined by ``,``, MAP values behind a null flag): SET and
SET_INTERNAL replace a value (a LIST's whole list: int count and elements; an empty one removes it),
CLEAR removes the scope's value, list or map, ADD appends a list (LIST) or puts a map (MAP: int
size, per entry key, null flag, value), ADD_ELEMENT appends one LIST element or (MAP, as
ADD_OR_UPDATE_ELEMENT) puts one entry (key, value), REMOVE_ELEMENT removes a map entry or a queue
element, MERGE_NS (target namespace, int count, source namespaces) moves the sources' lists after
the target's; for a priority queue (timers), which has no scope, ADD_ELEMENT adds an int count of
elements and REMOVE_ELEMENT removes one. Merging two REDUCING or AGGREGATING values needs the job's
function: refused.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, NoReturn

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import CorruptSavepointError, UnsupportedFormatError
from .composite import LIST_DELIMITER, map_scopes
from .compression import decode_framed
from .datainput import DataInput
from .handles import ChangelogHandle, InMemoryChanges, StreamHandle
from .heap import StateDecoder
from .keyed import KeyedBackendMeta, KeyedRows, KeyedSubtask
from .meta_info import BACKEND_STATE_TYPES, KEYED_STATE_TYPES, StateMetaInfo, read_meta_info
from .serializers import FlinkType
from .values import Codec, Undelimited, codec_for

__all__ = ["CHANGELOG", "Change", "iter_changes", "changelog_meta", "apply_changelog", "KeysNotRecordedError"]

#: The keyed layout name of a changelog backend's state.
CHANGELOG = "changelog"
COMMON_KEY_GROUP = -1
CLEAR, SET, SET_INTERNAL, ADD, MERGE_NS, ADD_ELEMENT, ADD_OR_UPDATE_ELEMENT, REMOVE_ELEMENT = range(8)
METADATA = (8, 9)
_OPERATIONS = ("CLEAR", "SET", "SET_INTERNAL", "ADD", "MERGE_NS", "ADD_ELEMENT", "ADD_OR_UPDATE_ELEMENT",
               "REMOVE_ELEMENT")
#: What each state kind's applier accepts (others make Flink's restore fail).
_ACCEPTED = {
    "VALUE": {SET, CLEAR},
    "REDUCING": {SET, SET_INTERNAL, CLEAR, MERGE_NS},
    "AGGREGATING": {SET, SET_INTERNAL, CLEAR, MERGE_NS},
    "LIST": {ADD, ADD_ELEMENT, SET, SET_INTERNAL, MERGE_NS, CLEAR},
    "MAP": {ADD, ADD_ELEMENT, ADD_OR_UPDATE_ELEMENT, REMOVE_ELEMENT, CLEAR},
    "PRIORITY_QUEUE": {ADD_ELEMENT, REMOVE_ELEMENT},
}
_TAIL = 3  # a METADATA record ends with the short state id and the byte backend state type

#: The whole file a stream handle names and the file's name (``HandleStore.open_file``).
Opener = Callable[[StreamHandle], tuple[Any, str]]


@dataclass(frozen=True)
class Change:
    """One change: its key group and bytes, which begin at ``at`` of ``path``."""

    key_group: int
    data: bytes
    path: str
    at: int

    def input(self) -> DataInput:
        return DataInput(self.data, base=self.at, path=self.path)


def iter_changes(open_stream: Opener, handle: ChangelogHandle) -> Iterator[Change]:
    """Every change of the handle's non-materialized state, in the order Flink applies them."""
    decoded: dict[str, tuple[bytes | memoryview, int, str]] = {}
    # Per DSTL stream, the (start, end) of each change set the handle named so far, sorted.
    extents: dict[str, list[tuple[int, int]]] = {}
    for part in handle.changes:
        if isinstance(part, InMemoryChanges):
            for key_group, data, at in part.changes:
                yield Change(key_group, data, "_metadata", at)
            continue
        for stream, offset in part.change_sets:
            if stream is None:
                raise CorruptSavepointError("a change set without a file in a changelog handle")
            if stream.kind == "segment":  # the whole file is read: a segment's start and size would be ignored
                raise UnsupportedFormatError(f"a change set in a segment of the merged file {stream.location!r} "
                                             f"(bytes {stream.start}..{stream.start + stream.size}): Flink's "
                                             "changelog storage writes DSTL files of its own, not file merging's")
            if stream.location not in decoded:
                decoded[stream.location] = _dstl_stream(open_stream, stream)
            yield from _change_set(*decoded[stream.location], offset, extents.setdefault(stream.location, []))


#: Where a changelog checkpoint's DSTL files are and how to have them read.
_DSTL_REMEDY = ("Flink writes them below state.changelog.dstl.dfs.base-path, not beside the checkpoint: copy the "
                "files it names into the checkpoint's directory, where they are read by name, or read a local "
                "checkpoint's where they are with allow_external_files=True (--allow-external-files)")


def _dstl_stream(open_stream: Opener, stream: StreamHandle) -> tuple[bytes | memoryview, int, str]:
    """A DSTL file's stream after its compression byte: (bytes, file offset of its first, name). The
    handle's size is the stream's (uncompressed, without that byte): the file is read whole."""
    try:
        buffer, name = open_stream(stream)
    except (CorruptSavepointError, UnsupportedFormatError) as exc:  # missing, or outside the checkpoint
        raise type(exc)(f"DSTL file of the changelog state backend: {exc.reason}; {_DSTL_REMEDY}",
                        path=exc.path) from None
    inp = DataInput(buffer, path=name)
    flag = inp.read_ubyte("changelog compression flag")
    if flag == 1:
        return decode_framed(buffer, 1, len(buffer), path=name), 0, f"{name} (decompressed)"
    if flag != 0:
        raise inp.corrupt(f"changelog compression flag {flag} is neither 0 nor 1", 0, 1)
    return memoryview(buffer)[1:], 1, name


def _change_set(data: bytes | memoryview, base: int, name: str, offset: int,
                named: list[tuple[int, int]]) -> Iterator[Change]:
    """The changes of the change set at ``offset`` of a DSTL stream (``StateChangeFormat``). ``named``:
    the sorted extents of the stream's change sets the handle named before, to which this one's is
    added. Flink writes a change set once and a handle names it once: one overlapping another is
    corrupt (its changes would apply twice, and naming one set over and over would cost its bytes
    each time)."""
    if offset > len(data):
        raise CorruptSavepointError(f"change set offset {offset} is past the end of its {len(data)}-byte stream",
                                    path=name, byte_range=(base + offset, base + offset))
    before = bisect.bisect_right(named, (offset, len(data) + 1))  # after a set starting at offset too
    if before and named[before - 1][1] > offset:
        _overlap(name, base, (offset, offset), named[before - 1])
    inp = DataInput(data, offset, len(data), base=base, path=name)
    for _ in range(inp.read_count("change set key group count", 8)):
        count = inp.read_count("change count", 4)
        key_group = inp.read_int("change key group")
        for _ in range(count):
            size = inp.read_count("change length")
            at = inp.pos
            yield Change(key_group, bytes(inp.read_bytes(size, "change")), name, base + at)
    if before < len(named) and named[before][0] < inp.pos:
        _overlap(name, base, (offset, inp.pos), named[before])
    named.insert(before, (offset, inp.pos))


def _overlap(name: str, base: int, extent: tuple[int, int], other: tuple[int, int]) -> NoReturn:
    raise CorruptSavepointError(
        f"the change set at {extent[0]} overlaps the one at {other[0]}..{other[1]} the handle named before: a "
        "changelog handle names each change set once", path=name, byte_range=(base + extent[0], base + extent[1]))


@dataclass(frozen=True)
class _LoggedState:
    """A METADATA record: the state id its changes name and the state's meta info."""

    state_id: int
    info: StateMetaInfo


def _metadata(change: Change) -> _LoggedState:
    inp = change.input()
    inp.read_ubyte("changelog operation")
    inp.read_int("state meta info version")
    end = len(change.data) - _TAIL
    if end < inp.pos:
        raise inp.corrupt("a METADATA change shorter than its state id and type", 0, len(change.data))
    # What follows the snapshot (the TTL flag and default-value flag, each 0 or 1) bounds an opaque last serializer.
    info = read_meta_info(inp, lambda i: i.pos <= end and change.data[i.pos] in (0, 1), KEYED_STATE_TYPES,
                          "a changelog's METADATA records")
    tail = DataInput(change.data, end, len(change.data), base=change.at, path=change.path)
    state_id = tail.read_short("state id")
    kind = tail.read_ubyte("backend state type")
    if kind >= len(BACKEND_STATE_TYPES) or BACKEND_STATE_TYPES[kind] != info.backend_type:
        raise tail.corrupt(f"state {info.name!r}: backend state type {kind} is not its meta info's "
                           f"{info.backend_type}", end + 2, 1)
    return _LoggedState(state_id, info)


def changelog_meta(changes: Iterable[Change], materialized: KeyedBackendMeta | None) -> KeyedBackendMeta:
    """The head of a changelog subtask: the key type and state meta infos of its materialized
    part (if any) and of its METADATA records. Without a materialized part the key serializer is
    in no byte Flink wrote, except a timer queue's: otherwise refused."""
    states = {info.name: info for info in materialized.states} if materialized else {}
    for change in changes:
        if change.key_group == COMMON_KEY_GROUP:
            states.setdefault((logged := _metadata(change)).info.name, logged.info)
    key_type = materialized.key_type if materialized else next(
        (info.serializers["VALUE_SERIALIZER"].children[0] for info in states.values()
         if info.backend_type == "PRIORITY_QUEUE" and info.serializers["VALUE_SERIALIZER"].kind == "timer"), None)
    if key_type is None:
        raise KeysNotRecordedError(list(states))
    return KeyedBackendMeta(False, key_type, list(states.values()), 0)


class KeysNotRecordedError(UnsupportedFormatError):
    """A changelog subtask's keyed state before its first materialization and without timers: no
    byte names the key serializer. ``states`` are the states refused; the operator's others (its
    operator state) import without them (``--skip-state``)."""

    WHY = ("changelog state backend keyed state before its first materialization: Flink records the key serializer "
           "only in a materialized snapshot (or a timer queue), so the keys cannot be read; take the checkpoint "
           "after a materialization (state.changelog.periodic-materialize.interval) or a canonical savepoint")

    #: Said of each state an import refuses.
    SHORT = ("changelog state backend keyed state before its first materialization (no key serializer recorded; "
             "take the checkpoint after state.changelog.periodic-materialize.interval)")

    def __init__(self, states: list[str]) -> None:
        self.states = states
        super().__init__(f"{self.WHY} (its states: {', '.join(map(repr, states)) or 'none'})")


class _StateTable:
    """One state's contents while changes are applied. Only the scopes some change touches (a
    queue's: elements) are held in dicts, keyed by composite key bytes (a MAP's by its scope, then
    user key), values as their rows hold them; the materialized rows of the others stay Arrow rows,
    as read: a large materialized state costs no Python object per row."""

    def __init__(self, info: StateMetaInfo, key_type: FlinkType, prefix_bytes: int) -> None:
        self.info = info
        self.kind = info.options.get("KEYED_STATE_TYPE", info.backend_type)
        if self.kind not in _ACCEPTED:
            raise UnsupportedFormatError(f"changelog of {self.kind} state {info.name!r}", state=info.name)
        self.decoder = StateDecoder(info, codec_for(key_type), prefix_bytes, writer="a changelog")
        self.key_type = key_type
        self.prefix_bytes = prefix_bytes
        # Gathered (touch) before the materialized rows load: the scopes whose rows load into the dicts.
        self.touched: set[bytes] = set()
        # The materialized rows of scopes no change touches.
        self.kept: list[KeyedRows] = []
        # VALUE, REDUCING, AGGREGATING: [value]; LIST: its elements (or runs of them, joined), appended to
        # without copying what is there, and the part lists of the scopes MERGE_NS moved in, nested (see
        # _merge); a queue's elements: [b""]. A row's value is its parts, flattened, joined by ",".
        self.values: dict[bytes, _Parts] = {}
        self.maps: dict[bytes, dict[bytes, bytes]] = {}
        # REDUCING, AGGREGATING: the scopes whose value is a merge of values by the job's function, until a
        # change sets it (a window operator logs the merged value with the element it adds right after):
        # how many values merged and the file of the MERGE_NS.
        self.unknown: dict[bytes, tuple[int, str | None]] = {}

    def touch(self, operation: int, key_group: int, inp: DataInput) -> None:
        """Note the scopes a change touches, without applying it."""
        prefix = self._prefix(operation, key_group, inp)
        if self.kind == "PRIORITY_QUEUE":
            self.touched.update(self._queue_elements(operation, prefix, inp))
            return
        key, scope = self._scope(prefix, inp)
        self.touched.add(scope)
        if operation == MERGE_NS:
            target, sources = self._merged_scopes(prefix, key, inp)
            self.touched.update([target, *sources])

    def load(self, rows: KeyedRows) -> None:
        """The materialized rows: those of touched scopes into the dicts, the others kept."""
        if not self.touched or not len(rows.keys):
            self.kept.append(rows)
            return
        scopes = rows.keys if self.kind != "MAP" else map_scopes(
            rows.keys, self.prefix_bytes, self.key_type, self.info.serializers["NAMESPACE_SERIALIZER"], self.info.name)
        touched = pc.is_in(scopes, value_set=pa.array(list(self.touched), pa.binary())).to_numpy(zero_copy_only=False)
        self.kept.append(rows.select(~touched))
        rows = rows.select(touched)
        keys, values = rows.keys.to_pylist(), rows.values.to_pylist()
        if self.kind != "MAP":
            self.values.update((key, [value]) for key, value in zip(keys, values))
            return
        for key, value, scope in zip(keys, values, scopes.filter(pa.array(touched)).to_pylist()):
            self.maps.setdefault(scope, {})[key[len(scope):]] = value

    def apply(self, operation: int, key_group: int, inp: DataInput) -> None:
        prefix = self._prefix(operation, key_group, inp)
        if self.kind == "PRIORITY_QUEUE":
            for element in self._queue_elements(operation, prefix, inp):
                if operation == ADD_ELEMENT:
                    self.values[element] = [b""]
                else:
                    self.values.pop(element, None)
            self._at_end(inp)
            return
        key, scope = self._scope(prefix, inp)
        if operation != MERGE_NS:
            self.unknown.pop(scope, None)  # SET, SET_INTERNAL or CLEAR: the scope's whole value, known again
        if operation == CLEAR:
            self.values.pop(scope, None)
            self.maps.pop(scope, None)
        elif operation == MERGE_NS:
            self._merge(*self._merged_scopes(prefix, key, inp), inp)
        elif self.kind == "MAP":
            self._map_change(operation, scope, inp)
        elif self.kind == "LIST":
            self._list_change(operation, scope, inp)
        else:  # SET, SET_INTERNAL
            self.values[scope] = [self._last(inp, self.decoder.value_codec)]
        self._at_end(inp)

    def _prefix(self, operation: int, key_group: int, inp: DataInput) -> bytes:
        """The key-group prefix of a change's composite keys, once its operation is one this kind takes."""
        if operation not in _ACCEPTED[self.kind]:
            raise inp.corrupt(f"a {_OPERATIONS[operation]} change of {self.kind} state {self.info.name!r}, which "
                              "Flink's restore does not apply", inp.pos - 3, 1)
        return key_group.to_bytes(self.prefix_bytes, "big")

    def _queue_elements(self, operation: int, prefix: bytes, inp: DataInput) -> list[bytes]:
        """A queue change's elements as composite keys: ADD_ELEMENT's count of them, REMOVE_ELEMENT's one."""
        count = inp.read_count("queue element count") if operation == ADD_ELEMENT else 1
        return [prefix + self.decoder.span(inp, self.decoder.value_codec) for _ in range(count)]

    def _scope(self, prefix: bytes, inp: DataInput) -> tuple[bytes, bytes]:
        """A key/value change's key and its scope (composite key of key group, key and namespace)."""
        d = self.decoder
        key = d.span(inp, d.key_codec)
        return key, d.composite(prefix, key, d.span(inp, d.namespace_codec))

    def _merged_scopes(self, prefix: bytes, key: bytes, inp: DataInput) -> tuple[bytes, list[bytes]]:
        """MERGE_NS's target scope and source scopes, in order."""
        d = self.decoder
        target = d.composite(prefix, key, d.span(inp, d.namespace_codec))
        return target, [d.composite(prefix, key, d.span(inp, d.namespace_codec))
                        for _ in range(inp.read_count("merged namespace count"))]

    def _list_change(self, operation: int, scope: bytes, inp: DataInput) -> None:
        d = self.decoder
        if operation == ADD_ELEMENT:
            elements = [self._last(inp, d.element)]
        else:  # ADD, SET, SET_INTERNAL: a whole list
            elements = [d.span(inp, d.element) for _ in range(inp.read_count("list length"))]
        if operation in (SET, SET_INTERNAL):
            self.values.pop(scope, None)
        if elements:
            self.values.setdefault(scope, []).extend(elements)

    def _map_change(self, operation: int, scope: bytes, inp: DataInput) -> None:
        d = self.decoder
        entries = self.maps.setdefault(scope, {})
        if operation == ADD:
            for _ in range(inp.read_count("map size")):
                user_key = d.span(inp, d.user_key)
                entries[user_key] = b"\x01" if inp.read_bool("map value null flag") else (
                    b"\x00" + d.span(inp, d.user_value))
        elif operation == REMOVE_ELEMENT:
            entries.pop(d.span(inp, d.user_key), None)
        else:  # ADD_ELEMENT, ADD_OR_UPDATE_ELEMENT: key, value
            user_key = d.span(inp, d.user_key)
            entries[user_key] = b"\x00" + self._last(inp, d.user_value)
        if not entries:
            del self.maps[scope]

    def _merge(self, target: bytes, sources: list[bytes], inp: DataInput) -> None:
        """MERGE_NS: the sources' values taken out, in order, then merged after the target's
        (``AbstractHeapMergingState.mergeNamespaces``). Two REDUCING or AGGREGATING values merge by
        the job's function: the target's value is unknown until a change sets or clears it."""
        merged = [v for v in (self.values.pop(s, None) for s in [target, *sources]) if v is not None]
        unknown = [self.unknown.pop(s) for s in [target, *sources] if s in self.unknown]
        if self.kind != "LIST" and (len(merged) > 1 or unknown):
            self.unknown[target] = unknown[0] if unknown else (len(merged), inp.path)
        elif merged:
            # The sources' part lists nest in the target's, not copied: a MERGE_NS costs its sources, not the
            # parts they hold (merging a long list back and forth was quadratic in the changes).
            merged[0].extend(merged[1:])
            self.values[target] = merged[0]

    def _last(self, inp: DataInput, codec: Codec) -> bytes:
        """The value that ends a change: stepped over, so that a damaged one is an error here and
        not a short value later; one of a type stored without its length (Kryo) is the rest."""
        start = inp.pos
        try:
            codec.skip(inp)
        except Undelimited:
            inp.pos = inp.end
        return bytes(inp.data[start:inp.pos])

    @staticmethod
    def _at_end(inp: DataInput) -> None:
        if not inp.at_end():
            raise inp.corrupt(f"{inp.remaining()} bytes left after a change")

    def rows(self, subtask: int) -> KeyedRows:
        if self.unknown:
            count, path = next(iter(self.unknown.values()))
            raise UnsupportedFormatError(
                f"a changelog merges {count} namespaces of {self.kind} state {self.info.name!r} and logs no value "
                f"after ({len(self.unknown)} such): the merged value takes the job's own function; take a canonical "
                "savepoint (Flink applies it there)", path=path, state=self.info.name)
        delimiter = bytes([LIST_DELIMITER])
        if self.kind != "MAP":
            pairs = sorted((k, delimiter.join(_flattened(v))) for k, v in self.values.items())
        else:
            pairs = sorted((scope + user_key, value) for scope, entries in self.maps.items()
                           for user_key, value in entries.items())
        keys = [k for k, _ in pairs]
        # Sorted composite keys run in key-group order: each begins with its key group, big-endian.
        groups = np.array([int.from_bytes(k[:self.prefix_bytes], "big") for k in keys], np.int64)
        changed = KeyedRows(np.full(len(keys), subtask, np.int64), groups, pa.array(keys, pa.binary()),
                            pa.array([v for _, v in pairs], pa.binary()))
        rows = KeyedRows.concat([*self.kept, changed])
        # Each part runs in key-group order; a stable sort by key group interleaves them so, and the rows of a
        # scope (a map's entries) stay together, all in one part.
        order = np.argsort(rows.key_groups, kind="stable")
        return KeyedRows(np.full(len(order), subtask, np.int64), rows.key_groups[order], rows.keys.take(order),
                         rows.values.take(order))


#: A scope's value: its parts (bytes) in order, and part lists a MERGE_NS moved in, each where it came.
_Parts = list[Any]


def _flattened(parts: _Parts) -> list[bytes]:
    """The bytes parts of ``parts`` in order, nested lists opened where they stand (iteratively: a
    chain of merges nests as deep as it is long)."""
    out: list[bytes] = []
    stack = [iter(parts)]
    while stack:
        for part in stack[-1]:
            if isinstance(part, list):
                stack.append(iter(part))
                break
            out.append(part)
        else:
            stack.pop()
    return out


def apply_changelog(handle: ChangelogHandle, changes: Iterable[Change], meta: KeyedBackendMeta,
                    materialized: list[KeyedSubtask], subtask: int, prefix_bytes: int) -> KeyedSubtask:
    """The subtask's state: its materialized rows with every change of its key groups applied. The
    changes are read twice: first for the scopes they touch, whose materialized rows alone load
    into dicts, then to apply them."""
    tables = {info.name: _StateTable(info, meta.key_type, prefix_bytes) for info in meta.states}
    changes = list(changes)
    for table, operation, key_group, inp in _data_changes(handle, changes, tables):
        table.touch(operation, key_group, inp)
    for part in materialized:
        for name, (_, rows) in part.states.items():
            tables[name].load(rows)
    for table, operation, key_group, inp in _data_changes(handle, changes, tables):
        table.apply(operation, key_group, inp)
    return KeyedSubtask(subtask, handle.key_groups, meta.key_type,
                        {name: (table.info, table.rows(subtask)) for name, table in tables.items()})


def _data_changes(handle: ChangelogHandle, changes: list[Change], tables: dict[str, _StateTable]
                  ) -> Iterator[tuple[_StateTable, int, int, DataInput]]:
    """Per data change of the handle's key groups, in order: its state's table, operation, key group
    and bytes after the state id. METADATA changes name the state of each id as they come."""
    by_id: dict[int, _StateTable] = {}
    for change in changes:
        inp = change.input()
        operation = inp.read_ubyte("changelog operation")
        if change.key_group == COMMON_KEY_GROUP:
            if operation not in METADATA:
                raise inp.corrupt(f"operation {operation} in the common key group, which holds METADATA only", 0, 1)
            logged = _metadata(change)
            by_id[logged.state_id] = tables[logged.info.name]
            continue
        if operation >= len(_OPERATIONS):
            raise inp.corrupt(f"unknown changelog operation {operation}", 0, 1)
        if change.key_group not in handle.key_groups:
            continue  # another subtask's key group (ChangelogBackendLogApplier skips it)
        at = inp.pos
        state_id = inp.read_short("state id")
        if state_id not in by_id:
            raise inp.corrupt(f"a change of state id {state_id}, which no METADATA change before it names", at, 2)
        yield by_id[state_id], operation, change.key_group, inp
