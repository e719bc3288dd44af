"""The positions of a FLIP-27 source in a savepoint: the splits each reader holds and the
split enumerator's checkpoint, decoded to dataclasses and encoded back.

A FLIP-27 source operator keeps two things (spec/security.md §5.1 has the byte layouts):

* the list state ``SourceReaderState`` (SPLIT_DISTRIBUTE, ``byte[]`` elements): one element
  per split a reader held, ``SimpleVersionedSerialization.writeVersionAndSerialize``
  of the source's split serializer (int version, int length, the split's bytes);
* its operator coordinator state: ``SourceCoordinator``'s framing (int framing version
  0 or 1, int enumerator serializer version, int length) around the enumerator's checkpoint.

Neither names the source, so the source is recognised by its bytes: the first known
split serializer that reads one of the readers' splits exactly (to its last byte) is
the source's, and every other split and the enumerator's checkpoint must then read
under it, else the bytes are damaged (:class:`~pyref.errors.CorruptSavepointError`
naming the operator, the state, the subtask and element, and the byte range).
Known: ``NumberSequenceSource`` (``env.fromSequence``, ``DataGeneratorSource``),
``KafkaSource`` (split serializer version 0, enumerator versions 0 to 3) and
``FileSource`` (split and enumerator version 1, the layout with modification time
and file size that Flink 1.15+ writes). Bytes of any other source stay opaque
(:class:`OpaqueSplit`, with a note of what would read them).

The legacy ``FlinkKafkaConsumer`` (Flink 1.x) is no FLIP-27 source: it keeps its partitions'
offsets in the union list state ``topic-partition-offset-states``
(:mod:`pyref.flink.kafka_consumer`), read here as its readers' "splits"
(:class:`~pyref.flink.kafka_consumer.KafkaConsumerPartition`, source ``"kafka-consumer"``,
no enumerator) and moved alike.

:func:`source_splits` reads them from an operator of a pyref savepoint or of a Flink
savepoint; :func:`rewrite_source_splits` writes a pyref savepoint with positions moved
(``pyref set-source-position``), which ``export-flink`` turns back into a Flink savepoint.
"""

from __future__ import annotations

import dataclasses
import os
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import pyarrow as pa

from .._proto.savepoint.v1 import manifest_pb2 as pb
from ..chunk import encode_chunk
from ..errors import CorruptSavepointError, InvalidArgumentError, SavepointError, unknown_names
from ..reader import OperatorView, Savepoint
from ..rewrite import Derivation, copy_states, derive
from .datainput import DataInput
from .dataoutput import DataOutput, string_value, varint
from .kafka_consumer import (CONSUMER_STATE, KAFKA_TOPIC_PARTITION, SENTINELS, KafkaConsumerPartition,
                             decode_consumer_partition, encode_consumer_partition, stored_offset)

__all__ = [
    "READER_STATE",
    "NO_STOPPING_OFFSET",
    "MIGRATED_OFFSET",
    "NumberSequenceSplit",
    "KafkaSplit",
    "FileSplit",
    "FileUri",
    "OpaqueSplit",
    "KafkaConsumerPartition",
    "EnumeratorSplit",
    "EnumeratorState",
    "SourceSplits",
    "source_splits",
    "describe_source",
    "source_text",
    "decode_split",
    "encode_split",
    "decode_coordinator_state",
    "encode_coordinator_state",
    "split_coordinator_state",
    "rewrite_source_splits",
]

#: The list state a FLIP-27 ``SourceOperator`` keeps its reader's splits in.
READER_STATE = "SourceReaderState"
#: ``KafkaPartitionSplit.NO_STOPPING_OFFSET`` (``Long.MIN_VALUE``): an unbounded split.
NO_STOPPING_OFFSET = -(1 << 63)
#: ``KafkaPartitionSplit.MIGRATED``: the offset an enumerator checkpoint of version 1 or 2
#: (topic and partition only) leaves to be looked up on restore.
MIGRATED_OFFSET = -(1 << 63)
#: ``SourceCoordinatorSerdeUtils``: framing versions of a ``SourceCoordinator``'s checkpoint.
_COORDINATOR_FRAMINGS = (0, 1)
_FILE_CHECKPOINT_MAGIC = 0xDEADBEEF  # PendingSplitsCheckpointSerializer.VERSION_1_MAGIC_NUMBER
_LE_INT = struct.Struct("<i")


# -- splits -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class NumberSequenceSplit:
    """A ``NumberSequenceSource`` split: the numbers ``start..end`` (both included) still to emit."""

    kind: ClassVar[str] = "number-sequence"
    split_id: str
    start: int
    end: int


@dataclass(frozen=True)
class KafkaSplit:
    """A ``KafkaPartitionSplit``: where to read ``topic`` partition ``partition`` from (the next
    offset, or -2 earliest, -3 committed, -1 latest, :data:`MIGRATED_OFFSET`) and, for a bounded
    split, where to stop (:data:`NO_STOPPING_OFFSET` for none)."""

    kind: ClassVar[str] = "kafka"
    topic: str
    partition: int
    starting_offset: int
    stopping_offset: int = NO_STOPPING_OFFSET

    @property
    def split_id(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True)
