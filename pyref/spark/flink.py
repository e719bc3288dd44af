"""Flink savepoints on Spark: import one in parallel, read its states as DataFrames.

::

    report = import_flink(spark, "/flink/savepoint-3f2a1c", "/savepoints/imported", uids=["url-counter"])
    counts = read_flink_state(spark, "/flink/savepoint-3f2a1c", "url-counter", "count")

:func:`import_flink` runs one Spark task per state handle (a subtask's operator
state, a subtask's keyed state): each plans the import exactly as the core
importer (:mod:`pyref.flink.import_plan`), transcodes its handle a run of key
groups at a time (:class:`pyref.flink.importer.OperatorColumns`) and writes
chunks with the core writer, never committing; the driver merges the tasks'
partial manifests and commits last, as :mod:`pyref.spark.commit` does, so a
failed import leaves the target as it was. Where a task meets data that asks
for another type (a null String...), the driver plans that place again and
runs the tasks again.

:func:`read_flink_state` reads one state of a Flink savepoint, one task per
subtask handle, with the columns ``spark.read.format("savepoint")`` gives a
pyref savepoint (keyed state ``key_group, key[, namespace][, user_key], value
[, ttl_timestamp]``, list state ``subtask, index, value``, broadcast state
``subtask, index, key, value``, timers ``key_group, key[, namespace],
timestamp``), keyed rows and timers with the ``subtask`` of Flink that held
them; values decoded through the types the import maps them to. ``raw=True``
gives Flink's stored bytes instead. :func:`pyref.spark.read_state` reads a
Flink savepoint through it when the path holds a Flink ``_metadata``, and
``spark.read.format("savepoint")`` through :class:`FlinkStateRead`.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from .._proto.savepoint.v1 import manifest_pb2 as pb
from ..errors import InvalidArgumentError, UnsupportedFormatError
from ..flink.import_plan import OperatorPlan, Place, plan_import
from ..flink.importer import (
    DEFAULT_BATCH_BYTES,
    ImportReport,
    OperatorColumns,
    OperatorImport,
    Replan,
    add_demotion,
    build_report,
    check_import_target,
    map_value_serializer,
)
from ..flink.keyed import TIMER_DOMAINS, TIMER_PREFIX
from ..flink.savepoint import FlinkOperator, FlinkSavepoint, flink_directory, timer_domain
from ..io import open_io
from ..serializers import Int64, ListOf
from ..ttl import TtlConfig, TtlValue, split_timestamps
from ..writer import delete_replaced, publish, read_previous
from .commit import Job, WriteOptions, adopt
from .datasource import as_spark_batches, spark_schema
from .frames import map_per_task
from .progress import Progress
from .sizing import sized_options
from .task_errors import typed_errors

__all__ = ["import_flink", "read_flink_state"]

Path = str | os.PathLike[str]


def _handles(plans: list[OperatorPlan]) -> list[tuple[str, int, str]]:
    """(hex operator id, subtask, "operator" or "keyed"): every state handle to import."""
    tasks = []
    for plan in plans:
        for sub in plan.flink.state.subtasks:
            if sub.managed_operator_state is not None and (plan.lists or plan.broadcasts):
                tasks.append((plan.flink.operator_id, sub.index, "operator"))
            if sub.managed_keyed_state is not None and plan.has_keyed:
                tasks.append((plan.flink.operator_id, sub.index, "keyed"))
    return tasks


def _open(source: str, options: dict[Any, Any]) -> FlinkSavepoint:
    """The import's source, opened as the task options say, on the driver and in every task."""
    return FlinkSavepoint.open(source, uids=options["uids"], allow_external_files=options["allow_external_files"])


