"""What a savepoint holds (``describe``) and whether all of it reads (``verify``).

Both return plain dicts and lists, ready for ``json.dumps``: the CLI prints them,
the Spark metadata view turns them into rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from ._proto.savepoint.v1 import manifest_pb2 as pb
from ._proto.savepoint.v1 import serializer_pb2
from .errors import ConcurrentWriteError, SavepointError, StorageError
from .key_groups import key_group_bounds
from .manifest import (
    BROADCAST_COLUMNS,
    COORDINATOR_COLUMNS,
    DATA_FILE_MAGIC,
    LIST_COLUMNS,
    keyed_column_count,
    state_label,
    timer_column_count,
)
from .reader import KIND_NAMES, Savepoint
from .serializers import Int64, ListOf, serializer_from_snapshot
from .timers import DOMAIN_NAMES, service_label
from .ttl import TtlConfig, TtlValue

#: Errors that are not statements about the savepoint's bytes: verify raises them.
_NOT_DAMAGE = (StorageError, ConcurrentWriteError)
MODE_NAMES = {pb.SPLIT_DISTRIBUTE: "SPLIT_DISTRIBUTE", pb.UNION: "UNION", pb.BROADCAST: "BROADCAST"}


def serializer_label(snapshot: serializer_pb2.SerializerSnapshot) -> str:
    """``tuple<string,int64>@v2`` style: id, children, snapshot version."""
    inner = ",".join(serializer_label(n) for n in snapshot.nested)
    return f"{snapshot.serializer_id}{f'<{inner}>' if inner else ''}@v{snapshot.version}"


def _chunk_bytes(chunks) -> tuple[int, int, int]:
    stored = sum(c.range.length if c.WhichOneof("location") == "range" else len(c.inline_data) for c in chunks)
    return len(chunks), stored, sum(c.raw_length for c in chunks)


def describe(sp: Savepoint, *, subtasks: bool = False) -> dict:
    """What the savepoint holds, O(manifest) in time and size: per operator, the number of
    key groups a subtask holds (smallest and largest); with ``subtasks``, also every
    subtask's ``[first, last]`` key groups (O(parallelism) per operator)."""
    m = sp.manifest
    operators = []
    for op in m.operators:
        states = []
        for ls in op.list_states:
            n, stored, raw = _chunk_bytes(ls.chunks)
            states.append({
                "name": ls.name, "type": "list", "mode": MODE_NAMES[ls.mode],
                "serializer": serializer_label(ls.element_serializer),
                "elements_per_partition": [sum(r.count for r in p.ranges) for p in ls.partitions],
                "chunks": n, "stored_bytes": stored, "raw_bytes": raw,
            })
        for ks in op.keyed_states:
            n, stored, raw = _chunk_bytes(ks.chunks)
            entry = {
                "name": ks.name, "type": "keyed", "kind": KIND_NAMES[ks.kind],
                "serializer": serializer_label(ks.value_serializer),
                "entries": sum(c.row_count for c in ks.chunks),
                "key_groups_with_entries": len({c.key_group for c in ks.chunks}),
                "chunks": n, "stored_bytes": stored, "raw_bytes": raw,
            }
            if ks.kind == pb.MAP:
                entry["user_key_serializer"] = serializer_label(ks.user_key_serializer)
            if ks.HasField("namespace_serializer"):
                entry["namespace_serializer"] = serializer_label(ks.namespace_serializer)
            if ks.HasField("ttl"):
                entry["ttl"] = vars(TtlConfig.from_proto(ks.ttl))
            states.append(entry)
        for bs in op.broadcast_states:
            n, stored, raw = _chunk_bytes(bs.chunks)
            states.append({
                "name": bs.name, "type": "broadcast", "serializer": serializer_label(bs.value_serializer),
                "key_serializer": serializer_label(bs.key_serializer),
                "entries_per_partition": [sum(r.count for r in p.ranges) for p in bs.partitions],
                "chunks": n, "stored_bytes": stored, "raw_bytes": raw,
            })
        timers = []
        for ts in op.timer_services:
            n, stored, raw = _chunk_bytes(ts.chunks)
            timers.append({
                "name": ts.name, "domain": DOMAIN_NAMES[ts.domain], "timers": sum(c.row_count for c in ts.chunks),
                "namespace_serializer": (serializer_label(ts.namespace_serializer)
                                         if ts.HasField("namespace_serializer") else None),
                "key_groups_with_timers": len({c.key_group for c in ts.chunks}),
                "chunks": n, "stored_bytes": stored, "raw_bytes": raw,
            })
        firsts, lasts = key_group_bounds(op.max_parallelism, op.parallelism)
        sizes = lasts - firsts + 1
        operator = {
            "operator_id": op.operator_id, "name": op.name, "uid": op.uid, "parallelism": op.parallelism,
            "max_parallelism": op.max_parallelism,
            "key_serializer": serializer_label(op.key_serializer) if op.HasField("key_serializer") else None,
            "key_groups": "writer" if op.key_groups == pb.KEY_GROUPS_FROM_WRITER else "hashed",
            # A one-cell payload is 16 bytes of row count, column count and two offsets, then the cell (§7).
            "coordinator_state_bytes": (op.coordinator_state.raw_length - 16 if op.HasField("coordinator_state")
                                        else None),
            "key_groups_per_subtask": {"min": int(sizes.min()), "max": int(sizes.max())},
            "states": states, "timer_services": timers,
        }
        if subtasks:
            operator["subtask_key_groups"] = np.stack([firsts, lasts], axis=1).tolist()
        operators.append(operator)
    return {
        "location": sp.location, "savepoint_id": m.savepoint_id, "format_version": str(sp.version),
        "created_by": m.created_by, "created_at_ms": m.created_at_ms,
        "required_features": list(m.required_features), "optional_features": list(m.optional_features),
        "bases": [{"directory": b.directory, "savepoint_id": b.savepoint_id} for b in m.bases],
        "data_files": len(m.data_files), "data_bytes": sum(f.size for f in m.data_files if f.base == 0),
        "operators": operators,
    }