class FileUri:
    """A Flink ``Path`` as it is stored: its URI's parts (None where the URI has none)."""

    scheme: str | None
    user_info: str | None
    host: str | None
    port: int
    path: str | None
    query: str | None = None
    fragment: str | None = None

    def __str__(self) -> str:
        authority = (f"{self.user_info}@" if self.user_info else "") + (self.host or "") + (
            f":{self.port}" if self.port != -1 else "")
        text = (f"{self.scheme}:" if self.scheme else "") + (f"//{authority}" if self.host is not None else "")
        return text + (self.path or "") + (f"?{self.query}" if self.query is not None else "") + (
            f"#{self.fragment}" if self.fragment is not None else "")


@dataclass(frozen=True)
class FileSplit:
    """A ``FileSourceSplit``: ``length`` bytes of ``path`` from ``offset``; ``reader_position``
    is the reader's checkpointed position in it, ``(offset, records after offset)``, if any."""

    kind: ClassVar[str] = "file"
    split_id: str
    path: FileUri | None
    offset: int
    length: int
    modification_time: int
    file_size: int
    hostnames: tuple[str, ...] = ()
    reader_position: tuple[int, int] | None = None


@dataclass(frozen=True)
class OpaqueSplit:
    """A split of a source pyref has no decoder for: its serializer version and bytes."""

    kind: ClassVar[str] = "opaque"
    serializer_version: int
    data: bytes

    @property
    def split_id(self) -> None:
        return None


Split = NumberSequenceSplit | KafkaSplit | FileSplit | OpaqueSplit | KafkaConsumerPartition


def _split_dict(split: Split) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": split.kind, "split_id": split.split_id}
    for f in dataclasses.fields(split):
        value = getattr(split, f.name)
        out[f.name] = value.hex() if isinstance(value, bytes) else str(value) if isinstance(value, FileUri) else (
            list(value) if isinstance(value, tuple) else value)
    return out


# -- the enumerator's checkpoint -------------------------------------------------------------


@dataclass(frozen=True)
class EnumeratorSplit:
    """A split in an enumerator's checkpoint: ``"pending"`` (not handed to a reader yet) or
    ``"assigned"``; Kafka's version-0 checkpoint also names the reader (``subtask``)."""

    split: Split
    status: str = "pending"
    subtask: int | None = None


@dataclass(frozen=True)
class EnumeratorState:
    """A split enumerator's checkpoint. ``initial_discovery_finished``: Kafka (version 2+);
    ``processed_paths``: FileSource (files already turned into splits); ``subtasks``: Kafka
    version 0, the readers of its assignment map in stored order; ``data``: the bytes of an
    enumerator pyref does not decode (then ``splits`` is empty)."""

    serializer_version: int
    splits: tuple[EnumeratorSplit, ...] = ()
    initial_discovery_finished: bool | None = None
    processed_paths: tuple[str, ...] | None = None
    subtasks: tuple[int, ...] | None = None
    data: bytes | None = None

    @property
    def pending(self) -> list[Split]:
        return [s.split for s in self.splits if s.status == "pending"]

    @property
    def assigned(self) -> list[Split]:
        return [s.split for s in self.splits if s.status == "assigned"]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"serializer_version": self.serializer_version,
                               "pending": [_split_dict(s) for s in self.pending],
                               "assigned": [{**_split_dict(s.split), **({"subtask": s.subtask} if s.subtask is not None
                                                                       else {})}
                                            for s in self.splits if s.status == "assigned"]}
        for name in ("initial_discovery_finished", "processed_paths", "subtasks"):
            value = getattr(self, name)
            if value is not None:
                out[name] = list(value) if isinstance(value, tuple) else value
        if self.data is not None:
            out["data"] = self.data.hex()
        return out


@dataclass(frozen=True)
class SourceSplits:
    """A source operator's positions: ``source`` (``"number-sequence"``, ``"kafka"``,
    ``"file"``, ``"kafka-consumer"`` for a legacy ``FlinkKafkaConsumer``, or None when no known
    serializer reads them), the splits each reader (subtask) held, the enumerator's checkpoint
    (None without coordinator state) and, for bytes left opaque, a note saying why."""

    operator: str
    source: str | None
    readers: tuple[tuple[Split, ...], ...]
    enumerator: EnumeratorState | None
    note: str | None = None

    def splits(self) -> list[Split]:
        """Every reader's splits, subtask by subtask."""
        return [s for reader in self.readers for s in reader]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"source": self.source,
                               "readers": [[_split_dict(s) for s in reader] for reader in self.readers],
                               "enumerator": self.enumerator.to_dict() if self.enumerator is not None else None}
        if self.note is not None:
            out["note"] = self.note
        return out


def describe_source(op: Any, *, path: str | None = None) -> dict[str, Any] | None:
    """``source_splits(op).to_dict()`` for ``pyref inspect --json``; damage is said
    (``{"error": ...}``), not raised, as inspect says what it cannot read."""
    try:
        splits = source_splits(op, path=path)
    except SavepointError as exc:
        return {"error": str(exc)}
    return splits.to_dict() if splits is not None else None


