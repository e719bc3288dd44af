"""Flink's ``_metadata`` of a canonical savepoint, as ``MetadataV3Serializer`` (Flink
1.13-1.15), ``MetadataV4Serializer`` (1.16-1.20), ``MetadataV5Serializer`` (2.0) and
``MetadataV6Serializer`` (2.1-2.3) write it; the inverse of :mod:`pyref.flink.metadata`.

Layout: int magic ``0x4960672D``, int version, long checkpoint id, int 0 master
states, int operator count, each operator: [v5+: UTF name, UTF uid, empty =
none] 16-byte operator id, int parallelism, int max parallelism, the coordinator
state (a null or inline stream handle), int subtask count, and per subtask its
index, managed operator state (int 1 and a handle, or int 0), raw operator state
(int 0), managed keyed state (a ``KeyGroupsSavepointStateHandle``, type 7, or the
null handle), raw keyed state (null), and no channel state (two int 0). Last
(v4+), the checkpoint properties as a Java serialization stream.

Stream handles are inline (``ByteStreamStateHandle``, type 1: UTF name, int
length, bytes) or relative files (``RelativeFileStateHandle``, type 6: UTF path
relative to the savepoint directory, long size), which is what lets a savepoint
directory be moved.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from ...errors import InvalidArgumentError
from ..dataoutput import DataOutput, utf
from ..handles import (
    BYTE_STREAM,
    NULL_HANDLE,
    PARTITIONABLE_OPERATOR,
    RELATIVE_STREAM,
    SAVEPOINT_KEY_GROUPS,
    DistributionMode,
)
from ..metadata import MAGIC
from .directory import StreamRef

__all__ = ["KeyedHandle", "OperatorHandle", "SubtaskHandles", "OperatorEntry", "metadata_bytes",
           "checkpoint_properties", "metadata_version",
           "flink_release"]

#: _metadata version by Flink minor version (MetadataSerializers of each release).
METADATA_VERSIONS = {(1, 13): 3, (1, 14): 3, (1, 15): 3, (1, 16): 4, (1, 17): 4, (1, 18): 4, (1, 19): 4, (1, 20): 4, (2, 0): 5, (2, 1): 6, (2, 2): 6, (2, 3): 6}


def flink_release(flink_version: str) -> tuple[int, int]:
    """(major, minor) of a Flink release this exporter writes for ("1.20", "2.3.0")."""
    parts = flink_version.split(".")
    release = (int(parts[0]), int(parts[1])) if len(parts) in (2, 3) and all(p.isdigit() for p in parts) else None
    if release not in METADATA_VERSIONS:
        known = ", ".join(f"{a}.{b}" for a, b in METADATA_VERSIONS)
        raise InvalidArgumentError(f"Flink version {flink_version!r} is not one this exporter writes ({known})")
    return release


def metadata_version(flink_version: str) -> int:
    """The ``_metadata`` version the Flink release ``flink_version`` writes."""
    return METADATA_VERSIONS[flink_release(flink_version)]


@dataclass(frozen=True)
class KeyedHandle:
    """A subtask's keyed state: key groups ``first_key_group ..`` and the offset of each
    one's data in ``stream`` (0: it holds none)."""

    first_key_group: int
    offsets: tuple[int, ...]
    stream: StreamRef


@dataclass(frozen=True)
class OperatorHandle:
    """A subtask's operator state: per state its distribution mode and element offsets
    (a broadcast state: the offset of its map)."""

    states: dict[str, tuple[DistributionMode, tuple[int, ...]]]
    stream: StreamRef


@dataclass(frozen=True)
class SubtaskHandles:
    index: int
    operator_state: OperatorHandle | None = None
    keyed_state: KeyedHandle | None = None


@dataclass(frozen=True)
class OperatorEntry:
    operator_id: bytes  # Flink's 16-byte OperatorID
    parallelism: int
    max_parallelism: int
    subtasks: list[SubtaskHandles]
    uid: str = ""
    name: str = ""
    coordinator_state: bytes | None = field(default=None, repr=False)


def _stream(out: DataOutput, stream: StreamRef | None) -> None:
    if stream is None:
        out.byte(NULL_HANDLE)
    elif stream.data is not None:  # inline
        out.byte(BYTE_STREAM).utf(stream.name).int(len(stream.data)).raw(stream.data)
    else:
        out.byte(RELATIVE_STREAM).utf(stream.name).long(stream.size)


def _operator_handle(out: DataOutput, handle: OperatorHandle) -> None:
    out.byte(PARTITIONABLE_OPERATOR).int(len(handle.states))
    for name, (mode, offsets) in handle.states.items():
        out.utf(name, "operator state name").byte(int(mode)).int(len(offsets))
        out.raw(struct.pack(f">{len(offsets)}q", *offsets))
    _stream(out, handle.stream)


