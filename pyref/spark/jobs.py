"""Redistribution and migration jobs on Spark.

- :func:`rescale`: a new parallelism. Only the manifest changes (the core's
  :func:`pyref.rewrite.rescale`): no state bytes are read or written.
- :func:`change_max_parallelism`: a new number of key groups. Every key is
  re-hashed (the core's vectorised :func:`~pyref.key_groups.compute_key_groups`
  on decoded key columns) and its entry, and (format 1.2) every timer, rewritten
  into its new key group's chunks; list and broadcast state are kept as they are.
  An operator whose key groups its writer assigned cannot change (spec/format.md
  §7.12), unless its keys are Flink SQL's, re-hashed as ``BinaryRowData`` hashes
  them (:mod:`pyref.flink.row_keys`). When the old and new max parallelism
  share enough residue classes (e.g. 128 -> 4096) each task writes the key
  groups it reads, with no shuffle (:func:`rehashed_entries`).
- :func:`migrate_state`: a state's values under a new serializer (schema
  evolution), resolved as in :func:`pyref.rewrite.migrate_state`, with chunks
  re-encoded in parallel.

Each writes a new savepoint, shallow by default (it refers to the source's data
files for everything it keeps), and reports progress on stderr.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Mapping
from functools import partial

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from .._proto.savepoint.v1 import manifest_pb2 as pb
from ..errors import InvalidArgumentError, unknown_names
from ..key_groups import check_parallelism, compute_key_groups
from ..keys import engine_key_groups, key_type_of
from ..manifest import selected_rows, state_label
from ..reader import Savepoint
from ..rewrite import migrate_chunk, resolve_migration
from ..rewrite import rescale as core_rescale
from ..serializers import Serializer, serializer_from_snapshot
from ..timers import find_timer_service
from .commit import FragmentRows, WriteOptions
from .datasource import spark_schema
from .fragments import (
    DEFAULT_FRAGMENT_BYTES,
    Fragment,
    chunk_fragments,
    find_state,
    keyed_batches,
    keyed_schema,
    residue_fragments,
    stored_length,
)
from .frames import fragment_tasks
from .progress import Progress
from .session import default_parallelism
from .writer import SavepointBuilder

Path = str | os.PathLike[str]


def rescale(source: Path, target: Path, parallelism: int | Mapping[str, int], *, spark: SparkSession | None = None,
            copy: bool = False, overwrite: bool = False, progress: bool = True, base_paths: bool = False,
            force: bool = False, target_file_bytes: int | None = None) -> Savepoint:
    """A new parallelism per operator (one number, or a map by operator id). Shallow:
    the core's :func:`pyref.rewrite.rescale`, planned on metadata, no state bytes
    read or written. With ``copy=True`` and ``spark``, the chunks are copied to the
    target byte for byte by Spark tasks in parallel, in data files of about
    ``target_file_bytes`` if given (one task each)."""
    if target_file_bytes is not None and (not copy or spark is None):
        raise InvalidArgumentError("target_file_bytes is for copies on Spark (copy=True and spark): a shallow "
                                   "rescale writes no data files")
    if not copy or spark is None:
        return core_rescale(source, target, parallelism, copy=copy, overwrite=overwrite, base_paths=base_paths,
                            force=force)
    with Progress(spark, enabled=progress) as report:
        with SavepointBuilder(spark, target, source=source, copy=True, overwrite=overwrite, progress=report,
                              force=force, target_file_bytes=target_file_bytes) as builder:
            builder.rescale(parallelism)
        return Savepoint.written(builder.io, builder.manifest)


def flatten(spark: SparkSession, source: Path, target: Path, *, overwrite: bool = False, progress: bool = True,
            force: bool = False, target_file_bytes: int | None = None) -> Savepoint:
    """A self-contained copy of ``source`` at ``target`` (the core's :func:`pyref.rewrite.flatten`),
    its chunks and its bases' copied byte for byte by Spark tasks in parallel (in data files
    of about ``target_file_bytes`` if given, one task each)."""
    with Progress(spark, enabled=progress) as report:
        with SavepointBuilder(spark, target, source=source, copy=True, overwrite=overwrite, progress=report,
                              force=force, target_file_bytes=target_file_bytes) as builder:
            pass  # nothing changes: the commit copies every chunk the source reads
        return Savepoint.written(builder.io, builder.manifest)


def rehashed(key_serializer: Serializer, max_parallelism: int, fragment: Fragment) -> Iterator[pa.RecordBatch]:
    """The serialized entries of a fragment with their key groups at ``max_parallelism``:
    key_group, key[, user_key], value."""
    snapshot = key_serializer.snapshot()
    # Flink SQL keys: writer-assigned key groups whose engine hash pyref knows (spec/format.md §7.12).
    key_groups = engine_key_groups(snapshot) or partial(compute_key_groups, key_type=key_type_of(snapshot))
    for raw in keyed_batches(fragment, raw=True):
        groups = key_groups(key_serializer.decode_array(raw.column(1)), max_parallelism)
        yield pa.record_batch([pa.array(groups, pa.int32()), *raw.columns[1:]], names=raw.schema.names)


def rehashed_entries(spark: SparkSession, sp: Savepoint, op: pb.Operator, state: pb.KeyedState | pb.TimerService,
                     max_parallelism: int,
                     tasks: int, fragment_bytes: int = DEFAULT_FRAGMENT_BYTES) -> DataFrame | FragmentRows:
    """The entries of a keyed state re-hashed to ``max_parallelism``, for about ``tasks``
    write tasks. Where the two max parallelisms share at least as many residue classes
    (their gcd) as there are tasks or Spark cores, whichever is fewer, rows stay in the
    task that reads them: fragments split by residue never share a new key group
    (spec/key-groups.md §8.1), so there are at most gcd of them. Otherwise they are a
    DataFrame, one reading task per ``fragment_bytes``, to shuffle by key group."""
    key_serializer = serializer_from_snapshot(op.key_serializer)
    read = partial(rehashed, key_serializer, max_parallelism)
    classes = math.gcd(op.max_parallelism, max_parallelism)
    if classes >= min(tasks, default_parallelism(spark)):
        return FragmentRows(residue_fragments(sp, op, state, classes, min(tasks, classes)), read)
    schema = spark_schema(keyed_schema(sp, op, state, raw=True, subtask=False))
    return fragment_tasks(spark, chunk_fragments(sp, op, state, fragment_bytes), read, schema)


def _wanted(operators: Mapping[str, pb.Operator], value: int | Mapping[str, int]) -> dict[str, int]:
    if isinstance(value, Mapping):
        unknown = sorted(set(value) - set(operators))
        if unknown:
            raise unknown_names("operators", unknown, operators)
        return dict(value)
    return {op_id: value for op_id in operators}


def change_max_parallelism(spark: SparkSession, source: Path, target: Path, max_parallelism: int | Mapping[str, int],
                           *, copy: bool = False, overwrite: bool = False, partitions: int | None = None,
                           options: WriteOptions | None = None, fragment_bytes: int = DEFAULT_FRAGMENT_BYTES,
                           progress: bool = True, base_paths: bool = False, force: bool = False,
                           target_file_bytes: int | None = None) -> Savepoint:
    """Write ``source`` to ``target`` with a new max parallelism (one number, or a map
    by operator id): the keyed state of every changed operator is re-hashed and
    rewritten, in ``partitions`` write tasks (default: one per ``fragment_bytes`` of
    stored state, at least Spark's default parallelism; with ``target_file_bytes``, one
    per that many stored bytes, each writing files of at most that size)."""
    with Progress(spark, enabled=progress) as report:
        builder = SavepointBuilder(spark, target, source=source, copy=copy, overwrite=overwrite, options=options,
                                   fragment_bytes=fragment_bytes, progress=report, base_paths=base_paths,
                                   force=force, target_file_bytes=target_file_bytes)
        with builder:
            sp = builder.source
            for operator_id, new in _wanted(builder.operators, max_parallelism).items():
                op = builder.operator(operator_id)
                if new == op.max_parallelism:
                    continue
                check_parallelism(op.parallelism, new)
                if (op.key_groups == pb.KEY_GROUPS_FROM_WRITER and (op.keyed_states or op.timer_services)
                        and engine_key_groups(op.key_serializer) is None):
                    raise InvalidArgumentError(
                        f"operator {operator_id!r}: its writer assigned the key groups, so no key can be given a new "
                        "one here; the max parallelism cannot change (spec/format.md §7.12)")
                assert sp is not None  # the builder's source: the savepoint being changed
                source_op = sp.operator(operator_id).proto
                report.step(f"{operator_id}: max parallelism {op.max_parallelism} -> {new}")
                op.max_parallelism = new
                # Keyed states and timer services alike: every row moves to its key's new key group.
                keyed: list[tuple[pb.KeyedState | pb.TimerService, pb.KeyedState | pb.TimerService]] = [
                    (next(k for k in source_op.keyed_states if k.name == s.name), s) for s in op.keyed_states]
                keyed += [(find_timer_service(source_op, s.name, s.domain), s) for s in list(op.timer_services)]
                for source_state, state in keyed:
                    stored = sum(stored_length(c) for c in source_state.chunks)
                    tasks = partitions or (max(1, math.ceil(stored / target_file_bytes)) if target_file_bytes
                                           else max(default_parallelism(spark), math.ceil(stored / fragment_bytes)))
                    entries = rehashed_entries(spark, sp, source_op, source_state, new, tasks, fragment_bytes)
                    builder.write_encoded_keyed_state(operator_id, state, entries, tasks)
        return Savepoint.written(builder.io, builder.manifest)


def _migrate(stored: tuple[Serializer, Serializer], selected: dict[int, list[tuple[int, int]]] | None, store,
             op: pb.Operator, state, chunk: pb.Chunk, sink, index: int) -> pb.Chunk:
    """One chunk migrated; of a list state, only the rows its ranges select (``selected``)."""
    return migrate_chunk(store, state, state_label(op, state.name), chunk, stored, sink,
                         None if selected is None else selected[index])


def migrate_state(spark: SparkSession, source: Path, target: Path, operator_id: str, state: str,
                  serializer: Serializer, *, copy: bool = False, overwrite: bool = False,
                  options: WriteOptions | None = None, fragment_bytes: int = DEFAULT_FRAGMENT_BYTES,
                  progress: bool = True, base_paths: bool = False, force: bool = False,
                  target_file_bytes: int | None = None) -> Savepoint:
    """Write ``source`` to ``target`` with one state's values under ``serializer``.
    As is or reconfigured: only the snapshot changes. After migration: every chunk
    is decoded with the old serializer and re-encoded with the new, in parallel (one task
    per ``fragment_bytes`` of stored chunks, or with ``target_file_bytes`` per that many,
    each writing one file).
    Incompatible: :class:`~pyref.IncompatibleSerializerError` naming the state."""
    with Progress(spark, enabled=progress) as report:
        builder = SavepointBuilder(spark, target, source=source, copy=copy, overwrite=overwrite, options=options,
                                   fragment_bytes=fragment_bytes, progress=report, base_paths=base_paths,
                                   force=force, target_file_bytes=target_file_bytes)
        with builder:
            op = builder.operator(operator_id)
            found = find_state(op, state)
            if found is None or isinstance(found, pb.BroadcastState):
                raise InvalidArgumentError("no such list or keyed state", state=state_label(op, state))
            result, stored = resolve_migration(found, serializer, state_label(op, state))
            report.step(f"{state_label(op, state)}: {result.kind.value} ({result.reason})")
            if stored is not None:
                # A list state's unselected rows are no state and may not decode (spec/format.md §5.3).
                selected = selected_rows(found) if isinstance(found, pb.ListState) else None
                builder.map_source_chunks(operator_id, state, partial(_migrate, stored, selected))
            field = "element_serializer" if isinstance(found, pb.ListState) else "value_serializer"
            getattr(found, field).CopyFrom(result.serializer.snapshot())
        return Savepoint.written(builder.io, builder.manifest)
