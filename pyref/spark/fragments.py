"""A state cut into task-sized fragments, and one fragment read as Arrow batches.

A fragment carries only what one Spark task needs, as serialized protobuf: the
chunks it reads, the data files (and bases) those chunks live in, and its
operator holding just that state. The task then reads exactly its byte ranges
through the core :class:`~pyref.reader.ChunkStore`, which checks every chunk's
CRC, and decodes whole chunks with the serializers' vectorised ``decode_array``.

No Spark import here: executors of any kind (data source reads, ``mapInArrow``
tasks, RDD tasks) share this module.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .._proto.savepoint.v1 import manifest_pb2 as pb
from ..broadcast import BroadcastStateView
from ..errors import InvalidArgumentError
from ..io import open_io
from ..key_groups import compute_key_groups, key_group_bounds, operator_index_for_key_group
from ..keys import as_key_array, key_type_of
from ..manifest import BROADCAST_COLUMNS, LIST_COLUMNS, state_label
from ..reader import ChunkStore, KeyedStateView, Savepoint
from ..restore import check_new_parallelism, plan_list_state
from ..serializers import serializer_from_snapshot
from ..timers import TimerServiceView, find_timer_service, service_label
from ..writer import _split_rows  # the core's cut of sized items into runs of about N bytes

#: Stored bytes a fragment aims at: big enough to amortise a task, small enough to spread.
DEFAULT_FRAGMENT_BYTES = 64 << 20
#: Least bytes per Arrow batch a read hands Spark: chunks of small key groups are coalesced
#: to this (each batch costs the hand-off a fixed overhead); full 1 MiB chunks pass as they are.
BATCH_BYTES = 1 << 20

State = pb.KeyedState | pb.ListState | pb.TimerService | pb.BroadcastState
#: Where a part of each type lives in an operator.
_FIELDS = {pb.KeyedState: "keyed_states", pb.ListState: "list_states", pb.TimerService: "timer_services",
           pb.BroadcastState: "broadcast_states"}


class Run(NamedTuple):
    """List-state rows of a fragment: ``count`` elements from ``first`` of chunk
    ``chunk`` (fragment-local index), which are elements ``index ..`` of ``subtask``."""

    subtask: int
    index: int  # type: ignore[assignment]  # a field, named like tuple.index
    chunk: int
    first: int
    count: int  # type: ignore[assignment]  # a field, named like tuple.count


@dataclass(frozen=True)
class Fragment:
    location: str
    #: pb.Manifest holding the bases and only the data files of this fragment's chunks.
    manifest: bytes
    #: pb.Operator holding only this state, which holds only this fragment's chunks.
    operator: bytes
    #: Index of each of the fragment's chunks in the whole state.
    chunk_indices: tuple[int, ...]
    #: List state read as rows: which elements, for which subtask (empty otherwise).
    runs: tuple[Run, ...] = ()

    def open(self) -> tuple[ChunkStore, pb.Operator]:
        manifest = pb.Manifest.FromString(self.manifest)
        return ChunkStore(open_io(self.location), manifest), pb.Operator.FromString(self.operator)

    def as_row(self) -> tuple:
        """The fragment as a row of :data:`FRAGMENT_SCHEMA` (plain values, so a task
        receives only its own fragment, as data)."""
        return self.location, self.manifest, self.operator, list(self.chunk_indices), [tuple(r) for r in self.runs]

    @classmethod
    def from_row(cls, row: dict) -> Fragment:
        """A fragment from a row of :data:`FRAGMENT_SCHEMA` as Arrow's ``to_pylist`` gives it."""
        return cls(row["location"], row["manifest"], row["operator"], tuple(row["chunk_indices"]),
                   tuple(Run(**r) for r in row["runs"]))


#: Spark schema (DDL) of :meth:`Fragment.as_row`.
FRAGMENT_SCHEMA = ("location string, manifest binary, operator binary, chunk_indices array<bigint>, "
                   "runs array<struct<subtask:int, index:bigint, chunk:int, first:bigint, count:bigint>>")


def stored_length(chunk: pb.Chunk) -> int:
    return chunk.range.length if chunk.WhichOneof("location") == "range" else len(chunk.inline_data)


