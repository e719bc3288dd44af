"""Savepoints as Spark DataFrames, through the Python Data Source API (pyspark >= 4.0).

::

    register(spark)
    counts = (spark.read.format("savepoint").option("operator", "url-counter")
              .option("state", "count").load("/savepoints/sp-1"))
    spark.read.format("savepoint-metadata").load("/savepoints/sp-1").show()

Options of ``savepoint`` reads (names as Spark matches them, without regard to case; the
snake_case names of pyref 1.x, ``target_parallelism`` and so on, are accepted too; any other
name is an error naming the valid ones):

- ``operator``, ``state`` (required): the state to read; or (format 1.2), instead
  of ``state``, ``timerService`` (and ``domain``, ``event_time`` or
  ``processing_time``, when both domains have a service of that name).
- ``raw`` = ``true``: the stored bytes as binary columns, nothing decoded (reads
  states whose serializer is not registered where Spark runs).
- ``targetParallelism`` = N: add ``subtask``, the subtask each row restores to
  at parallelism N (by key group for keyed state; by the restore plan's
  redistribution for list state, whose rows then are the lists each new subtask
  restores, UNION elements once per subtask).
- ``fragmentBytes``: stored bytes per Spark partition (default 64 MiB).
- ``pushFilters`` = ``true``: take Spark's filters on ``key``, ``key_group`` and
  ``subtask`` and plan only the chunks that can hold their rows (:class:`FilteringSavepointReader`).
- ``allowExternalFiles`` = ``true`` (a Flink savepoint or checkpoint only): read state files
  outside its directory where its handles name them (a changelog checkpoint's DSTL files where
  Flink wrote them), as ``read_flink_state(allow_external_files=True)`` does.

A ``.schema(...)`` must be the state's own columns; it is checked where Spark plans the read.
``df.write.format("savepoint")`` writes one state (:mod:`pyref.spark.sink`).

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

import operator
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, overload

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceWriter, InputPartition
from pyspark.sql.pandas.types import from_arrow_type, to_arrow_schema
from pyspark.sql.types import StructField, StructType

from ..errors import InvalidArgumentError
from ..flink.savepoint import is_flink_savepoint
from ..inspection import describe
from ..reader import Savepoint
from .fragments import DEFAULT_FRAGMENT_BYTES, Fragment, Selection, StateScan, fragment_batches

if TYPE_CHECKING:
    from .flink import FlinkStateRead
    from .session import AnySparkSession


def spark_schema(schema: pa.Schema) -> StructType:
    """The Spark schema of an Arrow schema (every column nullable, as Spark's Arrow reads expect)."""
    return StructType([StructField(f.name, from_arrow_type(_signed(f.type)), True) for f in schema])


def _signed(t: pa.DataType) -> pa.DataType:
    """``t`` with a ``char``'s UTF-16 code unit (uint16, which Spark has no type for) as int32,
    nested ones included; :func:`as_spark_batches` casts the values, losslessly."""
    if pa.types.is_uint16(t):
        return pa.int32()
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(_signed(t.value_type))
    if pa.types.is_map(t):
        return pa.map_(_signed(t.key_type), _signed(t.item_type))
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_signed(f.type)) for f in t])
    return t


#: Options of ``format("savepoint")`` reads, as documented (Spark matches option names
#: without regard to case); the snake_case names of pyref 1.x are accepted too.
READ_OPTIONS = ("path", "operator", "state", "timerService", "domain", "raw", "targetParallelism", "fragmentBytes",
                "pushFilters", "allowExternalFiles")


def option_values(options, valid: Sequence[str], what: str) -> dict[str, str]:
    """``options`` by their documented names; an unknown name is an error naming the valid
    ones (a typo must not read, or write, something else than asked)."""
    by_key = {name.lower(): name for name in valid}
    by_key.update({_snake(name): name for name in valid})
    values, unknown = {}, []
    for key, value in dict(options).items():
        name = by_key.get(key.lower())
        if name is None:
            unknown.append(key)
        else:
            values[name] = value
    if unknown:
        raise InvalidArgumentError(f"unknown option{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} "
                                   f"of format(\"savepoint\") {what}; valid options: {', '.join(valid)}")
    return values


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


