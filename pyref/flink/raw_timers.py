"""Timers Flink wrote as a subtask's raw keyed state: a RocksDB backend keeping its timers
on the heap (``state.backend.rocksdb.timer-service.factory: HEAP``) cannot put them in
RocksDB's native snapshot, so every checkpoint and native savepoint writes them the
legacy way (``InternalTimeServiceManagerImpl.snapshotToRawKeyedState``).

Every key group of the subtask's range has an offset into the raw stream (the first is
0); nothing else marks it. At each offset an ``InternalTimerServiceSerializationProxy``:
the magic ``F1 CD 85 9F`` (``PostVersionedIOReadableWritable``), the int version 2, an
int count of timer services, then per service its ``writeUTF`` name, the key and
namespace serializers' ``writeVersionedSnapshot`` (class name, int version, body; no
proxy version before them), an int count of event-time timers, those timers, an int
count of processing-time timers, those timers; a timer is its key, its namespace (as
their serializers write them) and a long timestamp. Each key group ends where the next
begins, the last at the end of the stream.

The timers become the rows Flink's RocksDB and heap backends store in their timer queues
(``_timer_state/event_<service>``, ``_timer_state/processing_<service>``: the key-group
prefix, then ``TimerSerializer``'s timestamp with its sign bit flipped, key, namespace),
so views, verification and import read them as any other checkpoint's.

Raw keyed state that does not start with the proxy's magic is a user's own
(``isUsingCustomRawKeyedState``), which only the job's code reads: refused by name.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ..errors import UnsupportedFormatError
from .datainput import DataInput
from .keyed import TIMER_DOMAINS, TIMER_PREFIX, KeyedRows, section_bounds
from .meta_info import StateMetaInfo
from .serializers import FlinkType, looks_like_versioned_snapshot, read_versioned_snapshot
from .to_flink import FlinkSerializer, timer_serializer
from .values import Codec, Undelimited, codec_for

__all__ = ["RawTimers", "RawTimerService", "is_timer_stream", "read_raw_timers"]

#: ``PostVersionedIOReadableWritable.VERSIONED_IDENTIFIER`` (-15, -51, -123, -97).
PROXY_MAGIC = bytes([0xF1, 0xCD, 0x85, 0x9F])
#: ``InternalTimerServiceSerializationProxy.VERSION`` of Flink 1.6 to 2.3.
PROXY_VERSION = 2
_FLIPPED_TIMESTAMP = struct.Struct(">Q")
_SIGN = 1 << 63
#: The smallest timer: a key and a namespace of at least zero bytes, and the long timestamp.
_TIMER_BYTES = 8
#: Flink's timer queue name prefixes: event time, then processing time, as a service's timers
#: follow each other in the stream.
QUEUE_PREFIXES = tuple(TIMER_PREFIX + domain for domain in TIMER_DOMAINS)


@dataclass(frozen=True)
class RawTimerService:
    """One timer service of a raw stream: its name, key and namespace types and, per
    domain, the timer queue's meta info as a managed queue's would be."""

    name: str
    key_type: FlinkType
    namespace_type: FlinkType

    def infos(self) -> list[StateMetaInfo]:
        timer = timer_serializer(FlinkSerializer(self.key_type.snapshot, self.key_type),
                                 FlinkSerializer(self.namespace_type.snapshot, self.namespace_type), self.name).type
        return [StateMetaInfo(prefix + self.name, "PRIORITY_QUEUE", {}, {"VALUE_SERIALIZER": timer})
                for prefix in QUEUE_PREFIXES]


def _follows_namespace(inp: DataInput) -> bool:
    """After the namespace snapshot: the event-time timer count, which the bytes left can hold."""
    return 0 <= inp.read_int("event-time timer count") * _TIMER_BYTES <= inp.remaining()


class _ServiceReader:
    """Steps over one service's timers, turning each into a timer queue row."""

    def __init__(self, service: RawTimerService, where: str) -> None:
        self.service = service
        self.where = where
        self.key_codec = self._codec(service.key_type, "key")
        self.namespace_codec = self._codec(service.namespace_type, "namespace")

    def _codec(self, flink_type: FlinkType, what: str) -> Codec:
        if flink_type.is_opaque:
            raise UnsupportedFormatError(
                f"timers of service {self.service.name!r} in raw keyed state have {what}s of {flink_type.describe()}, "
                "which Flink writes without their length, so the timers cannot be told apart; take a canonical "
                "savepoint (it keeps the timers in managed keyed state)", path=self.where, state=self.service.name)
        return codec_for(flink_type)

    def _span(self, inp: DataInput, codec: Codec) -> bytes:
        start = inp.pos
        try:
            codec.skip(inp)
        except Undelimited:
            raise UnsupportedFormatError(f"a timer of service {self.service.name!r} holds {codec.type.describe()}, "
                                         "whose length is not stored; take a canonical savepoint", path=self.where,
                                         state=self.service.name) from None
        return bytes(inp.data[start:inp.pos])

    def read(self, inp: DataInput, prefix: bytes, keys: list[bytes]) -> None:
        """One domain's int count and timers, appended to ``keys`` as queue rows."""
        for _ in range(inp.read_count(f"timer count of service {self.service.name!r}", _TIMER_BYTES)):
            key = self._span(inp, self.key_codec)
            namespace = self._span(inp, self.namespace_codec)
            stamp = _FLIPPED_TIMESTAMP.pack((inp.read_long("timer timestamp") + _SIGN) % (1 << 64))
            keys.append(prefix + stamp + key + namespace)


