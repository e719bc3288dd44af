"""The ``_metadata`` file of a Flink savepoint or checkpoint (``Checkpoints``,
``MetadataV2Serializer`` .. ``MetadataV7Serializer``).

Layout: int magic ``0x4960672D``, int version, then

* long checkpoint id; int count of master states, each ``magic 0xC96B1696``,
  int length and (int version, UTF name, int length, bytes);
* int count of operators, each: [v5+: UTF name, UTF uid, empty = unknown]
  16-byte operator id (two longs), int parallelism, int max parallelism,
  [v2: int chain length] [v3+: coordinator state as a stream handle], int
  subtask count (-1: the operator finished), and per subtask an int index
  (negative: finished, nothing follows) and its state: managed and raw
  operator state (int present flag, handle), managed and raw keyed state
  (handle), [v3+: input-channel and result-subpartition state collections: the
  in-flight data of an unaligned checkpoint, :mod:`pyref.flink.channel_state`]
  [v7: optional long of the regional checkpoint it came from];
* v4+: ``CheckpointProperties`` as a Java-serialized object, kept as bytes.

Versions 2 (Flink 1.6-1.10) through 7 are read; Flink 1.13-1.15 write
version 3, 1.16-1.20 version 4, 2.0 version 5, 2.1-2.3 version 6.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import CorruptSavepointError, UnsupportedFormatError
from .channel_state import INPUT, OUTPUT, ChannelStateHandle, read_channel_state
from .datainput import DataInput
from .handles import (
    KeyedHandle,
    OperatorStateHandle,
    StreamHandle,
    read_keyed_handle,
    read_operator_handle,
    read_stream_handle,
)

__all__ = ["MAGIC", "CheckpointMetadata", "MasterState", "OperatorState", "SubtaskState", "parse_metadata"]

MAGIC = 0x4960672D
_MASTER_STATE_MAGIC = 0xC96B1696 - (1 << 32)
SUPPORTED_VERSIONS = range(2, 8)
_JAVA_STREAM_MAGIC = b"\xac\xed\x00\x05"


@dataclass(frozen=True)
class MasterState:
    """A checkpoint master hook's state (opaque)."""

    name: str
    version: int
    data: bytes = field(repr=False)


@dataclass(frozen=True)
class SubtaskState:
    index: int
    finished: bool = False
    managed_operator_state: OperatorStateHandle | None = None
    raw_operator_state: OperatorStateHandle | None = None
    managed_keyed_state: KeyedHandle | None = None
    raw_keyed_state: KeyedHandle | None = None
    #: An unaligned checkpoint's in-flight data: input channel then result subpartition handles.
    in_flight: tuple[ChannelStateHandle, ...] = ()


@dataclass(frozen=True)
class OperatorState:
    """One operator's state: ``operator_id`` is the 32-digit hex of its
    16-byte ``OperatorID`` as Flink prints it."""

    operator_id: str
    parallelism: int
    max_parallelism: int
    subtasks: tuple[SubtaskState, ...]
    coordinator_state: StreamHandle | None = None
    name: str | None = None
    uid: str | None = None
    finished: bool = False


@dataclass(frozen=True)
class CheckpointMetadata:
    version: int
    checkpoint_id: int
    master_states: tuple[MasterState, ...]
    operators: tuple[OperatorState, ...]
    properties: bytes = field(default=b"", repr=False)

    @property
    def snapshot_format(self) -> str | None:
        """``CANONICAL`` or ``NATIVE`` for a savepoint, ``None`` for a checkpoint
        or unknown (v2, v3): read from the Java-serialized properties by name,
        without deserializing them."""
        for name in ("CANONICAL", "NATIVE"):
            if b"t\x00" + bytes([len(name)]) + name.encode() in self.properties:
                return name
        return None


def _read_master_state(inp: DataInput) -> MasterState:
    start = inp.pos
    if inp.read_int("master state magic") != _MASTER_STATE_MAGIC:
        raise inp.corrupt("master state: bad magic number", start, 4)
    length = inp.read_count("master state length")
    end = inp.pos + length
    sub = DataInput(inp.data, inp.pos, end, base=inp.base, path=inp.path)
    version = sub.read_int("master state version")
    name = sub.read_utf("master state name")
    data = sub.read_bytes(sub.read_count("master state data length"), "master state data")
    if not sub.at_end():
        raise sub.corrupt("trailing bytes in a master state", sub.pos, end - sub.pos)
    inp.pos = end
    return MasterState(name, version, data)


def _read_present_operator_handle(inp: DataInput) -> OperatorStateHandle | None:
    return read_operator_handle(inp) if inp.read_int("operator state present flag") != 0 else None