@overload
def int_option(values: dict[str, str], name: str, default: int) -> int: ...
@overload
def int_option(values: dict[str, str], name: str, default: None = None) -> int | None: ...
def int_option(values: dict[str, str], name: str, default: int | None = None) -> int | None:
    """Option ``name`` as a whole number >= 1, ``default`` when not given."""
    text = values.get(name)
    if text is None:
        return default
    try:
        number = int(text)
    except ValueError:
        raise InvalidArgumentError(f"option {name!r} takes a whole number, got {text!r}") from None
    if number < 1:
        raise InvalidArgumentError(f"option {name!r} must be at least 1, got {number}")
    return number


def bool_option(values: dict[str, str], name: str) -> bool:
    text = str(values.get(name, "false")).lower()
    if text not in ("true", "false"):
        raise InvalidArgumentError(f"option {name!r} is true or false, got {values[name]!r}")
    return text == "true"


class _Options:
    def __init__(self, options) -> None:
        values = option_values(options, READ_OPTIONS, "reads")
        path = values.get("path")
        if not path:
            raise InvalidArgumentError("give the savepoint location: .load(path)")
        self.path = path
        self.operator = values.get("operator")
        self.state = values.get("state")
        self.timer_service = values.get("timerService")
        self.domain = values.get("domain")
        self.raw = bool_option(values, "raw")
        self.target_parallelism = int_option(values, "targetParallelism")
        self.fragment_bytes = int_option(values, "fragmentBytes", DEFAULT_FRAGMENT_BYTES)
        self.push_filters = bool_option(values, "pushFilters")
        self.allow_external_files = bool_option(values, "allowExternalFiles")
        self.flink = is_flink_savepoint(path)
        pyref_only = [o for o in ("targetParallelism", "fragmentBytes", "pushFilters") if o in values]
        if self.flink and pyref_only:  # they plan a pyref savepoint's chunks
            raise InvalidArgumentError(f"option {', '.join(map(repr, pyref_only))}: for pyref savepoints; filter a "
                                       "Flink savepoint's DataFrame (.where(...)) or import it first", path=path)
        if not self.flink and "allowExternalFiles" in values:  # a pyref savepoint's files are its own or its bases'
            raise InvalidArgumentError("option 'allowExternalFiles': for Flink savepoints and checkpoints", path=path)
        if self.push_filters and not hasattr(DataSourceReader, "pushFilters"):  # pyspark 4.0 would ignore it
            raise InvalidArgumentError("option 'pushFilters' needs pyspark >= 4.1 (filter pushdown into Python data "
                                       "sources); read_state(keys=..., key_groups=..., subtasks=...) selects chunks "
                                       "on any pyspark", path=path)

    def flink_read(self) -> FlinkStateRead:
        from .flink import FlinkStateRead  # it builds on this module

        if not self.operator:
            raise InvalidArgumentError("option 'operator' is required", path=self.path)
        return FlinkStateRead.plan(self.path, self.operator, self.state, timer_service=self.timer_service,
                                   domain=self.domain, raw=self.raw, allow_external_files=self.allow_external_files)

    def plan(self, selection: Selection | None = None) -> StateScan:
        return StateScan.plan(self.path, self.operator, self.state, raw=self.raw,
                              target_parallelism=self.target_parallelism, fragment_bytes=self.fragment_bytes,
                              timer_service=self.timer_service, domain=self.domain, selection=selection)


class SavepointDataSource(DataSource):
    """``spark.read.format("savepoint")``: one state of a savepoint as a DataFrame."""

    @classmethod
    def name(cls) -> str:
        return "savepoint"

    def schema(self) -> StructType:
        options = _Options(self.options)
        return options.flink_read().schema if options.flink else spark_schema(options.plan().schema)

    def reader(self, schema: StructType) -> DataSourceReader:
        options = _Options(self.options)
        if options.flink:  # a Flink savepoint's state: read_flink_state's rows, a partition per subtask
            read = options.flink_read()
            check_user_schema(schema, read.schema)
            return FlinkStateReader(read)
        check_user_schema(schema, spark_schema(options.plan().schema))
        return (FilteringSavepointReader if options.push_filters else SavepointReader)(options, schema)


    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        """``df.write.format("savepoint")``: :mod:`pyref.spark.sink`."""
        from .sink import plan_write  # it builds on this module

        return plan_write(self.options, schema, overwrite)


