"""``df.write.format("savepoint")``: one state written from a DataFrame, through the Python
Data Source writer API, with the commit of :mod:`pyref.spark.commit`.

::

    (counts.write.format("savepoint").mode("overwrite")
     .option("operator", "url-counter").option("state", "count")
     .option("keySerializer", "string").option("valueSerializer", "int64").option("parallelism", 4)
     .save("/savepoints/sp-1"))

Without a savepoint at the path it bootstraps one holding this operator and state; with one
it adds the state to it (``append``), or replaces the state of that name (``overwrite``),
keeping everything else, and publishes the new manifest in place of the old one
atomically (spec/format.md §10). Each Spark task writes its rows' chunks with the core
writer and returns its partial manifest; Spark's driver-side ``commit`` merges them and
publishes, ``abort`` deletes every file of the write. Rows are written by the task that
holds them: no shuffle, so a key group's rows may be in chunks of several tasks (give
``df.repartition(n, "key")`` for fewer chunks). :class:`pyref.spark.SavepointBuilder`
writes several states at once and shuffles by key group.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, cast

import pyarrow as pa
from pyspark.sql import datasource as spark_datasource
from pyspark.sql.datasource import WriterCommitMessage
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from .. import __version__
from .._proto.savepoint.v1 import manifest_pb2 as pb
from .._proto.savepoint.v1 import serializer_pb2
from ..derived import check_not_a_base
from ..descriptions import KIND_NAMES
from ..errors import InvalidArgumentError, locating
from ..io import MANIFEST_NAME, SavepointIO, open_io
from ..key_groups import check_parallelism, default_max_parallelism
from ..keys import key_type_of
from ..manifest import decode_manifest, state_label
from ..redistribution import DistributionMode
from ..serializers import Serializer, serializer_from_snapshot
from ..ttl import TtlConfig
from ..writer import delete_replaced, publish
from .cli import parse_serializer, parse_size
from .commit import Job, WriteOptions, merge_keyed, merge_list, write_partial
from .datasource import bool_option, int_option, option_values
from .fragments import find_state
from .writer import _drop_unused_files, _feed_keyed, _feed_list, _open_keyed, _open_list, _Shape, _with_key_groups

#: Options of ``format("savepoint")`` writes (names without regard to case, snake_case too).
WRITE_OPTIONS = ("path", "operator", "state", "stateType", "kind", "keySerializer", "valueSerializer",
                 "userKeySerializer", "parallelism", "maxParallelism", "distribution", "codec", "chunkBytes",
                 "fileBytes", "targetFileSize", "inlineBytes", "keyBounds")

_KINDS = {name: kind for kind, name in KIND_NAMES.items()}
# pyspark 4.0 hands a writer Rows; later versions have an Arrow writer that takes batches.
if TYPE_CHECKING:
    from pyspark.sql.datasource import DataSourceWriter as _Writer
else:
    _Writer = getattr(spark_datasource, "DataSourceArrowWriter", spark_datasource.DataSourceWriter)


@dataclass(frozen=True)
class _Written(WriterCommitMessage):
    partial: bytes


@dataclass(frozen=True)
class _Target:
    """What every task and the commit need to know of the write, planned on the driver."""

    location: str
    job: Job
    shape: _Shape
    state: bytes  # the pb.KeyedState or pb.ListState, without chunks
    keyed: bool
    columns: tuple[str, ...]
    previous_digest: str | None  # sha256 of the manifest replaced, None: bootstrap
    new_operator: bytes  # the pb.Operator to add when the savepoint has none of that id, else b""


def plan_write(options, schema: StructType, overwrite: bool) -> SavepointSink:
    """Check the options and the DataFrame's columns against the savepoint at the path, on
    the driver, before any task runs."""
    values = option_values(options, WRITE_OPTIONS, "writes")
    location, operator_id, name = (values.get(k) for k in ("path", "operator", "state"))
    if not location or not operator_id or not name:
        raise InvalidArgumentError("a savepoint write needs .save(path) and the options 'operator' and 'state'")
    io = open_io(location)
    previous, manifest = _current(io)
    # Here, not in every task that opens a writer. df.write takes no force; SavepointBuilder does.
    check_not_a_base(io, previous, force=False,
                     breaking="replace the state with pyref.spark.SavepointBuilder(..., force=True) to break them")
    op = next((o for o in manifest.operators if o.operator_id == operator_id), None)
    new_operator = b""
    if op is None:
        op = _operator(values, operator_id)
        new_operator = op.SerializeToString()
    elif values.get("parallelism") or values.get("maxParallelism") or values.get("keySerializer"):
        raise InvalidArgumentError(f"operator {operator_id!r} exists: its parallelism and key serializer are the "
                                   "savepoint's; leave out 'parallelism', 'maxParallelism' and 'keySerializer'",
                                   path=io.location)
    existing = find_state(op, name)
    if existing is not None and not overwrite:
        raise InvalidArgumentError("state exists; write with mode('overwrite') to replace it",
                                   state=state_label(op, name), path=io.location)
    state_type = values.get("stateType") or _type_of(existing, state_label(op, name))
    if state_type not in ("keyed", "list"):
        raise InvalidArgumentError(f"option 'stateType' is 'keyed' or 'list', got {state_type!r}")
    keyed = state_type == "keyed"
    if keyed:
        replaced = existing if isinstance(existing, pb.KeyedState) else None
        value_serializer, value_snapshot = _kept_serializer(
            values, "valueSerializer", replaced.value_serializer if replaced is not None else None)
        state, columns, open_state = _keyed_state(values, op, name, value_serializer, value_snapshot, replaced)
    else:
        replaced_list = existing if isinstance(existing, pb.ListState) else None
        value_serializer, value_snapshot = _kept_serializer(
            values, "valueSerializer", replaced_list.element_serializer if replaced_list is not None else None)
        mode = (DistributionMode.parse(values["distribution"]) if "distribution" in values
                else DistributionMode(replaced_list.mode) if replaced_list is not None
                else DistributionMode.SPLIT_DISTRIBUTE)
        state = pb.ListState(name=name, mode=cast(pb.DistributionMode, int(mode)), element_serializer=value_snapshot)
        columns, open_state = ("subtask", "value"), partial(_open_list, _Shape.of(op), name, value_serializer, mode)
    _check_columns(schema, columns)
    options = WriteOptions(codec=values.get("codec", "zstd"),
                           chunk_bytes=int_option(values, "chunkBytes", WriteOptions.chunk_bytes),
                           file_bytes=_file_bytes(values),
                           inline_bytes=_count(values, "inlineBytes", WriteOptions.inline_bytes),
                           key_bounds=bool_option(values, "keyBounds"))
    target = _Target(io.location, Job.new(io.location, options), _Shape.of(op), state.SerializeToString(), keyed,
                     columns, hashlib.sha256(previous).hexdigest() if previous is not None else None, new_operator)
    return SavepointSink(target, open_state, schema)


def _type_of(existing: pb.ListState | pb.KeyedState | pb.BroadcastState | None, label: str) -> str:
    """The 'stateType' a write takes by default: a replaced state's own (a list state written over as keyed
    state by default became one, which Flink refuses to restore), else keyed. A broadcast state, which this
    path does not write, is replaced only by a 'stateType' given."""
    if isinstance(existing, pb.BroadcastState):
        raise InvalidArgumentError("the state is a broadcast state, which df.write does not write: give option 'stateType' "
                                   "('keyed' or 'list') to replace it by such a state", state=label)
    return "list" if isinstance(existing, pb.ListState) else "keyed"


def _file_bytes(values: dict[str, str]) -> int:
    """The largest data file a task writes: option 'targetFileSize' (256MB, 1g...) or 'fileBytes'
    (bytes), one of the two. Tasks are the DataFrame's partitions (no shuffle), each writing
    files of about that size from its rows."""
    if "targetFileSize" not in values:
        return int_option(values, "fileBytes", WriteOptions.file_bytes)
    if "fileBytes" in values:
        raise InvalidArgumentError("give option 'targetFileSize' or 'fileBytes', not both: they set the same limit")
    return parse_size(values["targetFileSize"], "option 'targetFileSize'")


def _current(io: SavepointIO) -> tuple[bytes | None, pb.Manifest]:
    """The manifest at the path as stored and decoded (none: an empty one)."""
    if io.size(MANIFEST_NAME) is None:
        return None, pb.Manifest()
    previous = io.read_file(MANIFEST_NAME)
    return previous, decode_manifest(previous, path=io.describe(MANIFEST_NAME))[0]


def _count(values: dict[str, str], name: str, default: int) -> int:
    """A whole number option that may be 0."""
    text = values.get(name)
    if text is None:
        return default
    if not text.isdigit():
        raise InvalidArgumentError(f"option {name!r} takes a whole number >= 0, got {text!r}")
    return int(text)


def _required_serializer(values: dict[str, str], option: str) -> Serializer:
    serializer = _serializer(values, option)
    if serializer is None:
        raise InvalidArgumentError(f"give option {option!r} (a serializer label such as int64 or string)")
    return serializer


def _kept_serializer(values: dict[str, str], option: str, replaced: serializer_pb2.SerializerSnapshot | None
                     ) -> tuple[Serializer, serializer_pb2.SerializerSnapshot]:
    """A serializer and the snapshot to store: ``option`` ('valueSerializer', 'userKeySerializer'),
    else the replaced state's. Where it is the replaced state's, that state's snapshot is kept as it is,
    with the engine's own snapshot (spec/serializers.md §2.4: a Flink import's POJO, say, which
    an export writes back as Flink's POJO, not as the tuple a job never declared)."""
    if replaced is None:
        required = _required_serializer(values, option)
        return required, required.snapshot()
    given = _serializer(values, option)
    kept = serializer_from_snapshot(replaced)
    if given is None or given == kept:
        return kept, replaced
    return given, given.snapshot()