def find_state(op: pb.Operator, name: str) -> pb.ListState | pb.KeyedState | pb.BroadcastState | None:
    """The operator's list, keyed or broadcast state of that name (they share names, rule O3)."""
    return next((s for s in [*op.list_states, *op.keyed_states, *op.broadcast_states] if s.name == name), None)


def part_of(op: pb.Operator) -> State:
    """The one state or timer service a fragment's operator holds."""
    parts: list[State] = [*op.list_states, *op.keyed_states, *op.timer_services, *op.broadcast_states]
    (part,) = parts
    return part


def _shell(state: State) -> State:
    """The state without its chunks (and partitions): what every fragment repeats."""
    shell = type(state)()
    for field, value in state.ListFields():
        if field.name in ("chunks", "partitions"):
            continue
        if field.message_type is None:
            setattr(shell, field.name, value)
        else:
            getattr(shell, field.name).CopyFrom(value)
    return shell


def _fragment(sp: Savepoint, op: pb.Operator, state: State, shell: State, chunk_indices: Sequence[int],
              runs: Sequence[Run] = ()) -> Fragment:
    manifest = pb.Manifest(savepoint_id=sp.manifest.savepoint_id, bases=sp.manifest.bases)
    local_files: dict[int, int] = {}
    part = type(shell)()
    part.CopyFrom(shell)
    for i in chunk_indices:
        chunk = part.chunks.add()
        chunk.CopyFrom(state.chunks[i])
        if chunk.WhichOneof("location") == "range":
            f = chunk.range.file
            if f not in local_files:
                local_files[f] = len(manifest.data_files)
                manifest.data_files.append(sp.manifest.data_files[f])
            chunk.range.file = local_files[f]
    operator = pb.Operator(operator_id=op.operator_id, name=op.name, parallelism=op.parallelism,
                           max_parallelism=op.max_parallelism, key_groups=op.key_groups)
    if op.HasField("key_serializer"):
        operator.key_serializer.CopyFrom(op.key_serializer)
    getattr(operator, _FIELDS[type(part)]).append(part)
    return Fragment(sp.location, manifest.SerializeToString(), operator.SerializeToString(),
                    tuple(chunk_indices), tuple(runs))


def chunk_fragments(sp: Savepoint, op: pb.Operator, state: State, target_bytes: int = DEFAULT_FRAGMENT_BYTES,
                    whole_key_groups: bool = False, selected: np.ndarray | None = None) -> list[Fragment]:
    """Consecutive chunks of ``state`` (key-group order for keyed state and timers), or only the
    ``selected`` chunk indices (ascending), in fragments of about ``target_bytes``; with
    ``whole_key_groups`` no key group is cut between two fragments (a timer stored twice, in two
    chunks of its key group, is then seen by one task, §7.9)."""
    indices = np.arange(len(state.chunks)) if selected is None else np.asarray(selected, dtype=np.int64)
    sizes = np.fromiter((stored_length(state.chunks[i]) for i in indices), dtype=np.int64, count=len(indices))
    starts = np.arange(len(sizes))
    if whole_key_groups and len(sizes):
        groups = np.fromiter((state.chunks[i].key_group for i in indices), dtype=np.int64, count=len(indices))
        starts = np.concatenate([[0], np.flatnonzero(np.diff(groups)) + 1])
        sizes = np.add.reduceat(sizes, starts)
    bounds = np.append(starts, len(indices))
    shell = _shell(state)
    return [_fragment(sp, op, state, shell, indices[int(bounds[start]):int(bounds[stop])].tolist())
            for start, stop in _split_rows(sizes, target_bytes)]


