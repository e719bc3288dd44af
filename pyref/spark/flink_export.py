"""Exporting a savepoint to Flink on Spark: :func:`export_flink`.

The driver plans the export (:func:`pyref.flink.writer.plan_export`: every check
Flink could fail on, before anything is written); each Spark task writes the state
handles it is given, one keyed or operator-state stream per Flink subtask, into
the target directory (a state file, or the bytes themselves when small enough to
go inline) and returns the handle; the driver writes ``_metadata`` last and
atomically, as the core export does. A failed job deletes every file that appeared
in the target since it began, those of failed or retried task attempts included.

Tasks read their part of the source savepoint themselves; only handles (offsets,
file names, inline bytes up to the inline threshold) travel to the driver. The
target must be a directory every executor and the driver see (local mode, or a
shared file system).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from functools import partial

from pyspark.sql import SparkSession

from ..flink.writer.directory import DEFAULT_INLINE_BYTES, ExportDirectory
from ..flink.writer.export import ExportResult, HandleTask, HandleWriter, plan_export, publish
from ..flink.writer.metadata import KeyedHandle, OperatorHandle
from ..reader import Savepoint
from .progress import Progress

__all__ = ["export_flink"]


def _write_handles(location: str, flink_version: str, directory: str, inline_bytes: int,
                   tasks: Iterable[tuple[int, HandleTask]]) -> Iterator[tuple[int, KeyedHandle | OperatorHandle]]:
    writer = HandleWriter(Savepoint.open(location), flink_version, directory, inline_bytes)
    for index, task in tasks:
        yield index, writer.write(task)


def export_flink(spark: SparkSession, source: str | os.PathLike[str], target: str | os.PathLike[str], *,
                 flink_version: str, parallelism: int | Mapping[str, int] | None = None,
                 operators: Iterable[str] | None = None, inline_bytes: int = DEFAULT_INLINE_BYTES,
                 overwrite: bool = False, checkpoint_id: int = 1, progress: bool = True) -> ExportResult:
    """:func:`pyref.flink.export_savepoint` as a Spark job: one task per state handle."""
    sp = Savepoint.open(source)
    plan = plan_export(sp, flink_version, parallelism, operators, checkpoint_id)
    directory = ExportDirectory(os.fspath(target), overwrite=overwrite)
    tasks = plan.tasks()
    with Progress(spark, enabled=progress) as report:
        try:
            report.step(f"export to Flink {flink_version}: {len(tasks)} state handles of {len(plan.operators)} "
                        "operators")
            rdd = spark.sparkContext.parallelize(list(enumerate(tasks)), max(len(tasks), 1))
            written = rdd.mapPartitions(partial(_write_handles, sp.location, flink_version, directory.path, inline_bytes)).collect()
            handles = {tasks[index]: handle for index, handle in written}
            report.step("writing _metadata")
            return publish(sp, plan, directory, handles)
        except BaseException:
            directory.abort()
            raise