def _serializer(values: dict[str, str], option: str) -> Serializer | None:
    text = values.get(option)
    return None if text is None else parse_serializer(text)


def _operator(values: dict[str, str], operator_id: str) -> pb.Operator:
    parallelism = int_option(values, "parallelism")
    if parallelism is None:
        raise InvalidArgumentError(f"operator {operator_id!r} is new: give option 'parallelism'")
    max_parallelism = int_option(values, "maxParallelism", default_max_parallelism(parallelism))
    check_parallelism(parallelism, max_parallelism)
    op = pb.Operator(operator_id=operator_id, parallelism=parallelism, max_parallelism=max_parallelism)
    key_serializer = _serializer(values, "keySerializer")
    if key_serializer is not None:
        key_type_of(key_serializer.snapshot())  # refuses serializers without a key hash
        op.key_serializer.CopyFrom(key_serializer.snapshot())
    return op


def _keyed_state(values: dict[str, str], op: pb.Operator, name: str, value_serializer: Serializer,
                 value_snapshot: serializer_pb2.SerializerSnapshot, replaced: pb.KeyedState | None):
    """The keyed state to write, its columns and how a task opens it. A keyed state it replaces
    keeps its kind (unless 'kind' says otherwise), namespace and TTL: the DataFrame then has
    the ``namespace`` and ``ttl_timestamp`` columns its read gives (a state that silently lost
    its TTL or windows would no longer be the job's: Flink refuses to restore it)."""
    if not op.HasField("key_serializer"):
        raise InvalidArgumentError(f"keyed state needs a key serializer: give option 'keySerializer' for the new "
                                   f"operator {op.operator_id!r}")
    if op.key_groups == pb.KEY_GROUPS_FROM_WRITER:
        raise InvalidArgumentError(f"operator {op.operator_id!r} has writer-assigned key groups; write it with "
                                   "SavepointBuilder, which takes a key_group column")
    kind = values.get("kind", KIND_NAMES[replaced.kind] if replaced is not None else "value")
    if kind not in _KINDS:
        raise InvalidArgumentError(f"unknown keyed state kind {kind!r}; choose one of {sorted(_KINDS)}")
    if kind != "map" and "userKeySerializer" in values:
        raise InvalidArgumentError("option 'userKeySerializer' is for kind 'map' only")
    user_key_serializer, user_key_snapshot = (None, None) if kind != "map" else _kept_serializer(
        values, "userKeySerializer",
        replaced.user_key_serializer if replaced is not None and replaced.HasField("user_key_serializer") else None)
    namespace_snapshot = (replaced.namespace_serializer
                          if replaced is not None and replaced.HasField("namespace_serializer") else None)
    namespace_serializer = serializer_from_snapshot(namespace_snapshot) if namespace_snapshot is not None else None
    ttl = TtlConfig.from_proto(replaced.ttl) if replaced is not None and replaced.HasField("ttl") else None
    state = pb.KeyedState(name=name, kind=_KINDS[kind], value_serializer=value_snapshot)
    if user_key_snapshot is not None:
        state.user_key_serializer.CopyFrom(user_key_snapshot)
    if namespace_snapshot is not None:
        state.namespace_serializer.CopyFrom(namespace_snapshot)
    if ttl is not None:
        state.ttl.CopyFrom(ttl.to_proto())
    columns = ("key", *(["namespace"] if namespace_serializer is not None else []),
               *(["user_key"] if kind == "map" else []), "value", *(["ttl_timestamp"] if ttl is not None else []))
    open_state = partial(_open_keyed, _Shape.of(op), name, kind, value_serializer, user_key_serializer,
                         namespace_serializer, ttl)
    return state, columns, open_state


