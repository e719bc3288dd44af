"""Broadcast map state (spec/format.md §5.8, §7.10, format 1.2): operator state of
(key, value) entries of which every subtask holds a copy, stored as a list state of
two-column rows with one partition per subtask, and restored by the BROADCAST rule
(spec/redistribution.md §9).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute is used below)

from ._proto.savepoint.v1 import manifest_pb2 as pb
from .descriptions import BroadcastStateInfo
from .errors import CorruptSavepointError, InvalidArgumentError
from .manifest import BROADCAST_COLUMNS
from .reader import ChunkStore, PartitionedView, python_map
from .serializers import Serializer, serializer_from_snapshot
from .writer import OperatorWriter, SavepointWriter, _BufferedState, _binary, _fails_writer, _values, check_subtask


def _repeated_key(keys: pa.Array) -> bytes | None:
    """An encoded key that occurs twice in ``keys`` (rule B5), or None."""
    counts = pa.compute.value_counts(keys)
    repeated = counts.filter(pa.compute.greater(counts.field("counts"), 1))
    return repeated[0]["values"].as_py() if len(repeated) else None


class BroadcastStateWriter(_BufferedState):
    """Writes the map of every subtask: :meth:`add` for one subtask's entries, :meth:`add_all`
    for entries every subtask holds (stored once, shared by all partitions).

    Entries are buffered (and spilled) like list elements, one slot per subtask and one
    more, the last, for the shared entries. The encoded keys are kept apart, outside the
    buffer budget, to refuse a repeated key when it is added (rule B5): a broadcast map is
    held whole by every subtask that restores it, so it is small next to keyed state."""

    def __init__(self, writer: SavepointWriter, operator: OperatorWriter, name: str, key_serializer: Serializer,
                 value_serializer: Serializer) -> None:
        super().__init__(writer, operator, name, slots=operator.parallelism + 1)
        self.key_serializer = key_serializer
        self.value_serializer = value_serializer
        self.partitions = [pb.Partition() for _ in range(operator.parallelism)]
        #: The slot of the entries every partition shares.
        self._shared = operator.parallelism
        # Encoded keys per slot: a partition is a map, its keys distinct (rule B5).
        self._keys: dict[int, set[bytes]] = {}

    @_fails_writer
    def add(self, subtask: int, keys: Sequence[Any] | pa.Array, values: Sequence[Any] | pa.Array) -> None:
        """Add entries to the map of ``subtask``."""
        self._add(check_subtask(subtask, len(self.partitions), self.label), keys, values)

    @_fails_writer
    def add_all(self, keys: Sequence[Any] | pa.Array, values: Sequence[Any] | pa.Array) -> None:
        """Add entries to the map of every subtask (the usual broadcast state: one map, everywhere)."""
        self._add(self._shared, keys, values)

    @_fails_writer
    def add_encoded(self, subtask: int, keys: pa.Array, values: pa.Array) -> None:
        """Add already serialized entries (binary arrays) to the map of ``subtask``."""
        self._add_encoded(check_subtask(subtask, len(self.partitions), self.label), [_binary(keys), _binary(values)])

    def _add(self, slot: int, keys: Sequence[Any] | pa.Array, values: Sequence[Any] | pa.Array) -> None:
        self._add_encoded(slot, [_binary(self.key_serializer.encode_array(_values(keys))),
                                 _binary(self.value_serializer.encode_array(_values(values)))])

    def _add_encoded(self, slot: int, encoded: list[pa.Array]) -> None:
        self._writer._check_open()
        if len(encoded[0]) != len(encoded[1]):
            raise InvalidArgumentError("keys and values differ in length", state=self.label)
        if not len(encoded[0]):
            return
        seen = self._keys.setdefault(slot, set())
        # The keys already in the partitions these entries join: a subtask's own and the shared ones,
        # or for shared entries every partition's.
        held = [seen, self._keys.get(self._shared, set())] if slot != self._shared else list(self._keys.values())
        batch = encoded[0].to_pylist()
        repeated = _repeated_key(encoded[0])
        if repeated is None:
            repeated = next((k for k in batch if any(k in keys for keys in held)), None)
        if repeated is not None:
            raise InvalidArgumentError(f"key {self.key_serializer.decode(repeated)!r} is already in the map",
                                       state=self.label)
        seen.update(batch)
        self._append(encoded, np.full(len(batch), slot, dtype=np.uint16))
        self._writer._relieve_budget()

    def _emit(self, slot: int, chunk: pb.Chunk) -> None:
        self.chunks.append(chunk)
        rows = pb.ElementRange(chunk=len(self.chunks) - 1, count=chunk.row_count)
        for partition in self.partitions if slot == self._shared else [self.partitions[slot]]:
            partition.ranges.append(rows)

    def to_proto(self) -> pb.BroadcastState:
        return pb.BroadcastState(name=self.name, key_serializer=self.key_serializer.snapshot(),
                                 value_serializer=self.value_serializer.snapshot(), chunks=self.chunks,
                                 partitions=self.partitions)


class BroadcastStateView(PartitionedView):
    """One broadcast state of an open savepoint."""

    def __init__(self, store: ChunkStore, operator: pb.Operator, state: pb.BroadcastState) -> None:
        super().__init__(store, operator, state, BROADCAST_COLUMNS)
        self.key_serializer = serializer_from_snapshot(state.key_serializer)
        self.value_serializer = serializer_from_snapshot(state.value_serializer)

    def encoded_entries(self, ranges: Sequence[pb.ElementRange]) -> tuple[pa.Array, pa.Array]:
        """The encoded keys and values of the rows ``ranges`` select; a key that occurs twice
        is corrupt (rule B5)."""
        rows = list(self.read_rows(ranges))
        keys = pa.concat_arrays([k for k, _ in rows]) if rows else pa.array([], pa.binary())
        values = pa.concat_arrays([v for _, v in rows]) if rows else pa.array([], pa.binary())
        self.check_distinct_keys(keys)
        return keys, values

    def check_distinct_keys(self, keys: pa.Array) -> None:
        """Refuse the encoded keys of one partition if one occurs twice (rule B5)."""
        repeated = _repeated_key(keys)
        if repeated is not None:
            raise CorruptSavepointError(f"broadcast state repeats the key {repeated.hex()} in one partition "
                                        "(rule B5)", state=self.label)

    def scan_batches(self) -> Iterator[pa.RecordBatch]:
        """Every entry of every subtask's map, decoded: ``subtask, index, key, value``, one
        batch per range, read in storage order (:meth:`PartitionedView.scan_rows`), a map
        every subtask shares read once. The keys of each distinct partition are checked
        once all are read (rule B5): a repeated key fails the scan at its end."""
        signature = {p: tuple((r.chunk, r.first, r.count) for r in partition.ranges)
                     for p, partition in enumerate(self.proto.partitions)}
        checked = {sig: p for p, sig in reversed(signature.items())}  # one partition per distinct list of ranges
        keys: dict[int, list[pa.Array]] = {}
        for p, index, (key, value) in self.scan_rows():
            if checked[signature[p]] == p:
                keys.setdefault(p, []).append(key)
            yield self._rows_batch(p, index, [self.key_serializer.decode_array(key),
                                              self.value_serializer.decode_array(value)], ["key", "value"])
        for held in keys.values():
            self.check_distinct_keys(pa.concat_arrays(held))

    def _cell_fields(self) -> list[pa.Field]:
        return [pa.field("key", self.key_serializer.arrow_type()),
                pa.field("value", self.value_serializer.arrow_type())]

    @property
    def info(self) -> BroadcastStateInfo:
        return BroadcastStateInfo.of(self.proto)

    def summary(self) -> str:
        return self.info.summary()

    def arrow_ranges(self, ranges: Sequence[pb.ElementRange]) -> pa.Table:
        """The entries of ``ranges`` decoded to Arrow: key, value."""
        keys, values = self.encoded_entries(ranges)
        return pa.table({"key": self.key_serializer.decode_array(keys),
                         "value": self.value_serializer.decode_array(values)})

    def map_of(self, ranges: Iterable[pb.ElementRange]) -> dict[Any, Any]:
        """The entries of ``ranges`` as a dict; keys that are equal Python values (0.0 and
        -0.0) are refused (:func:`pyref.reader.python_map`)."""
        keys, values = self.encoded_entries(list(ranges))
        return python_map(((self.key_serializer.decode(k.as_buffer()), self.value_serializer.decode(v.as_buffer()))
                           for k, v in zip(keys, values)), "keys", self.label)

    def partition(self, index: int) -> dict[Any, Any]:
        """The map subtask ``index`` held."""
        return self.map_of(self._check_partition(index))

    def partitions(self) -> Iterator[dict[Any, Any]]:
        return (self.partition(i) for i in range(self.partition_count))
