"""What a savepoint holds, as plain dataclasses built from its manifest alone (no state bytes).

:func:`pyref.inspection.describe` returns a :class:`SavepointInfo`; every state view has an
``info``; their ``to_dict()`` is the JSON of ``pyref inspect --json``. The protobuf messages
of the manifest stay internal: these are the public description of what it says.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ._proto.savepoint.v1 import manifest_pb2 as pb
from ._proto.savepoint.v1 import serializer_pb2
from .key_groups import key_group_bounds
from .ttl import TtlConfig

KIND_NAMES = {pb.VALUE: "value", pb.LIST: "list", pb.MAP: "map", pb.REDUCING: "reducing",
              pb.AGGREGATING: "aggregating"}
MODE_NAMES = {pb.SPLIT_DISTRIBUTE: "SPLIT_DISTRIBUTE", pb.UNION: "UNION", pb.BROADCAST: "BROADCAST"}
#: Time domains by value of savepoint.v1.TimeDomain.
DOMAIN_NAMES = {pb.EVENT_TIME: "event_time", pb.PROCESSING_TIME: "processing_time"}


def serializer_label(snapshot: serializer_pb2.SerializerSnapshot) -> str:
    """``tuple<string,int64>@v2`` style: id, children, snapshot version."""
    inner = ",".join(serializer_label(n) for n in snapshot.nested)
    return f"{snapshot.serializer_id}{f'<{inner}>' if inner else ''}@v{snapshot.version}"


def _sizes(chunks: Sequence[pb.Chunk]) -> dict[str, int]:
    stored = sum(c.range.length if c.WhichOneof("location") == "range" else len(c.inline_data) for c in chunks)
    return {"chunks": len(chunks), "stored_bytes": stored, "raw_bytes": sum(c.raw_length for c in chunks)}


def _counts(partitions: Iterable[pb.Partition]) -> list[int]:
    return [sum(r.count for r in p.ranges) for p in partitions]


def _plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


def _stored(chunks: int, stored_bytes: int) -> str:
    return f"{_plural(chunks, 'chunk')}, {stored_bytes} bytes"


class _Described:
    """``to_dict()``: the JSON form, a ``type`` after the name where the class has one and
    without the optional fields (:attr:`_OPTIONAL`) that are None."""

    _TYPE: ClassVar[str | None] = None
    _OPTIONAL: ClassVar[frozenset[str]] = frozenset()

    def to_dict(self) -> dict[str, Any]:
        fields = {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}  # type: ignore[arg-type]
        out = {"name": fields.pop("name")} if self._TYPE is not None else {}
        if self._TYPE is not None:
            out["type"] = self._TYPE
        out.update((k, v) for k, v in fields.items() if not (k in self._OPTIONAL and v is None))
        return out


def _plain(value: Any) -> Any:
    """A field as JSON has it: descriptions and dataclasses as dicts, lists of them as lists."""
    if isinstance(value, _Described):
        return value.to_dict()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


@dataclass(frozen=True)
class ListStateInfo(_Described):
    """An operator list state: its distribution mode, element serializer and elements per partition."""

    _TYPE = "list"
    name: str
    mode: str
    serializer: str
    elements_per_partition: list[int]
    chunks: int
    stored_bytes: int
    raw_bytes: int

    @classmethod
    def of(cls, state: pb.ListState) -> ListStateInfo:
        return cls(name=state.name, mode=MODE_NAMES[state.mode], serializer=serializer_label(state.element_serializer),
                   elements_per_partition=_counts(state.partitions), **_sizes(state.chunks))

    def summary(self) -> str:
        elements = sum(self.elements_per_partition)
        return (f"[{self.mode}] {self.serializer}: {_plural(elements, 'element')} in "
                f"{_plural(len(self.elements_per_partition), 'partition')}, {_stored(self.chunks, self.stored_bytes)}")


@dataclass(frozen=True)
class KeyedStateInfo(_Described):
    """A keyed state: its kind, serializers, optional TTL, entries and the key groups holding them."""

    _TYPE = "keyed"
    _OPTIONAL = frozenset({"user_key_serializer", "namespace_serializer", "ttl"})
    name: str
    kind: str
    serializer: str
    entries: int
    key_groups_with_entries: int
    chunks: int
    stored_bytes: int
    raw_bytes: int
    user_key_serializer: str | None = None
    namespace_serializer: str | None = None
    ttl: TtlConfig | None = None

    @classmethod
    def of(cls, state: pb.KeyedState) -> KeyedStateInfo:
        return cls(
            name=state.name, kind=KIND_NAMES[state.kind], serializer=serializer_label(state.value_serializer),
            entries=sum(c.row_count for c in state.chunks),
            key_groups_with_entries=len({c.key_group for c in state.chunks}), **_sizes(state.chunks),
            user_key_serializer=serializer_label(state.user_key_serializer) if state.kind == pb.MAP else None,
            namespace_serializer=(serializer_label(state.namespace_serializer)
                                  if state.HasField("namespace_serializer") else None),
            ttl=TtlConfig.from_proto(state.ttl) if state.HasField("ttl") else None)

    def summary(self) -> str:
        return (f"[{self.kind}] {self.serializer}: {_plural(self.entries, 'entry', 'entries')} in "
                f"{_plural(self.key_groups_with_entries, 'key group')}, {_stored(self.chunks, self.stored_bytes)}")


@dataclass(frozen=True)
class BroadcastStateInfo(_Described):
    """Format 1.2: a broadcast map state, its entries per partition."""

    _TYPE = "broadcast"
    name: str
    serializer: str
    key_serializer: str
    entries_per_partition: list[int]
    chunks: int
    stored_bytes: int
    raw_bytes: int

    @classmethod
    def of(cls, state: pb.BroadcastState) -> BroadcastStateInfo:
        return cls(name=state.name, serializer=serializer_label(state.value_serializer),
                   key_serializer=serializer_label(state.key_serializer),
                   entries_per_partition=_counts(state.partitions), **_sizes(state.chunks))

    def summary(self) -> str:
        entries = max(self.entries_per_partition, default=0)
        return (f"{self.key_serializer} -> {self.serializer}: up to {entries} entries in each of "
                f"{_plural(len(self.entries_per_partition), 'partition')}, {_stored(self.chunks, self.stored_bytes)}")


@dataclass(frozen=True)
class TimerServiceInfo(_Described):
    """Format 1.2: a timer service, its timers and the key groups holding them."""

    name: str
    domain: str
    timers: int
    namespace_serializer: str | None
    key_groups_with_timers: int
    chunks: int
    stored_bytes: int
    raw_bytes: int

    @classmethod
    def of(cls, service: pb.TimerService) -> TimerServiceInfo:
        return cls(name=service.name, domain=DOMAIN_NAMES[service.domain],
                   timers=sum(c.row_count for c in service.chunks),
                   namespace_serializer=(serializer_label(service.namespace_serializer)
                                         if service.HasField("namespace_serializer") else None),
                   key_groups_with_timers=len({c.key_group for c in service.chunks}), **_sizes(service.chunks))

    def summary(self) -> str:
        return (f"[{self.domain}]: {_plural(self.timers, 'timer')} in "
                f"{_plural(self.key_groups_with_timers, 'key group')}, {_stored(self.chunks, self.stored_bytes)}")


StateInfo = ListStateInfo | KeyedStateInfo | BroadcastStateInfo


@dataclass(frozen=True)
class KeyGroupsPerSubtask:
    """The fewest and the most key groups one subtask holds."""

    min: int
    max: int


@dataclass(frozen=True)
class OperatorInfo(_Described):
    """An operator: parallelism, keys, its states and timer services; with ``subtasks``,
    each subtask's ``[first, last]`` key groups."""

    _OPTIONAL = frozenset({"subtask_key_groups"})
    operator_id: str
    name: str
    uid: str
    parallelism: int
    max_parallelism: int
    key_serializer: str | None
    key_groups: str  # "hashed", or "writer" (format 1.2, spec/format.md §7.12)
    coordinator_state_bytes: int | None
    key_groups_per_subtask: KeyGroupsPerSubtask
    states: list[StateInfo]
    timer_services: list[TimerServiceInfo]
    subtask_key_groups: list[list[int]] | None = None

    @classmethod
    def of(cls, op: pb.Operator, *, subtasks: bool = False) -> OperatorInfo:
        firsts, lasts = key_group_bounds(op.max_parallelism, op.parallelism)
        sizes = lasts - firsts + 1
        states: list[StateInfo] = [*map(ListStateInfo.of, op.list_states), *map(KeyedStateInfo.of, op.keyed_states),
                                   *map(BroadcastStateInfo.of, op.broadcast_states)]
        return cls(
            operator_id=op.operator_id, name=op.name, uid=op.uid, parallelism=op.parallelism,
            max_parallelism=op.max_parallelism,
            key_serializer=serializer_label(op.key_serializer) if op.HasField("key_serializer") else None,
            key_groups="writer" if op.key_groups == pb.KEY_GROUPS_FROM_WRITER else "hashed",
            # A one-cell payload is 16 bytes of row count, column count and two offsets, then the cell (§7).
            coordinator_state_bytes=op.coordinator_state.raw_length - 16 if op.HasField("coordinator_state") else None,
            key_groups_per_subtask=KeyGroupsPerSubtask(int(sizes.min()), int(sizes.max())),
            states=states, timer_services=[TimerServiceInfo.of(t) for t in op.timer_services],
            subtask_key_groups=np.stack([firsts, lasts], axis=1).tolist() if subtasks else None)

    def summary(self) -> str:
        kinds = [(ListStateInfo, "list"), (KeyedStateInfo, "keyed"), (BroadcastStateInfo, "broadcast")]
        states = [f"{sum(isinstance(s, kind) for s in self.states)} {name}" for kind, name in kinds]
        return (f"parallelism {self.parallelism}, max parallelism {self.max_parallelism}; states: "
                f"{', '.join(states)}; {_plural(len(self.timer_services), 'timer service')}; "
                f"{sum(s.stored_bytes for s in [*self.states, *self.timer_services])} bytes")


