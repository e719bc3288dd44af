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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import IntegerType, StructField, StructType

from .. import __version__
from .._proto.savepoint.v1 import manifest_pb2 as pb
from ..errors import InvalidArgumentError
from ..io import open_io
from ..key_groups import check_parallelism, compute_key_groups, default_max_parallelism
from ..keys import as_key_array, key_type_of
from ..manifest import state_label
from ..reader import KIND_NAMES, Savepoint
from ..redistribution import DistributionMode
from ..restore import resolve_parallelism
from ..rewrite import Derivation, check_target, rescaled_operator
from ..serializers import Bytes, Serializer, serializer_from_snapshot
from ..writer import OperatorWriter, delete_replaced, publish, read_previous
from .commit import (
    FragmentRows,
    Job,
    WriteOptions,
    map_chunks,
    merge_keyed,
    merge_list,
    replace_chunks,
    write_fragment_partials,
    write_partials,
)
from .fragments import DEFAULT_FRAGMENT_BYTES, chunk_fragments, find_state
from .progress import Progress

_KINDS = {name: kind for kind, name in KIND_NAMES.items()}


def _key_column(column: pa.Array, key_serializer: Serializer) -> pa.Array:
    """Keys as the key serializer's Arrow type (a Spark LongType column for int32 keys, say)."""
    wanted = key_serializer.arrow_type()
    if column.type != wanted and not pa.types.is_struct(wanted):  # tuple keys hash by position
        column = column.cast(wanted)
    return as_key_array(column, key_serializer)


def _with_key_groups(key_serializer: Serializer, max_parallelism: int, batches):
    key_type = key_type_of(key_serializer.snapshot())
    for batch in batches:
        groups = compute_key_groups(_key_column(batch.column("key"), key_serializer), max_parallelism, key_type)
        yield pa.record_batch([pa.array(groups, pa.int32()), *batch.columns], names=["key_group", *batch.schema.names])


@dataclass(frozen=True)
class _Shape:
    """What a task's writer needs of an operator (protobuf messages do not pickle)."""

    operator_id: str
    parallelism: int
    max_parallelism: int
    key_serializer: Serializer | None

    @classmethod
    def of(cls, op: pb.Operator) -> _Shape:
        key_serializer = serializer_from_snapshot(op.key_serializer) if op.HasField("key_serializer") else None
        return cls(op.operator_id, op.parallelism, op.max_parallelism, key_serializer)

    def open(self, writer) -> OperatorWriter:
        return writer.add_operator(self.operator_id, self.parallelism, max_parallelism=self.max_parallelism,
                                   key_serializer=self.key_serializer)


def _open_keyed(shape: _Shape, name: str, kind: str, value_serializer: Serializer,
                user_key_serializer: Serializer | None, writer):
    return shape.open(writer).keyed_state(name, value_serializer, kind=kind, user_key_serializer=user_key_serializer)


def _feed_keyed(state, batch: pa.RecordBatch) -> None:
    names = batch.schema.names
    state.add(_key_column(batch.column("key"), state.operator.key_serializer), batch.column("value"),
              batch.column("user_key") if "user_key" in names else None)


def _open_list(shape: _Shape, name: str, serializer: Serializer, mode: DistributionMode, writer):
    return shape.open(writer).list_state(name, serializer, mode)


def _feed_list(state, batch: pa.RecordBatch) -> None:
    subtasks = batch.column("subtask").to_numpy(zero_copy_only=False)
    order = np.argsort(subtasks, kind="stable")
    values = batch.column("value").take(pa.array(order))
    ordered = subtasks[order]
    bounds = np.flatnonzero(np.diff(ordered)) + 1
    for start, stop in zip([0, *bounds.tolist()], [*bounds.tolist(), len(order)]):
        state.add(int(ordered[start]), values.slice(start, stop - start))


