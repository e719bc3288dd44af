"""Savepoints as Spark DataFrames, through the Python Data Source API (pyspark >= 4.0).

::

    register(spark)
    counts = (spark.read.format("savepoint").option("operator", "url-counter")
              .option("state", "count").load("/savepoints/sp-1"))
    spark.read.format("savepoint-metadata").load("/savepoints/sp-1").show()

Options of ``savepoint``:

- ``operator``, ``state`` (required): the state to read; or (format 1.2), instead
  of ``state``, ``timer_service`` (and ``domain``, ``event_time`` or
  ``processing_time``, when both domains have a service of that name).
- ``raw`` = ``true``: the stored bytes as binary columns, nothing decoded (reads
  states whose serializer is not registered where Spark runs).
- ``target_parallelism`` = N: add ``subtask``, the subtask each row restores to
  at parallelism N (by key group for keyed state; by the restore plan's
  redistribution for list state, whose rows then are the lists each new subtask
  restores, UNION elements once per subtask).
- ``fragment_bytes``: stored bytes per Spark partition (default 64 MiB).

Keyed state reads as ``key_group, key[, namespace][, user_key], value
[, ttl_timestamp][, subtask]`` (namespace and TTL timestamp for namespaced and TTL
states, format 1.2), list state as ``subtask, index, value``, broadcast state as
``subtask, index, key, value`` and a timer service as ``key_group, key[, namespace],
timestamp[, subtask]`` (each distinct timer once), with Spark types from the
serializers' Arrow types. Spark partitions follow chunks: each carries only its chunks and
the manifest entries they need, and its task reads only those byte ranges.
:func:`pyref.spark.read_state` reads the same rows faster (:mod:`~pyref.spark.frames`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.pandas.types import from_arrow_type, to_arrow_schema
from pyspark.sql.types import StructField, StructType

from ..errors import InvalidArgumentError
from ..inspection import describe
from ..reader import Savepoint
from .fragments import DEFAULT_FRAGMENT_BYTES, Fragment, StateScan, fragment_batches


def spark_schema(schema: pa.Schema) -> StructType:
    """The Spark schema of an Arrow schema (every column nullable, as Spark's Arrow reads expect)."""
    return StructType([StructField(f.name, from_arrow_type(f.type), True) for f in schema])


class _Options:
    def __init__(self, options) -> None:
        self.path = options.get("path")
        if not self.path:
            raise InvalidArgumentError("give the savepoint location: .load(path)")
        self.operator = options.get("operator")
        self.state = options.get("state")
        self.timer_service = options.get("timer_service")
        self.domain = options.get("domain")
        self.raw = str(options.get("raw", "false")).lower() == "true"
        target = options.get("target_parallelism")
        self.target_parallelism = int(target) if target is not None else None
        self.fragment_bytes = int(options.get("fragment_bytes", DEFAULT_FRAGMENT_BYTES))

    def plan(self) -> StateScan:
        return StateScan.plan(self.path, self.operator, self.state, raw=self.raw,
                              target_parallelism=self.target_parallelism, fragment_bytes=self.fragment_bytes,
                              timer_service=self.timer_service, domain=self.domain)


class SavepointDataSource(DataSource):
    """``spark.read.format("savepoint")``: one state of a savepoint as a DataFrame."""

    @classmethod
    def name(cls) -> str:
        return "savepoint"

    def schema(self) -> StructType:
        return spark_schema(_Options(self.options).plan().schema)

    def reader(self, schema: StructType) -> DataSourceReader:
        return SavepointReader(_Options(self.options), schema)


class SavepointReader(DataSourceReader):
    def __init__(self, options: _Options, schema: StructType) -> None:
        self.options = options
        self.schema = schema

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(f) for f in self.options.plan().fragments]

    def read(self, partition: InputPartition | None) -> Iterator[pa.RecordBatch]:
        # A state without chunks has no partitions, and Spark still reads one: pyspark 4.0
        # passes None, later versions an InputPartition holding None.
        fragment: Fragment | None = partition.value if partition is not None else None
        if fragment is None:
            return
        batches = fragment_batches(fragment, raw=self.options.raw, target_parallelism=self.options.target_parallelism)
        yield from as_spark_batches(batches, self.schema)


def as_spark_batches(batches: Iterator[pa.RecordBatch], schema: StructType) -> Iterator[pa.RecordBatch]:
    """``batches`` with the Arrow schema Spark expects of ``schema`` (its own mapping:
    every field nullable), cast where they differ."""
    target = to_arrow_schema(schema)
    for batch in batches:
        yield batch if batch.schema.equals(target) else pa.Table.from_batches([batch]).cast(target).to_batches()[0]


_METADATA_SCHEMA = pa.schema([
    ("operator_id", pa.string()), ("operator_name", pa.string()), ("parallelism", pa.int32()),
    ("max_parallelism", pa.int32()), ("key_serializer", pa.string()), ("state", pa.string()),
    ("state_type", pa.string()), ("kind", pa.string()), ("mode", pa.string()), ("serializer", pa.string()),
    ("user_key_serializer", pa.string()), ("entries", pa.int64()), ("chunks", pa.int64()),
    ("stored_bytes", pa.int64()), ("raw_bytes", pa.int64()),
])


class SavepointMetadataDataSource(DataSource):
    """``spark.read.format("savepoint-metadata")``: one row per state (per operator
    without state): operators, states, kinds and modes, serializers, parallelism,
    max parallelism, entries (elements for list state), chunk counts and bytes."""

    @classmethod
    def name(cls) -> str:
        return "savepoint-metadata"

    def schema(self) -> StructType:
        return spark_schema(_METADATA_SCHEMA)

    def reader(self, schema: StructType) -> DataSourceReader:
        return _MetadataReader(_Options(self.options).path, schema)


class _MetadataReader(DataSourceReader):
    def __init__(self, path: str, schema: StructType) -> None:
        self.path = path
        self.schema = schema

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        rows = []
        for op in describe(Savepoint.open(self.path)).to_dict()["operators"]:
            common = {"operator_id": op["operator_id"], "operator_name": op["name"], "parallelism": op["parallelism"],
                      "max_parallelism": op["max_parallelism"], "key_serializer": op["key_serializer"]}
            timers = [{"name": ts["name"], "type": "timers", "kind": ts["domain"], "entries": ts["timers"],
                       "serializer": ts["namespace_serializer"], **{k: ts[k] for k in ("chunks", "stored_bytes",
                                                                                       "raw_bytes")}}
                      for ts in op["timer_services"]]
            for st in [*op["states"], *timers] or [{}]:
                rows.append({**common, "state": st.get("name"), "state_type": st.get("type"), "kind": st.get("kind"),
                             "mode": st.get("mode"), "serializer": st.get("serializer"),
                             "user_key_serializer": st.get("user_key_serializer"),
                             "entries": _entries(st),
                             "chunks": st.get("chunks"), "stored_bytes": st.get("stored_bytes"),
                             "raw_bytes": st.get("raw_bytes")})
        target = to_arrow_schema(self.schema)
        yield from pa.Table.from_pylist(rows, schema=_METADATA_SCHEMA).cast(target).to_batches()


def _entries(state: dict[Any, Any]) -> int | None:
    for per_partition in ("elements_per_partition", "entries_per_partition"):
        if per_partition in state:
            return sum(state[per_partition])
    return state.get("entries")


def register(spark: SparkSession) -> None:
    """Make ``format("savepoint")`` and ``format("savepoint-metadata")`` available on ``spark``."""
    spark.dataSource.register(SavepointDataSource)
    spark.dataSource.register(SavepointMetadataDataSource)