@dataclass
class VerifyReport:
    chunks: int = 0
    values: int = 0
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_dict(self) -> dict:
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
    for i, f in enumerate(sp.manifest.data_files):
        try:
            io, rel = store.file_location(i)
            size = io.size(rel)
            if size is None:
                report.errors.append(f"data file missing: {io.describe(rel)}")
            elif size != f.size:
                report.errors.append(f"data file {io.describe(rel)} is {size} bytes, manifest says {f.size}")
            elif io.read_range(rel, 0, len(DATA_FILE_MAGIC)) != DATA_FILE_MAGIC:
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
            _verify_chunks(sp, state_label(op, ls.name), ls.chunks, LIST_COLUMNS, lambda: [
                serializer_from_snapshot(ls.element_serializer)], report)
        for ks in op.keyed_states:
            identities = _Identities(ks)
            if _verify_chunks(sp, state_label(op, ks.name), ks.chunks, keyed_column_count(ks),
                              lambda: _keyed_serializers(op, ks), report, identities):
                identities.report(state_label(op, ks.name), report)
        for ts in op.timer_services:
            _verify_chunks(sp, service_label(op.operator_id, ts.name, ts.domain), ts.chunks, timer_column_count(ts),
                           lambda: [serializer_from_snapshot(op.key_serializer),
                                    *([serializer_from_snapshot(ts.namespace_serializer)]
                                      if ts.HasField("namespace_serializer") else []), Int64()], report)
        for bs in op.broadcast_states:
            _verify_chunks(sp, state_label(op, bs.name), bs.chunks, BROADCAST_COLUMNS, lambda: [
                serializer_from_snapshot(bs.key_serializer), serializer_from_snapshot(bs.value_serializer)], report)
            _verify_broadcast_keys(sp, op, bs, report)
        if op.HasField("coordinator_state"):
            _verify_chunks(sp, f"{op.operator_id} (coordinator state)", [op.coordinator_state], COORDINATOR_COLUMNS,
                           lambda: None, report)
    if report.errors:
        store.check_unchanged()  # damage seen because a writer replaced the savepoint meanwhile?
    return report


