"""States as DataFrames from ``mapInArrow`` tasks over fragments.

::

    counts = read_state(spark, "/savepoints/sp-1", "url-counter", "count")

:func:`read_state` reads what ``spark.read.format("savepoint")`` reads, with the
same options and columns, but as a ``mapInArrow`` job: one task per fragment,
each yielding its fragment's Arrow batches. It is the faster of the two. Spark
plans a Python data source through extra Python workers and puts a row-by-row
copy (a ``Project``) over every Python data source scan, so the JVM handles each
row twice; a ``mapInArrow`` result is copied once. Use the data source where a
``format``/``load`` reader is wanted (SQL, configuration-driven pipelines) and
this where throughput matters.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from ..errors import InvalidArgumentError
from .datasource import as_spark_batches, spark_schema
from .fragments import DEFAULT_FRAGMENT_BYTES, FRAGMENT_SCHEMA, Fragment, Selection, StateScan, fragment_batches

#: Reads one fragment as Arrow batches, in a Spark task.
FragmentReader = Callable[[Fragment], Iterator[pa.RecordBatch]]
#: Turns a task's batches into its output (a writer returning its partial manifest, say).
BatchConsumer = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]


def _run(read: FragmentReader, consume: BatchConsumer | None, rows: Iterator[pa.RecordBatch]
         ) -> Iterator[pa.RecordBatch]:
    fragments = (Fragment.from_row(row) for batch in rows for row in batch.to_pylist())
    batches = (batch for fragment in fragments for batch in read(fragment))
    return batches if consume is None else consume(batches)


def map_per_task(spark: SparkSession, rows: Sequence[tuple], schema: str, fn: BatchConsumer,
                 output: StructType | str) -> DataFrame:
    """``fn`` run on each of ``rows`` (of the DDL ``schema``) in a Spark task of its own, as a
    ``mapInArrow`` function: given a batch holding its row, it yields batches of ``output``.

    The rows travel with the function (pyspark broadcasts a large one), each task picking
    its own by the id of a range with one id per partition: the same plan on classic Spark
    and Spark Connect, and no job runs before the tasks. (Joining the rows, broadcast, to
    such a range ran a broadcast job first, a good part of a small read's time.)"""
    arrow_schema = to_arrow_schema(spark.createDataFrame([], schema).schema)
    tasks = len(rows)
    return spark.range(0, tasks, 1, max(tasks, 1)).mapInArrow(
        partial(_task_rows, tuple(rows), arrow_schema, fn), output)


def _task_rows(rows: tuple[tuple, ...], schema: pa.Schema, fn: BatchConsumer, ids: Iterator[pa.RecordBatch]
               ) -> Iterator[pa.RecordBatch]:
    picked = [dict(zip(schema.names, rows[i])) for batch in ids for i in batch.column("id").to_pylist()]
    return fn(iter([pa.RecordBatch.from_pylist(picked, schema=schema)] if picked else []))


def fragment_tasks(spark: SparkSession, fragments: Sequence[Fragment], read: FragmentReader,
                   schema: StructType | str, consume: BatchConsumer | None = None) -> DataFrame:
    """The batches ``read`` makes of each fragment, in a Spark task of its own (one
    partition per fragment), passed through ``consume`` in that task if given."""
    return map_per_task(spark, [f.as_row() for f in fragments], FRAGMENT_SCHEMA, partial(_run, read, consume), schema)


def _spark_rows(raw: bool, target_parallelism: int | None, schema: StructType, selection: Selection,
                fragment: Fragment) -> Iterator[pa.RecordBatch]:
    batches = fragment_batches(fragment, raw=raw, target_parallelism=target_parallelism)
    return as_spark_batches((selection.rows(b) for b in batches), schema)


def read_state(spark: SparkSession, path: str | os.PathLike[str], operator: str, state: str | None = None, *,
               raw: bool = False, target_parallelism: int | None = None, fragment_bytes: int = DEFAULT_FRAGMENT_BYTES,
               timer_service: str | None = None, domain: str | None = None, keys: Sequence | None = None,
               key_groups: Iterable[int] | None = None, subtasks: Iterable[int] | None = None) -> DataFrame:
    """One state of the savepoint at ``path`` as a DataFrame, or (format 1.2, ``timer_service``
    instead of ``state``) one timer service's timers: the rows and columns of
    ``spark.read.format("savepoint")`` with the options of the same names. A Flink savepoint
    (a directory with a Flink ``_metadata``) is read by :func:`pyref.spark.flink.read_flink_state`.

    ``keys``, ``key_groups`` and ``subtasks`` keep only those rows, and plan only the chunks
    (list runs) that can hold them: a lookup of a few keys reads their key groups' chunks
    (and of those, with format 1.1 key bounds, only the ones whose bounds hold a key)."""
    from ..flink.import_cli import is_flink_savepoint

    if is_flink_savepoint(os.fspath(path)):
        # These plan a pyref savepoint's chunks; left unapplied they would return every row.
        given = [name for name, value in (("target_parallelism", target_parallelism), ("keys", keys),
                                          ("key_groups", key_groups), ("subtasks", subtasks)) if value is not None]
        if given:
            raise InvalidArgumentError(f"{', '.join(given)}: for pyref savepoints; filter a Flink savepoint's "
                                       "DataFrame (.where(...)) or import the Flink savepoint first",
                                       path=os.fspath(path))
        from .flink import read_flink_state

        return read_flink_state(spark, path, operator, state, timer_service=timer_service, domain=domain, raw=raw)
    selection = Selection(None if keys is None else tuple(keys),
                          None if key_groups is None else frozenset(int(g) for g in key_groups),
                          None if subtasks is None else frozenset(int(s) for s in subtasks))
    if keys is not None and raw:
        raise InvalidArgumentError("keys select decoded keys; read raw=True without them")
    scan = StateScan.plan(os.fspath(path), operator, state, raw=raw, target_parallelism=target_parallelism,
                          fragment_bytes=fragment_bytes, timer_service=timer_service, domain=domain,
                          selection=selection)
    schema = spark_schema(scan.schema)
    return fragment_tasks(spark, scan.fragments, partial(_spark_rows, raw, target_parallelism, schema, selection),
                          schema)