@dataclass(frozen=True)
class Selection:
    """What a read keeps, from filters Spark pushed down (each None: no condition): rows whose
    ``key`` is one of ``keys``, whose key group is in ``key_groups``, whose subtask (at the
    read's target parallelism; a list state's own subtasks without one) is in ``subtasks``.
    Planning keeps only the chunks (list runs) that can hold such rows; a task then keeps
    only the rows of ``keys`` (every row of a kept chunk has a kept key group and subtask)."""

    keys: tuple | None = None
    key_groups: frozenset[int] | None = None
    subtasks: frozenset[int] | None = None

    def keyed_chunks(self, op: pb.Operator, state: pb.KeyedState | pb.TimerService,
                     target_parallelism: int | None) -> np.ndarray:
        """Indices of the chunks of a keyed state (timer service) that may hold selected rows."""
        groups = np.fromiter((c.key_group for c in state.chunks), dtype=np.int64, count=len(state.chunks))
        keep = np.ones(len(groups), dtype=bool)
        if self.key_groups is not None:
            keep &= np.isin(groups, np.fromiter(self.key_groups, dtype=np.int64))
        if self.subtasks is not None:
            starts, ends = key_group_bounds(op.max_parallelism, target_parallelism or op.parallelism)
            owner = np.searchsorted(ends, groups)  # subtask i owns key groups starts[i]..ends[i]
            keep &= np.isin(owner, np.fromiter(self.subtasks, dtype=np.int64))
        if self.keys is not None:
            key_serializer = serializer_from_snapshot(op.key_serializer)
            # As an array: Spark's filters give a char key as its code unit, an int (spark_schema)
            key_array = as_key_array(list(self.keys), key_serializer)
            wanted = compute_key_groups(key_array, op.max_parallelism, key_type_of(op.key_serializer))
            keep &= np.isin(groups, wanted)
            encoded = sorted(key_serializer.encode_array(key_array).to_pylist())
            for i in np.flatnonzero(keep):  # format 1.1 key bounds skip chunks that cannot hold a key
                bounds = state.chunks[i].key_bounds if state.chunks[i].HasField("key_bounds") else None
                if bounds is not None:  # the first key from the lower bound on (not every key: chunks x keys)
                    first = bisect.bisect_left(encoded, bounds.min)
                    keep[i] = first < len(encoded) and encoded[first] <= bounds.max
        return np.flatnonzero(keep)

    def assignment(self, assignment: Sequence[Sequence[pb.ElementRange]]) -> list[list[pb.ElementRange]]:
        """A list (broadcast) state's element ranges per subtask, those of unselected subtasks dropped."""
        return [list(ranges) if self.subtasks is None or subtask in self.subtasks else []
                for subtask, ranges in enumerate(assignment)]

    def rows(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The batch's rows of the selected keys."""
        if self.keys is None or not batch.num_rows:
            return batch
        column = batch.column("key")
        keys = list(self.keys)
        if pa.types.is_uint16(column.type):  # a char's code unit: given as a str, or an int by Spark's filters
            keys = [ord(k) if isinstance(k, str) else k for k in keys]
        return batch.filter(pc.is_in(column, value_set=pa.array(keys, column.type)))


def residue_fragments(sp: Savepoint, op: pb.Operator, state: pb.KeyedState, modulus: int,
                      parts: int) -> list[Fragment]:
    """The chunks of a keyed state in about ``parts`` fragments by key-group residue:
    each fragment holds, in chunk order, the chunks whose key group modulo ``modulus``
    falls in its run of residues (runs balanced by stored bytes). Re-hashed to a max
    parallelism whose gcd with the state's is a multiple of ``modulus``, two fragments
    never share a key group (spec/key-groups.md §8.1)."""
    groups = np.fromiter((c.key_group for c in state.chunks), dtype=np.int64, count=len(state.chunks))
    sizes = np.fromiter((stored_length(c) for c in state.chunks), dtype=np.int64, count=len(state.chunks))
    residues = groups % modulus
    per_residue = np.bincount(residues, weights=sizes, minlength=modulus).astype(np.int64)
    target = max(1, -(-int(sizes.sum()) // max(parts, 1)))
    shell = _shell(state)
    fragments = []
    for low, high in _split_rows(per_residue, target):
        chunks = np.flatnonzero((residues >= low) & (residues < high))
        if len(chunks):
            fragments.append(_fragment(sp, op, state, shell, chunks.tolist()))
    return fragments


def list_fragments(sp: Savepoint, op: pb.Operator, state: pb.ListState | pb.BroadcastState,
                   assignment: Sequence[Sequence[pb.ElementRange]],
                   target_bytes: int = DEFAULT_FRAGMENT_BYTES) -> list[Fragment]:
    """Fragments producing the rows of ``assignment``: per subtask, the element ranges it holds in
    order. A broadcast state's subtask is never cut between fragments: its map's keys are checked
    to be distinct (rule B5) by the one task that reads it."""
    items: list[tuple[int, int, pb.ElementRange]] = []
    for subtask, ranges in enumerate(assignment):
        index = 0
        for r in ranges:
            items.append((subtask, index, r))
            index += r.count
    # A range costs its share of its chunk's stored bytes.
    sizes = np.fromiter((stored_length(state.chunks[r.chunk]) * r.count // max(state.chunks[r.chunk].row_count, 1)
                         for _, _, r in items), dtype=np.int64, count=len(items))
    cuts = [(start, stop) for start, stop in _split_rows(sizes, target_bytes)]
    if isinstance(state, pb.BroadcastState) and items:
        subtasks = np.array([subtask for subtask, _, _ in items])
        starts = np.concatenate([[0], np.flatnonzero(np.diff(subtasks)) + 1, [len(items)]])
        per_subtask = np.add.reduceat(sizes, starts[:-1])
        cuts = [(int(starts[a]), int(starts[b])) for a, b in _split_rows(per_subtask, target_bytes)]
    fragments, shell = [], _shell(state)
    for start, stop in cuts:
        local: dict[int, int] = {}
        runs = []
        for subtask, index, r in items[start:stop]:
            local.setdefault(r.chunk, len(local))
            runs.append(Run(subtask, index, local[r.chunk], r.first, r.count))
        fragments.append(_fragment(sp, op, state, shell, list(local), runs))
    return fragments


# --------------------------------------------------------------------------
# Schemas and batches
# --------------------------------------------------------------------------


def keyed_names(state: pb.KeyedState) -> list[str]:
    """The stored columns of a keyed state, with the key group first (spec/format.md §7.1)."""
    return ["key_group", "key", *(["namespace"] if state.HasField("namespace_serializer") else []),
            *(["user_key"] if state.kind == pb.MAP else []), "value"]


def timer_names(service: pb.TimerService) -> list[str]:
    return ["key_group", "key", *(["namespace"] if service.HasField("namespace_serializer") else []), "timestamp"]


def _raw_schema(names: list[str]) -> pa.Schema:
    return pa.schema([pa.field(names[0], pa.int32()), *(pa.field(n, pa.binary()) for n in names[1:])])


def keyed_schema(sp: Savepoint, op: pb.Operator, state: pb.KeyedState | pb.TimerService, *, raw: bool,
                 subtask: bool) -> pa.Schema:
    """Arrow schema of :func:`keyed_batches`: a keyed state's or (format 1.2) a timer service's rows."""
    timers = isinstance(state, pb.TimerService)
    if raw:
        schema = _raw_schema(timer_names(state) if timers else keyed_names(state))
    else:
        schema = (_timer_view if timers else _keyed_view)(sp.store, op, state).arrow_chunks([]).schema
    return schema.append(pa.field("subtask", pa.int32())) if subtask else schema


def list_schema(state: pb.ListState | pb.BroadcastState, *, raw: bool) -> pa.Schema:
    """Arrow schema of :func:`list_batches`: subtask, index, then value (list state) or key, value
    (format 1.2 broadcast state)."""
    if isinstance(state, pb.BroadcastState):
        key = pa.binary() if raw else serializer_from_snapshot(state.key_serializer).arrow_type()
        value = pa.binary() if raw else serializer_from_snapshot(state.value_serializer).arrow_type()
        entry = [pa.field("key", key), pa.field("value", value)]
    else:
        entry = [pa.field("value", pa.binary() if raw else serializer_from_snapshot(state.element_serializer)
                          .arrow_type())]
    return pa.schema([pa.field("subtask", pa.int32()), pa.field("index", pa.int64()), *entry])


def _keyed_view(store: ChunkStore, op: pb.Operator, state: pb.KeyedState) -> KeyedStateView:
    return KeyedStateView(store, op, serializer_from_snapshot(op.key_serializer), state)


def _timer_view(store: ChunkStore, op: pb.Operator, service: pb.TimerService) -> TimerServiceView:
    return TimerServiceView(store, op, serializer_from_snapshot(op.key_serializer), service)


def keyed_batches(fragment: Fragment, *, raw: bool, target_parallelism: int | None = None) -> Iterator[pa.RecordBatch]:
    """The rows of a keyed state's or (format 1.2) a timer service's fragment: key_group, key,
    [namespace], [user_key], value[, ttl_timestamp] for keyed state and key_group, key,
    [namespace], timestamp for timers, then [subtask]. One batch per chunk (per key group
    of distinct timers, §7.9).

    Raw batches hold the stored bytes (no serializer needed); otherwise values
    are decoded. ``target_parallelism`` adds the subtask that restores each row.
    """
    store, op = fragment.open()
    state = part_of(op)
    timers = isinstance(state, pb.TimerService)
    chunks = list(state.chunks)
    batches: Iterator[pa.RecordBatch]
    if raw:
        names = timer_names(state) if timers else keyed_names(state)
        columns = store.read_many(chunks, len(names) - 1,
                                  service_label(op.operator_id, state.name, state.domain) if timers
                                  else state_label(op, state.name))
        batches = (pa.record_batch([pa.array(np.full(c.row_count, c.key_group, np.int32)), *cols], names=names)
                   for c, cols in zip(chunks, columns))
    elif timers:
        batches = _timer_view(store, op, state).arrow_batches(chunks)
    else:
        batches = _keyed_view(store, op, state).arrow_batches(chunks)
    for batch in batches:
        if target_parallelism is not None:
            groups = batch.column("key_group").to_numpy(zero_copy_only=False)
            subtask = operator_index_for_key_group(op.max_parallelism, target_parallelism, int(groups[0])) \
                if len(groups) else 0  # a batch is one key group's rows
            batch = pa.record_batch([*batch.columns, pa.array(np.full(batch.num_rows, subtask, np.int32))],
                                    names=[*batch.schema.names, "subtask"])
        yield batch


def list_batches(fragment: Fragment, *, raw: bool) -> Iterator[pa.RecordBatch]:
    """One batch per run: subtask, index, value (list state) or key, value (broadcast state),
    decoded or, when ``raw``, the stored bytes. A broadcast map repeating a key is corrupt (B5)."""
    store, op = fragment.open()
    state = part_of(op)
    broadcast = isinstance(state, pb.BroadcastState)
    if broadcast:
        view = BroadcastStateView(store, op, state)
        decoders = None if raw else [view.key_serializer.decode_array, view.value_serializer.decode_array]
        names, width = ["key", "value"], BROADCAST_COLUMNS
    else:
        decoders = None if raw else [serializer_from_snapshot(state.element_serializer).decode_array]
        names, width = ["value"], LIST_COLUMNS
    runs = fragment.runs
    # Consecutive runs of one chunk share a single read, and a chunk that comes back later is not read again.
    distinct = [r.chunk for i, r in enumerate(runs) if i == 0 or runs[i - 1].chunk != r.chunk]
    columns = store.read_indexed(state.chunks, distinct, width, state_label(op, state.name))
    current: int | None = None
    read: list[pa.Array] = []
    held: dict[int, list[pa.Array]] = {}
    for r in runs:
        if r.chunk != current:
            current, read = r.chunk, next(columns)
        cells = [c.slice(r.first, r.count) for c in read]
        if broadcast:
            held.setdefault(r.subtask, []).append(cells[0])
        yield pa.record_batch([pa.array(np.full(r.count, r.subtask, np.int32)),
                               pa.array(np.arange(r.index, r.index + r.count, dtype=np.int64)),
                               *(cells if decoders is None else [d(c) for d, c in zip(decoders, cells)])],
                              names=["subtask", "index", *names])
    for keys in held.values():  # a subtask's whole map is in this fragment (list_fragments)
        view.check_distinct_keys(pa.concat_arrays(keys))


def coalesce(batches: Iterator[pa.RecordBatch], target_bytes: int) -> Iterator[pa.RecordBatch]:
    """``batches`` concatenated into batches of about ``target_bytes`` or more (empty ones
    dropped; one that is large enough passes uncopied)."""
    group: list[pa.RecordBatch] = []
    size = 0
    for batch in batches:
        if not batch.num_rows:
            continue
        group.append(batch)
        size += batch.nbytes
        if size >= target_bytes:
            yield _concatenated(group)
            group, size = [], 0
    if group:
        yield _concatenated(group)


def _concatenated(batches: list[pa.RecordBatch]) -> pa.RecordBatch:
    return batches[0] if len(batches) == 1 else pa.Table.from_batches(batches).combine_chunks().to_batches()[0]


# --------------------------------------------------------------------------
# One state, read
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class StateScan:
    """How to read one state as rows: the columns, and the fragments that tasks read
    with :func:`fragment_batches`. The ``savepoint`` data source and
    :func:`pyref.spark.read_state` both run this; they differ only in how Spark
    hands the batches on."""

    schema: pa.Schema
    fragments: tuple[Fragment, ...]
    max_parallelism: int = 0
    writer_assigned_key_groups: bool = False

    @classmethod
    def plan(cls, location: str, operator: str | None, state: str | None, *, raw: bool = False,
             target_parallelism: int | None = None, fragment_bytes: int = DEFAULT_FRAGMENT_BYTES,
             timer_service: str | None = None, domain: str | None = None,
             selection: Selection | None = None) -> StateScan:
        """Plan reading ``operator``/``state`` of the savepoint at ``location`` (the
        manifest only): keyed state as key_group, key[, namespace][, user_key], value
        [, ttl_timestamp][, subtask]; list state as subtask, index, value and broadcast state
        as subtask, index, key, value, the lists (maps) of ``target_parallelism`` subtasks if
        given; or, with ``timer_service`` (and ``domain`` when the name is in both), that
        timer service's distinct timers as key_group, key[, namespace], timestamp[, subtask]
        (see the data source's options). A ``selection`` keeps only the chunks (list runs) that
        may hold its rows."""
        sp = Savepoint.open(location)
        if not operator or not (state or timer_service):
            names = {op.operator_id: [*op.list_state_names, *op.keyed_state_names, *op.broadcast_state_names]
                     for op in sp.operators}
            raise InvalidArgumentError(f"options 'operator' and 'state' (or 'timer_service') are required; this "
                                       f"savepoint has {names}", path=sp.location)
        if state and timer_service or domain is not None and not timer_service:  # one would be ignored
            raise InvalidArgumentError("give the state, or a timer service (and its domain), not both",
                                       path=sp.location)
        op = sp.operator(operator).proto
        found = find_timer_service(op, timer_service, domain) if timer_service else find_state(op, str(state))
        if found is None:
            there = [s.name for s in (*op.list_states, *op.keyed_states, *op.broadcast_states)]
            raise InvalidArgumentError(f"no such state; operator {operator!r} has {there}",
                                       state=f"{operator}/{state}", path=sp.location)
        if target_parallelism is not None:
            check_new_parallelism(op, target_parallelism)
        if isinstance(found, (pb.KeyedState, pb.TimerService)):
            schema = keyed_schema(sp, op, found, raw=raw, subtask=target_parallelism is not None)
            selected = selection.keyed_chunks(op, found, target_parallelism) if selection is not None else None
            fragments = chunk_fragments(sp, op, found, fragment_bytes,
                                        whole_key_groups=isinstance(found, pb.TimerService), selected=selected)
        else:
            schema = list_schema(found, raw=raw)
            if target_parallelism is None:
                assignment = [list(p.ranges) for p in found.partitions]
            else:
                assignment = plan_list_state(op, target_parallelism)[found.name]
            if selection is not None:
                assignment = selection.assignment(assignment)
            fragments = list_fragments(sp, op, found, assignment, fragment_bytes)
        return cls(schema, tuple(fragments), op.max_parallelism, op.key_groups == pb.KEY_GROUPS_FROM_WRITER)


def fragment_batches(fragment: Fragment, *, raw: bool, target_parallelism: int | None) -> Iterator[pa.RecordBatch]:
    """The rows of a fragment of any kind of state or of timers (see :meth:`StateScan.plan`), in
    batches of about :data:`BATCH_BYTES`."""
    if fragment.runs:
        batches = list_batches(fragment, raw=raw)
    else:
        batches = keyed_batches(fragment, raw=raw, target_parallelism=target_parallelism)
    return coalesce(batches, BATCH_BYTES)