def _keyed_serializers(op: pb.Operator, ks: pb.KeyedState) -> list:
    """The serializers of a keyed state's columns, a TTL state's values as TTL cells (§7.8)."""
    value = serializer_from_snapshot(ks.value_serializer)
    if ks.HasField("ttl"):
        value = TtlValue(value)
    return [serializer_from_snapshot(op.key_serializer),
            *([serializer_from_snapshot(ks.namespace_serializer)] if ks.HasField("namespace_serializer") else []),
            *([serializer_from_snapshot(ks.user_key_serializer)] if ks.kind == pb.MAP else []),
            ListOf(value) if ks.kind == pb.LIST else value]


def _verify_broadcast_keys(sp: Savepoint, op: pb.Operator, bs: pb.BroadcastState, report: VerifyReport) -> None:
    """Rule B5: the keys of every partition are distinct. Each chunk is decoded once for all
    partitions (which share chunks: one map, every subtask), and partitions with the same
    ranges are checked once, so the work stays linear in the stored bytes (spec/format.md §5.9)."""
    view = sp.operator(op.operator_id).broadcast_state(bs.name)
    try:
        keys = [key for key, _ in sp.store.read_many(bs.chunks, BROADCAST_COLUMNS, view.label)]
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
    """The identities (key[, namespace][, user key], as stored) of a keyed state's rows, by key
    group, to report rows that repeat one (spec/format.md §7.1: allowed, the last wins, but
    a writer SHOULD not store them). Only the identity columns are kept, copied."""

    def __init__(self, state: pb.KeyedState) -> None:
        self.width = 1 + state.HasField("namespace_serializer") + (state.kind == pb.MAP)
        self.state = state
        self.parts: list[pa.RecordBatch] = []

    def __call__(self, i: int, columns: list[pa.BinaryArray]) -> None:
        groups = pa.array(np.full(len(columns[0]), self.state.chunks[i].key_group, np.int32))
        identity = [pa.concat_arrays([c]) for c in columns[:self.width]]  # copies: the chunk's buffers are freed
        self.parts.append(pa.record_batch([groups, *identity], names=["key_group", *map(str, range(self.width))]))

    def report(self, label: str, report: VerifyReport) -> None:
        if not self.parts:
            return
        table = pa.Table.from_batches(self.parts)
        counts = table.group_by(table.column_names).aggregate([("key_group", "count")])
        repeated = counts.filter(pa.compute.greater(counts.column("key_group_count"), 1))
        if repeated.num_rows:
            first = repeated.slice(0, 1).to_pylist()[0]
            report.warnings.append(
                f"{label}: {repeated.num_rows} keys are stored in more than one row (e.g. encoded key "
                f"{first['0'][:32].hex()} in key group {first['key_group']}, {first['key_group_count']} rows); "
                "readers take the last in state order (spec/format.md §7.1)")


def _verify_chunks(sp: Savepoint, label: str, chunks, columns: int, serializers_of, report: VerifyReport,
                   on_chunk=None) -> bool:
    """Read every chunk; decode every cell with ``serializers_of()`` (None: the cells are opaque),
    and hand each chunk's columns to ``on_chunk(index, columns)`` if given. The chunks are read
    in storage order (few large requests on object stores); if any is damaged, they are read
    again one by one, so that the report names each damaged chunk. Whether all read."""
    try:
        serializers = serializers_of()
    except SavepointError as exc:
        report.warnings.append(f"{label}: values not decoded: {exc.reason}")
        serializers = None
    try:
        values = 0
        for i, cols in sp.store.scan(chunks, columns, label):
            values += _decoded_values(cols, serializers)
            if on_chunk is not None:
                on_chunk(i, cols)
    except _NOT_DAMAGE:
        raise
    except SavepointError:
        pass
    else:
        report.chunks += len(chunks)
        report.values += values
        return True
    for chunk in chunks:
        report.chunks += 1
        try:
            report.values += _decoded_values(sp.store.read_columns(chunk, columns, label), serializers)
        except _NOT_DAMAGE:
            raise
        except SavepointError as exc:
            report.errors.append(str(exc))
    return False


def _decoded_values(columns: list[pa.BinaryArray], serializers: list | None) -> int:
    """Decode every cell of a chunk's columns; the number of cells (0 when they stay opaque)."""
    if serializers is None:
        return 0
    for s, c in zip(serializers, columns):
        s.decode_array(c)
    return len(columns[0]) * len(columns)

