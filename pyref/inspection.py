"""What a savepoint holds (``describe``) and whether all of it reads (``verify``).

Both return dataclasses (:class:`~pyref.descriptions.SavepointInfo`, :class:`VerifyReport`)
whose ``to_dict()`` is ready for ``json.dumps``: the CLI prints them, the Spark metadata
view turns them into rows.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute in _Identities.report)

from ._proto.savepoint.v1 import manifest_pb2 as pb
from .descriptions import SavepointInfo
from .errors import ConcurrentWriteError, SavepointError, StorageError, locating
from .manifest import (
    BROADCAST_COLUMNS,
    COORDINATOR_COLUMNS,
    DATA_FILE_MAGIC,
    LIST_COLUMNS,
    keyed_column_count,
    selected_rows,
    state_label,
    timer_column_count,
)
from .reader import Savepoint
from .serializers import Int64, ListOf, Serializer, serializer_from_snapshot
from .timers import service_label
from .ttl import TtlValue

#: Errors that are not statements about the savepoint's bytes: verify raises them.
_NOT_DAMAGE = (StorageError, ConcurrentWriteError)


def describe(sp: Savepoint, *, subtasks: bool = False) -> SavepointInfo:
    """What the savepoint holds, O(manifest) in time and size: per operator, the number of
    key groups a subtask holds (smallest and largest); with ``subtasks``, also every
    subtask's ``[first, last]`` key groups (O(parallelism) per operator). ``to_dict()`` of
    the result is the JSON of ``pyref inspect --json``."""
    return SavepointInfo.of(sp.manifest, location=sp.location, format_version=str(sp.version), subtasks=subtasks,
                            warnings=_base_warnings(sp))


def broken_bases(sp: Savepoint) -> dict[int, SavepointError]:
    """Each base (1-based index) that is missing, replaced or unreadable (spec/format.md §8.2),
    with the error a read through it would raise: one manifest read per base, no data file.
    A failing storage or a savepoint replaced meanwhile is raised instead."""
    broken = {}
    for k in range(1, len(sp.manifest.bases) + 1):
        try:
            sp.store.base_io(k)
        except _NOT_DAMAGE:
            raise
        except SavepointError as exc:
            broken[k] = exc
    return broken


def _base_warnings(sp: Savepoint) -> list[str]:
    return [f"{exc.reason}: its state cannot be read; restore the base or use a flattened copy"
            for exc in broken_bases(sp).values()]


@dataclass
class VerifyReport:
    """What :func:`verify` checked (chunks, values) and found: errors (damage) and warnings;
    ``to_dict()`` is ``pyref verify --json``."""

    chunks: int = 0
    values: int = 0
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_dict(self) -> dict[Any, Any]:
        return {"ok": self.ok, "chunks": self.chunks, "values": self.values, "errors": self.errors,
                "warnings": self.warnings}


def verify(sp: Savepoint) -> VerifyReport:
    """Read every data file header, chunk and value; check every base reference.

    Errors are collected rather than raised so one run reports all damage. A failing
    storage (:class:`StorageError`) says nothing about the savepoint and is raised, as is
    a savepoint replaced while being verified (:class:`ConcurrentWriteError`).
    """
    report = VerifyReport()
    store = sp.store
    store.check_before_reading(report.errors)  # serializers and every base (spec/format.md §5.10), all reported
    # A missing or replaced base is one error, not one per file and chunk it held (§8.2):
    # its files are skipped, which a warning says.
    unread: set[int] = set()
    for k, exc in broken_bases(sp).items():
        if str(exc) not in report.errors:  # the check above stops at the first broken base
            report.errors.append(str(exc))
        files = {i for i, f in enumerate(sp.manifest.data_files) if f.base == k}
        unread |= files
        report.warnings.append(f"{len(files)} data files of base {sp.manifest.bases[k - 1].directory!r} and the "
                               "chunks in them not read: the base is broken")
    for i, f in enumerate(sp.manifest.data_files):
        if i in unread:
            continue
        try:
            io, rel = store.file_location(i)
            size = io.size(rel)
            if size is None:
                report.errors.append(f"data file missing: {io.describe(rel)}")
            elif size != f.size:
                report.errors.append(f"data file {io.describe(rel)} is {size} bytes, manifest says {f.size}")
            elif f.size and io.read_range(rel, 0, len(DATA_FILE_MAGIC)) != DATA_FILE_MAGIC:  # empty: §6.1
                report.errors.append(f"data file {io.describe(rel)} does not start with the data-file magic")
        except _NOT_DAMAGE:
            raise
        except SavepointError as exc:
            report.errors.append(str(exc))
    referenced = {f.path for f in sp.manifest.data_files if f.base == 0}
    for rel in sp.io.list_files("data"):
        if rel not in referenced:
            report.warnings.append(f"unreferenced file (left by an interrupted writer? `pyref clean` deletes old ones): "
                                   f"{sp.io.describe(rel)}")
    for op in sp.manifest.operators:
        for ls in op.list_states:
            chunks, runs = _selected_rows(state_label(op, ls.name), ls, report)
            _verify_chunks(sp, state_label(op, ls.name), chunks, LIST_COLUMNS, lambda: [
                serializer_from_snapshot(ls.element_serializer)], report, unread, runs=runs)
        for ks in op.keyed_states:
            identities = _Identities(ks)
            if _verify_chunks(sp, state_label(op, ks.name), ks.chunks, keyed_column_count(ks),
                              lambda: _keyed_serializers(op, ks), report, unread, identities):
                identities.report(state_label(op, ks.name), report)
        for ts in op.timer_services:
            _verify_chunks(sp, service_label(op.operator_id, ts.name, ts.domain), ts.chunks, timer_column_count(ts),
                           lambda: [serializer_from_snapshot(op.key_serializer),
                                    *([serializer_from_snapshot(ts.namespace_serializer)]
                                      if ts.HasField("namespace_serializer") else []), Int64()], report, unread)
        for bs in op.broadcast_states:
            chunks, runs = _selected_rows(state_label(op, bs.name), bs, report)
            _verify_chunks(sp, state_label(op, bs.name), chunks, BROADCAST_COLUMNS, lambda: [
                serializer_from_snapshot(bs.key_serializer), serializer_from_snapshot(bs.value_serializer)],
                report, unread, runs=runs)
            _verify_broadcast_keys(sp, op, bs, report)
        if op.HasField("coordinator_state"):
            _verify_chunks(sp, f"{op.operator_id} (coordinator state)", [op.coordinator_state], COORDINATOR_COLUMNS,
                           lambda: None, report, unread)
    if report.errors:
        store.check_unchanged()  # damage seen because a writer replaced the savepoint meanwhile?
    return report


def _keyed_serializers(op: pb.Operator, ks: pb.KeyedState) -> list[Any]:
    """The serializers of a keyed state's columns, a TTL state's values as TTL cells (§7.8)."""
    value = serializer_from_snapshot(ks.value_serializer)
    if ks.HasField("ttl"):
        value = TtlValue(value)
    return [serializer_from_snapshot(op.key_serializer),
            *([serializer_from_snapshot(ks.namespace_serializer)] if ks.HasField("namespace_serializer") else []),
            *([serializer_from_snapshot(ks.user_key_serializer)] if ks.kind == pb.MAP else []),
            ListOf.of_list_state(value) if ks.kind == pb.LIST else value]


def _selected_rows(label: str, state: pb.ListState | pb.BroadcastState,
                   report: VerifyReport) -> tuple[list[pb.Chunk], list[list[tuple[int, int]]]]:
    """The chunks of a list or broadcast state that some range refers to, each with the runs
    of its rows that ranges select: only these are read and decoded, as by every reader, so
    damage elsewhere is no error (spec/format.md §5.3); verify says how many chunks it skipped."""
    runs = selected_rows(state)
    if len(runs) < len(state.chunks):
        report.warnings.append(f"{label}: {len(state.chunks) - len(runs)} chunks no range refers to, not read "
                               "(spec/format.md §5.3)")
    return [state.chunks[i] for i in runs], list(runs.values())


def _verify_broadcast_keys(sp: Savepoint, op: pb.Operator, bs: pb.BroadcastState, report: VerifyReport) -> None:
    """Rule B5: the keys of every partition are distinct. Each chunk is decoded once for all
    partitions (which share chunks: one map, every subtask), and partitions with the same
    ranges are checked once, so the work stays linear in the stored bytes (spec/format.md §5.9)."""
    view = sp.operator(op.operator_id).broadcast_state(bs.name)
    referenced = list(selected_rows(bs))  # §5.3: only these chunks are state
    try:
        keys = dict(zip(referenced, (key for key, _ in sp.store.read_many([bs.chunks[i] for i in referenced],
                                                                           BROADCAST_COLUMNS, view.label))))
    except _NOT_DAMAGE:
        raise
    except SavepointError:
        return  # a chunk that does not read: _verify_chunks reported it
    checked = set()
    for i, partition in enumerate(bs.partitions):
        ranges = partition.SerializeToString(deterministic=True)
        if ranges in checked:
            continue
        checked.add(ranges)
        held = [keys[r.chunk].slice(r.first, r.count) for r in partition.ranges]
        try:
            view.check_distinct_keys(pa.concat_arrays(held) if held else pa.array([], pa.binary()))
        except SavepointError as exc:
            report.errors.append(f"partition {i}: {exc}")


class _Identities:
    """The identities (key[, namespace][, user key], as stored) of a keyed state's rows, to
    report rows that repeat one (spec/format.md §7.1: allowed, the last wins, but a writer
    SHOULD not store them). Two rows of one identity share a key group, so each key group's
    identities are kept (copied) only until its last chunk is read, then counted and dropped:
    memory is the key groups in flight, not the state."""

    def __init__(self, state: pb.KeyedState) -> None:
        self.width = 1 + state.HasField("namespace_serializer") + (state.kind == pb.MAP)
        self.waiting = collections.Counter(chunk.key_group for chunk in state.chunks)
        self.parts: dict[int, list[list[pa.Array]]] = {}
        self.repeated = 0  # identities stored in more than one row
        self.example: tuple[bytes, int, int] | None = None  # (encoded key, key group, rows) of the first

    def __call__(self, chunk: pb.Chunk, columns: list[pa.BinaryArray]) -> None:
        group = chunk.key_group
        # Copies: the chunk's buffers are freed once it is read.
        self.parts.setdefault(group, []).append([pa.concat_arrays([c]) for c in columns[:self.width]])
        self.waiting[group] -= 1
        if not self.waiting[group]:
            self._count(group, self.parts.pop(group))

    def _count(self, group: int, parts: list[list[pa.Array]]) -> None:
        names = [str(i) for i in range(self.width)]
        table = pa.table([pa.chunked_array([p[i] for p in parts], pa.binary()) for i in range(self.width)],
                         names=names)
        counts = table.group_by(names).aggregate([("0", "count")])
        repeated = counts.filter(pa.compute.greater(counts.column("0_count"), 1))
        if repeated.num_rows and self.example is None:
            first = repeated.slice(0, 1).to_pylist()[0]
            self.example = (first["0"], group, first["0_count"])
        self.repeated += repeated.num_rows

    def report(self, label: str, report: VerifyReport) -> None:
        for group, parts in sorted(self.parts.items()):  # key groups some of whose chunks were not read
            self._count(group, parts)
        self.parts = {}
        if self.example is not None:
            key, group, rows = self.example
            report.warnings.append(
                f"{label}: {self.repeated} keys are stored in more than one row (e.g. encoded key "
                f"{key[:32].hex()} in key group {group}, {rows} rows); readers take the last in state order "
                "(spec/format.md §7.1)")


def _verify_chunks(sp: Savepoint, label: str, chunks: Sequence[pb.Chunk], columns: int,
                   serializers_of: Callable[[], list[Serializer] | None], report: VerifyReport,
                   unread: set[int], on_chunk: Callable[[pb.Chunk, list[pa.BinaryArray]], None] | None = None,
                   runs: Sequence[Sequence[tuple[int, int]]] | None = None) -> bool:
    """Read every chunk, except those in the data files ``unread`` (of broken bases, reported
    once); decode every cell with ``serializers_of()`` (None: the cells are opaque), and hand
    each chunk's columns to ``on_chunk(chunk, columns)`` if given; with ``runs``, only the rows
    ``runs[i]`` (``(first, count)`` pairs) of ``chunks[i]`` are decoded. The chunks are read in
    storage order (few large requests on object stores); if any is damaged, they are read
    again one by one, so that the report names each damaged chunk. Whether all read."""
    if unread:
        kept = [i for i, c in enumerate(chunks) if c.WhichOneof("location") != "range" or c.range.file not in unread]
        chunks = [chunks[i] for i in kept]
        runs = None if runs is None else [runs[i] for i in kept]
    try:
        serializers = serializers_of()
    except SavepointError as exc:
        report.warnings.append(f"{label}: values not decoded: {exc.reason}")
        serializers = None
    try:
        values = 0
        for i, cols in sp.store.scan(chunks, columns, label):
            values += _decoded_values(cols, serializers, None if runs is None else runs[i])
            if on_chunk is not None:
                on_chunk(chunks[i], cols)
    except _NOT_DAMAGE:
        raise
    except SavepointError:
        pass
    else:
        report.chunks += len(chunks)
        report.values += values
        return True
    for i, chunk in enumerate(chunks):
        report.chunks += 1
        stored = (chunk.range.offset, chunk.range.offset + chunk.range.length) if chunk.HasField("range") else None
        try:
            with locating(path=sp.store.describe(chunk), state=label, byte_range=stored):
                report.values += _decoded_values(sp.store.read_columns(chunk, columns, label), serializers,
                                                 None if runs is None else runs[i])
        except _NOT_DAMAGE:
            raise
        except SavepointError as exc:
            report.errors.append(str(exc))
    return False


def _decoded_values(columns: list[pa.BinaryArray], serializers: list[Any] | None,
                    runs: Sequence[tuple[int, int]] | None = None) -> int:
    """Decode every cell of a chunk's columns, or of its rows ``runs`` (``(first, count)``
    pairs); the number of cells (0 when they stay opaque)."""
    if serializers is None:
        return 0
    if runs is not None:
        columns = [pa.concat_arrays([c.slice(first, count) for first, count in runs]) for c in columns]
    for s, c in zip(serializers, columns):
        s.decode_array(c)
    return len(columns[0]) * len(columns)