def _import_task(job: Job, source: str, options: dict[Any, Any], demotions: dict[Any, Any], batch_bytes: int,
                 task: tuple[str, int, str]) -> tuple[bytes | None, dict[Any, Any], list[Replan]]:
    """One handle through the core writer, never committed: (the partial manifest, rows
    per state, places to plan again); no manifest when there are places."""
    operator_id, subtask, part = task
    with _open(source, options) as sp:
        plan = plan_import(sp, ttl=options["ttl"], ttl_default=options["ttl_default"],
                           skip_states=options["skip_states"], demotions=demotions, operators=[operator_id],
                           drop_in_flight_data=options["drop_in_flight_data"])[0]
        writer = job.writer()
        try:
            imp = OperatorImport(writer, plan)
            imp.writer.coordinator_state = None  # the driver writes it, once
            if part == "operator":
                imp.operator_subtask(subtask)
            else:
                for batch in plan.flink.keyed_subtasks(batch_bytes, subtask=subtask):
                    imp.keyed_batch(batch)
            if imp.replans:
                writer.abort()
                return None, {}, list(imp.replans.values())
            partial_manifest = writer.build_manifest()
        except BaseException:
            writer.abort()  # best effort; the driver deletes whatever is left
            raise
    return partial_manifest.SerializeToString(), dict(imp.rows), []


_REPLAN = pa.struct([(n, pa.string()) for n in ("operator", "state", "role", "kind", "detail")])
#: What an import task returns to the driver: the handle, its partial manifest (null when it
#: found places to plan again), its rows per state, and those places.
_IMPORT_RESULT = pa.schema([("operator_id", pa.string()), ("subtask", pa.int32()), ("part", pa.string()),
                           ("partial", pa.binary()), ("rows", pa.map_(pa.string(), pa.int64())),
                           ("replans", pa.list_(_REPLAN))])