def source_text(info: dict[str, Any]) -> list[str]:
    """The lines ``pyref inspect`` prints of :func:`describe_source`'s dict."""
    if "error" in info:
        return [f"  source splits not read: {info['error']}"]
    out = [f"  source {info['source'] or 'not decoded'}" + (f" ({info['note']})" if "note" in info else "")]
    for subtask, reader in enumerate(info["readers"]):
        out += [f"    reader {subtask}: {_split_text(s)}" for s in reader] or [f"    reader {subtask}: no splits"]
    e = info["enumerator"]
    if e is not None:
        said = "; ".join(f"{what} {', '.join(_split_text(s) for s in e[what])}" for what in ("pending", "assigned")
                         if e[what]) or "no splits"
        extra = "".join(f"; {name.replace('_', ' ')} {e[name] if name != 'processed_paths' else len(e[name])}"
                        for name in ("initial_discovery_finished", "processed_paths") if name in e)
        out.append(f"    enumerator (version {e['serializer_version']}): "
                   + (f"{len(e['data']) // 2} bytes not decoded" if "data" in e else said) + extra)
    return out


def _split_text(split: dict[str, Any]) -> str:
    """One split of :func:`describe_source`'s dict, in a few words."""
    kind = split["kind"]
    if kind == "number-sequence":
        return f"[{split['split_id']}] {split['start']}..{split['end']}"
    if kind == "kafka":
        stop = "" if split["stopping_offset"] == NO_STOPPING_OFFSET else f" to {split['stopping_offset']}"
        start = "(migrated)" if split["starting_offset"] == MIGRATED_OFFSET else split["starting_offset"]
        return f"{split['topic']}/{split['partition']} offset {start}{stop}" + (
            f" (reader {split['subtask']})" if "subtask" in split else "")
    if kind == "kafka-consumer":
        offset = split["offset"]
        at = f"{SENTINELS[offset]} offset" if offset in SENTINELS else f"offset {offset} (resumes at {offset + 1})"
        return f"{split['topic']}/{split['partition']} {at}"
    if kind == "file":
        position = split["reader_position"]
        at = f", at {position[0]} +{position[1]} records" if position else ""
        return f"[{split['split_id']}] {split['path']} bytes {split['offset']}+{split['length']}{at}"
    return f"{len(split['data']) // 2} bytes (serializer version {split['serializer_version']})"


# -- the sources' serializers -----------------------------------------------------------------


class _Format:
    """One source's split and enumerator serializers, as Flink's code writes them."""

    kind: str
    split_version: int
    enumerator_versions: tuple[int, ...]
    #: What the note of undecoded bytes calls this serializer.
    described: str

    def read_split(self, inp: DataInput) -> Split:
        raise NotImplementedError

    def write_split(self, out: DataOutput, split: Any) -> None:
        raise NotImplementedError

    def read_enumerator(self, inp: DataInput, version: int) -> EnumeratorState:
        raise NotImplementedError

    def write_enumerator(self, state: EnumeratorState) -> bytes:
        raise NotImplementedError

    def split_bytes(self, split: Split) -> bytes:
        if not isinstance(split, _SPLIT_TYPES[self.kind]):
            raise InvalidArgumentError(f"a {type(split).__name__} is no split of a {self.kind} source")
        out = DataOutput()
        self.write_split(out, split)
        return out.getvalue()

    def nested_split(self, inp: DataInput, version: int, length: int, what: str) -> Split:
        """A split an enumerator's checkpoint holds: ``length`` bytes of the split serializer's."""
        if version != self.split_version:
            raise inp.corrupt(f"{what}: split serializer version {version}, {self.described} writes "
                              f"{self.split_version}")
        start = inp.pos
        return _read_exactly(self, DataInput(inp.read_bytes(length, what), base=inp.base + start, path=inp.path,
                                             state=inp.state))


def _read_exactly(fmt: _Format, inp: DataInput) -> Split:
    split = fmt.read_split(inp)
    if not inp.at_end():
        raise inp.corrupt(f"{inp.remaining()} bytes after a {fmt.kind} split", inp.pos, inp.remaining())
    return split


class _NumberSequence(_Format):
    """``NumberSequenceSource.SplitSerializer`` / ``CheckpointSerializer`` (flink-core), version 1."""

    kind, split_version, enumerator_versions = "number-sequence", 1, (1,)
    described = "NumberSequenceSource's serializer (version 1)"

    def read_split(self, inp: DataInput) -> NumberSequenceSplit:
        return NumberSequenceSplit(inp.read_utf("split id"), inp.read_long("from"), inp.read_long("to"))

    def write_split(self, out: DataOutput, split: NumberSequenceSplit) -> None:
        out.utf(split.split_id, "split id").long(split.start).long(split.end)

    def read_enumerator(self, inp: DataInput, version: int) -> EnumeratorState:
        count = inp.read_count("remaining splits", 18)
        return EnumeratorState(version, tuple(EnumeratorSplit(self.read_split(inp)) for _ in range(count)))

    def write_enumerator(self, state: EnumeratorState) -> bytes:
        out = DataOutput().int(len(state.splits))
        for s in state.splits:
            out.raw(self.split_bytes(s.split))
        return out.getvalue()