def check_user_schema(given: StructType, actual: StructType) -> None:
    """A user's ``.schema(...)`` must be the state's columns (names and types), checked where
    Spark plans the read rather than failing in its tasks."""
    if [(f.name, f.dataType) for f in given.fields] != [(f.name, f.dataType) for f in actual.fields]:
        raise InvalidArgumentError(f"the given schema {given.simpleString()} is not this state's "
                                   f"{actual.simpleString()}; leave out .schema(...) to read it as stored")


class SavepointReader(DataSourceReader):
    """Reads one state's fragments (those its :class:`~pyref.spark.fragments.Selection` keeps)."""

    def __init__(self, options: _Options, schema: StructType) -> None:
        self.options = options
        self.schema = schema
        self.selection = Selection()

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(f) for f in self.options.plan(self.selection).fragments]

    def read(self, partition: InputPartition | None) -> Iterator[pa.RecordBatch]:
        # A state without chunks has no partitions, and Spark still reads one: pyspark 4.0
        # passes None, later versions an InputPartition holding None.
        fragment: Fragment | None = partition.value if partition is not None else None
        if fragment is None:
            return
        batches = fragment_batches(fragment, raw=self.options.raw, target_parallelism=self.options.target_parallelism)
        yield from as_spark_batches((self.selection.rows(b) for b in batches), self.schema)


class FlinkStateReader(DataSourceReader):
    """One state of a Flink savepoint (:class:`pyref.spark.flink.FlinkStateRead`): a partition per subtask."""

    def __init__(self, planned: FlinkStateRead) -> None:
        self.planned = planned

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(s) for s in self.planned.subtasks]

    def read(self, partition: InputPartition | None) -> Iterator[pa.RecordBatch]:
        subtask: int | None = partition.value if partition is not None else None  # None: as SavepointReader
        if subtask is not None:
            yield from self.planned.batches([subtask])


# Spark's filters by class name: pyspark 4.0 has no filter classes (nor pushdown) to import.
_COMPARISONS = {"GreaterThan": operator.gt, "GreaterThanOrEqual": operator.ge, "LessThan": operator.lt,
                "LessThanOrEqual": operator.le}


class FilteringSavepointReader(SavepointReader):
    """With ``pushFilters`` = ``true``: takes Spark's filters on ``key`` (= and IN), ``key_group``
    (=, IN, <, <=, >, >=) and ``subtask`` (= and IN) to plan only the chunks that may hold
    their rows. Opt-in: pyspark (4.1 to at least 4.3.0) keeps the last pushed-down scan's
    partitions and reader on the DataFrame's data source (the JVM's PythonDataSourceV2), and
    a later query of the same DataFrame that pushes no filter reads them too (README)."""

    def pushFilters(self, filters: list) -> Iterator:
        scan = self.options.plan()
        names = set(scan.schema.names)
        key_type = scan.schema.field("key").type if "key" in names else None
        keyed = "key_group" in names and not self.options.raw and not scan.writer_assigned_key_groups
        pushable = key_type if keyed and key_type is not None and not pa.types.is_struct(key_type) else None
        for f in filters:
            narrowed = _narrowed(self.selection, f, names, pushable, scan.max_parallelism)
            if narrowed is None:
                yield f  # Spark evaluates it
            else:
                self.selection = narrowed


def _values(f) -> tuple | None:
    """The values an = or IN filter accepts (None for other filters)."""
    kind = type(f).__name__
    if kind == "EqualTo":
        return (f.value,)
    if kind == "In":
        return tuple(f.value)
    return None


def _narrowed(selection: Selection, f, names: set[str], key_type: pa.DataType | None, max_parallelism: int
              ) -> Selection | None:
    """``selection`` narrowed by filter ``f``, or None when the read cannot apply ``f`` itself;
    ``key_type``: the Arrow type of keys a filter on ``key`` selects (None: it cannot)."""
    attribute: tuple[str, ...] = getattr(f, "attribute", ())  # Not has a child filter instead
    column = attribute[0] if len(attribute) == 1 else None
    values = _values(f)
    if column == "key" and key_type is not None and values is not None and None not in values:
        keys = {repr(k): k for k in _spark_equal_keys(values, key_type)}  # repr: tells -0.0 from 0.0
        if selection.keys is not None:
            kept = {repr(k) for k in selection.keys}
            keys = {r: k for r, k in keys.items() if r in kept}
        return replace(selection, keys=tuple(sorted(keys.values(), key=repr)))
    if column == "subtask" and "subtask" in names and values is not None:
        subtasks = frozenset(int(v) for v in values if v is not None)
        return replace(selection, subtasks=subtasks if selection.subtasks is None else selection.subtasks & subtasks)
    if column == "key_group" and "key_group" in names:
        groups = _key_groups(f, values, max_parallelism)
        if groups is None:
            return None
        return replace(selection, key_groups=groups if selection.key_groups is None else selection.key_groups & groups)
    return None


