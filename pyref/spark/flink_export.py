"""Exporting a savepoint to Flink on Spark: :func:`export_flink`.

The driver plans the export (:func:`pyref.flink.writer.plan_export`: every check
Flink could fail on, before anything is written); each Spark task writes the state
handles it is given, one keyed or operator-state stream per Flink subtask, into
the target directory (a state file, or the bytes themselves when small enough to
go inline) and returns the handle; the driver writes ``_metadata`` last and
atomically, as the core export does. A failed job deletes every file that appeared
in the target since it began, those of failed or retried task attempts included.

Tasks read their part of the source savepoint themselves; only handles (offsets,
file names, inline bytes up to the inline threshold) travel to the driver, as plain
rows (no pickled objects, no ``SparkContext``: the job runs on Spark Connect too). The
target must be a directory every executor and the driver see (local mode, or a
shared file system).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from functools import partial
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession

from ..flink.writer.directory import DEFAULT_INLINE_BYTES, StreamRef
from ..flink.writer.export import ExportResult, HandleTask, HandleWriter, prepare_export, publish
from ..flink.writer.metadata import KeyedHandle, OperatorHandle
from ..reader import Savepoint
from ..flink.handles import DistributionMode
from .datasource import spark_schema
from .frames import map_per_task
from .progress import Progress
from .task_errors import typed_errors

__all__ = ["export_flink"]


#: A task's written handle, as a row: the keyed stream's key-group offsets, or each operator
#: state's distribution mode (its name) and element offsets; the stream's file or inline bytes.
_HANDLE = pa.schema([
    ("task", pa.int32()), ("keyed", pa.bool_()), ("first_key_group", pa.int32()), ("offsets", pa.list_(pa.int64())),
    ("states", pa.list_(pa.struct([("name", pa.string()), ("mode", pa.string()), ("offsets", pa.list_(pa.int64()))]))),
    ("stream_name", pa.string()), ("stream_size", pa.int64()), ("stream_data", pa.binary()),
])


def _handle_row(index: int, handle: KeyedHandle | OperatorHandle) -> dict[str, Any]:
    stream = {"stream_name": handle.stream.name, "stream_size": handle.stream.size, "stream_data": handle.stream.data}
    if isinstance(handle, KeyedHandle):
        return {"task": index, "keyed": True, "first_key_group": handle.first_key_group,
                "offsets": list(handle.offsets), "states": None, **stream}
    return {"task": index, "keyed": False, "first_key_group": None, "offsets": None, **stream,
            "states": [{"name": name, "mode": mode.name, "offsets": list(offsets)}
                       for name, (mode, offsets) in handle.states.items()]}


def _handle_of(row: Any) -> KeyedHandle | OperatorHandle:
    stream = StreamRef(row.stream_name, row.stream_size, row.stream_data)
    if row.keyed:
        return KeyedHandle(row.first_key_group, tuple(row.offsets), stream)
    return OperatorHandle({s.name: (DistributionMode[s.mode], tuple(s.offsets)) for s in row.states}, stream)


def _write_handles(location: str, flink_version: str, directory: str, file_prefix: str, inline_bytes: int,
                   rows: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    writer = HandleWriter(Savepoint.open(location), flink_version, directory, file_prefix, inline_bytes)
    for batch in rows:
        for task in batch.to_pylist():
            handle = writer.write(HandleTask(task["operator_id"], task["subtask"], task["parallelism"], task["keyed"]))
            yield pa.RecordBatch.from_pylist([_handle_row(task["handle"], handle)], schema=_HANDLE)


def export_flink(spark: SparkSession, source: str | os.PathLike[str], target: str | os.PathLike[str], *,
                 flink_version: str, parallelism: int | Mapping[str, int] | None = None,
                 operators: Iterable[str] | None = None, inline_bytes: int = DEFAULT_INLINE_BYTES,
                 overwrite: bool = False, checkpoint_id: int = 1, progress: bool = True) -> ExportResult:
    """:func:`pyref.flink.export_savepoint` as a Spark job: one task per state handle."""
    sp, plan, directory = prepare_export(source, target, flink_version=flink_version, parallelism=parallelism,
                                         operators=operators, inline_bytes=inline_bytes, overwrite=overwrite,
                                         checkpoint_id=checkpoint_id)
    tasks = plan.tasks()
    with Progress(spark, enabled=progress) as report:
        try:
            report.step(f"export to Flink {flink_version}: {len(tasks)} state handles of {len(plan.operators)} "
                        "operators")
            write = partial(_write_handles, sp.location, flink_version, directory.path, directory.file_prefix,
                            inline_bytes)
            with typed_errors():  # a task's pyref error is raised as itself
                written = map_per_task(spark, [(i, t.operator_id, t.subtask, t.parallelism, t.keyed)
                                               for i, t in enumerate(tasks)],
                                       "handle int, operator_id string, subtask int, parallelism int, keyed boolean",
                                       write, spark_schema(_HANDLE)).collect()
            handles = {tasks[row.task]: _handle_of(row) for row in written}
            report.step("writing _metadata")
            return publish(sp, plan, directory, handles)
        except BaseException:
            directory.abort()
            raise