class _Kafka(_Format):
    """``KafkaPartitionSplitSerializer`` (version 0) and ``KafkaSourceEnumStateSerializer``
    (versions 0 to 3) of apache/flink-connector-kafka."""

    kind, split_version, enumerator_versions = "kafka", 0, (0, 1, 2, 3)
    described = "KafkaSource's serializer (split version 0, enumerator versions 0-3)"
    _STATUS = {0: "assigned", 1: "pending"}  # AssignmentStatus: ASSIGNED(0), UNASSIGNED(1)

    def read_split(self, inp: DataInput) -> KafkaSplit:
        return KafkaSplit(inp.read_utf("topic"), inp.read_int("partition"), inp.read_long("starting offset"),
                          inp.read_long("stopping offset"))

    def write_split(self, out: DataOutput, split: KafkaSplit) -> None:
        out.utf(split.topic, "topic").int(split.partition).long(split.starting_offset).long(split.stopping_offset)

    def _status(self, inp: DataInput) -> str:
        code = inp.read_int("assignment status")
        if code not in self._STATUS:
            raise inp.corrupt(f"assignment status {code} (0 assigned, 1 unassigned)", inp.pos - 4, 4)
        return self._STATUS[code]

    def read_enumerator(self, inp: DataInput, version: int) -> EnumeratorState:
        if version == 0:  # SerdeUtils.serializeSplitAssignments: per reader, its splits
            readers = inp.read_count("readers", 8)
            split_version = inp.read_int("split serializer version")
            splits, subtasks, seen = [], [], set()
            for _ in range(readers):
                subtask = inp.read_int("subtask")
                if subtask in seen:  # a map's keys: Java's reader would keep the last one's splits alone
                    raise inp.corrupt(f"subtask {subtask} has two assignments", inp.pos - 4, 4)
                seen.add(subtask)
                subtasks.append(subtask)
                for _ in range(inp.read_count("assigned splits", 4)):
                    split = self.nested_split(inp, split_version, inp.read_count("split length"), "split")
                    splits.append(EnumeratorSplit(split, "assigned", subtask))
            return EnumeratorState(version, tuple(splits), subtasks=tuple(subtasks))
        count = inp.read_count("partitions", 6)
        if version == 3:
            split_version = inp.read_int("split serializer version")
            splits = [EnumeratorSplit(self.nested_split(inp, split_version, inp.read_count("split length"), "split"),
                                      self._status(inp))
                      for _ in range(count)]
        else:  # 1 and 2: topic and partition only
            splits = [EnumeratorSplit(KafkaSplit(inp.read_utf("topic"), inp.read_int("partition"), MIGRATED_OFFSET),
                                      self._status(inp) if version == 2 else "assigned") for _ in range(count)]
        finished = inp.read_bool("initial discovery finished") if version >= 2 else None
        return EnumeratorState(version, tuple(splits), initial_discovery_finished=finished)

    def write_enumerator(self, state: EnumeratorState) -> bytes:
        version, out = state.serializer_version, DataOutput()
        codes = {status: code for code, status in self._STATUS.items()}
        if version == 0:
            subtasks = state.subtasks or ()
            by_subtask: dict[int | None, list[bytes]] = {}  # one pass: a scan per subtask was quadratic
            for s in state.splits:
                by_subtask.setdefault(s.subtask, []).append(self.split_bytes(s.split))
            out.int(len(subtasks)).int(self.split_version)
            for subtask in subtasks:
                mine = by_subtask.get(subtask, [])
                out.int(subtask).int(len(mine))
                for data in mine:
                    out.int(len(data)).raw(data)
            return out.getvalue()
        out.int(len(state.splits))
        if version == 3:
            out.int(self.split_version)
        for s in state.splits:
            if version == 3:
                data = self.split_bytes(s.split)
                out.int(len(data)).raw(data).int(codes[s.status])
                continue
            split = s.split
            if not isinstance(split, KafkaSplit):
                raise InvalidArgumentError(f"a {type(split).__name__} is no split of a kafka source")
            out.utf(split.topic, "topic").int(split.partition)
            if version == 2:
                out.int(codes[s.status])
        if version >= 2:
            out.boolean(bool(state.initial_discovery_finished))
        return out.getvalue()


