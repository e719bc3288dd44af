"""Opening a Flink savepoint in place: ``FlinkSavepoint.open(path)``.

Opening reads ``_metadata`` only; an operator's state streams are read the
first time one of its states is asked for. Operators are named by the uid
Flink stored (metadata v5+, Flink 2.x), else by a name the caller gave (for a
uid, the operator id is ``murmur3_128(uid)`` exactly as Flink derives it),
else by their hex operator id.

What an importer consumes, a column at a time (all bytes as Flink stored them):

* per operator: ``operator_id`` (hex of Flink's 16-byte id), ``uid``,
  ``flink_name``, ``parallelism``, ``max_parallelism``, ``coordinator_state``
  (bytes; ``source_coordinator_checkpoint()`` unwraps a FLIP-27 source's);
* keyed state, one subtask at a time (``keyed_subtasks()``): the key type and
  per state its meta info (kind, TTL wrapper, namespace, value, user-key
  serializer models, :class:`~pyref.flink.serializers.FlinkType`) and
  :class:`~pyref.flink.keyed.KeyedRows` (composite keys and values as Arrow
  binary columns, the stored key group and subtask of each row, runs per key
  group); a view's ``to_arrow()`` splits keys into key / namespace / user key;
* timers: per service and domain, key / namespace bytes and int64 timestamps;
* list and union state: one Arrow binary column of elements per old subtask;
  broadcast state: (keys, values) columns per old subtask.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import cached_property
from typing import Any, TypeVar

import mmh3
import pyarrow as pa

from ..errors import (
    CorruptSavepointError,
    InvalidArgumentError,
    SavepointError,
    SavepointNotFoundError,
    UnsupportedFormatError,
    unknown_names,
)
from ..location import parse_location
from ..reader import savepoints_below
from ..storage import MANIFEST_NAME, open_io
from .channel_state import in_flight_summary
from .datainput import DataInput
from .changelog import CHANGELOG, apply_changelog, changelog_meta, iter_changes
from .handles import (DistributionMode, ChangelogHandle, IncrementalHandle, KeyedHandle, KeyGroupsHandle,
                      StreamHandle, TAKE_CANONICAL, open_handle_store)
from .heap import HEAP, SAVEPOINT_FORMAT, iter_heap_subtask, keyed_layout
from .rocksdb.native import ROCKSDB_NATIVE, iter_native_subtask
from .keyed import (
    TIMER_DOMAINS,
    TIMER_PREFIX,
    KeyedBackendMeta,
    KeyedRows,
    KeyedSubtask,
    iter_keyed_subtask,
    read_keyed_backend_meta,
)
from .meta_info import StateMetaInfo
from .metadata import CheckpointMetadata, OperatorState, SubtaskState, parse_metadata
from .operator_state import OperatorStream, read_operator_head, read_operator_stream
from .raw_timers import RawTimers, is_timer_stream, read_raw_timers
from .serializers import FlinkType
from .sources import split_coordinator_state
from .state_views import FlinkBroadcastStateView, FlinkKeyedStateView, FlinkListStateView, FlinkTimerView

__all__ = ["FlinkSavepoint", "FlinkOperator", "operator_id_of_uid"]

T = TypeVar("T")



def operator_id_of_uid(uid: str) -> str:
    """The hex ``OperatorID`` Flink derives from an operator's uid
    (``StreamGraphHasherV2``: Guava's ``murmur3_128(0)`` of the UTF-8 uid)."""
    return mmh3.hash_bytes(uid.encode("utf-8")).hex()


def timer_types(info: StateMetaInfo) -> tuple[FlinkType, FlinkType]:
    """The key and namespace types of a timer queue's elements; a queue of anything else
    (a priority queue of the user's own elements) is not read."""
    timer = info.serializers["VALUE_SERIALIZER"]
    if timer.kind != "timer":
        raise UnsupportedFormatError(f"timer queue {info.name!r} holds {timer.describe()}, not timers",
                                     state=info.name)
    key_type, namespace_type = timer.children
    return key_type, namespace_type


def _prefix_bytes(max_parallelism: int) -> int:
    return 1 if max_parallelism <= 128 else 2


def _source(stream: StreamHandle, name: str) -> object:
    """What identifies the bytes a stream's buffer holds: its file (``name``), or the handle itself for
    bytes inline in ``_metadata``, whose names Flink makes unique but hostile bytes need not."""
    return id(stream) if stream.kind == "inline" else name


class FlinkOperator:
    """One operator of a Flink savepoint."""

    def __init__(self, savepoint: FlinkSavepoint, state: OperatorState, name: str | None) -> None:
        self._savepoint = savepoint
        self.state = state
        self.operator_id = state.operator_id
        self.uid = state.uid
        self.flink_name = state.name
        self.name = state.uid or name or state.operator_id
        self.parallelism = state.parallelism
        self.max_parallelism = state.max_parallelism
        self.finished = state.finished
        self._parsed = savepoint._parsed  # shared: a stream head is parsed once per savepoint (_once)

    def __repr__(self) -> str:
        return f"FlinkOperator({self.name!r}, id={self.operator_id}, parallelism={self.parallelism})"

    @property
    def in_flight(self) -> dict[str, int] | None:
        """The in-flight data an unaligned checkpoint kept of the operator's subtasks (handles, channels
        and bytes of input channels and of result subpartitions), or ``None`` when it has none."""
        handles = tuple(h for s in self.state.subtasks for h in s.in_flight)
        return in_flight_summary(handles) if handles else None

    @property
    def coordinator_state(self) -> bytes | None:
        """The operator coordinator's checkpoint bytes (e.g. a source's split enumerator)."""
        handle = self.state.coordinator_state
        return handle.data if handle is not None else None

    def source_coordinator_checkpoint(self) -> tuple[int, bytes] | None:
        """A FLIP-27 source's enumerator checkpoint: (its serializer version, the
        bytes it wrote), unwrapped from ``SourceCoordinator``'s framing (int
        framing version 0 or 1, int serializer version, int length, bytes);
        ``None`` when the operator has no coordinator state."""
        data = self.coordinator_state
        if data is None:
            return None
        unwrapped = split_coordinator_state(data, state=f"{self.name} coordinator", path=self._savepoint.location)
        if unwrapped is None:
            raise UnsupportedFormatError("coordinator state is not a source coordinator's (framing version 0 or 1)",
                                         path=self._savepoint.location, state=f"{self.name} coordinator")
        return unwrapped

    def _once(self, key: tuple[Any, ...], read: Callable[[], T]) -> T:
        """``read()``'s result, or the typed error it raised, kept under ``key``: every view
        needs a subtask's stream head, and delimiting an opaque serializer snapshot there may
        take a scan of the stream, so each stream is parsed once however often it is asked for.
        A stream head is kept by the bytes it is (file, start, end), for all operators: handles
        naming the same bytes (of a merged file, say) parse them once, not once each (100 handles
        of one 150 KB head took 41 s)."""
        if key not in self._parsed:
            try:
                self._parsed[key] = read()
            except SavepointError as exc:
                self._parsed[key] = exc
        result = self._parsed[key]
        if isinstance(result, SavepointError):
            raise result.with_traceback(None)
        return result

    def _keyed_head(self, handle: KeyedHandle) -> KeyedBackendMeta:
        """The key serializer and state meta infos at the head of a subtask's keyed stream
        (of a native-format handle: its meta stream; of a changelog: its materialized part's and its log's)."""
        if isinstance(handle, ChangelogHandle):
            materialized = self._keyed_head(handle.materialized[0]) if handle.materialized else None
            return self._once(("keyed", id(handle)), lambda: changelog_meta(
                iter_changes(self._savepoint.store.open_file, handle), materialized))
        # A meta stream is the head alone; a keyed stream's head ends where its first key group begins.
        if isinstance(handle, IncrementalHandle):
            stream, present = handle.meta, []
        else:
            stream, present = handle.stream, [o for o in handle.offsets if o]
        assert stream is not None  # _keyed_handle leaves out handles without one
        buffer, start, end, name = self._savepoint.store.open(stream)
        head_end = start + min(present) if present else end
        return self._once(("keyed head", _source(stream, name), start, end, head_end), lambda: read_keyed_backend_meta(
            DataInput(buffer, start, end, path=name), head_end))

    def _check_key_group_ranges(self) -> None:
        """Flink gives every subtask its own key groups: two keyed handles (managed, or raw) of
        the operator claiming one would both yield its rows, every key of it twice."""
        self._once(("key-group-ranges", id(self)), self._disjoint_key_groups)

    def _disjoint_key_groups(self) -> None:
        for kind in ("managed_keyed_state", "raw_keyed_state"):
            ranges = sorted((h.key_groups.start, h.key_groups.stop, s.index) for s in self.state.subtasks
                            if (h := getattr(s, kind)) is not None and h.key_groups)
            for (_, stop, first), (start, _, second) in zip(ranges, ranges[1:]):
                if start < stop:
                    raise CorruptSavepointError(f"operator {self.name}: subtasks {first} and {second} both hold "
                                                f"{kind.replace('_', ' ')} of key group {start}",
                                                path=self._savepoint.location)

    def _keyed_handle(self, sub) -> KeyedHandle | None:
        """A subtask's keyed state handle, None when it holds none."""
        self._check_key_group_ranges()
        handle = sub.managed_keyed_state
        if isinstance(handle, IncrementalHandle) and handle.meta is None and handle.shared + handle.private:
            raise CorruptSavepointError(f"subtask {sub.index}: RocksDB files but no meta stream (the state meta "
                                        "infos) in its keyed state handle", path=self._savepoint.location)
        if isinstance(handle, ChangelogHandle):
            if len(handle.materialized) > 1:
                raise UnsupportedFormatError(
                    f"subtask {sub.index}: changelog state backend keyed state restored from {len(handle.materialized)} "
                    f"materialized snapshots (a rescaled changelog job); {TAKE_CANONICAL}", path=self._savepoint.location)
            return handle if handle.materialized or handle.changes else None
        if handle is None or (handle.meta if isinstance(handle, IncrementalHandle) else handle.stream) is None:
            return None
        return handle

    def keyed_layout(self, subtask: int) -> str | None:
        """How a subtask's keyed state is laid out: ``savepoint-format``, ``heap`` (a HashMap
        backend's checkpoint), ``rocksdb-native`` (RocksDB's SST files), ``changelog`` (the
        changelog backend's materialized snapshot and changes) or ``None`` (no keyed state)."""
        sub = self._subtask_states.get(subtask)
        handle = self._keyed_handle(sub) if sub is not None else None
        return None if handle is None else self._layout(handle)

    @cached_property
    def _subtask_states(self) -> dict[int, SubtaskState]:
        """Each subtask's state by its index (one each, metadata.py checks): a search per subtask asked for
        was quadratic in the parallelism (32768 subtasks of 50 bytes each took over 10 s)."""
        return {sub.index: sub for sub in self.state.subtasks}

    def _layout(self, handle: KeyedHandle) -> str:
        if isinstance(handle, ChangelogHandle):
            return CHANGELOG
        if isinstance(handle, IncrementalHandle):
            return ROCKSDB_NATIVE
        if handle.savepoint:  # a canonical savepoint's keyed state is always in the savepoint format
            return SAVEPOINT_FORMAT
        meta = self._keyed_head(handle)
        assert handle.stream is not None
        buffer, start, end, name = self._savepoint.store.open(handle.stream)
        return self._once(("layout", id(handle)), lambda: keyed_layout(
            buffer, start, end, handle.key_groups, handle.offsets, meta, _prefix_bytes(self.max_parallelism), name))

    @property
    def has_raw_state(self) -> bool:
        """True when some subtask wrote raw (user-serialized) operator state, or raw keyed
        state that is not the timers RocksDB keeps on the heap."""
        return any(s.raw_operator_state is not None for s in self.state.subtasks) or any(
            not is_timer_stream(*self._raw_keyed_stream(s)[:3]) for s in self.state.subtasks
            if s.raw_keyed_state is not None)

    def _raw_keyed_stream(self, sub) -> tuple[Any, int, int, str, KeyGroupsHandle]:
        """A subtask's raw keyed stream (buffer, start, end, file name) and its handle."""
        self._check_key_group_ranges()
        handle = sub.raw_keyed_state
        if not isinstance(handle, KeyGroupsHandle) or handle.stream is None:
            raise CorruptSavepointError(f"subtask {sub.index}: raw keyed state without a key-grouped stream",
                                        path=self._savepoint.location)
        buffer, start, end, name = self._savepoint.store.open(handle.stream)
        return buffer, start, end, name, handle

    def _raw_timers(self, sub, head_only: bool = False) -> RawTimers | None:
        """The timers a subtask wrote as raw keyed state (RocksDB with heap timers), or None;
        a user's own raw keyed state is not read (:attr:`has_raw_state`: an import refuses it)."""
        if sub.raw_keyed_state is None:
            return None
        buffer, start, end, name, handle = self._raw_keyed_stream(sub)
        if not is_timer_stream(buffer, start, end):
            return None

        def read() -> RawTimers:
            return read_raw_timers(buffer, start, end, sub.index, handle.key_groups, handle.offsets, name,
                                   _prefix_bytes(self.max_parallelism), self.name, head_only=head_only)

        # The services, from the first key group, are kept; a whole stream's timers are read when asked for.
        return self._once(("raw-timer-services", id(handle)), read) if head_only else read()

    # -- operator state ---------------------------------------------------

    @cached_property
    def _operator_streams(self) -> dict[int, OperatorStream]:
        streams = {}
        for sub in self.state.subtasks:
            stream = self.operator_stream(sub.index)
            if stream is not None:
                streams[sub.index] = stream
        return streams

    def operator_stream(self, subtask: int) -> OperatorStream | None:
        """One subtask's operator state (list, union and broadcast states), or None."""
        sub = self._subtask_states.get(subtask)
        handle = sub.managed_operator_state if sub is not None else None
        if handle is None or handle.stream is None:
            return None
        buffer, start, end, name = self._savepoint.store.open(handle.stream)
        source = _source(handle.stream, name)
        return self._once(("operator", id(handle)), lambda: read_operator_stream(
            buffer, start, end, handle, name, lambda inp, stop: self._once(
                ("operator head", source, inp.pos, stop), lambda: read_operator_head(inp, stop))))

    def keyed_meta(self) -> tuple[FlinkType | None, dict[str, StateMetaInfo]]:
        """The key type and every keyed state's meta info (timer queues included), from the
        head of each subtask's keyed stream only: no key group is read."""
        key_type: FlinkType | None = None
        infos: dict[str, StateMetaInfo] = {}
        for sub in self.state.subtasks:
            handle = self._keyed_handle(sub)
            if handle is not None:
                meta = self._keyed_head(handle)
                key_type = key_type or meta.key_type
                for info in meta.states:
                    infos.setdefault(info.name, info)
            timers = self._raw_timers(sub, head_only=True)
            for service in timers.services if timers else ():
                key_type = key_type or service.key_type
                for info in service.infos():
                    infos.setdefault(info.name, info)
        return key_type, infos

    def _operator_meta(self, broadcast: bool) -> dict[str, dict[str, FlinkType]]:
        types: dict[str, dict[str, FlinkType]] = {}
        for stream in self._operator_streams.values():
            for meta in stream.meta.broadcast_states if broadcast else stream.meta.list_states:
                types.setdefault(meta.name, meta.serializers)
        return types

    @property
    def list_state_names(self) -> list[str]:
        return sorted(self._operator_meta(False))

    @property
    def broadcast_state_names(self) -> list[str]:
        return sorted(self._operator_meta(True))

    def list_state(self, name: str) -> FlinkListStateView:
        types = self._operator_meta(False)
        if name not in types:
            raise InvalidArgumentError(f"operator {self.name} has no list state {name!r} (its list states: "
                                       f"{', '.join(map(repr, sorted(types))) or 'none'})", state=name)
        empty = pa.array([], pa.binary())
        modes = {s.managed_operator_state.states[name].mode for s in self.state.subtasks
                 if s.managed_operator_state is not None and name in s.managed_operator_state.states}
        if len(modes) > 1:
            raise UnsupportedFormatError(f"list state {name!r} has different modes in different subtasks", state=name)
        mode = modes.pop() if modes else DistributionMode.SPLIT_DISTRIBUTE
        streams = self._operator_streams
        partitions = [streams[i].elements.get(name, empty) if i in streams else empty for i in range(self.parallelism)]
        return FlinkListStateView(name, mode, types[name]["VALUE_SERIALIZER"], partitions)

    def broadcast_state(self, name: str) -> FlinkBroadcastStateView:
        types = self._operator_meta(True)
        if name not in types:
            raise unknown_names(f"broadcast states of operator {self.name}", [name], types, state=name)
        empty = (pa.array([], pa.binary()), pa.array([], pa.binary()))
        partitions = [self._operator_streams[i].broadcast.get(name, empty) if i in self._operator_streams else empty
                      for i in range(self.parallelism)]
        return FlinkBroadcastStateView(name, types[name]["KEY_SERIALIZER"], types[name]["VALUE_SERIALIZER"],
                                       partitions)

    # -- keyed state ------------------------------------------------------

    def keyed_subtasks(self, batch_bytes: int | None = None, subtask: int | None = None) -> Iterator[KeyedSubtask]:
        """Each subtask's keyed state, one subtask at a time (what an importer
        streams through: memory holds one subtask's state, not the operator's);
        with ``batch_bytes``, runs of whole key groups of about that many stored
        bytes, so memory holds one run. ``subtask``: only that subtask's."""
        prefix_bytes = _prefix_bytes(self.max_parallelism)
        wanted = self.state.subtasks if subtask is None else [
            sub for sub in [self._subtask_states.get(subtask)] if sub is not None]
        for sub in wanted:
            handle = self._keyed_handle(sub)
            timers = self._raw_timers(sub)
            if handle is None:
                if timers is not None and timers.services:
                    yield KeyedSubtask(sub.index, timers.key_groups, timers.services[0].key_type,
                                       timers.states)
                continue
            for i, part in enumerate(self._managed_runs(sub.index, handle, prefix_bytes, batch_bytes)):
                # Every run lists every state: the timers' rows come with the first.
                yield part if timers is None else part.with_states(timers.states if i == 0 else timers.empty())

    def _managed_runs(self, subtask: int, handle: KeyedHandle, prefix_bytes: int,
                      batch_bytes: int | None) -> Iterator[KeyedSubtask]:
        """A subtask's managed keyed state in runs of whole key groups, whichever its layout (a
        changelog's in one run: its changes may touch any key group)."""
        meta = self._keyed_head(handle)
        if isinstance(handle, ChangelogHandle):
            materialized = [part for inner in handle.materialized
                            for part in self._managed_runs(subtask, inner, prefix_bytes, None)]
            yield apply_changelog(handle, iter_changes(self._savepoint.store.open_file, handle), meta, materialized,
                                  subtask, prefix_bytes)
            return
        if isinstance(handle, IncrementalHandle):
            yield from iter_native_subtask(self._sst_bytes, handle, subtask, prefix_bytes, meta,
                                           self._savepoint.location, batch_bytes)
            return
        assert handle.stream is not None
        buffer, start, end, name = self._savepoint.store.open(handle.stream)
        read = iter_heap_subtask if self._layout(handle) == HEAP else iter_keyed_subtask
        yield from read(buffer, start, end, subtask, handle.key_groups, handle.offsets, name, prefix_bytes,
                        batch_bytes, meta)

    def _sst_bytes(self, stream: StreamHandle) -> tuple[memoryview, str, int]:
        buffer, start, end, name = self._savepoint.store.open(stream)
        return memoryview(buffer)[start:end], name, start

    @cached_property
    def _keyed(self) -> tuple[FlinkType | None, dict[str, tuple[StateMetaInfo, KeyedRows]]]:
        """Key type and, per keyed state, its meta info and the rows of every subtask."""
        key_type = None
        parts: dict[str, list[KeyedRows]] = {}
        infos: dict[str, StateMetaInfo] = {}
        for part in self.keyed_subtasks():
            key_type = key_type or part.key_type
            for name, (info, rows) in part.states.items():
                infos.setdefault(name, info)
                parts.setdefault(name, []).append(rows)
        return key_type, {name: (infos[name], KeyedRows.concat(rows)) for name, rows in parts.items()}

    @property
    def key_type(self) -> FlinkType | None:
        return self._keyed[0]

    @property
    def keyed_state_names(self) -> list[str]:
        return sorted(n for n, (info, _) in self._keyed[1].items() if info.backend_type != "PRIORITY_QUEUE")

    @property
    def timer_services(self) -> list[tuple[str, str]]:
        """(service name, domain) of every timer queue, e.g. ``("window-timers", "event-time")``."""
        out = []
        for name, (info, _) in self._keyed[1].items():
            if info.backend_type == "PRIORITY_QUEUE" and name.startswith(TIMER_PREFIX):
                rest = name[len(TIMER_PREFIX):]
                for prefix, domain in TIMER_DOMAINS.items():
                    if rest.startswith(prefix):
                        out.append((rest[len(prefix):], domain))
        return sorted(out)

    def keyed_state(self, name: str) -> FlinkKeyedStateView:
        key_type, states = self._keyed
        if name not in states or states[name][0].backend_type == "PRIORITY_QUEUE":
            raise InvalidArgumentError(f"operator {self.name} has no keyed state {name!r} (its keyed states: "
                                       f"{', '.join(map(repr, self.keyed_state_names)) or 'none'})", state=name)
        info, rows = states[name]
        assert key_type is not None  # a keyed stream's head holds the key serializer
        return FlinkKeyedStateView.of(info, key_type, rows, _prefix_bytes(self.max_parallelism), self.max_parallelism)

    def timers(self, service: str, domain: str = "event-time") -> FlinkTimerView:
        domain = timer_domain(domain)
        prefix = {v: k for k, v in TIMER_DOMAINS.items()}[domain]
        name = TIMER_PREFIX + prefix + service
        states = self._keyed[1]
        if name not in states:
            raise InvalidArgumentError(f"operator {self.name} has no {domain} timers of service {service!r}")
        info, rows = states[name]
        key_type, namespace_type = timer_types(info)
        return FlinkTimerView(service, domain, key_type, namespace_type, rows, _prefix_bytes(self.max_parallelism),
                              self.max_parallelism)

def timer_domain(domain: str) -> str:
    """Flink's name of a timer domain, also given as pyref names it (``event_time``)."""
    name = domain.replace("_", "-")
    if name not in TIMER_DOMAINS.values():
        raise InvalidArgumentError(f"timer domain must be 'event-time' or 'processing-time' ('event_time', "
                                   f"'processing_time'), got {domain!r}")
    return name


#: The file that makes a directory a Flink checkpoint or savepoint.
METADATA = "_metadata"


class FlinkSavepoint:
    """A Flink savepoint (canonical or native) or a retained aligned checkpoint (keyed
    state in the savepoint format, the HashMap backend's layout or RocksDB's SST files),
    read in place without a JVM."""

    def __init__(self, path: str, metadata: CheckpointMetadata, names: Mapping[str, str], *,
                 allow_external_files: bool = False) -> None:
        self.location = path
        self.metadata = metadata
        self.store = open_handle_store(path, allow_external_files=allow_external_files)
        self._parsed: dict[tuple[Any, ...], Any] = {}  # FlinkOperator._once's
        self.operators = [FlinkOperator(self, op, names.get(op.operator_id)) for op in metadata.operators]

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, uids: Iterable[str] | Mapping[str, str] | None = None,
             allow_external_files: bool = False) -> FlinkSavepoint:
        """Open the savepoint directory ``path`` (or its ``_metadata`` file): a local
        path, or a URL of an object store (``s3://``, ``gs://``, ``az://``...) or of HDFS.

        ``uids`` names operators whose uid Flink did not store: an iterable of
        the job's uids, or a mapping from a uid or a hex operator id to a name.
        """
        path = flink_directory(path)
        io = open_io(path)
        if io.stat(METADATA) is None:
            # The other way round from pyref's reader's hint: a pyref savepoint handed where a Flink one goes.
            pyref = ("; it is a pyref savepoint (_manifest): pyref inspect, verify and export-flink read it, as does "
                     "pyref.Savepoint.open" if io.stat(MANIFEST_NAME) is not None else "")
            raise SavepointNotFoundError(f"no Flink _metadata file{pyref or savepoints_below(io)}", path=path)
        metadata = parse_metadata(io.read_file(METADATA), io.describe(METADATA))
        return cls(path, metadata, _operator_names(uids, metadata, path), allow_external_files=allow_external_files)

    def __enter__(self) -> FlinkSavepoint:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.store.close()

    @property
    def version(self) -> int:
        """The ``_metadata`` format version."""
        return self.metadata.version

    @property
    def checkpoint_id(self) -> int:
        return self.metadata.checkpoint_id

    def find_operator(self, name: str) -> FlinkOperator | None:
        """An operator by uid, given name or hex operator id (in either case); of Flink 1.x,
        which stores no uids, by uid too (its id is the uid's hash); None if none is."""
        exact = next((op for op in self.operators if name in (op.name, op.uid, op.operator_id)), None)
        return exact or next((op for op in self.operators if op.operator_id == operator_id_named(name)), None)

    def operator(self, name: str) -> FlinkOperator:
        """An operator as :meth:`find_operator` finds it; a name of none is an error listing them."""
        if (op := self.find_operator(name)) is not None:
            return op
        names = ", ".join(repr(op.name) + ("" if op.name == op.operator_id else f" ({op.operator_id})")
                          for op in self.operators)
        raise InvalidArgumentError(f"savepoint has no operator {name!r}; its operators: {names}", path=self.location)

    def restore_plan(self, parallelism: int | Mapping[str, int]):
        """What each subtask restores at a new parallelism (see :mod:`pyref.flink.restore`)."""
        from .restore import FlinkRestorePlan

        return FlinkRestorePlan(self, parallelism)