def _open_encoded_keyed(shape: _Shape, name: str, map_state: bool, writer):
    # Tasks place already serialized bytes: Bytes() stands in for every serializer, and
    # the driver's state (kind, snapshots) is what reaches the manifest.
    placeholder = Bytes()
    operator = replace(shape, key_serializer=placeholder).open(writer)
    return operator.keyed_state(name, placeholder, kind="map" if map_state else "value",
                                user_key_serializer=placeholder if map_state else None)


def _feed_encoded_keyed(state, batch: pa.RecordBatch) -> None:
    groups = batch.column("key_group").to_numpy(zero_copy_only=False)
    state.add_encoded(batch.columns[1:], groups)


def _copy_chunk(store, op: pb.Operator, state, chunk: pb.Chunk, sink) -> pb.Chunk:
    return sink.put_stored(chunk, store.read_stored(chunk, state_label(op, state.name)))


class SavepointBuilder:
    """A savepoint under construction at ``target``, written with Spark.

    Without ``source`` it starts empty (bootstrap); with ``source`` it starts as
    a shallow copy of that savepoint (or a full copy with ``copy=True``). A
    failed Spark job aborts the build: its files are removed and the target is
    left as it was. Use as a context manager to commit on success.
    """

    def __init__(self, spark: SparkSession, target: str | os.PathLike[str], *,
                 source: str | os.PathLike[str] | None = None, copy: bool = False, overwrite: bool = False,
                 options: WriteOptions | None = None, partitions: int | None = None,
                 fragment_bytes: int = DEFAULT_FRAGMENT_BYTES, progress: Progress | None = None) -> None:
        self.spark = spark
        self.io = open_io(target)
        self.partitions = partitions
        self.fragment_bytes = fragment_bytes
        self.progress = progress or Progress(spark, enabled=False)
        self.job = Job.new(self.io.location, options or WriteOptions())
        self.source = Savepoint.open(source) if source is not None else None
        if self.source is not None:
            check_target(self.source, self.io, copy)
        self._previous = read_previous(self.io, overwrite)
        if self.source is None:
            self.manifest = pb.Manifest(savepoint_id=str(uuid.uuid4()), created_by=f"pyref {__version__} (spark)",
                                        created_at_ms=int(time.time() * 1000))
        else:
            self.manifest = Derivation(self.source, self.io, copy).manifest
        self.copy = copy
        self.operators: dict[str, pb.Operator] = {}
        # States still holding the source's chunks, by (operator id, name) as built: the
        # source operator they came from. With copy=True they are copied at commit.
        self._kept: dict[tuple[str, str], pb.Operator] = {}
        for op in self.source.manifest.operators if self.source is not None else []:
            self.operators[op.operator_id] = _clone(op)
            self._kept.update({(op.operator_id, s.name): op for s in [*op.list_states, *op.keyed_states]})
        self._done = False

    # -- operators ------------------------------------------------------------

    def operator(self, operator_id: str) -> pb.Operator:
        """The operator as it will be committed (a protobuf message; edit with care)."""
        self._check_open()
        if operator_id not in self.operators:
            raise InvalidArgumentError(f"no operator {operator_id!r} in the savepoint being built")
        return self.operators[operator_id]

    def add_operator(self, operator_id: str, parallelism: int, *, max_parallelism: int | None = None,
                     key_serializer: Serializer | None = None, name: str = "") -> None:
        self._check_open()
        if not operator_id or operator_id in self.operators:
            raise InvalidArgumentError(f"operator id {operator_id!r} is empty or already used")
        max_parallelism = default_max_parallelism(parallelism) if max_parallelism is None else max_parallelism
        check_parallelism(parallelism, max_parallelism)
        op = pb.Operator(operator_id=operator_id, name=name, parallelism=parallelism, max_parallelism=max_parallelism)
        if key_serializer is not None:
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
            for s in [*rescaled.list_states, *rescaled.keyed_states]:
                if (operator_id, s.name) in self._kept:  # chunk lists may be compacted: copy from the new ones
                    self._kept[(operator_id, s.name)] = rescaled

    # -- states ---------------------------------------------------------------

    def remove_state(self, operator_id: str, name: str) -> None:
        op = self.operator(operator_id)
        for states in (op.list_states, op.keyed_states):
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
                        kind: str = "value", user_key_serializer: Serializer | None = None, key: str = "key",
                        value: str = "value", user_key: str = "user_key", replace: bool = False) -> None:
        """Write a keyed state from ``df``: one row per entry (``kind`` "value"), per
        key's whole list ("list": an array column), or per map entry ("map", with a
        ``user_key`` column). Executors hash keys to key groups, the rows are
        repartitioned by key group, and each task writes its key groups' chunks."""
        op = self.operator(operator_id)
        if not op.HasField("key_serializer"):
            raise InvalidArgumentError(f"operator {operator_id!r} has no key serializer; add it with one")
        if kind not in _KINDS:
            raise InvalidArgumentError(f"unknown keyed state kind {kind!r}; choose one of {sorted(_KINDS)}")
        if (user_key_serializer is None) != (kind != "map"):
            raise InvalidArgumentError("a user_key_serializer is required for map state and only for it")
        self._new_state_name(op, name, replace)
        state = pb.KeyedState(name=name, kind=_KINDS[kind], value_serializer=value_serializer.snapshot())
        columns = [df[key].alias("key"), *([df[user_key].alias("user_key")] if kind == "map" else []),
                   df[value].alias("value")]
        selected = df.select(*columns)
        key_serializer = serializer_from_snapshot(op.key_serializer)
        with_groups = selected.mapInArrow(
            partial(_with_key_groups, key_serializer, op.max_parallelism),
            StructType([StructField("key_group", IntegerType()), *selected.schema.fields]))
        open_state = partial(_open_keyed, _Shape.of(op), name, kind, value_serializer, user_key_serializer)
        self._run_keyed(op, state, with_groups, open_state, _feed_keyed)
        if user_key_serializer is not None:
            state.user_key_serializer.CopyFrom(user_key_serializer.snapshot())
        op.keyed_states.append(state)

    def write_encoded_keyed_state(self, operator_id: str, state: pb.KeyedState, rows: DataFrame | FragmentRows,
                                  partitions: int | None = None) -> None:
        """Write ``state`` (name, kind, serializers as given) from serialized rows:
        ``key_group`` (of the operator's max parallelism), ``key``[, ``user_key``],
        ``value``, all binary but the key group. A DataFrame is shuffled by key group
        into ``partitions`` tasks; :class:`FragmentRows` are written where they are
        read, one task per fragment. Replaces a state of that name."""
        op = self.operator(operator_id)
        state = _clone(state)
        self._new_state_name(op, state.name, replace=True)
        open_state = partial(_open_encoded_keyed, _Shape.of(op), state.name, state.kind == pb.MAP)
        if isinstance(rows, FragmentRows):
            self.progress.step(f"writing keyed state {state_label(op, state.name)} "
                               f"({len(rows.fragments)} tasks, no shuffle)")
            partials = self._guarded(lambda: write_fragment_partials(
                self.spark, self.job, rows.fragments, rows.read, open_state, _feed_encoded_keyed))
            merge_keyed(self.manifest, state, partials)
        else:
            self._run_keyed(op, state, rows, open_state, _feed_encoded_keyed, partitions)
        op.keyed_states.append(state)

    def _run_keyed(self, op: pb.Operator, state: pb.KeyedState, df: DataFrame, open_state: Callable,
                   feed: Callable, partitions: int | None = None) -> None:
        partitions = min(partitions or self._partitions(), op.max_parallelism)
        self.progress.step(f"writing keyed state {state_label(op, state.name)} ({partitions} tasks)")
        shuffled = df.repartition(partitions, "key_group")
        merge_keyed(self.manifest, state, self._guarded(lambda: write_partials(shuffled, self.job, open_state, feed)))

    def add_list_state(self, operator_id: str, name: str, df: DataFrame, serializer: Serializer,
                       mode: DistributionMode = DistributionMode.SPLIT_DISTRIBUTE, *, subtask: str = "subtask",
                       value: str = "value", order_by: str | None = None, replace: bool = False) -> None:
        """Write an operator list state from ``df``: one row per element with the
        ``subtask`` whose list holds it, in ``order_by`` order within a subtask
        (e.g. the ``index`` column of a list state read with Spark)."""
        op = self.operator(operator_id)
        mode = DistributionMode.parse(mode)
        self._new_state_name(op, name, replace)
        state = pb.ListState(name=name, mode=int(mode), element_serializer=serializer.snapshot())
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

    def map_source_chunks(self, operator_id: str, name: str, fn: Callable) -> None:
        """Replace every chunk of a state kept from the source with ``fn(store,
        operator, state, chunk, sink) -> chunk`` run in parallel (row counts and
        key groups must stay: list partitions refer to rows of chunks)."""
        op = self.operator(operator_id)
        source_op = self._kept.get((operator_id, name))
        if source_op is None:
            raise InvalidArgumentError("state does not hold the source savepoint's chunks (new, rewritten or absent)",
                                       state=state_label(op, name))
        state, source_state = find_state(op, name), find_state(source_op, name)
        self.progress.step(f"rewriting chunks of {state_label(source_op, name)}")
        fragments = chunk_fragments(self.source, source_op, source_state, self.fragment_bytes)
        results = self._guarded(lambda: map_chunks(self.spark, self.job, fragments, fn))
        replace_chunks(self.manifest, state, results)
        del self._kept[(operator_id, name)]

    # -- commit ---------------------------------------------------------------

    def commit(self) -> pb.Manifest:
        """Copy what still has to be copied, then atomically publish the savepoint."""
        self._check_open()
        if self.copy:
            for operator_id, name in list(self._kept):
                self.map_source_chunks(operator_id, name, _copy_chunk)
        manifest = self.manifest
        for op in self.operators.values():
            if not op.keyed_states:
                op.ClearField("key_serializer")  # present exactly when there is keyed state
            manifest.operators.append(op)
        _drop_unused_files(manifest)
        manifest.DiscardUnknownFields()  # fields of a newer writer may carry invariants this build cannot keep
        self.progress.step(f"committing {self.io.location}")
        try:
            # publish aborts (deletes the build's files) only if the manifest was certainly not written.
            publish(self.io, manifest, self._previous, self.abort)
        finally:
            self._done = True
        self.job.delete_unreferenced(self.io, manifest)
        delete_replaced(self.io, manifest, self._previous)
        return manifest

    def abort(self) -> None:
        """Remove every file the build wrote; the target stays as it was."""
        if not self._done:
            self._done = True
            self.job.delete_unreferenced(self.io, None)

    def _guarded(self, step: Callable):
        try:
            return step()
        except BaseException:
            self.abort()
            raise

    def _check_open(self) -> None:
        if self._done:
            raise InvalidArgumentError("this build has already committed or aborted")

    def _partitions(self) -> int:
        return self.partitions or int(self.spark.conf.get("spark.sql.shuffle.partitions"))

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


def _drop_unused_files(manifest: pb.Manifest) -> None:
    """Remove data files no chunk refers to (removed or replaced states), renumbering the rest."""
    chunks = [c for op in manifest.operators for s in [*op.list_states, *op.keyed_states] for c in s.chunks
              if c.WhichOneof("location") == "range"]
    used = sorted({c.range.file for c in chunks})
    renumber = {old: new for new, old in enumerate(used)}
    for c in chunks:
        c.range.file = renumber[c.range.file]
    files = [manifest.data_files[i] for i in used]
    del manifest.data_files[:]
    manifest.data_files.extend(files)