class _File(_Format):
    """``FileSourceSplitSerializer`` and ``PendingSplitsCheckpointSerializer``
    (flink-connector-files), version 1 as Flink 1.15+ writes it."""

    kind, split_version, enumerator_versions = "file", 1, (1,)
    described = "FileSource's serializer (version 1, Flink 1.15+)"

    @staticmethod
    def _nullable(inp: DataInput, what: str) -> str | None:
        return inp.read_string_value(what) if inp.read_bool(f"{what} present") else None

    def read_split(self, inp: DataInput) -> FileSplit:
        split_id = inp.read_utf("split id")
        path = None
        if inp.read_bool("path present"):  # Path.serializeToDataOutputView: the URI's parts
            path = FileUri(self._nullable(inp, "scheme"), self._nullable(inp, "user info"),
                           self._nullable(inp, "host"), inp.read_int("port"), self._nullable(inp, "path"),
                           self._nullable(inp, "query"), self._nullable(inp, "fragment"))
        offset, length = inp.read_long("offset"), inp.read_long("length")
        modified, size = inp.read_long("modification time"), inp.read_long("file size")
        hosts = tuple(inp.read_utf("host name") for _ in range(inp.read_count("host names", 2)))
        position = (inp.read_long("reader offset"), inp.read_long("records after offset")) if inp.read_bool(
            "reader position present") else None
        return FileSplit(split_id, path, offset, length, modified, size, hosts, position)

    def write_split(self, out: DataOutput, split: FileSplit) -> None:
        out.utf(split.split_id, "split id").boolean(split.path is not None)
        if split.path is not None:
            p = split.path
            for part in (p.scheme, p.user_info, p.host):
                self._write_nullable(out, part)
            out.int(p.port)
            for part in (p.path, p.query, p.fragment):
                self._write_nullable(out, part)
        out.long(split.offset).long(split.length).long(split.modification_time).long(split.file_size)
        out.int(len(split.hostnames))
        for host in split.hostnames:
            out.utf(host, "host name")
        out.boolean(split.reader_position is not None)
        if split.reader_position is not None:
            out.long(split.reader_position[0]).long(split.reader_position[1])

    @staticmethod
    def _write_nullable(out: DataOutput, text: str | None) -> None:
        out.boolean(text is not None)
        if text is not None:
            out.raw(string_value(text))

    def read_enumerator(self, inp: DataInput, version: int) -> EnumeratorState:
        def le_int(what: str) -> int:  # this checkpoint's ints are little-endian (a ByteBuffer's)
            return int(_LE_INT.unpack(inp.read_bytes(4, what))[0])

        magic = le_int("magic number")
        if magic & 0xFFFFFFFF != _FILE_CHECKPOINT_MAGIC:
            raise inp.corrupt(f"magic number {magic & 0xFFFFFFFF:#x}, not {_FILE_CHECKPOINT_MAGIC:#x}", inp.pos - 4, 4)
        split_version, splits, paths = le_int("split serializer version"), le_int("splits"), le_int("paths")
        if splits < 0 or paths < 0 or 4 * (splits + paths) > inp.remaining():
            raise inp.corrupt(f"{splits} splits and {paths} paths in {inp.remaining()} bytes", inp.pos - 8, 8)
        pending = []
        for _ in range(splits):
            pending.append(EnumeratorSplit(self.nested_split(inp, split_version, le_int("split length"), "split")))
        processed = []
        for _ in range(paths):
            length = le_int("path length")
            raw = inp.read_bytes(length, "processed path")
            try:
                processed.append(raw.decode("utf-8"))
            except UnicodeDecodeError:
                raise inp.corrupt("processed path is not UTF-8", inp.pos - length, length) from None
        return EnumeratorState(version, tuple(pending), processed_paths=tuple(processed))

    def write_enumerator(self, state: EnumeratorState) -> bytes:
        splits = [self.split_bytes(s.split) for s in state.splits]
        paths = [p.encode("utf-8") for p in state.processed_paths or ()]
        out = bytearray(struct.pack("<Iiii", _FILE_CHECKPOINT_MAGIC, self.split_version, len(splits), len(paths)))
        for data in [*splits, *paths]:
            out += _LE_INT.pack(len(data)) + data
        return bytes(out)


FORMATS: dict[str, _Format] = {f.kind: f for f in (_NumberSequence(), _Kafka(), _File())}
_SPLIT_TYPES: dict[str, type] = {"number-sequence": NumberSequenceSplit, "kafka": KafkaSplit, "file": FileSplit}
_UNKNOWN_NOTE = ("not the splits of a NumberSequenceSource, KafkaSource or FileSource (Flink 1.15+): decoding "
                 "them needs their source's split serializer")


# -- envelopes -----------------------------------------------------------------------------


def _split_version(data: bytes, state: str, path: str | None) -> int:
    """The version of ``SimpleVersionedSerialization.writeVersionAndSerialize``'s bytes (int
    version, int length, the split's bytes), whose length must be the bytes that follow."""
    inp = DataInput(data, path=path, state=state)
    version = inp.read_int("split serializer version")
    length = inp.read_count("split length")
    if length != inp.remaining():
        raise inp.corrupt(f"split length {length}, {inp.remaining()} bytes follow", 4, 4)
    return version


def decode_split(data: bytes, source: str | None = None, *, state: str = READER_STATE,
                 path: str | None = None) -> Split:
    """A split as a reader stores it (version, length, bytes); of the given ``source`` kind, or
    the first known one that reads it exactly, else an :class:`OpaqueSplit`."""
    if source is not None and source not in FORMATS:
        raise unknown_names("sources", [source], list(FORMATS))
    version = _split_version(data, state, path)
    for fmt in [FORMATS[source]] if source is not None else FORMATS.values():
        payload = DataInput(data, 8, path=path, state=state)
        if version != fmt.split_version:
            if source is not None:
                raise payload.corrupt(f"split serializer version {version}: {fmt.described}", 0, 4)
            continue
        try:
            return _read_exactly(fmt, payload)
        except CorruptSavepointError:
            if source is not None:
                raise
    return OpaqueSplit(version, bytes(data[8:]))