def flink_directory(path: str | os.PathLike[str]) -> str:
    """The savepoint directory a user names by ``path``: the directory itself, or its
    ``_metadata`` file; a local one as an absolute path (what Spark's executors open)."""
    path = os.fspath(path)
    location = parse_location(path)
    if location.is_local:  # a plain path or a file: URL, as the path it names
        local = location.path
        return os.path.dirname(local) if os.path.basename(local) == METADATA and os.path.isfile(local) else local
    head, _, tail = path.rstrip("/").rpartition("/")
    return head if tail == METADATA and open_io(head).stat(METADATA) is not None else path


def is_flink_savepoint(path: str | os.PathLike[str]) -> bool:
    """A directory with a Flink ``_metadata`` and no pyref manifest (or the ``_metadata``
    itself), local or remote."""
    try:
        io = open_io(flink_directory(path))
        return io.stat(METADATA) is not None and io.stat(MANIFEST_NAME) is None
    except SavepointError:
        return False


def operator_id_named(key: str) -> str:
    """The hex operator id a user means by ``key``: a hex id in either case (Flink prints
    lowercase, other tools uppercase), else a uid, whose id is its hash."""
    is_hex = len(key) == 32 and all(c in "0123456789abcdefABCDEF" for c in key)
    return key.lower() if is_hex else operator_id_of_uid(key)