def _spark_equal_keys(values: tuple, key_type: pa.DataType) -> list:
    """The stored keys Spark's = or IN of ``values`` matches. A char's column is Spark's int:
    a number beyond a code unit (0..65535) matches no key. Spark's float equality holds
    -0.0 = 0.0, where Flink's keys (and their key groups) differ: both are looked up."""
    if pa.types.is_uint16(key_type):
        return [v for v in values if not isinstance(v, int) or 0 <= v <= 0xFFFF]
    if pa.types.is_floating(key_type):
        return [*values, *(-v for v in values if v == 0)]
    return list(values)


def _key_groups(f, values: tuple | None, max_parallelism: int) -> frozenset[int] | None:
    every = range(max_parallelism)
    if values is not None:
        return frozenset(int(v) for v in values if v is not None and 0 <= int(v) < max_parallelism)
    compare = _COMPARISONS.get(type(f).__name__)
    return frozenset(g for g in every if compare(g, f.value)) if compare is not None else None


def as_spark_batches(batches: Iterator[pa.RecordBatch], schema: StructType) -> Iterator[pa.RecordBatch]:
    """``batches`` with the Arrow schema Spark expects of ``schema`` (its own mapping:
    every field nullable), cast where they differ."""
    target = to_arrow_schema(schema)
    for batch in batches:
        if batch.schema.equals(target):
            yield batch
        else:
            yield pa.RecordBatch.from_arrays([_cast(c, f.type) for c, f in zip(batch.columns, target)], schema=target)


def _cast(array: pa.Array, target: pa.DataType) -> pa.Array:
    """``array`` as ``target``. A map is rebuilt from its cast keys and items (and a struct or
    list holding one from its cast children): pyarrow before 15 aborts the process casting a map."""
    if array.type.equals(target) or not _holds_map(target):
        return array.cast(target)
    mask = array.is_null() if array.null_count else None
    if pa.types.is_struct(target):
        return pa.StructArray.from_arrays([_cast(array.field(i), f.type) for i, f in enumerate(target)],
                                          fields=list(target), mask=mask)
    # Always a new array at offset 0: pyarrow 14's MapArray.from_arrays misreads a slice's offsets (a sliced
    # struct's map column failed validation). A null offset marks a null list or map.
    offsets = pa.array(array.offsets.to_numpy(), mask=None if mask is None else
                       np.append(mask.to_numpy(zero_copy_only=False), False))
    if pa.types.is_map(target):
        return pa.MapArray.from_arrays(offsets, _cast(array.keys, target.key_type), _cast(array.items, target.item_type))
    return pa.ListArray.from_arrays(offsets.cast(pa.int32()), _cast(array.values, target.value_type))


def _holds_map(t: pa.DataType) -> bool:
    if pa.types.is_map(t):
        return True
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _holds_map(t.value_type)
    return pa.types.is_struct(t) and any(_holds_map(f.type) for f in t)


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
        values = option_values(self.options, ("path",), "metadata reads")
        if not values.get("path"):
            raise InvalidArgumentError("give the savepoint location: .load(path)")
        return _MetadataReader(values["path"], schema)


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


def register(spark: AnySparkSession) -> None:
    """Make ``format("savepoint")`` and ``format("savepoint-metadata")`` available on ``spark``,
    and turn on Spark's filter pushdown to Python data sources (pyspark >= 4.1), without which
    Spark refuses a reader that takes filters (the setting is unknown to, and ignored by, 4.0)."""
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    spark.dataSource.register(SavepointDataSource)
    spark.dataSource.register(SavepointMetadataDataSource)