def encode_split(split: Split) -> bytes:
    """The bytes a reader stores for ``split`` (version, length, the split serializer's bytes; a
    legacy ``FlinkKafkaConsumer``'s element)."""
    if isinstance(split, KafkaConsumerPartition):
        return encode_consumer_partition(split)
    if isinstance(split, OpaqueSplit):
        return struct.pack(">ii", split.serializer_version, len(split.data)) + split.data
    fmt = FORMATS[split.kind]
    data = fmt.split_bytes(split)
    return struct.pack(">ii", fmt.split_version, len(data)) + data


def split_coordinator_state(data: bytes, *, state: str = "coordinator state",
                            path: str | None = None) -> tuple[int, bytes] | None:
    """A ``SourceCoordinator``'s checkpoint unwrapped: (enumerator serializer version, the
    enumerator's bytes); None when ``data`` is not one (another coordinator's state)."""
    inp = DataInput(data, path=path, state=state)
    if len(data) < 4 or inp.read_int("framing version") not in _COORDINATOR_FRAMINGS:
        return None
    version = inp.read_int("enumerator serializer version")
    checkpoint = inp.read_bytes(inp.read_count("enumerator checkpoint length"), "enumerator checkpoint")
    if not inp.at_end():
        raise inp.corrupt(f"{inp.remaining()} bytes after the enumerator checkpoint", inp.pos, inp.remaining())
    return version, checkpoint


def decode_coordinator_state(data: bytes, source: str, *, state: str = "coordinator state",
                             path: str | None = None) -> EnumeratorState:
    """The enumerator's checkpoint in a ``source`` operator's coordinator state; one of a
    version the source's serializer does not write stays opaque (``data``)."""
    unwrapped = split_coordinator_state(data, state=state, path=path)
    if unwrapped is None:
        raise CorruptSavepointError("coordinator state is not a source coordinator's (framing version 0 or 1)",
                                    path=path, state=state, byte_range=(0, min(len(data), 4)))
    version, checkpoint = unwrapped
    fmt = FORMATS[source]
    if version not in fmt.enumerator_versions:
        return EnumeratorState(version, data=checkpoint)
    inp = DataInput(checkpoint, base=12, path=path, state=state)
    result = fmt.read_enumerator(inp, version)
    if not inp.at_end():
        raise inp.corrupt(f"{inp.remaining()} bytes after the enumerator checkpoint", inp.pos, inp.remaining())
    return result


def encode_coordinator_state(source: str, enumerator: EnumeratorState) -> bytes:
    """A ``SourceCoordinator``'s checkpoint of ``enumerator`` (framing version 1), written at
    the enumerator's serializer version (an opaque one as it was)."""
    data = enumerator.data if enumerator.data is not None else FORMATS[source].write_enumerator(enumerator)
    return struct.pack(">iii", 1, enumerator.serializer_version, len(data)) + data


# -- an operator's splits ----------------------------------------------------------------------


class _SourceOperator(Protocol):
    @property
    def list_state_names(self) -> list[str]: ...

    @property
    def coordinator_state(self) -> bytes | None: ...


def _stored_elements(op: Any, name: str, serializer_id: str, flink_type: Callable[[Any], bool]
                     ) -> list[list[bytes]] | None:
    """The elements per subtask of list state ``name`` as stored bytes, of a pyref operator
    (whose serializer is ``serializer_id``) or a Flink one (whose element type ``flink_type``
    accepts); None when the operator has no such state."""
    if name not in op.list_state_names:
        return None
    view = op.list_state(name)
    if isinstance(op, OperatorView):
        held, count = view.serializer.serializer_id == serializer_id, view.partition_count
    else:
        held, count = flink_type(view.element_type), len(view.partitions)
    return [list(view.partition(i)) for i in range(count)] if held else None


def _reader_elements(op: Any) -> list[list[bytes]] | None:
    """The reader state's elements (``byte[]``) per subtask; None when it has none."""
    return _stored_elements(op, READER_STATE, "bytes", lambda t: t.kind == "bytes")


def _consumer_elements(op: Any) -> list[list[bytes]] | None:
    """A legacy ``FlinkKafkaConsumer``'s offsets state, its elements per subtask; None when the
    operator has none. Imported, Flink's tuple serializer is kept and its elements are opaque."""
    return _stored_elements(op, CONSUMER_STATE, "opaque", lambda t: (
        t.kind == "tuple" and [c.kind for c in t.children] == ["kryo", "int64"]
        and t.children[0].type_name == KAFKA_TOPIC_PARTITION))


def _consumer_offsets(name: str, elements: list[list[bytes]], path: str | None) -> SourceSplits:
    """The consumer's partitions per subtask. One serializer wrote every element, naming the class alike (one
    Kryo registration, or by name): an element naming it otherwise is damaged (Flink would read another class)."""
    label = f"{name}/{CONSUMER_STATE}"
    readers = tuple(tuple(decode_consumer_partition(e, state=f"{label} subtask {s} element {i}", path=path)
                          for i, e in enumerate(subtask)) for s, subtask in enumerate(elements))
    first = next((p for reader in readers for p in reader), None)
    for s, reader in enumerate(readers):
        for i, partition in enumerate(reader):
            if first is not None and partition.kryo_registration != first.kryo_registration:
                raise CorruptSavepointError(
                    f"Kafka consumer offset element: the class is written {_class_written(partition)}, the state's "
                    f"first element's {_class_written(first)}", path=path, state=f"{label} subtask {s} element {i}",
                    byte_range=(0, len(varint(partition.kryo_registration or 1))))
    return SourceSplits(name, KafkaConsumerPartition.kind, readers, None)


