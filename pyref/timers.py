"""Timers (spec/format.md §5.7, §7.9, format 1.2): per operator, named timer services of
one time domain, each a set of (key, [namespace], timestamp) rows stored by key group
like keyed state, so that every timer moves with its key on restore and rescale.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, cast

import numpy as np
import pyarrow as pa

from ._proto.savepoint.v1 import manifest_pb2 as pb
from .descriptions import DOMAIN_NAMES, TimerServiceInfo
from .errors import CorruptSavepointError, InvalidArgumentError
from .keys import as_key_array
from .manifest import state_label, timer_column_count
from .reader import ChunkStore, KeyGroupedView
from .serializers import Int64, Serializer, serializer_from_snapshot
from .writer import OperatorWriter, SavepointWriter, _fails_writer, _KeyGroupedState, _values

#: Time domains by name (the values of savepoint.v1.TimeDomain).
DOMAINS = {name: domain for domain, name in DOMAIN_NAMES.items()}
_TIMESTAMP = Int64()


def domain_of(domain: str | int) -> pb.TimeDomain:
    """A time domain given by name ("event_time", "processing_time") or enum value."""
    if domain in DOMAIN_NAMES:
        return cast(pb.TimeDomain, int(domain))
    if domain not in DOMAINS:
        raise InvalidArgumentError(f"time domain is one of {sorted(DOMAINS)}, got {domain!r}")
    return DOMAINS[domain]


def service_label(operator_id: str, name: str, domain: int) -> str:
    return f"{operator_id}/{name} ({DOMAIN_NAMES.get(cast(pb.TimeDomain, domain), domain)} timers)"


class TimerServiceWriter(_KeyGroupedState):
    """Adds the timers of one timer service, grouped into key-group chunks."""

    def __init__(self, writer: SavepointWriter, operator: OperatorWriter, name: str, domain: str | int,
                 namespace_serializer: Serializer | None = None) -> None:
        super().__init__(writer, operator, name)
        self.domain = domain_of(domain)
        self.namespace_serializer = namespace_serializer
        self.columns = 2 + (namespace_serializer is not None)

    @property
    def label(self) -> str:
        return service_label(self.operator.operator_id, self.name, self.domain)

    @_fails_writer
    def add(self, keys: Sequence[Any] | pa.Array, timestamps: Sequence[int] | pa.Array | np.ndarray,
            namespaces: Sequence[Any] | pa.Array | None = None, *, subtask: int | None = None,
            key_groups: Sequence[int] | np.ndarray | None = None) -> None:
        """Register timers: ``timestamps[i]`` (ms) for ``keys[i]`` (under ``namespaces[i]``
        when the service has a namespace serializer). ``subtask`` and ``key_groups`` as
        for keyed state (:meth:`pyref.writer.KeyedStateWriter.add`)."""
        op = self.operator
        if (namespaces is None) != (self.namespace_serializer is None):
            raise InvalidArgumentError("namespaces are required for a timer service with a namespace serializer "
                                       "and only for it", state=self.label)
        key_array = as_key_array(keys, op.keys())
        if not isinstance(timestamps, (pa.Array, pa.ChunkedArray)):
            # Whole buffers, as given: int64 refuses what it cannot hold (a str, a fraction of a ms)
            try:
                stamps = np.asarray(timestamps)
                timestamps = pa.array(stamps if stamps.size else stamps.astype(np.int64))
            except (pa.ArrowException, OverflowError, TypeError, ValueError) as exc:
                raise InvalidArgumentError(f"timestamps must be whole ms that int64 holds: {exc}",
                                           state=self.label) from None
        columns = [op.keys().encode_array(key_array)]
        if self.namespace_serializer is not None and namespaces is not None:
            columns.append(self.namespace_serializer.encode_array(_values(namespaces)))
        columns.append(_TIMESTAMP.encode_array(timestamps))
        self.add_encoded(columns, self._key_groups(key_array, key_groups, subtask))

    def to_proto(self) -> pb.TimerService:
        service = pb.TimerService(name=self.name, domain=self.domain, chunks=self.sorted_chunks())
        if self.namespace_serializer is not None:
            service.namespace_serializer.CopyFrom(self.namespace_serializer.snapshot())
        return service


class TimerServiceView(KeyGroupedView):
    """One timer service of an open savepoint."""

    def __init__(self, store: ChunkStore, operator: pb.Operator, key_serializer: Serializer,
                 service: pb.TimerService) -> None:
        super().__init__(store, operator, service, timer_column_count(service))
        self.name = service.name
        self.domain = DOMAIN_NAMES[service.domain]
        self.label = service_label(operator.operator_id, service.name, service.domain)
        self.key_serializer = key_serializer
        self.namespace_serializer = (serializer_from_snapshot(service.namespace_serializer)
                                     if service.HasField("namespace_serializer") else None)

    def _serializers(self) -> list[Serializer]:
        return [self.key_serializer, *([self.namespace_serializer] if self.namespace_serializer else []), _TIMESTAMP]

    @property
    def info(self) -> TimerServiceInfo:
        return TimerServiceInfo.of(self.proto)

    def summary(self) -> str:
        return self.info.summary()

    def arrow_batches(self, chunks: Sequence[pb.Chunk]) -> Iterator[pa.RecordBatch]:
        """The distinct timers of each chunk's key group (a timer stored twice is one, §7.9), one batch per
        key group read: key_group, key[, namespace], timestamp. A timestamp of other than 8 bytes is
        corrupt (rule T5)."""
        return self._batches(self.read_key_groups(chunks))

    def scan_batches(self) -> Iterator[pa.RecordBatch]:
        """Every timer, as :meth:`arrow_batches` gives them, read in storage order
        (:meth:`KeyGroupedView.scan_key_groups`): a full read in few large requests, for
        analytics on object stores. Key groups come in storage order."""
        return self._batches(self.scan_key_groups())

    def _batches(self, key_groups: Iterable[tuple[int, list[pa.BinaryArray]]]) -> Iterator[pa.RecordBatch]:
        names = ["key_group", "key", *(["namespace"] if self.namespace_serializer else []), "timestamp"]
        for group, columns in key_groups:
            encoded = pa.table(columns, names=[str(i) for i in range(len(columns))])
            distinct = encoded.group_by(encoded.column_names, use_threads=False).aggregate([])
            try:
                arrays = [s.decode_array(distinct.column(str(i)).combine_chunks())
                          for i, s in enumerate(self._serializers())]
            except CorruptSavepointError as exc:  # T5 among them: a timestamp is exactly 8 bytes
                raise CorruptSavepointError(f"timer of key group {group}: {exc.reason}", state=self.label) from None
            yield pa.record_batch([pa.array(np.full(distinct.num_rows, group, np.int32)), *arrays], names=names)

    def arrow_chunks(self, chunks: Sequence[pb.Chunk]) -> pa.Table:
        batches = list(self.arrow_batches(chunks))
        if batches:
            return pa.Table.from_batches(batches)
        names = ["key", *(["namespace"] if self.namespace_serializer else []), "timestamp"]
        return pa.schema([pa.field("key_group", pa.int32()),
                          *(pa.field(n, s.arrow_type()) for n, s in zip(names, self._serializers()))]).empty_table()

    def to_arrow(self) -> pa.Table:
        return self.arrow_chunks(self.proto.chunks)

    def iter_chunks(self, chunks: Sequence[pb.Chunk]) -> Iterator[tuple[Any, ...]]:
        """Distinct timers, decoded: (key, timestamp) or (key, namespace, timestamp)."""
        for batch in self.arrow_batches(chunks):
            columns = [[s._from_arrow_value(v) for v in batch.column(i + 1).to_pylist()]
                       for i, s in enumerate(self._serializers())]
            yield from zip(*columns)

    def timers(self) -> Iterator[tuple[Any, ...]]:
        return self.iter_chunks(self.proto.chunks)


def find_timer_service(operator: pb.Operator, name: str, domain: str | int | None = None) -> pb.TimerService:
    """The operator's timer service ``name`` (of ``domain``, which may be left out when the name is unique)."""
    found = [s for s in operator.timer_services if s.name == name and (domain is None or s.domain == domain_of(domain))]
    if len(found) != 1:
        which = "no" if not found else "more than one (give the domain)"
        raise InvalidArgumentError(f"{which} timer service {name!r}", state=state_label(operator, name))
    return found[0]
