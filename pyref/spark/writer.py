"""Building savepoints with Spark: bootstrap from DataFrames, or edit an existing one.

::

    with SavepointBuilder(spark, "/savepoints/bootstrap") as b:
        b.add_operator("url-counter", parallelism=2, key_serializer=String())
        b.add_keyed_state("url-counter", "count", counts_df, Int64())      # columns key, value
        b.add_operator("kafka-source", parallelism=2)
        b.add_list_state("kafka-source", "offsets", offsets_df, Int64())   # columns subtask, value

    with SavepointBuilder(spark, "/savepoints/sp-2", source="/savepoints/sp-1") as b:
        b.remove_state("url-counter", "legacy")
        b.rename_operator("kafka-source", "kafka-source-v2")

Format 1.2: keyed state takes a namespace and a TTL column, :meth:`SavepointBuilder.add_timers`
writes a timer service (its rows by key group, like keyed state),
:meth:`~SavepointBuilder.add_broadcast_state` a broadcast map, and
:meth:`~SavepointBuilder.set_coordinator_state` an operator's coordinator state.

Each state is written by a Spark job whose tasks write chunks in parallel
(:mod:`pyref.spark.commit`); nothing of the state reaches the driver, and
nothing is visible at the target until :meth:`SavepointBuilder.commit`. Edits
of an existing savepoint are shallow by default, as in :mod:`pyref.rewrite`:
the new savepoint refers to the source's data files for every state it keeps
(so it must be a sibling of the source); ``copy=True`` copies those chunks, in
parallel, byte for byte.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, cast

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import IntegerType, StructField, StructType
from pyspark.sql.udf import UserDefinedFunction
from pyspark.util import PythonEvalType

from .. import __version__
from .._proto.savepoint.v1 import manifest_pb2 as pb
from ..errors import InvalidArgumentError
from ..io import open_io
from ..key_groups import check_parallelism, compute_key_groups, default_max_parallelism
from ..keys import as_key_array, key_type_of
from ..manifest import state_label
from ..descriptions import KIND_NAMES
from ..reader import Savepoint
from ..redistribution import DistributionMode
from ..restore import resolve_parallelism
from ..rewrite import Derivation, check_target, referenced_chunks_only, rescaled_operator
from ..chunk import encode_chunk
from ..serializers import Bytes, Serializer, serializer_from_snapshot
from ..timers import domain_of, find_timer_service
from ..ttl import TtlConfig
from ..writer import OperatorWriter, delete_replaced, publish, read_previous
from .commit import (
    FragmentRows,
    Job,
    WriteOptions,
    adopt,
    map_chunks,
    merge_keyed,
    merge_list,
    replace_chunks,
    write_fragment_partials,
    write_partials,
)
from .fragments import DEFAULT_FRAGMENT_BYTES, chunk_fragments, find_state, keyed_names, timer_names
from .duplicates import ORDER, resolve_duplicates, unique_rows
from .progress import Progress
from .session import is_connect
from .sizing import sized_options, task_size
from .task_errors import typed_errors

_KINDS = {name: kind for kind, name in KIND_NAMES.items()}


def _key_column(column: pa.Array, key_serializer: Serializer) -> pa.Array:
    """Keys as the key serializer's Arrow type (a Spark LongType column for int32 keys, say).
    Only within a kind of type: a number cast to a string key would be another key than meant."""
    wanted = key_serializer.arrow_type()
    if column.type != wanted and not pa.types.is_struct(wanted):  # tuple keys hash by position
        if _type_kind(column.type) != _type_kind(wanted):
            raise InvalidArgumentError(f"the key column is of type {column.type}; keys of "
                                       f"{key_serializer.serializer_id} are {wanted}")
        try:
            column = column.cast(wanted)  # a safe cast: a key beyond the key type's range is refused
        except pa.ArrowInvalid as exc:
            raise InvalidArgumentError(f"a key does not fit the {key_serializer.serializer_id} key serializer: "
                                       f"{exc}") from None
    return as_key_array(column, key_serializer)


def _type_kind(t: pa.DataType) -> str:
    for kind, test in (("integer", pa.types.is_integer), ("floating", pa.types.is_floating),
                       ("string", pa.types.is_string), ("string", pa.types.is_large_string),
                       ("binary", pa.types.is_binary), ("binary", pa.types.is_large_binary)):
        if test(t):
            return kind
    return str(t)


def _key_groups_of(key_serializer: Serializer, max_parallelism: int, keys: pa.Array) -> pa.Array:
    """The key group of each key (Spark's column of the keys), as an int32 array."""
    groups = compute_key_groups(_key_column(keys, key_serializer), max_parallelism,
                                key_type_of(key_serializer.snapshot()))
    return pa.array(groups, pa.int32())


def _with_key_groups(key_serializer: Serializer, max_parallelism: int, batches):
    for batch in batches:
        groups = _key_groups_of(key_serializer, max_parallelism, batch.column("key"))
        yield pa.record_batch([groups, *batch.columns], names=["key_group", *batch.schema.names])


def _key_group_udf(df: DataFrame, key_serializer: Serializer, max_parallelism: int) -> Callable[..., Any] | None:
    """An Arrow UDF of the keys' key groups, of the DataFrame's kind (classic or Spark Connect);
    None on pyspark 4.0, which has no Arrow UDFs. Spark sends such a UDF the key column only
    and keeps the other columns in the JVM, where a ``mapInArrow`` of the rows would send
    every column to Python and back: the values, most of the bytes, crossed twice for nothing.
    (Made with the UDF class of the session's kind: ``pyspark.sql.functions.arrow_udf`` picks
    Spark Connect in any process that has a Connect session, whatever the DataFrame.)"""
    eval_type = getattr(PythonEvalType, "SQL_SCALAR_ARROW_UDF", None)
    if eval_type is None:
        return None
    if is_connect(df.sparkSession):
        from pyspark.sql.connect.udf import UserDefinedFunction as ConnectFunction

        return ConnectFunction(partial(_key_groups_of, key_serializer, max_parallelism), IntegerType(),
                               name="pyref_key_group", evalType=eval_type)
    return UserDefinedFunction(partial(_key_groups_of, key_serializer, max_parallelism), IntegerType(),
                               name="pyref_key_group", evalType=eval_type)


@dataclass(frozen=True)
class _Shape:
    """What a task's writer needs of an operator (protobuf messages do not pickle)."""

    operator_id: str
    parallelism: int
    max_parallelism: int
    key_serializer: Serializer | None
    key_groups: str = "hashed"

    @classmethod
    def of(cls, op: pb.Operator) -> _Shape:
        key_serializer = serializer_from_snapshot(op.key_serializer) if op.HasField("key_serializer") else None
        return cls(op.operator_id, op.parallelism, op.max_parallelism, key_serializer,
                   "writer" if op.key_groups == pb.KEY_GROUPS_FROM_WRITER else "hashed")

    def open(self, writer) -> OperatorWriter:
        return writer.add_operator(self.operator_id, self.parallelism, max_parallelism=self.max_parallelism,
                                   key_serializer=self.key_serializer, key_groups=self.key_groups)


def _open_keyed(shape: _Shape, name: str, kind: str, value_serializer: Serializer,
                user_key_serializer: Serializer | None, namespace_serializer: Serializer | None, ttl: TtlConfig | None,
                writer):
    return shape.open(writer).keyed_state(name, value_serializer, kind=kind, user_key_serializer=user_key_serializer,
                                          namespace_serializer=namespace_serializer, ttl=ttl)


def _given_key_groups(state, batch: pa.RecordBatch):
    """The key groups an operator's writer assigned (spec/format.md §7.12); None: they are hashed."""
    if not state.operator.writer_assigned_key_groups:
        return None
    return batch.column("key_group").to_numpy(zero_copy_only=False)


def _feed_keyed(state, batch: pa.RecordBatch) -> None:
    names = batch.schema.names
    stamps = None
    if "ttl_timestamp" in names:
        column = batch.column("ttl_timestamp")
        stamps = column.to_pylist() if pa.types.is_list(column.type) else column.to_numpy(zero_copy_only=False)
    state.add(_key_column(batch.column("key"), state.operator.key_serializer), batch.column("value"),
              batch.column("user_key") if "user_key" in names else None,
              namespaces=batch.column("namespace") if "namespace" in names else None, ttl_timestamps=stamps,
              key_groups=_given_key_groups(state, batch))


def _open_timers(shape: _Shape, name: str, domain: int, namespace_serializer: Serializer | None, writer):
    return shape.open(writer).timer_service(name, domain, namespace_serializer)


def _feed_timers(service, batch: pa.RecordBatch) -> None:
    names = batch.schema.names
    service.add(_key_column(batch.column("key"), service.operator.key_serializer), batch.column("timestamp"),
                batch.column("namespace") if "namespace" in names else None,
                key_groups=_given_key_groups(service, batch))


def _open_broadcast(shape: _Shape, name: str, key_serializer: Serializer, value_serializer: Serializer, writer):
    return shape.open(writer).broadcast_state(name, key_serializer, value_serializer)


def _feed_broadcast(state, batch: pa.RecordBatch) -> None:
    if "subtask" not in batch.schema.names:  # one map for every subtask
        state.add_all(batch.column("key"), batch.column("value"))
        return
    for subtask, rows in _by_subtask(batch):
        state.add(subtask, rows.column("key"), rows.column("value"))


def _by_subtask(batch: pa.RecordBatch):
    """(subtask, its rows in order) for each subtask of a batch with a ``subtask`` column."""
    subtasks = batch.column("subtask").to_numpy(zero_copy_only=False)
    order = np.argsort(subtasks, kind="stable")
    rows = batch.take(pa.array(order))
    ordered = subtasks[order]
    bounds = np.flatnonzero(np.diff(ordered)) + 1
    for start, stop in zip([0, *bounds.tolist()], [*bounds.tolist(), len(order)]):
        yield int(ordered[start]), rows.slice(start, stop - start)


def _open_list(shape: _Shape, name: str, serializer: Serializer, mode: DistributionMode, writer):
    return shape.open(writer).list_state(name, serializer, mode)


def _feed_list(state, batch: pa.RecordBatch) -> None:
    for subtask, rows in _by_subtask(batch):
        state.add(subtask, rows.column("value"))


def _open_encoded(shape: _Shape, name: str, columns: list[str], writer):
    """A task's stand-in for a keyed state (or, with a "timestamp" column, a timer service) of
    the given stored columns: tasks place already serialized bytes, so Bytes() stands in for
    every serializer, and the driver's state (kind, snapshots) is what reaches the manifest."""
    placeholder = Bytes()
    operator = replace(shape, key_serializer=placeholder).open(writer)
    namespace = placeholder if "namespace" in columns else None
    if "timestamp" in columns:
        return operator.timer_service(name, "event_time", namespace)
    map_state = "user_key" in columns
    return operator.keyed_state(name, placeholder, kind="map" if map_state else "value",
                                user_key_serializer=placeholder if map_state else None,
                                namespace_serializer=namespace)


def _feed_encoded_keyed(state, batch: pa.RecordBatch) -> None:
    groups = batch.column("key_group").to_numpy(zero_copy_only=False)
    state.add_encoded(batch.columns[1:], groups)


def _copy_chunk(store, op: pb.Operator, state, chunk: pb.Chunk, sink, index: int) -> pb.Chunk:
    return sink.put_stored(chunk, store.read_stored(chunk, state_label(op, state.name)))


class SavepointBuilder:
    """A savepoint under construction at ``target``, written with Spark.

    Without ``source`` it starts empty (bootstrap); with ``source`` it starts as
    a shallow copy of that savepoint (or a full copy with ``copy=True``). A
    failed Spark job aborts the build: its files are removed and the target is
    left as it was. Use as a context manager to commit on success.

    Keyed state is written by as many tasks as Spark's adaptive execution makes of the
    shuffled rows (about one per core for small data, one per
    ``spark.sql.adaptive.advisoryPartitionSizeInBytes`` for large), each task's data files
    at most ``options.file_bytes``; ``partitions`` fixes the number instead.
    ``target_file_bytes`` sizes tasks and files from the data instead: each task gets about
    that many shuffled bytes (whatever the number of cores: small data makes few tasks), its
    data files are at most that size, and chunks copied or rewritten without a shuffle are
    read in fragments of that size, one task (one file) each.
    """

    def __init__(self, spark: SparkSession, target: str | os.PathLike[str], *,
                 source: str | os.PathLike[str] | None = None, copy: bool = False, overwrite: bool = False,
                 options: WriteOptions | None = None, partitions: int | None = None,
                 fragment_bytes: int = DEFAULT_FRAGMENT_BYTES, progress: Progress | None = None,
                 base_paths: bool = False, force: bool = False, target_file_bytes: int | None = None) -> None:
        self.spark = spark
        self.io = open_io(target)
        self.partitions = partitions
        options, self.target_file_bytes = sized_options(options, target_file_bytes)
        if self.target_file_bytes is not None:
            fragment_bytes = self.target_file_bytes
        self.fragment_bytes = fragment_bytes
        self.progress = progress or Progress(spark, enabled=False)
        self.job = Job.new(self.io.location, options)
        self.source = Savepoint.open(source) if source is not None else None
        if self.source is not None:
            check_target(self.source, self.io, copy, base_paths)
        self._force = force  # replace a target other shallow savepoints use as a base (spec/format.md §8.4)
        self._previous = read_previous(self.io, overwrite, force=force)
        if self.source is None:
            self.manifest = pb.Manifest(savepoint_id=str(uuid.uuid4()), created_by=f"pyref {__version__} (spark)",
                                        created_at_ms=int(time.time() * 1000))
        else:
            self.manifest = Derivation(self.source, self.io, copy).manifest
        self.copy = copy
        self.operators: dict[str, pb.Operator] = {}
        # Parts still holding the source's chunks, by (operator id, part) as built: the source
        # operator they came from. A part is a state's name, ("timers", name, domain) for a
        # timer service, or "coordinator" (format 1.2). With copy=True they are copied at commit.
        self._kept: dict[tuple[str, str | tuple[Any, ...]], pb.Operator] = {}
        for source_op in self.source.manifest.operators if self.source is not None else []:
            op = referenced_chunks_only(source_op)  # what the source reads: its chunks are copied or rewritten
            self.operators[op.operator_id] = _clone(op)
            self._kept.update({(op.operator_id, part): op for part in _parts(op)})
        self._done = False

    # -- operators ------------------------------------------------------------

    def operator(self, operator_id: str) -> pb.Operator:
        """The operator as it will be committed (a protobuf message; edit with care)."""
        self._check_open()
        if operator_id not in self.operators:
            raise InvalidArgumentError(f"no operator {operator_id!r} in the savepoint being built")
        return self.operators[operator_id]

    def add_operator(self, operator_id: str, parallelism: int, *, max_parallelism: int | None = None,
                     key_serializer: Serializer | None = None, name: str = "", uid: str = "",
                     engine_operator_id: bytes = b"", key_groups: str = "hashed") -> None:
        """An operator; ``uid``, ``engine_operator_id`` and ``key_groups="writer"`` as in
        :meth:`pyref.SavepointWriter.add_operator` (format 1.2): with writer-assigned key
        groups, keyed state and timers are given a ``key_group`` column instead of hashed."""
        self._check_open()
        if not operator_id or operator_id in self.operators:
            raise InvalidArgumentError(f"operator id {operator_id!r} is empty or already used")
        if key_groups not in ("hashed", "writer"):
            raise InvalidArgumentError(f"key_groups is 'hashed' or 'writer', got {key_groups!r}")
        max_parallelism = default_max_parallelism(parallelism) if max_parallelism is None else max_parallelism
        check_parallelism(parallelism, max_parallelism)
        op = pb.Operator(operator_id=operator_id, name=name, parallelism=parallelism, max_parallelism=max_parallelism,
                         uid=uid, engine_operator_id=engine_operator_id,
                         key_groups=pb.KEY_GROUPS_FROM_WRITER if key_groups == "writer" else pb.KEY_GROUPS_HASHED)
        if key_serializer is not None:
            if key_groups == "hashed":
                key_type_of(key_serializer.snapshot())  # refuses serializers without a key hash
            op.key_serializer.CopyFrom(key_serializer.snapshot())
        self.operators[operator_id] = op

    def remove_operator(self, operator_id: str) -> None:
        self.operator(operator_id)
        del self.operators[operator_id]
        self._kept = {k: v for k, v in self._kept.items() if k[0] != operator_id}

    def rename_operator(self, operator_id: str, new_id: str) -> None:
        """Change an operator's id (Flink's uid); its state stays as it is."""
        op = self.operator(operator_id)
        if not new_id or new_id in self.operators:
            raise InvalidArgumentError(f"operator id {new_id!r} is empty or already used")
        op.operator_id = new_id
        self.operators = {(new_id if k == operator_id else k): v for k, v in self.operators.items()}
        self._kept = {((new_id, k[1]) if k[0] == operator_id else k): v for k, v in self._kept.items()}

    def rescale(self, parallelism: int | Mapping[str, int]) -> None:
        """Every operator as restored at a new parallelism (one number, or a map by
        operator id) and snapshotted again: :func:`pyref.rewrite.rescaled_operator`,
        which moves no state bytes."""
        wanted = resolve_parallelism(list(self.operators.values()), parallelism)
        for operator_id, op in self.operators.items():
            rescaled = rescaled_operator(op, wanted[operator_id])
            op.CopyFrom(rescaled)
            for part in _parts(rescaled):
                if (operator_id, part) in self._kept:  # chunk lists may be compacted: copy from the new ones
                    self._kept[(operator_id, part)] = rescaled

    # -- states ---------------------------------------------------------------

    def remove_state(self, operator_id: str, name: str) -> None:
        op = self.operator(operator_id)
        for states in (op.list_states, op.keyed_states, op.broadcast_states):
            for i, s in enumerate(states):
                if s.name == name:
                    del states[i]
                    self._kept.pop((operator_id, name), None)
                    return
        raise InvalidArgumentError("no such state", state=state_label(op, name))

    def _new_state_name(self, op: pb.Operator, name: str, replace: bool) -> None:
        if not name:
            raise InvalidArgumentError(f"empty state name in operator {op.operator_id!r}")
        if find_state(op, name) is not None:
            if not replace:
                raise InvalidArgumentError("state exists; pass replace=True to replace it", state=state_label(op, name))
            self.remove_state(op.operator_id, name)

    def add_keyed_state(self, operator_id: str, name: str, df: DataFrame, value_serializer: Serializer, *,
                        kind: str = "value", user_key_serializer: Serializer | None = None,
                        namespace_serializer: Serializer | None = None, ttl: TtlConfig | None = None,
                        key: str = "key", value: str = "value", user_key: str = "user_key",
                        namespace: str = "namespace", ttl_timestamp: str = "ttl_timestamp", key_group: str = "key_group",
                        replace: bool = False, duplicates: str = "error", order_by: str | None = None,
                        combine: str | None = None) -> None:
        """Write a keyed state from ``df``: one row per entry (``kind`` "value", "reducing",
        "aggregating"), per key's whole list ("list": an array column), or per map entry
        ("map", with a ``user_key`` column). Format 1.2: with ``namespace_serializer`` every
        row has a ``namespace`` column (a window, say), with ``ttl`` a ``ttl_timestamp`` column
        (the last-access ms; for "list" an array, one per element); an operator with
        writer-assigned key groups needs a ``key_group`` column. Executors hash keys to key
        groups, the rows are repartitioned by key group, and each task writes its key
        groups' chunks.

        Rows repeating an identity (a key, with its namespace and, for "map", its user key)
        are refused by default (``duplicates="error"``), naming one: stored, which value a
        reader gets would depend on the order Spark delivered them (spec/format.md §7.1).
        ``duplicates="last"`` keeps the row with the greatest ``order_by`` column of each
        identity (ties: an error); ``duplicates="combine"`` aggregates the values with the
        Spark SQL aggregate function ``combine`` ("sum", "max", "last", ...), the TTL
        timestamp by its max."""
        op = self.operator(operator_id)
        if not op.HasField("key_serializer"):
            raise InvalidArgumentError(f"operator {operator_id!r} has no key serializer; add it with one")
        if kind not in _KINDS:
            raise InvalidArgumentError(f"unknown keyed state kind {kind!r}; choose one of {sorted(_KINDS)}")
        if (user_key_serializer is None) != (kind != "map"):
            raise InvalidArgumentError("a user_key_serializer is required for map state and only for it")
        self._new_state_name(op, name, replace)
        state = pb.KeyedState(name=name, kind=_KINDS[kind], value_serializer=value_serializer.snapshot())
        identity = ["key", *(["namespace"] if namespace_serializer else []), *(["user_key"] if kind == "map" else [])]
        columns = [df[key].alias("key"), *([df[namespace].alias("namespace")] if namespace_serializer else []),
                   *([df[user_key].alias("user_key")] if kind == "map" else []), df[value].alias("value"),
                   *([df[ttl_timestamp].alias("ttl_timestamp")] if ttl is not None else []),
                   *([df[key_group].cast("int").alias("key_group")] if op.key_groups == pb.KEY_GROUPS_FROM_WRITER
                     else []),
                   *([df[order_by].alias(ORDER)] if order_by is not None else [])]
        rows, check = resolve_duplicates(df.select(*columns), identity, duplicates, combine)
        open_state = partial(_open_keyed, _Shape.of(op), name, kind, value_serializer, user_key_serializer,
                             namespace_serializer, ttl)
        unique = partial(unique_rows, identity, state_label(op, name)) if check else None
        self._run_keyed(op, state, self._keyed_rows(op, rows, [rows[c] for c in rows.columns if c != "key_group"],
                                                    "key_group"),
                        open_state, _feed_keyed, unique=unique, sort=identity if check else ())
        if user_key_serializer is not None:
            state.user_key_serializer.CopyFrom(user_key_serializer.snapshot())
        if namespace_serializer is not None:
            state.namespace_serializer.CopyFrom(namespace_serializer.snapshot())
        if ttl is not None:
            state.ttl.CopyFrom(ttl.to_proto())
        op.keyed_states.append(state)

    def _keyed_rows(self, op: pb.Operator, df: DataFrame, columns: list[Any], key_group: str) -> DataFrame:
        """``columns`` of ``df`` after a key_group column: hashed by executors, or (writer-assigned
        key groups, spec/format.md §7.12) the caller's ``key_group`` column."""
        if op.key_groups == pb.KEY_GROUPS_FROM_WRITER:
            return df.select(df[key_group].cast("int").alias("key_group"), *columns)
        selected = df.select(*columns)
        key_serializer = serializer_from_snapshot(op.key_serializer)
        key_groups = _key_group_udf(selected, key_serializer, op.max_parallelism)
        if key_groups is not None:
            return selected.select(key_groups(selected["key"]).alias("key_group"), *selected.columns)
        return selected.mapInArrow(partial(_with_key_groups, key_serializer, op.max_parallelism),
                                   StructType([StructField("key_group", IntegerType()), *selected.schema.fields]))

    def add_timers(self, operator_id: str, name: str, domain: str, df: DataFrame, *,
                   namespace_serializer: Serializer | None = None, key: str = "key", namespace: str = "namespace",
                   timestamp: str = "timestamp", key_group: str = "key_group", replace: bool = False) -> None:
        """Format 1.2: write a timer service (``domain`` "event_time" or "processing_time") from
        ``df``, one row per timer: ``key``, [``namespace``], ``timestamp`` (ms). The rows are
        written by key group, as keyed state is, so that each timer restores with its key."""
        op = self.operator(operator_id)
        if not op.HasField("key_serializer"):
            raise InvalidArgumentError(f"operator {operator_id!r} has no key serializer; add it with one")
        found = [s for s in op.timer_services if s.name == name and s.domain == domain_of(domain)]
        if found:
            if not replace:
                raise InvalidArgumentError("timer service exists; pass replace=True to replace it",
                                           state=state_label(op, name))
            op.timer_services.remove(found[0])
            self._kept.pop((operator_id, ("timers", name, domain_of(domain))), None)
        service = pb.TimerService(name=name, domain=domain_of(domain))
        if namespace_serializer is not None:
            service.namespace_serializer.CopyFrom(namespace_serializer.snapshot())
        columns = [df[key].alias("key"), *([df[namespace].alias("namespace")] if namespace_serializer else []),
                   df[timestamp].cast("long").alias("timestamp")]
        open_service = partial(_open_timers, _Shape.of(op), name, service.domain, namespace_serializer)
        self._run_keyed(op, service, self._keyed_rows(op, df, columns, key_group), open_service, _feed_timers)
        op.timer_services.append(service)

    def add_broadcast_state(self, operator_id: str, name: str, df: DataFrame, key_serializer: Serializer,
                            value_serializer: Serializer, *, key: str = "key", value: str = "value",
                            subtask: str | None = None, replace: bool = False) -> None:
        """Format 1.2: write a broadcast map state from ``df``'s (``key``, ``value``) rows: the
        one map every subtask holds (stored once, written by one task), or, with a ``subtask``
        column, each subtask's own map."""
        op = self.operator(operator_id)
        self._new_state_name(op, name, replace)
        state = pb.BroadcastState(name=name, key_serializer=key_serializer.snapshot(),
                                  value_serializer=value_serializer.snapshot())
        rows = df.select(*([df[subtask].cast("int").alias("subtask")] if subtask else []), df[key].alias("key"),
                         df[value].alias("value"))
        rows = rows.repartition(min(self._partitions(), op.parallelism), "subtask") if subtask else rows.coalesce(1)
        self.progress.step(f"writing broadcast state {state_label(op, name)}")
        open_state = partial(_open_broadcast, _Shape.of(op), name, key_serializer, value_serializer)
        partials = self._guarded(lambda: write_partials(rows, self.job, open_state, _feed_broadcast))
        merge_list(self.manifest, state, partials, op.parallelism)
        op.broadcast_states.append(state)

    def set_coordinator_state(self, operator_id: str, state: bytes | None) -> None:
        """Format 1.2: the operator coordinator's state (opaque bytes, spec/format.md §7.11), or
        None for none. Small by nature, it is written by the driver."""
        op = self.operator(operator_id)
        self._kept.pop((operator_id, "coordinator"), None)
        op.ClearField("coordinator_state")
        if state is None:
            return
        payload = encode_chunk([pa.array([bytes(state)], pa.binary())])
        op.coordinator_state.CopyFrom(self._driver_chunk(lambda sink: sink.put(payload, 1)))

    def _driver_chunk(self, store: Callable[..., Any]) -> pb.Chunk:
        """A chunk the driver writes itself (``store(sink)`` puts it), placed in the target."""
        sink = self.job.sink()
        try:
            chunk = store(sink)
            files = sink.close()
        except BaseException:
            sink.abort()
            raise
        (placed,) = adopt(self.manifest, pb.Manifest(data_files=files), [chunk])
        return placed

    def write_encoded_keyed_state(self, operator_id: str, state: pb.KeyedState | pb.TimerService,
                                  rows: DataFrame | FragmentRows, partitions: int | None = None) -> None:
        """Write ``state`` (name, kind, serializers as given) from serialized rows:
        ``key_group`` (of the operator's max parallelism), then the stored columns
        (spec/format.md §7.1: ``key``[, ``namespace``][, ``user_key``], ``value``), all
        binary but the key group; or (format 1.2) a timer service from ``key_group``,
        ``key``[, ``namespace``], ``timestamp``. A DataFrame is shuffled by key group into
        ``partitions`` tasks; :class:`FragmentRows` are written where they are read, one
        task per fragment. Replaces a state (timer service) of that name."""
        op = self.operator(operator_id)
        state = _clone(state)
        timers = isinstance(state, pb.TimerService)
        if timers:
            for existing in [s for s in op.timer_services if (s.name, s.domain) == (state.name, state.domain)]:
                op.timer_services.remove(existing)
                self._kept.pop((operator_id, ("timers", state.name, state.domain)), None)
        else:
            self._new_state_name(op, state.name, replace=True)
        names = timer_names(state) if timers else keyed_names(state)
        open_state = partial(_open_encoded, _Shape.of(op), state.name, names)
        if isinstance(rows, FragmentRows):
            self.progress.step(f"writing keyed state {state_label(op, state.name)} "
                               f"({len(rows.fragments)} tasks, no shuffle)")
            partials = self._guarded(lambda: write_fragment_partials(
                self.spark, self.job, rows.fragments, rows.read, open_state, _feed_encoded_keyed))
            merge_keyed(self.manifest, state, partials)
        else:
            self._run_keyed(op, state, rows, open_state, _feed_encoded_keyed, partitions)
        (op.timer_services if timers else op.keyed_states).append(state)

    def _run_keyed(self, op: pb.Operator, state: pb.KeyedState, df: DataFrame, open_state: Callable,
                   feed: Callable, partitions: int | None = None, unique: Callable | None = None,
                   sort: Sequence[str] = ()) -> None:
        """Shuffle ``df`` by key group into write tasks; with ``unique``, each task's rows sorted
        by key group and ``sort`` pass through it (it refuses a repeated identity)."""
        partitions = partitions or self.partitions
        if partitions is None:  # Spark's adaptive execution sizes the tasks from the data shuffled
            self.progress.step(f"writing keyed state {state_label(op, state.name)} (tasks sized by the data"
                               + (f", about {self.target_file_bytes} bytes each)" if self.target_file_bytes else ")"))
            shuffled = df.repartition("key_group")
        else:
            partitions = min(partitions, op.max_parallelism)
            self.progress.step(f"writing keyed state {state_label(op, state.name)} ({partitions} tasks)")
            shuffled = df.repartition(partitions, "key_group")
        if sort:
            shuffled = shuffled.sortWithinPartitions("key_group", *sort)
        with task_size(self.spark, self.target_file_bytes if partitions is None else None):
            merge_keyed(self.manifest, state, self._guarded(
                lambda: write_partials(shuffled, self.job, open_state, feed, prepare=unique)))

    def add_list_state(self, operator_id: str, name: str, df: DataFrame, serializer: Serializer,
                       mode: DistributionMode = DistributionMode.SPLIT_DISTRIBUTE, *, subtask: str = "subtask",
                       value: str = "value", order_by: str | None = None, replace: bool = False) -> None:
        """Write an operator list state from ``df``: one row per element with the
        ``subtask`` whose list holds it, in ``order_by`` order within a subtask
        (e.g. the ``index`` column of a list state read with Spark)."""
        op = self.operator(operator_id)
        mode = DistributionMode.parse(mode)
        self._new_state_name(op, name, replace)
        state = pb.ListState(name=name, mode=cast(pb.DistributionMode, mode), element_serializer=serializer.snapshot())
        rows = df.select(df[subtask].cast("int").alias("subtask"), df[value].alias("value"),
                         *([df[order_by].alias("order")] if order_by else []))
        rows = rows.repartition(min(self._partitions(), op.parallelism), "subtask")
        if order_by:
            rows = rows.sortWithinPartitions("subtask", "order").drop("order")
        self.progress.step(f"writing list state {state_label(op, name)}")
        open_state = partial(_open_list, _Shape.of(op), name, serializer, mode)
        partials = self._guarded(lambda: write_partials(rows, self.job, open_state, _feed_list))
        merge_list(self.manifest, state, partials, op.parallelism)
        op.list_states.append(state)

    def map_source_chunks(self, operator_id: str, name: str | tuple[Any, ...], fn: Callable[..., Any]) -> None:
        """Replace every chunk of a state kept from the source with ``fn(store,
        operator, state, chunk, sink, index) -> chunk`` (``index``: the chunk's in the
        state) run in parallel (row counts and key groups must stay: list partitions refer
        to rows of chunks). ``name`` is a
        state's name or (format 1.2) ``("timers", name, domain)``."""
        op = self.operator(operator_id)
        source_op = self._kept.get((operator_id, name))
        if source_op is None:
            raise InvalidArgumentError("state does not hold the source savepoint's chunks (new, rewritten or absent)",
                                       state=state_label(op, str(name)))
        state, source_state = _part(op, name), _part(source_op, name)
        self.progress.step(f"rewriting chunks of {state_label(source_op, str(name))}")
        assert self.source is not None  # the state was kept from it
        fragments = chunk_fragments(self.source, source_op, source_state, self.fragment_bytes)
        results = self._guarded(lambda: map_chunks(self.spark, self.job, fragments, fn))
        replace_chunks(self.manifest, state, results)
        del self._kept[(operator_id, name)]

    def _copy_coordinator_state(self, operator_id: str) -> None:
        """The source's coordinator state, copied by the driver (one small chunk)."""
        op, source_op = self.operator(operator_id), self._kept.pop((operator_id, "coordinator"))
        source = source_op.coordinator_state
        if source.WhichOneof("location") != "range":
            op.coordinator_state.CopyFrom(source)  # inline: it is in the manifest already
            return
        assert self.source is not None  # the coordinator state was kept from it
        stored = self.source.store.read_stored(source, f"{operator_id} (coordinator state)")
        op.coordinator_state.CopyFrom(self._driver_chunk(lambda sink: sink.put_stored(source, stored)))

    # -- commit ---------------------------------------------------------------

    def commit(self) -> Savepoint:
        """Copy what still has to be copied, then atomically publish the savepoint; returns
        it, open (its manifest is ``.manifest``)."""
        self._check_open()
        if self.copy:
            for operator_id, part in list(self._kept):
                if part == "coordinator":
                    self._guarded(lambda: self._copy_coordinator_state(operator_id))
                else:
                    self.map_source_chunks(operator_id, part, _copy_chunk)
        manifest = self.manifest
        for op in self.operators.values():
            if not (op.keyed_states or op.timer_services):
                op.ClearField("key_serializer")  # present exactly when there is keyed state or a timer service
            manifest.operators.append(op)
        _drop_unused_files(manifest)
        manifest.DiscardUnknownFields()  # fields of a newer writer may carry invariants this build cannot keep
        self.progress.step(f"committing {self.io.location}")
        try:
            # publish aborts (deletes the build's files) only if the manifest was certainly not written.
            publish(self.io, manifest, self._previous, self.abort, force=self._force)
        finally:
            self._done = True
        self.job.delete_unreferenced(self.io, manifest)
        delete_replaced(self.io, manifest, self._previous)
        return Savepoint.written(self.io, manifest)

    def abort(self) -> None:
        """Remove every file the build wrote; the target stays as it was."""
        if not self._done:
            self._done = True
            self.job.delete_unreferenced(self.io, None)

    def _guarded(self, step: Callable[..., Any]):
        """``step()`` (Spark jobs writing the build's files); if it fails, the build is aborted,
        and a pyref error a task raised is raised as itself."""
        try:
            with typed_errors():
                return step()
        except BaseException:
            self.abort()
            raise

    def _check_open(self) -> None:
        if self._done:
            raise InvalidArgumentError("this build has already committed or aborted")

    def _partitions(self) -> int:
        return self.partitions or int(str(self.spark.conf.get("spark.sql.shuffle.partitions")))

    def __enter__(self) -> SavepointBuilder:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()


def _clone(message):
    copy = type(message)()
    copy.CopyFrom(message)
    return copy


def _parts(op: pb.Operator) -> list[str | tuple[Any, ...]]:
    """The parts of an operator that hold chunks, as the builder names them."""
    return [*(s.name for s in [*op.list_states, *op.keyed_states, *op.broadcast_states]),
            *(("timers", s.name, s.domain) for s in op.timer_services),
            *(["coordinator"] if op.HasField("coordinator_state") else [])]


def _part(op: pb.Operator, part: str | tuple[Any, ...]):
    """The state or (a ("timers", name, domain) part) timer service of the operator."""
    if isinstance(part, tuple):
        return find_timer_service(op, part[1], part[2])
    return find_state(op, part)


def _drop_unused_files(manifest: pb.Manifest) -> None:
    """Remove data files no chunk refers to (removed or replaced states), renumbering the rest."""
    chunks = [c for op in manifest.operators
              for s in [*op.list_states, *op.keyed_states, *op.timer_services, *op.broadcast_states] for c in s.chunks]
    chunks += [op.coordinator_state for op in manifest.operators if op.HasField("coordinator_state")]
    chunks = [c for c in chunks if c.WhichOneof("location") == "range"]
    used = sorted({c.range.file for c in chunks})
    renumber = {old: new for new, old in enumerate(used)}
    for c in chunks:
        c.range.file = renumber[c.range.file]
    files = [manifest.data_files[i] for i in used]
    del manifest.data_files[:]
    manifest.data_files.extend(files)