def _class_written(partition: KafkaConsumerPartition) -> str:
    registration = partition.kryo_registration
    return "by name" if registration is None else f"as Kryo registration {registration - 2}"


def _operator_name(op: Any) -> str:
    return str(op.operator_id if isinstance(op, OperatorView) else op.name)


def source_splits(op: _SourceOperator, source: str | None = None, *,
                  path: str | None = None) -> SourceSplits | None:
    """The positions of a FLIP-27 source operator (a pyref :class:`~pyref.reader.OperatorView`
    or a :class:`~pyref.flink.FlinkOperator`): its readers' splits and its enumerator's
    checkpoint, decoded; None when the operator has neither a ``SourceReaderState`` of
    ``byte[]`` nor a ``SourceCoordinator``'s state. ``source`` (``"kafka"``...) skips the
    recognition: bytes it does not read are then damage, not another source's. A legacy
    ``FlinkKafkaConsumer``'s offsets come as its readers' splits (source ``"kafka-consumer"``)."""
    if source is not None and source not in (*FORMATS, KafkaConsumerPartition.kind):
        raise unknown_names("sources", [source], [*FORMATS, KafkaConsumerPartition.kind])
    name = _operator_name(op)
    consumer = _consumer_elements(op) if source in (None, KafkaConsumerPartition.kind) else None
    if consumer is not None:
        return _consumer_offsets(name, consumer, path)
    if source == KafkaConsumerPartition.kind:
        return None
    readers = _reader_elements(op)
    coordinator = op.coordinator_state
    label = f"{name}/{READER_STATE}"
    unwrapped = split_coordinator_state(coordinator, state=f"{name} (coordinator state)", path=path) \
        if coordinator is not None else None
    if readers is None and unwrapped is None:
        return None
    readers = readers or []
    versions = [[_split_version(e, f"{label} subtask {s} element {i}", path) for i, e in enumerate(elements)]
                for s, elements in enumerate(readers)]
    if source is None:
        source = _recognise(readers, versions, coordinator)
    if source is None:
        opaque = tuple(tuple(OpaqueSplit(v, bytes(e[8:])) for v, e in zip(vs, elements))
                       for vs, elements in zip(versions, readers))
        enumerator = EnumeratorState(unwrapped[0], data=unwrapped[1]) if unwrapped is not None else None
        return SourceSplits(name, None, opaque, enumerator, _UNKNOWN_NOTE)
    decoded = tuple(tuple(decode_split(e, source, state=f"{label} subtask {s} element {i}", path=path)
                          for i, e in enumerate(elements)) for s, elements in enumerate(readers))
    enumerator = decode_coordinator_state(coordinator, source, state=f"{name} (coordinator state)", path=path) \
        if unwrapped is not None and coordinator is not None else None
    note = None
    if enumerator is not None and enumerator.data is not None:
        note = (f"enumerator serializer version {enumerator.serializer_version} not decoded: "
                f"{FORMATS[source].described}")
    return SourceSplits(name, source, decoded, enumerator, note)


def _recognise(readers: list[list[bytes]], versions: list[list[int]], coordinator: bytes | None) -> str | None:
    """The first known source one of whose splits (else, when no reader holds a split, whose
    enumerator checkpoint) reads exactly."""
    for fmt in FORMATS.values():
        for elements, element_versions in zip(readers, versions):
            for data, version in zip(elements, element_versions):
                if version == fmt.split_version and _reads(lambda: decode_split(data, fmt.kind)):
                    return fmt.kind
    if coordinator is not None and not any(readers):
        for fmt in FORMATS.values():
            if _reads(lambda: decode_coordinator_state(coordinator, fmt.kind).data is None):
                return fmt.kind
    return None


def _reads(decode: Callable[[], Any]) -> bool:
    try:
        return decode() is not False
    except SavepointError:
        return False


# -- rewriting positions -----------------------------------------------------------------------