def _subtask(out: DataOutput, sub: SubtaskHandles) -> None:
    out.int(sub.index)
    if sub.operator_state is None:
        out.int(0)
    else:
        out.int(1)
        _operator_handle(out, sub.operator_state)
    out.int(0)  # raw operator state
    keyed = sub.keyed_state
    if keyed is None:
        out.byte(NULL_HANDLE)
    else:
        out.byte(SAVEPOINT_KEY_GROUPS).int(keyed.first_key_group).int(len(keyed.offsets))
        out.raw(struct.pack(f">{len(keyed.offsets)}q", *keyed.offsets))
        _stream(out, keyed.stream)
    out.byte(NULL_HANDLE)  # raw keyed state
    out.int(0).int(0)  # input channel and result subpartition state


def _operator(out: DataOutput, op: OperatorEntry, version: int) -> None:
    if version >= 5:
        out.utf(op.name, "operator name").utf(op.uid, "operator uid")
    out.raw(op.operator_id).int(op.parallelism).int(op.max_parallelism)
    if op.coordinator_state is None:
        out.byte(NULL_HANDLE)
    else:
        _stream(out, StreamRef("coordinator", len(op.coordinator_state), op.coordinator_state))
    out.int(len(op.subtasks))
    for sub in op.subtasks:
        _subtask(out, sub)


def metadata_bytes(version: int, checkpoint_id: int, operators: list[OperatorEntry]) -> bytes:
    """The whole ``_metadata`` file."""
    out = DataOutput().int(MAGIC).int(version).long(checkpoint_id)
    out.int(0).int(len(operators))  # no master states
    for op in operators:
        _operator(out, op, version)
    if version >= 4:
        out.raw(checkpoint_properties())
    return out.getvalue()


# -- CheckpointProperties, Java-serialized ------------------------------------------


def _java_string(text: str) -> bytes:
    return b"t" + utf(text)  # TC_STRING


def _class_descriptor(name: str, serial_version: int, flags: int, fields: list[tuple[str, str, str | None]],
                      superclass: bytes) -> bytes:
    """TC_CLASSDESC: name, serialVersionUID, flags, fields (type code, name, class
    signature of object fields), TC_ENDBLOCKDATA, the superclass descriptor."""
    out = b"r" + utf(name) + struct.pack(">qBH", serial_version, flags, len(fields))
    for code, field_name, signature in fields:
        out += code.encode() + utf(field_name) + (_java_string(signature) if signature else b"")
    return out + b"x" + superclass


_SERIALIZABLE, _ENUM = 0x02, 0x10
_ENUM_CLASS = _class_descriptor("java.lang.Enum", 0, _SERIALIZABLE | _ENUM, [], b"p")
#: The handle Java gives the java.lang.Enum descriptor in this stream (0x7e0000 + 9).
_ENUM_CLASS_REFERENCE = b"q" + struct.pack(">i", 0x7E0000 + 9)


def _enum_constant(class_name: str, constant: str, superclass: bytes) -> bytes:
    return b"~" + _class_descriptor(class_name, 0, _SERIALIZABLE | _ENUM, [], superclass) + _java_string(constant)


def checkpoint_properties(name: str = "Savepoint", action: str = "NONE", forced: bool = True) -> bytes:
    """``CheckpointProperties`` of a canonical savepoint as ``ObjectOutputStream`` writes it:
    what ``SavepointType.savepoint(CANONICAL)`` gives (``name`` "Savepoint", post-checkpoint
    action NONE); a stop-with-savepoint writes "Suspend Savepoint" and SUSPEND."""
    flags = [False, False, False, False, False, forced, False]  # discard*, forced, unclaimed
    properties = _class_descriptor(
        "org.apache.flink.runtime.checkpoint.CheckpointProperties", 2, _SERIALIZABLE,
        [("Z", n, None) for n in ("discardCancelled", "discardFailed", "discardFinished", "discardSubsumed",
                                   "discardSuspended", "forced", "unclaimed")]
        + [("L", "checkpointType", "Lorg/apache/flink/runtime/checkpoint/SnapshotType;")], b"p")
    savepoint_type = _class_descriptor(
        "org.apache.flink.runtime.checkpoint.SavepointType", -0x5F782CF75BA7EB48, _SERIALIZABLE,
        [("L", "formatType", "Lorg/apache/flink/core/execution/SavepointFormatType;"),
         ("L", "name", "Ljava/lang/String;"),
         ("L", "postCheckpointAction", "Lorg/apache/flink/runtime/checkpoint/SavepointType$PostCheckpointAction;")],
        b"p")
    return (b"\xac\xed\x00\x05" + b"s" + properties + bytes(flags) + b"s" + savepoint_type
            + _enum_constant("org.apache.flink.core.execution.SavepointFormatType", "CANONICAL", _ENUM_CLASS)
            + _java_string(name)
            + _enum_constant("org.apache.flink.runtime.checkpoint.SavepointType$PostCheckpointAction", action,
                             _ENUM_CLASS_REFERENCE))