def _read_service_head(inp: DataInput) -> RawTimerService:
    name = inp.read_utf("timer service name")
    inp.state = name
    key_type = read_versioned_snapshot(inp, looks_like_versioned_snapshot)
    namespace_type = read_versioned_snapshot(inp, _follows_namespace)
    return RawTimerService(name, key_type, namespace_type)


@dataclass
class RawTimers:
    """Every timer service of one subtask's raw stream and, per timer queue, its rows."""

    key_groups: range
    services: list[RawTimerService]
    states: dict[str, tuple[StateMetaInfo, KeyedRows]]

    def empty(self) -> dict[str, tuple[StateMetaInfo, KeyedRows]]:
        """Every timer queue without its rows: what a subtask's later runs list."""
        return {name: (info, _rows(rows.subtasks[:0], [], [])) for name, (info, rows) in self.states.items()}


def _rows(subtasks: np.ndarray, groups: list[int], keys: list[bytes]) -> KeyedRows:
    return KeyedRows(subtasks, np.array(groups, np.int64), pa.array(keys, pa.binary()),
                     pa.array([b""] * len(keys), pa.binary()))


def is_timer_stream(buffer, start: int, end: int) -> bool:
    """Does a raw keyed stream start (its first key group, at offset 0) as timers do?"""
    return end - start >= len(PROXY_MAGIC) and bytes(buffer[start:start + len(PROXY_MAGIC)]) == PROXY_MAGIC


def read_raw_timers(buffer, start: int, end: int, subtask: int, key_groups: range, offsets: tuple[int, ...],
                    name: str, prefix_bytes: int, operator: str, *, head_only: bool = False) -> RawTimers:
    """The timers of one subtask's raw keyed stream ``buffer[start:end]``; ``head_only``:
    its services from the first key group alone (what meta info needs)."""
    bounds = section_bounds(dict(zip(key_groups, offsets)), end - start, name, start, from_start=True)
    services: list[RawTimerService] = []
    readers: list[_ServiceReader] = []
    rows: dict[str, tuple[list[int], list[bytes]]] = {}
    for key_group, offset, stop in bounds[:1] if head_only else bounds:
        inp = DataInput(buffer, start + offset, start + stop, path=name)
        if inp.remaining() < len(PROXY_MAGIC) or inp.read_bytes(len(PROXY_MAGIC)) != PROXY_MAGIC:
            raise UnsupportedFormatError(
                f"operator {operator} wrote raw keyed state that is not Flink's timers (key group {key_group} does "
                "not start with the timer services' magic F1CD859F): the job's own raw keyed state, which only its "
                "code reads; leave the operator out of the import", path=name,
                byte_range=(start + offset, start + offset + min(4, stop - offset)))
        version_at = inp.pos
        if (version := inp.read_int("timer services version")) != PROXY_VERSION:
            raise UnsupportedFormatError(f"timer services of version {version} (Flink 1.6 to 2.3 write version "
                                         f"{PROXY_VERSION}) in raw keyed state", path=name,
                                         byte_range=(version_at, version_at + 4))
        count = inp.read_count("timer service count", 3)
        if key_group != bounds[0][0] and count != len(services):
            raise inp.corrupt(f"key group {key_group} has {count} timer services, key group {bounds[0][0]} "
                              f"{len(services)}", version_at + 4, 4)
        prefix = key_group.to_bytes(prefix_bytes, "big")
        for i in range(count):
            head_at = inp.pos
            service = _read_service_head(inp)
            if len(services) <= i:
                services.append(service)
                readers.append(_ServiceReader(service, name))
            elif service != services[i]:
                raise inp.corrupt(f"key group {key_group}: timer service {service.name!r} differs from the one "
                                  f"key group {bounds[0][0]} names there", head_at, inp.pos - head_at)
            for state_prefix in QUEUE_PREFIXES:
                groups, keys = rows.setdefault(state_prefix + service.name, ([], []))
                before = len(keys)
                readers[i].read(inp, prefix, keys)
                groups.extend([key_group] * (len(keys) - before))
            inp.state = None
        if not inp.at_end():
            raise inp.corrupt(f"{inp.remaining()} bytes after the timers of key group {key_group}", inp.pos,
                              inp.remaining())
    states = {}
    for service in services:
        for info in service.infos():
            groups, keys = rows.get(info.name, ([], []))
            states[info.name] = (info, _rows(np.full(len(keys), subtask, np.int64), groups, keys))
    return RawTimers(key_groups, services, states)