def rewrite_source_splits(source: str | os.PathLike[str], target: str | os.PathLike[str], operator: str,
                          update: Callable[[Split], Split], *, kind: str | None = None, copy: bool = False,
                          overwrite: bool = False, base_paths: bool = False, force: bool = False) -> Savepoint:
    """Write ``source`` (a pyref savepoint, e.g. imported from Flink) to ``target`` with the
    splits of source operator ``operator`` replaced by ``update(split)``: every reader's
    and every split in its enumerator's checkpoint. Everything else is copied (or, shallow by
    default, referred to) as :func:`pyref.rescale` does; the target is written atomically and
    returned, open. ``pyref export-flink`` then gives Flink a savepoint to restore from."""

    def build(src: Savepoint, derivation: Derivation) -> list[pb.Operator]:
        ids = [op.operator_id for op in src.manifest.operators]
        if operator not in ids:
            raise unknown_names("operators", [operator], ids)
        return [_rewritten(src, op, derivation) if op.operator_id == operator else copy_states(op, derivation)
                for op in src.manifest.operators]

    def _rewritten(src: Savepoint, op: pb.Operator, derivation: Derivation) -> pb.Operator:
        splits = source_splits(src.operator(op.operator_id), kind, path=src.location)
        if splits is None or splits.source is None:
            raise InvalidArgumentError(f"operator {operator!r} holds no splits of a known source"
                                       + (f" ({splits.note})" if splits is not None and splits.note else ""))
        readers = [[_updated(update, s, splits.source) for s in reader] for reader in splits.readers]
        rewrite_enumerator = splits.enumerator is not None and splits.enumerator.data is None
        kept = pb.Operator()
        kept.CopyFrom(op)
        if rewrite_enumerator:  # not copied: it is replaced
            kept.ClearField("coordinator_state")
        splits_state = CONSUMER_STATE if splits.source == KafkaConsumerPartition.kind else READER_STATE
        new = copy_states(kept, derivation, skip=splits_state)
        sink = derivation.sink
        if splits_state in [s.name for s in new.list_states]:
            state = next(s for s in new.list_states if s.name == splits_state)
            chunks = [sink.put(encode_chunk([pa.array([encode_split(s) for s in reader], pa.binary())]), len(reader))
                      for reader in readers if reader]
            del state.partitions[:]
            chunk = 0
            for reader in readers:
                state.partitions.add().ranges.extend([pb.ElementRange(chunk=chunk, first=0, count=len(reader))]
                                                     if reader else [])
                chunk += bool(reader)
            sink.flush()
            state.chunks.extend(derivation.own(c) for c in chunks)
        if rewrite_enumerator:
            assert splits.enumerator is not None
            held = {(s.topic, s.partition) for reader in readers for s in reader if isinstance(s, KafkaSplit)}
            enumerator = dataclasses.replace(splits.enumerator, splits=tuple(
                _enumerator_split(update, s, splits.source, splits.enumerator.serializer_version, held)
                for s in splits.enumerator.splits))
            cell = encode_coordinator_state(splits.source, enumerator)
            coordinator = sink.put(encode_chunk([pa.array([cell], pa.binary())]), 1)
            sink.flush()
            new.coordinator_state.CopyFrom(derivation.own(coordinator))
        return new

    return derive(source, target, copy=copy, overwrite=overwrite, base_paths=base_paths, build=build, force=force)


def _updated(update: Callable[[Split], Split], split: Split, source: str) -> Split:
    new = update(split)
    if type(new) is not type(split):
        raise InvalidArgumentError(f"update turned a {type(split).__name__} into a {type(new).__name__}; a "
                                   f"{source} source's splits stay {type(split).__name__}s")
    return new


def _enumerator_split(update: Callable[[Split], Split], split: EnumeratorSplit, source: str, version: int,
                      held: set[tuple[str, int]]) -> EnumeratorSplit:
    """An enumerator checkpoint's split updated. KafkaSource's versions 1 and 2 store topic and
    partition only (the connector looks the offset up on restore): a position for a partition a
    reader holds is the reader's split's; for one no reader holds it cannot be stored (it was
    dropped, silently)."""
    new = _updated(update, split.split, source)
    if new == split.split or source != "kafka" or version not in (1, 2):
        return dataclasses.replace(split, split=new)
    assert isinstance(new, KafkaSplit)
    if (new.topic, new.partition) not in held:
        raise InvalidArgumentError(f"the KafkaSource enumerator checkpoint (version {version}) stores topic and "
                                   f"partition only, so the position of {new.topic}:{new.partition}, which no reader "
                                   "holds, cannot be set: the connector looks it up with its offsets initializer")
    return split


def kafka_offsets(offsets: Mapping[tuple[str, int], int]) -> Callable[[Split], Split]:
    """An ``update`` for :func:`rewrite_source_splits`: the Kafka splits of the given
    ``(topic, partition)`` start from the given offset (-2 earliest, -1 latest, -3 the
    committed one); every other split stays. A legacy ``FlinkKafkaConsumer`` stores the
    offset before the one it resumes at, or its sentinel for -2, -1, -3."""

    def update(split: Split) -> Split:
        if isinstance(split, KafkaSplit) and (split.topic, split.partition) in offsets:
            return dataclasses.replace(split, starting_offset=offsets[split.topic, split.partition])
        if isinstance(split, KafkaConsumerPartition) and (split.topic, split.partition) in offsets:
            return dataclasses.replace(split, offset=stored_offset(offsets[split.topic, split.partition],
                                                                   f"{split.topic}:{split.partition}"))
        return split

    return update


def sequence_starts(starts: Mapping[str, int]) -> Callable[[Split], Split]:
    """An ``update`` for :func:`rewrite_source_splits`: the number-sequence splits of the given
    ids start from the given number (their end stays); every other split stays."""

    def update(split: Split) -> Split:
        if isinstance(split, NumberSequenceSplit) and split.split_id in starts:
            return dataclasses.replace(split, start=starts[split.split_id])
        return split

    return update