def _operator_names(uids: Iterable[str] | Mapping[str, str] | None, metadata: CheckpointMetadata,
                    path: str) -> dict[str, str]:
    """Hex operator id -> name, from uids or a {uid or hex id: name} mapping; a uid or id
    of no operator of the savepoint is an error listing its operators (a typo would
    otherwise leave that operator unnamed without a word), and so is another name for an
    operator whose uid Flink stored (2.x), which names it (the name would be dropped)."""
    if uids is None:
        return {}
    if isinstance(uids, str):
        raise InvalidArgumentError("uids must be an iterable of uids or a mapping, not one string")
    pairs = uids.items() if isinstance(uids, Mapping) else ((u, u) for u in uids)
    ids = {op.operator_id for op in metadata.operators}
    names, unknown = {}, []
    for key, name in pairs:
        hex_id = operator_id_named(key)
        names[hex_id] = name
        if hex_id not in ids:
            unknown.append(key)
    if unknown:
        listed = ", ".join(op.operator_id + (f" (uid {op.uid})" if op.uid else "") for op in metadata.operators)
        raise InvalidArgumentError(f"no operator of the savepoint has the uid or id {', '.join(map(repr, unknown))} "
                                   f"(a uid names the operator whose id is its hash); its operators: {listed}",
                                   path=path)
    renamed = [f"{op.operator_id} is {op.uid!r}, not {names[op.operator_id]!r}" for op in metadata.operators
               if op.uid and names.get(op.operator_id, op.uid) != op.uid]
    if renamed:
        raise InvalidArgumentError(f"--uid (uids) names operators whose uid Flink stored, which names them: "
                                   f"{'; '.join(renamed)}", path=path)
    return names