def _check_columns(schema: StructType, columns: tuple[str, ...]) -> None:
    if sorted(schema.names) != sorted(columns):
        raise InvalidArgumentError(f"the DataFrame's columns {schema.names} are not this state's {list(columns)}; "
                                   "select and rename them first")


class SavepointSink(_Writer):
    def __init__(self, target: _Target, open_state, schema: StructType) -> None:
        self.target = target
        self.open_state = open_state
        self.arrow_schema = to_arrow_schema(schema)

    def write(self, iterator: Iterator) -> WriterCommitMessage:
        t = self.target
        batches = (b.select(list(t.columns)) for b in _as_batches(iterator, self.arrow_schema))
        if t.keyed:
            assert t.shape.key_serializer is not None  # plan_write refuses keyed state without one
            batches = _with_key_groups(t.shape.key_serializer, t.shape.max_parallelism, batches)
        feed = _feed_keyed if t.keyed else _feed_list
        name = (pb.KeyedState if t.keyed else pb.ListState).FromString(t.state).name
        with locating(state=f"{t.shape.operator_id}/{name}"):  # a key the key serializer refuses, say
            return _Written(write_partial(t.job, self.open_state, feed, batches))

    def commit(self, messages: list) -> None:
        t = self.target
        io = open_io(t.location)
        previous, manifest = _current(io)
        digest = hashlib.sha256(previous).hexdigest() if previous is not None else None
        if digest != t.previous_digest:
            self.abort(messages)
            raise InvalidArgumentError("the savepoint changed while this write ran; nothing was committed",
                                       path=t.location)
        manifest.savepoint_id = str(uuid.uuid4())
        manifest.created_by = f"pyref {__version__} (spark)"
        manifest.created_at_ms = int(time.time() * 1000)
        if t.new_operator:
            manifest.operators.add().ParseFromString(t.new_operator)
        op = next(o for o in manifest.operators if o.operator_id == t.shape.operator_id)
        partials = [pb.Manifest.FromString(m.partial) for m in messages if m is not None]
        state = (pb.KeyedState if t.keyed else pb.ListState).FromString(t.state)
        for states in (op.list_states, op.keyed_states, op.broadcast_states):  # the state replaced, of any type
            kept = [s for s in states if s.name != state.name]
            del states[:]
            states.extend(kept)
        states = op.keyed_states if t.keyed else op.list_states
        if t.keyed:
            merge_keyed(manifest, state, partials)
        else:
            merge_list(manifest, state, partials, op.parallelism)
        states.append(state)
        _drop_unused_files(manifest)
        publish(io, manifest, previous, lambda: t.job.delete_unreferenced(io, None))
        t.job.delete_unreferenced(io, manifest)
        delete_replaced(io, manifest, previous)

    def abort(self, messages: list) -> None:
        self.target.job.delete_unreferenced(open_io(self.target.location), None)


def _as_batches(iterator: Iterator, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Arrow batches of what Spark hands the writer: batches (pyspark >= 4.1) or, from
    pyspark 4.0's row writer, rows gathered into batches."""
    rows: list = []
    for item in iterator:
        if isinstance(item, pa.RecordBatch):
            yield item
            continue
        rows.append(item.asDict())
        if len(rows) >= 10_000:
            yield pa.RecordBatch.from_pylist(rows, schema=schema)
            rows = []
    if rows:
        yield pa.RecordBatch.from_pylist(rows, schema=schema)