@dataclass(frozen=True)
class BaseInfo:
    """A savepoint whose data files this (shallow) one refers to."""

    directory: str
    savepoint_id: str


@dataclass(frozen=True)
class SavepointInfo(_Described):
    """What a savepoint holds, O(manifest) in time and size (``pyref inspect``)."""

    location: str
    savepoint_id: str
    format_version: str
    created_by: str
    created_at_ms: int
    required_features: list[str]
    optional_features: list[str]
    bases: list[BaseInfo]
    data_files: int
    data_bytes: int  # of its own data files, not its bases'
    operators: list[OperatorInfo]

    @classmethod
    def of(cls, manifest: pb.Manifest, *, location: str, format_version: str, subtasks: bool = False) -> SavepointInfo:
        m = manifest
        return cls(
            location=location, savepoint_id=m.savepoint_id, format_version=format_version, created_by=m.created_by,
            created_at_ms=m.created_at_ms, required_features=list(m.required_features),
            optional_features=list(m.optional_features),
            bases=[BaseInfo(b.directory, b.savepoint_id) for b in m.bases], data_files=len(m.data_files),
            data_bytes=sum(f.size for f in m.data_files if f.base == 0),
            operators=[OperatorInfo.of(op, subtasks=subtasks) for op in m.operators])

    def summary(self) -> str:
        states = sum(len(op.states) for op in self.operators)
        bases = f", {_plural(len(self.bases), 'base')}" if self.bases else ""
        return (f"id {self.savepoint_id}, format {self.format_version}: {_plural(len(self.operators), 'operator')}, "
                f"{_plural(states, 'state')}, {_plural(self.data_files, 'data file')} "
                f"({self.data_bytes} bytes of its own){bases}")