def _read_subtask(inp: DataInput, index: int, version: int) -> SubtaskState:
    if version == 2:
        inp.read_long("legacy duration")
        start = inp.pos
        if inp.read_int("legacy non-partitioned state count") > 0:
            raise UnsupportedFormatError("legacy non-partitioned operator state (Flink 1.1)", path=inp.path,
                                         byte_range=(inp.base + start, inp.base + start + 4))
    managed_op = _read_present_operator_handle(inp)
    raw_op = _read_present_operator_handle(inp)
    managed_keyed = read_keyed_handle(inp)
    raw_keyed = read_keyed_handle(inp)
    in_flight: tuple[ChannelStateHandle, ...] = ()
    if version >= 3:
        in_flight = read_channel_state(inp, INPUT, version) + read_channel_state(inp, OUTPUT, version)
    if version >= 7 and inp.read_ubyte("reference checkpoint marker") == 1:
        inp.read_long("reference checkpoint id")
    return SubtaskState(index, False, managed_op, raw_op, managed_keyed, raw_keyed, in_flight)


def _read_operator(inp: DataInput, version: int) -> OperatorState:
    name = uid = None
    if version >= 5:
        name = inp.read_utf("operator name") or None
        uid = inp.read_utf("operator uid") or None
    operator_id = inp.read_bytes(16, "operator id").hex()
    parallelism = inp.read_int("parallelism")
    max_parallelism = inp.read_int("max parallelism")
    if not 1 <= parallelism <= max_parallelism <= 32768:
        raise inp.corrupt(f"operator {operator_id}: parallelism {parallelism} / max parallelism "
                          f"{max_parallelism} out of range", inp.pos - 8, 8)
    coordinator = None
    if version == 2:
        inp.read_int("chain length")
    else:
        at = inp.pos
        coordinator = read_stream_handle(inp)
        if coordinator is not None and coordinator.kind != "inline":
            raise inp.corrupt("coordinator state is not inline", at, inp.pos - at)
    count = inp.read_int("subtask state count")
    if count < 0:
        return OperatorState(operator_id, parallelism, max_parallelism, (), coordinator, name, uid, finished=True)
    if count > parallelism:
        raise inp.corrupt(f"operator {operator_id}: {count} subtask states for parallelism {parallelism}",
                          inp.pos - 4, 4)
    subtasks = []
    seen: set[int] = set()
    for _ in range(count):
        at = inp.pos
        index = inp.read_int("subtask index")
        finished = version >= 3 and index < 0
        if finished:
            index = -index - 1
        if not 0 <= index < parallelism:
            raise inp.corrupt(f"operator {operator_id}: subtask index {index} outside parallelism {parallelism}",
                              at, 4)
        if index in seen:  # Flink keeps an operator's subtask states in a map: it never writes one twice
            raise inp.corrupt(f"operator {operator_id}: subtask {index} has two states", at, 4)
        seen.add(index)
        subtasks.append(SubtaskState(index, True) if finished else _read_subtask(inp, index, version))
    return OperatorState(operator_id, parallelism, max_parallelism, tuple(subtasks), coordinator, name, uid)


def parse_metadata(data: bytes, path: str | None = None) -> CheckpointMetadata:
    """Parse a whole ``_metadata`` file."""
    inp = DataInput(data, path=path)
    if inp.remaining() < 8:
        raise inp.corrupt("not a Flink _metadata file: shorter than its header", 0, len(data))
    magic = inp.read_int("magic number") & 0xFFFFFFFF
    if magic != MAGIC:
        raise CorruptSavepointError(f"not a Flink _metadata file: magic number 0x{magic:08X}, expected "
                                    f"0x{MAGIC:08X}", path=path, byte_range=(0, 4))
    version = inp.read_int("metadata version")
    if version not in SUPPORTED_VERSIONS:
        raise UnsupportedFormatError(f"Flink metadata version {version} is not supported (versions "
                                     f"{SUPPORTED_VERSIONS.start}..{SUPPORTED_VERSIONS.stop - 1} are)",
                                     path=path, byte_range=(4, 8))
    checkpoint_id = inp.read_long("checkpoint id")
    if checkpoint_id < 0:
        raise inp.corrupt(f"negative checkpoint id {checkpoint_id}", 8, 8)
    masters = tuple(_read_master_state(inp) for _ in range(inp.read_count("master state count", 8)))
    operators = tuple(_read_operator(inp, version) for _ in range(inp.read_count("operator count", 28)))
    properties = b""
    if version >= 4:
        at = inp.pos
        properties = inp.read_bytes(inp.remaining(), "checkpoint properties")
        if not properties.startswith(_JAVA_STREAM_MAGIC):
            raise inp.corrupt("checkpoint properties are not a Java serialization stream", at, len(properties))
    elif not inp.at_end():
        raise inp.corrupt(f"{inp.remaining()} trailing bytes after the operators", inp.pos, inp.remaining())
    return CheckpointMetadata(version, checkpoint_id, masters, operators, properties)