def _import_tasks(run, rows: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for batch in rows:
        for task in batch.to_pylist():
            written, counts, replans = run((task["operator_id"], task["subtask"], task["part"]))
            yield pa.RecordBatch.from_pylist([{
                **task, "partial": written, "rows": list(counts.items()),
                "replans": [{"operator": r.place.operator, "state": r.place.state, "role": r.place.role,
                             "kind": r.kind, "detail": r.detail} for r in replans]}], schema=_IMPORT_RESULT)


def _run_import_tasks(spark: SparkSession, tasks: list[tuple[str, int, str]], run
                      ) -> list[tuple[bytes | None, dict, list[Replan]]]:
    """``run(task)`` of every state handle, one Spark task each, in the order of ``tasks``;
    results travel as plain rows (no pickled objects)."""
    if not tasks:
        return []
    with typed_errors():  # a task's pyref error is raised as itself
        written = map_per_task(spark, tasks, "operator_id string, subtask int, part string",
                               partial(_import_tasks, run), spark_schema(_IMPORT_RESULT)).collect()
    results = {(r.operator_id, r.subtask, r.part): (r.partial, dict(r.rows), [
        Replan(Place(p.operator, p.state, p.role), p.kind, p.detail) for p in r.replans])
        for r in written}
    return [results[task] for task in tasks]


def _merge(manifest: pb.Manifest, written: pb.Manifest) -> None:
    """Add a task's chunks to the states of the same names (its partitions to theirs)."""
    part = written.operators[0]
    op = next(o for o in manifest.operators if o.operator_id == part.operator_id)
    pairs = [(s, next(t for t in op.list_states if t.name == s.name)) for s in part.list_states]
    pairs += [(s, next(t for t in op.broadcast_states if t.name == s.name)) for s in part.broadcast_states]
    pairs += [(s, next(t for t in op.keyed_states if t.name == s.name)) for s in part.keyed_states]
    pairs += [(s, next(t for t in op.timer_services if (t.name, t.domain) == (s.name, s.domain)))
              for s in part.timer_services]
    adopted = iter(adopt(manifest, written, [c for s, _ in pairs for c in s.chunks]))
    for source, target in pairs:
        base = len(target.chunks)
        target.chunks.extend(next(adopted) for _ in source.chunks)
        if isinstance(source, (pb.ListState, pb.BroadcastState)):
            for i, partition in enumerate(source.partitions):
                target.partitions[i].ranges.extend(pb.ElementRange(chunk=base + r.chunk, first=r.first, count=r.count)
                                                   for r in partition.ranges)


def _sort_key_groups(manifest: pb.Manifest) -> None:
    for op in manifest.operators:
        for state in [*op.keyed_states, *op.timer_services]:
            chunks = sorted(state.chunks, key=lambda c: c.key_group)  # stable: a key group keeps its order
            del state.chunks[:]
            state.chunks.extend(chunks)


def import_flink(spark: SparkSession, source: Path, target: Path, *,
                 uids: Iterable[str] | Mapping[str, str] | None = None, ttl: Mapping[str, TtlConfig] | None = None,
                 ttl_default: TtlConfig | None = None, skip_states: Iterable[str] = (), overwrite: bool = False,
                 options: WriteOptions | None = None, batch_bytes: int = DEFAULT_BATCH_BYTES,
                 progress: bool = True, force: bool = False, target_file_bytes: int | None = None,
                 drop_in_flight_data: bool = False, allow_external_files: bool = False) -> ImportReport:
    """:func:`pyref.flink.import_flink` on Spark, one task per state handle. ``source``
    must be readable from every executor: an object store or HDFS URL, a shared
    file system, or a local path with a local master. ``force`` replaces a target
    shallow savepoints use as a base. ``target_file_bytes`` caps each task's data
    files (the tasks are the handles). ``drop_in_flight_data`` and ``allow_external_files``:
    as the core import's (the files outside must be readable from every executor too)."""
    started = time.monotonic()
    options, _ = sized_options(options, target_file_bytes)
    source = flink_directory(source)
    check_import_target(target)
    io = open_io(os.fspath(target))
    previous = read_previous(io, overwrite, force=force)
    task_options: dict[str, Any] = {"uids": uids if isinstance(uids, Mapping) or uids is None else list(uids),
                    "ttl": dict(ttl or {}), "ttl_default": ttl_default, "skip_states": list(skip_states),
                    "drop_in_flight_data": drop_in_flight_data, "allow_external_files": allow_external_files}
    demotions: dict[Place, str] = {}
    with Progress(spark, enabled=progress) as report, _open(source, task_options) as sp:
        for attempt in itertools.count(1):  # as the core import: each pass plans a place again, or commits
            plans = plan_import(sp, demotions=demotions, **{k: v for k, v in task_options.items()
                                                            if k not in ("uids", "allow_external_files")})
            tasks = _handles(plans)
            job = Job.new(io.location, options)
            report.step(f"import-flink: {len(tasks)} state handles of {len(plans)} operators"
                        + (f" (attempt {attempt})" if attempt > 1 else ""))
            try:
                results = _run_import_tasks(spark, tasks, partial(_import_task, job, source, task_options,
                                                                  dict(demotions), batch_bytes))
                replans = {r.place: r for _, _, found in results for r in found}  # tasks may share a place
                if replans:
                    job.delete_unreferenced(io, None)
                    for replan in replans.values():
                        add_demotion(demotions, replan)
                    continue
                writer = job.writer()  # the driver's: operators, serializers, coordinator state
                imports = [OperatorImport(writer, plan) for plan in plans]
                manifest = writer.build_manifest()
                for (operator_id, _, _), (written, rows, _) in sorted(zip(tasks, results), key=lambda t: t[0]):
                    _merge(manifest, pb.Manifest.FromString(written))
                    next(i for i in imports if i.plan.flink.operator_id == operator_id).rows.update(rows)
                _sort_key_groups(manifest)
                report.step("import-flink: committing")
                publish(io, manifest, previous, lambda: job.delete_unreferenced(io, None), force=force)
            except BaseException:
                job.delete_unreferenced(io, None)
                raise
            delete_replaced(io, manifest, previous)
            job.delete_unreferenced(io, manifest)  # files of retried task attempts
            return build_report(sp, target, manifest, imports, demotions, attempt, time.monotonic() - started)
    raise AssertionError("itertools.count() ended")


# -- reading -----------------------------------------------------------------------------


def _target(sp: FlinkSavepoint, operator: str, state: str | None, timer_service: str | None,
            domain: str | None) -> tuple[str, str]:
    """(hex operator id, Flink's name of the state or timer queue), from metadata alone."""
    op = sp.operator(operator)
    if (state is None) == (timer_service is None) or domain is not None and timer_service is None:
        raise InvalidArgumentError("give the state, or a timer_service (and its domain), not both")
    if state is not None:
        return op.operator_id, state
    _, infos = op.keyed_meta()
    assert timer_service is not None  # checked above: the state or a timer service
    wanted = None if domain is None else timer_domain(domain)
    queues = [TIMER_PREFIX + prefix + timer_service for prefix, name in TIMER_DOMAINS.items()
              if wanted in (None, name) and TIMER_PREFIX + prefix + timer_service in infos]
    if len(queues) != 1:
        services = sorted({name[len(TIMER_PREFIX) + len(prefix):] for name in infos for prefix in TIMER_DOMAINS
                           if name.startswith(TIMER_PREFIX + prefix)})
        raise InvalidArgumentError(f"{'no' if not queues else 'more than one (give domain)'} timer service "
                                   f"{timer_service!r} in operator {op.name} (its timer services: "
                                   f"{', '.join(map(repr, services)) or 'none'})")
    return op.operator_id, queues[0]


def _state_names(op: FlinkOperator) -> list[str]:
    """The names of an operator's list, broadcast and keyed states (not its timer queues), from
    metadata alone: what an error lists when a name matches none."""
    _, infos = op.keyed_meta()
    keyed = (name for name, info in infos.items() if info.backend_type != "PRIORITY_QUEUE")
    return sorted({*op.list_state_names, *op.broadcast_state_names, *keyed})


def _plan_one(source: str, uids, operator_id: str, name: str, allow_external_files: bool) -> OperatorPlan:
    with FlinkSavepoint.open(source, uids=uids, allow_external_files=allow_external_files) as sp:
        return plan_import(sp, operators=[operator_id], only=name,
                           demotions=dict.fromkeys(_nullable_places(sp, operator_id, name), "nullable"))[0]


def _nullable_places(sp: FlinkSavepoint, operator_id: str, name: str) -> list[Place]:
    """Reading, every place may hold a null (a null String, a null MAP value): the Arrow
    type is the same either way, so no pass is needed to find out."""
    op = next(o for o in sp.operators if o.operator_id == operator_id)
    roles = ("key", "namespace", "user_key", "value", "map_null", "element", "broadcast_key", "broadcast_value")
    return [Place(op.name, state, role) for state in ("", name) for role in roles]


def _subtask_column(n: int, subtask: int) -> pa.Array:
    return pa.array(np.full(n, subtask, np.int32))


def _keyed_rows(plan: OperatorPlan, subtask: int, raw: bool, batch) -> pa.RecordBatch | None:
    """A run of a subtask's rows of the planned keyed state or timer service: decoded, or
    (``raw``) Flink's bytes split into their parts (the reader's views)."""
    columns = OperatorColumns(plan)
    if raw:
        view = columns.keyed_view(plan.keyed[0], batch) if plan.keyed else columns.timer_view(plan.timers[0], batch)
        if view is None:
            return None
        table = view.to_arrow(raw=True)
        table = table.select([*table.column_names[1:], "subtask"]).combine_chunks()  # subtask last, as decoded
        return table.to_batches()[0]
    found = columns.keyed(plan.keyed[0], batch) if plan.keyed else columns.timers(plan.timers[0], batch)
    if found is None:
        return None
    encoded, groups = found
    decoded = _keyed_batch(plan, encoded, groups) if plan.keyed else _timer_batch(plan, encoded, groups)
    return pa.RecordBatch.from_arrays([*decoded.columns, _subtask_column(len(groups), subtask)],
                                      names=[*decoded.schema.names, "subtask"])


def _timer_batch(plan: OperatorPlan, encoded: list[pa.Array], groups: np.ndarray) -> pa.RecordBatch:
    """key_group, key, [namespace], timestamp."""
    p = plan.timers[0]
    arrays = [plan.keys().serializer.decode_array(encoded[0])]
    if p.namespace is not None:
        arrays.append(p.namespace.serializer.decode_array(encoded[1]))
    arrays.append(Int64().decode_array(encoded[-1]))
    names = ["key", *(["namespace"] if p.namespace else []), "timestamp"]
    return pa.record_batch([pa.array(groups, pa.int32()), *arrays], names=["key_group", *names])


def _keyed_batch(plan: OperatorPlan, encoded: list[pa.Array], groups: np.ndarray) -> pa.RecordBatch:
    """key_group, key, [namespace], [user_key], value, [ttl_timestamp]."""
    p = plan.keyed[0]
    serializers = [plan.keys().serializer, *([p.namespace.serializer] if p.namespace else []),
                   *([p.user_key.serializer] if p.user_key else [])]
    arrays = [s.decode_array(c) for s, c in zip(serializers, encoded)]
    names = ["key", *(["namespace"] if p.namespace else []), *(["user_key"] if p.user_key else []), "value"]
    value = map_value_serializer(p)
    cells = encoded[-1]
    if p.kind == "list" and p.ttl_cells:
        lists = [ListOf(TtlValue(value)).decode(c) for c in cells.to_pylist()]
        arrays.append(pa.array([[value._to_arrow_value(v) for _, v in cell] for cell in lists],
                               pa.list_(value.arrow_type())))
        arrays.append(pa.array([[t for t, _ in cell] for cell in lists], pa.list_(pa.int64())))
        names.append("ttl_timestamp")
    elif p.kind == "list":
        arrays.append(ListOf(value).decode_array(cells))
    elif p.ttl_cells:
        stamps, values = split_timestamps(cells)
        arrays += [value.decode_array(values), pa.array(stamps, pa.int64())]
        names.append("ttl_timestamp")
    else:
        arrays.append(value.decode_array(cells))
    return pa.record_batch([pa.array(groups, pa.int32()), *arrays], names=["key_group", *names])


def _operator_batch(plan: OperatorPlan, name: str, subtask: int, raw: bool) -> pa.RecordBatch | None:
    """A subtask's elements of the planned list state, or entries of its broadcast state."""
    stream = plan.flink.operator_stream(subtask)
    columns = OperatorColumns(plan)
    if plan.lists:
        elements = stream.elements.get(name) if stream is not None else None
        if elements is None or not len(elements):
            return None
        p = plan.lists[0]
        values = [elements if raw else p.element.serializer.decode_array(columns.list_elements(p, elements))]
        names = ["value"]
    else:
        entries = stream.broadcast.get(name) if stream is not None else None
        if entries is None or not len(entries[0]):
            return None
        b = plan.broadcasts[0]
        values = list(entries) if raw else [s.decode_array(c) for s, c in zip(
            (b.key.serializer, b.value.serializer), columns.broadcast_entries(b, *entries))]
        names = ["key", "value"]
    n = len(values[0])
    return pa.record_batch([_subtask_column(n, subtask), pa.array(np.arange(n, dtype=np.int64)), *values],
                           names=["subtask", "index", *names])


@dataclass(frozen=True)
class FlinkStateRead:
    """One state (or timer service) of a Flink savepoint planned for reading on the driver:
    what :func:`read_flink_state` and ``spark.read.format("savepoint")`` on a Flink path
    hand their tasks, each reading some of ``subtasks``."""

    source: str
    uids: list[str] | Mapping[str, str] | None
    operator_id: str
    name: str  # Flink's name of the state or timer queue
    raw: bool
    subtasks: tuple[int, ...]
    schema: StructType
    allow_external_files: bool = False  # FlinkSavepoint.open's

    @classmethod
    def plan(cls, path: Path, operator: str, state: str | None = None, *, timer_service: str | None = None,
             domain: str | None = None, uids: Iterable[str] | Mapping[str, str] | None = None,
             raw: bool = False, allow_external_files: bool = False) -> FlinkStateRead:
        source = flink_directory(path)
        uids = uids if isinstance(uids, Mapping) or uids is None else list(uids)
        with FlinkSavepoint.open(source, uids=uids, allow_external_files=allow_external_files) as sp:
            operator_id, name = _target(sp, operator, state, timer_service, domain)
            plan = _plan_one(source, uids, operator_id, name, allow_external_files)
            if not (plan.lists or plan.broadcasts or plan.keyed or plan.timers):
                names = _state_names(sp.operator(operator_id))
                raise InvalidArgumentError(f"operator {operator} has no state {name!r} (its states: "
                                           f"{', '.join(map(repr, names)) or 'none'})", path=source)
            subtasks = tuple(s.index for s in plan.flink.state.subtasks)
            return cls(source, uids, operator_id, name, raw, subtasks, spark_schema(_empty_schema(plan, name, raw)),
                       allow_external_files)

    def batches(self, subtasks: Iterable[int], batch_bytes: int = DEFAULT_BATCH_BYTES) -> Iterator[pa.RecordBatch]:
        """The rows ``subtasks`` held, as Arrow batches of :attr:`schema`."""
        plan = _plan_one(self.source, self.uids, self.operator_id, self.name, self.allow_external_files)
        if plan.lists or plan.broadcasts:
            batches = (_operator_batch(plan, self.name, s, self.raw) for s in subtasks)
        else:
            batches = (_keyed_rows(plan, s, self.raw, b) for s in subtasks
                       for b in plan.flink.keyed_subtasks(batch_bytes, s))
        try:
            yield from as_spark_batches((b for b in batches if b is not None), self.schema)
        except Replan as replan:  # text UTF-8 cannot hold, a POJO subclass: only Flink's bytes hold it
            raise UnsupportedFormatError(f"{replan}: the values cannot be decoded as their type; read them with "
                                         "raw=True", path=self.source, state=self.name) from None


def _read_task(read: FlinkStateRead, batch_bytes: int, rows: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    return read.batches([s for batch in rows for s in batch.column("subtask").to_pylist()], batch_bytes)


def read_flink_state(spark: SparkSession, path: Path, operator: str, state: str | None = None, *,
                     timer_service: str | None = None, domain: str | None = None,
                     uids: Iterable[str] | Mapping[str, str] | None = None, raw: bool = False,
                     batch_bytes: int = DEFAULT_BATCH_BYTES, allow_external_files: bool = False) -> DataFrame:
    """One state (or, with ``timer_service``, one timer service's timers) of the Flink
    savepoint at ``path`` as a DataFrame, one Spark task per subtask that holds it.
    ``operator`` is a uid, a name given in ``uids``, or the hex operator id.
    ``allow_external_files``: ``FlinkSavepoint.open``'s (a changelog checkpoint's DSTL files
    where Flink wrote them, readable from every executor)."""
    read = FlinkStateRead.plan(path, operator, state, timer_service=timer_service, domain=domain, uids=uids, raw=raw,
                               allow_external_files=allow_external_files)
    return map_per_task(spark, [(i,) for i in read.subtasks], "subtask int", partial(_read_task, read, batch_bytes),
                        read.schema)


def _empty_schema(plan: OperatorPlan, name: str, raw: bool) -> pa.Schema:
    """The columns of a read, from the plan alone."""
    if plan.lists or plan.broadcasts:
        if plan.lists:
            entry = [("value", pa.binary() if raw else plan.lists[0].element.serializer.arrow_type())]
        else:
            p = plan.broadcasts[0]
            entry = [("key", pa.binary() if raw else p.key.serializer.arrow_type()),
                     ("value", pa.binary() if raw else p.value.serializer.arrow_type())]
        return pa.schema([("subtask", pa.int32()), ("index", pa.int64()), *entry])
    if raw:
        parts = (["user_key", "value_is_null"] if plan.keyed and plan.keyed[0].kind == "map" else [])
        last = ["value"] if plan.keyed else ["timestamp"]
        types = {"value_is_null": pa.bool_(), "timestamp": pa.int64()}
        return pa.schema([("key_group", pa.int32()), *((n, types.get(n, pa.binary())) for n in
                                                       ["key", "namespace", *parts, *last]), ("subtask", pa.int32())])
    empty = pa.array([], pa.binary())
    if plan.timers:
        decoded = _timer_batch(plan, [empty] * (2 + (plan.timers[0].namespace is not None)), np.zeros(0, np.int64))
    else:
        k = plan.keyed[0]
        decoded = _keyed_batch(plan, [empty] * (2 + (k.namespace is not None) + (k.user_key is not None)),
                               np.zeros(0, np.int64))
    return decoded.schema.append(pa.field("subtask", pa.int32()))
