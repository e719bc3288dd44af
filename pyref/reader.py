"""Reading a savepoint: open reads the manifest only; state bytes are read per
chunk, when asked for, and every chunk's CRC32C is checked on the way in.

Values decode lazily: iterating a state decodes one value at a time, while the
``*_arrow`` methods decode whole chunks at once for analytics.
"""

from __future__ import annotations

import bisect
import os
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute is used below; it is not imported by "import pyarrow")

from ._proto.savepoint.v1 import manifest_pb2 as pb
from .checksum import crc32c
from .chunk import decode_chunk
from .codecs import decompress
from .errors import (
    ConcurrentWriteError,
    CorruptSavepointError,
    IncompatibleSerializerError,
    InvalidArgumentError,
    SavepointError,
    SavepointNotFoundError,
)
from .io import MANIFEST_NAME, SavepointIO, open_io
from .key_groups import KeyGroupRange, compute_key_groups
from .keys import as_key_array, key_type_of
from .manifest import KEYED_COLUMNS, LIST_COLUMNS, FormatVersion, decode_manifest, read_manifest_file, state_label
from .parallel import ordered_map
from .redistribution import DistributionMode
from .serializers import Compatibility, ListOf, Serializer, resolve_compatibility, serializer_from_snapshot

KIND_NAMES = {pb.VALUE: "value", pb.LIST: "list", pb.MAP: "map"}


class ChunkStore:
    """Fetches and decodes chunks of one savepoint, through its bases when needed."""

    def __init__(self, io: SavepointIO, manifest: pb.Manifest) -> None:
        self.io = io
        self.manifest = manifest
        self._bases: dict[int, SavepointIO] = {}
        self._checked_sizes: set[int] = set()
        self._file_identities: dict[object, int] = {}
        self._lock = threading.Lock()
        #: Stored bytes fetched so far, for read-amplification accounting.
        self.bytes_read = 0

    def base_io(self, base: int) -> SavepointIO:
        """IO of ``bases[base - 1]``, after checking it is the savepoint that was referenced."""
        if base == 0:
            return self.io
        if base not in self._bases:
            ref = self.manifest.bases[base - 1]
            io = self.io.sibling(ref.directory)
            if io.location == self.io.location:  # by name, or through a link: one resolved identity
                raise CorruptSavepointError(f"base {ref.directory!r} names this savepoint's own directory",
                                            path=self.io.describe(MANIFEST_NAME))
            data = read_manifest_file(io)
            if data is None:
                raise CorruptSavepointError(f"base savepoint {ref.directory!r} is missing; this savepoint refers to "
                                            "its data files", path=io.location)
            found, _ = decode_manifest(data, path=io.describe(MANIFEST_NAME))
            if found.savepoint_id != ref.savepoint_id:
                raise CorruptSavepointError(
                    f"base savepoint {ref.directory!r} was replaced (id {found.savepoint_id}, expected "
                    f"{ref.savepoint_id}); the data this savepoint refers to is gone", path=io.location)
            self._bases[base] = io
        return self._bases[base]

    def _check_distinct_file(self, io: SavepointIO, rel: str, index: int) -> None:
        """Two data-file entries must not be one file through a link (spec/format.md §6.2):
        chunks of both could then share stored bytes despite rule C6."""
        identity = io.file_identity(rel)
        if identity is None:
            return
        with self._lock:
            other = self._file_identities.setdefault(identity, index)
        if other != index:
            first, _ = self.file_location(other)
            raise CorruptSavepointError(f"data files {self.manifest.data_files[other].path!r} (in {first.location}) and "
                                        f"{self.manifest.data_files[index].path!r} are the same file", path=io.describe(rel))

    def file_location(self, index: int) -> tuple[SavepointIO, str]:
        f = self.manifest.data_files[index]
        return self.base_io(f.base), f.path

    def read_stored(self, chunk: pb.Chunk, state: str) -> bytes:
        """The chunk's stored bytes, CRC-checked. A file that is missing, shorter or
        different because a writer replaced the savepoint meanwhile is reported as
        :class:`ConcurrentWriteError` ("replaced while reading"), not as damage."""
        try:
            return self._read_stored_once(chunk, state)
        except (CorruptSavepointError, SavepointNotFoundError) as exc:
            if chunk.WhichOneof("location") != "range":
                raise
            self.check_unchanged()
            if isinstance(exc, SavepointNotFoundError):  # a listed data file is gone: damage, not "no savepoint"
                raise CorruptSavepointError("data file is missing", path=exc.path, state=state) from None
            raise

    def check_unchanged(self) -> None:
        """Raise :class:`ConcurrentWriteError` if this savepoint, or a base already
        resolved, was replaced or deleted since it was opened."""
        opened = [(self.io, self.manifest.savepoint_id),
                  *((io, self.manifest.bases[k - 1].savepoint_id) for k, io in list(self._bases.items()))]
        for io, expected in opened:
            try:
                found: str | None = read_committed(io)[1].savepoint_id
            except SavepointNotFoundError:
                found = None
            except SavepointError:
                continue  # damaged now rather than replaced: the caller's error stands
            if found != expected:
                now = "deleted" if found is None else f"replaced (now {found})"
                raise ConcurrentWriteError(f"the savepoint was {now} while reading (opened {expected}); "
                                           "open it again", path=io.location)

    def _read_stored_once(self, chunk: pb.Chunk, state: str) -> bytes:
        if chunk.WhichOneof("location") == "inline_data":
            stored, where, byte_range = chunk.inline_data, self.io.describe(MANIFEST_NAME) + " (inline)", None
        else:
            r = chunk.range
            io, rel = self.file_location(r.file)
            where, byte_range = io.describe(rel), (r.offset, r.offset + r.length)
            if r.file not in self._checked_sizes:
                size, expected = io.size(rel), self.manifest.data_files[r.file].size
                if size != expected:
                    raise CorruptSavepointError(
                        "data file is missing" if size is None else f"data file is {size} bytes, manifest says {expected}",
                        path=where, state=state)
                self._check_distinct_file(io, rel, r.file)
                self._checked_sizes.add(r.file)
            stored = io.read_range(rel, r.offset, r.length)
            with self._lock:
                self.bytes_read += r.length
        computed = crc32c(stored)
        if computed != chunk.crc32c:
            raise CorruptSavepointError(f"chunk CRC32C mismatch (stored {chunk.crc32c:#010x}, computed {computed:#010x})",
                                        path=where, state=state, byte_range=byte_range)
        return stored

    def read_columns(self, chunk: pb.Chunk, columns: int, state: str) -> list[pa.BinaryArray]:
        stored = self.read_stored(chunk, state)
        where = self.describe(chunk)
        payload = decompress(chunk.codec, stored, chunk.raw_length, path=where, state=state)
        return decode_chunk(payload, expected_rows=chunk.row_count, expected_columns=columns, path=where, state=state)

    def read_many(self, chunks: Sequence[pb.Chunk], columns: int, state: str) -> Iterator[list[pa.BinaryArray]]:
        """``read_columns`` of each chunk, in order, several chunks decoding at once."""
        return ordered_map(lambda chunk: self.read_columns(chunk, columns, state), chunks)

    def read_indexed(self, chunks: Sequence[pb.Chunk], indexes: Sequence[int], columns: int,
                     state: str) -> Iterator[list[pa.BinaryArray]]:
        """``read_columns`` of ``chunks[i]`` for each ``i`` of ``indexes``, in order, reading and
        decoding each chunk once however often it comes back: it is kept from its first to
        its last use. Ranges A, B, A, B, ... would otherwise decompress a chunk per range
        (spec/security.md §6.1)."""
        last_use = {index: position for position, index in enumerate(indexes)}
        decoded = self.read_many([chunks[i] for i in dict.fromkeys(indexes)], columns, state)
        held: dict[int, list[pa.BinaryArray]] = {}
        for position, index in enumerate(indexes):
            if index not in held:
                held[index] = next(decoded)
            yield held[index]
            if last_use[index] == position:
                del held[index]

    def describe(self, chunk: pb.Chunk) -> str:
        if chunk.WhichOneof("location") == "inline_data":
            return self.io.describe(MANIFEST_NAME) + " (inline)"
        io, rel = self.file_location(chunk.range.file)
        return f"{io.describe(rel)}@{chunk.range.offset}"


def _resolve(label: str, snapshot, new: Serializer | None) -> Serializer:
    """The serializer to decode stored bytes with, given the caller's new serializer."""
    if new is None:
        return serializer_from_snapshot(snapshot)
    result = resolve_compatibility(snapshot, new)
    if result.kind is Compatibility.INCOMPATIBLE:
        raise IncompatibleSerializerError(
            f"serializer {new.serializer_id!r} cannot read state written with {snapshot.serializer_id!r} "
            f"(version {snapshot.version}): {result.reason}", state=label)
    if result.kind is Compatibility.COMPATIBLE_AFTER_MIGRATION:
        # Stored bytes are in the old layout: decode them with the old serializer.
        return serializer_from_snapshot(snapshot)
    return result.serializer


class ListStateView:
    """One operator list state."""

    def __init__(self, store: ChunkStore, operator: pb.Operator, state: pb.ListState,
                 serializer: Serializer | None = None) -> None:
        self._store = store
        self.proto = state
        self.name = state.name
        self.label = state_label(operator, state.name)
        self.mode = DistributionMode(state.mode)
        self.serializer = _resolve(self.label, state.element_serializer, serializer)

    @property
    def partition_count(self) -> int:
        return len(self.proto.partitions)

    def element_counts(self) -> list[int]:
        """Elements per partition (per subtask; per origin subtask for UNION)."""
        return [sum(r.count for r in p.ranges) for p in self.proto.partitions]

    def read_encoded(self, ranges: Sequence[pb.ElementRange]) -> Iterator[pa.BinaryArray]:
        """Serialized elements of ``ranges``, one Arrow slice per range; consecutive
        ranges of one chunk share a single read."""
        runs: list[tuple[int, list[pb.ElementRange]]] = []
        for r in ranges:
            if runs and runs[-1][0] == r.chunk:
                runs[-1][1].append(r)
            else:
                runs.append((r.chunk, [r]))
        indexes = [index for index, _ in runs]
        for (_, run), (column,) in zip(runs, self._store.read_indexed(self.proto.chunks, indexes, LIST_COLUMNS,
                                                                      self.label)):
            for r in run:
                yield column.slice(r.first, r.count)

    def iter_ranges(self, ranges: Sequence[pb.ElementRange]) -> Iterator:
        decode = self.serializer.decode
        for column in self.read_encoded(ranges):
            for i in range(len(column)):
                yield decode(column[i].as_buffer())

    def partition(self, index: int) -> Iterator:
        """Lazily decoded elements of partition ``index``."""
        if not 0 <= index < self.partition_count:
            raise InvalidArgumentError(f"partition {index} of {self.partition_count}", state=self.label)
        return self.iter_ranges(self.proto.partitions[index].ranges)

    def arrow_ranges(self, ranges: Sequence[pb.ElementRange]) -> pa.Array:
        parts = [self.serializer.decode_array(c) for c in self.read_encoded(ranges)]
        return pa.concat_arrays(parts) if parts else pa.array([], type=self.serializer.arrow_type())


class KeyedStateView:
    """One keyed state."""

    def __init__(self, store: ChunkStore, operator: pb.Operator, key_serializer: Serializer, state: pb.KeyedState,
                 value_serializer: Serializer | None = None, user_key_serializer: Serializer | None = None) -> None:
        self._store = store
        self.proto = state
        self.name = state.name
        self.label = state_label(operator, state.name)
        self.kind = KIND_NAMES[state.kind]
        self.max_parallelism = operator.max_parallelism
        self.key_serializer = key_serializer
        self.key_type = key_type_of(operator.key_serializer)
        self.value_serializer = _resolve(self.label, state.value_serializer, value_serializer)
        self.user_key_serializer = (_resolve(self.label, state.user_key_serializer, user_key_serializer)
                                    if state.kind == pb.MAP else None)
        self._stored_value = ListOf(self.value_serializer) if state.kind == pb.LIST else self.value_serializer
        self._columns = KEYED_COLUMNS[state.kind]

    @cached_property
    def chunk_key_groups(self) -> np.ndarray:
        """The key group of each chunk, in chunk order (non-decreasing, rule K4)."""
        return np.fromiter((c.key_group for c in self.proto.chunks), dtype=np.int64, count=len(self.proto.chunks))

    def chunks_in(self, groups: KeyGroupRange) -> list[pb.Chunk]:
        """The chunks of the key groups in ``groups`` (a slice of the ordered chunk list)."""
        lo = int(np.searchsorted(self.chunk_key_groups, groups.first, side="left"))
        hi = int(np.searchsorted(self.chunk_key_groups, groups.last, side="right"))
        return list(self.proto.chunks[lo:hi])

    @property
    def key_groups(self) -> list[int]:
        """Key groups that hold entries."""
        return np.unique(self.chunk_key_groups).tolist()

    def read_encoded(self, chunks: Sequence[pb.Chunk]) -> Iterator[tuple[int, list[pa.BinaryArray]]]:
        chunks = list(chunks)
        for chunk, columns in zip(chunks, self._store.read_many(chunks, self._columns, self.label)):
            yield chunk.key_group, columns

    def iter_chunks(self, chunks: Sequence[pb.Chunk]) -> Iterator[tuple]:
        """Lazily decoded entries: (key, value) or, for MAP state, (key, user_key, value)."""
        decoders = [self.key_serializer.decode]
        if self.user_key_serializer is not None:
            decoders.append(self.user_key_serializer.decode)
        decoders.append(self._stored_value.decode)
        for _, columns in self.read_encoded(chunks):
            for i in range(len(columns[0])):
                yield tuple(d(c[i].as_buffer()) for d, c in zip(decoders, columns))

    def items(self) -> Iterator[tuple]:
        return self.iter_chunks(self.proto.chunks)

    def key_group_of(self, key) -> int:
        keys = as_key_array([key], self.key_serializer)
        return int(compute_key_groups(keys, self.max_parallelism, self.key_type)[0])

    def get(self, key, default=None):
        """The state of one key (value, list, or dict for MAP), reading only its key group's chunks."""
        group = self.key_group_of(key)
        wanted = self.key_serializer.encode(key)
        # Format 1.1 key bounds let a lookup skip chunks that cannot hold the key.
        chunks = [c for c in self.chunks_in(KeyGroupRange(group, group))
                  if not c.HasField("key_bounds") or c.key_bounds.min <= wanted <= c.key_bounds.max]
        # Rows of the key, in stored order; the last row of a (user) key wins (spec/format.md §7.1).
        # User keys are told apart by their bytes, which is the same in every language.
        latest: dict[bytes, object] = {}
        for _, columns in self.read_encoded(chunks):
            matches = pa.compute.equal(columns[0], pa.scalar(wanted, pa.binary())).to_numpy(zero_copy_only=False)
            for i in np.flatnonzero(matches).tolist():
                user_key = columns[1][i].as_py() if self.user_key_serializer is not None else b""
                latest[user_key] = columns[-1][i].as_buffer()
        if not latest:
            return default
        if self.user_key_serializer is None:
            return self._stored_value.decode(latest[b""])
        return {self.user_key_serializer.decode(k): self._stored_value.decode(v) for k, v in latest.items()}

    def _arrow_columns(self) -> tuple[list[str], list[Serializer]]:
        names = ["key_group", "key", *(["user_key"] if self.user_key_serializer else []), "value"]
        serializers = [self.key_serializer, *([self.user_key_serializer] if self.user_key_serializer else []),
                       self._stored_value]
        return names, serializers

    def arrow_batches(self, chunks: Sequence[pb.Chunk]) -> Iterator[pa.RecordBatch]:
        """Entries decoded to Arrow, one record batch per chunk, as they are read:
        key_group, key[, user_key], value."""
        names, serializers = self._arrow_columns()
        for group, columns in self.read_encoded(chunks):
            arrays = [pa.array(np.full(len(columns[0]), group, dtype=np.int32))]
            arrays += [s.decode_array(c) for s, c in zip(serializers, columns)]
            yield pa.record_batch(arrays, names=names)

    def arrow_chunks(self, chunks: Sequence[pb.Chunk]) -> pa.Table:
        """Entries decoded to Arrow: key_group, key[, user_key], value."""
        batches = list(self.arrow_batches(chunks))
        if not batches:
            names, serializers = self._arrow_columns()
            schema = pa.schema([pa.field("key_group", pa.int32()),
                                *(pa.field(n, s.arrow_type()) for n, s in zip(names[1:], serializers))])
            return schema.empty_table()
        return pa.Table.from_batches(batches)

    def to_arrow(self) -> pa.Table:
        return self.arrow_chunks(self.proto.chunks)


@dataclass
class OperatorView:
    """One operator of an open savepoint."""

    _store: ChunkStore
    proto: pb.Operator

    @property
    def operator_id(self) -> str:
        return self.proto.operator_id

    @property
    def parallelism(self) -> int:
        return self.proto.parallelism

    @property
    def max_parallelism(self) -> int:
        return self.proto.max_parallelism

    @property
    def list_state_names(self) -> list[str]:
        return [s.name for s in self.proto.list_states]

    @property
    def keyed_state_names(self) -> list[str]:
        return [s.name for s in self.proto.keyed_states]

    @cached_property
    def key_serializer(self) -> Serializer | None:
        return serializer_from_snapshot(self.proto.key_serializer) if self.proto.HasField("key_serializer") else None

    def _find(self, states, name: str):
        for s in states:
            if s.name == name:
                return s
        raise InvalidArgumentError(f"operator {self.operator_id!r} has no such state", state=f"{self.operator_id}/{name}")

    def list_state(self, name: str, serializer: Serializer | None = None) -> ListStateView:
        """A list state; with ``serializer``, resolved against the stored snapshot."""
        return ListStateView(self._store, self.proto, self._find(self.proto.list_states, name), serializer)

    def keyed_state(self, name: str, value_serializer: Serializer | None = None,
                    user_key_serializer: Serializer | None = None) -> KeyedStateView:
        return KeyedStateView(self._store, self.proto, self.key_serializer, self._find(self.proto.keyed_states, name),
                              value_serializer, user_key_serializer)


def read_committed(io: SavepointIO) -> tuple[bytes, pb.Manifest, FormatVersion]:
    """The committed manifest: its bytes, decoded and validated, and its format version."""
    data = read_manifest_file(io)
    if data is None:
        raise SavepointNotFoundError("no committed savepoint here (no _manifest)", path=io.location)
    manifest, version = decode_manifest(data, path=io.describe(MANIFEST_NAME))
    return data, manifest, version


class Savepoint:
    """An open savepoint. Opening reads and validates the manifest and nothing else."""

    def __init__(self, io: SavepointIO, manifest: pb.Manifest, version: FormatVersion) -> None:
        self.io = io
        self.manifest = manifest
        self.version = version
        self.store = ChunkStore(io, manifest)

    @classmethod
    def open(cls, path: str | os.PathLike[str] | SavepointIO) -> Savepoint:
        io = open_io(path)
        _, manifest, version = read_committed(io)
        return cls(io, manifest, version)

    @property
    def location(self) -> str:
        return self.io.location

    @property
    def savepoint_id(self) -> str:
        return self.manifest.savepoint_id

    @property
    def operators(self) -> list[OperatorView]:
        return [OperatorView(self.store, op) for op in self.manifest.operators]

    def operator(self, operator_id: str) -> OperatorView:
        for op in self.manifest.operators:
            if op.operator_id == operator_id:
                return OperatorView(self.store, op)
        raise InvalidArgumentError(f"savepoint has no operator {operator_id!r}", path=self.location)

    def restore_plan(self, parallelism: int | dict[str, int]):
        """Which key groups and list elements each subtask restores at a new parallelism."""
        from .restore import RestorePlan

        return RestorePlan(self, parallelism)


def partition_starts(partition: pb.Partition) -> list[int]:
    """The index of each range's first element in the partition, and the element count last."""
    starts, total = [], 0
    for r in partition.ranges:
        starts.append(total)
        total += r.count
    starts.append(total)
    return starts


def locate_in_partition(partition: pb.Partition, first: int, count: int,
                        starts: Sequence[int] | None = None) -> list[pb.ElementRange]:
    """The chunk ranges holding elements ``first .. first+count`` of a partition; ``starts``
    (:func:`partition_starts`) spares recounting the partition on every call."""
    starts = partition_starts(partition) if starts is None else starts
    total = starts[-1]
    if first < 0 or count < 0 or first + count > total:
        raise InvalidArgumentError(f"elements {first}..{first + count} outside a partition of {total}")
    out: list[pb.ElementRange] = []
    i = bisect.bisect_right(starts, first) - 1
    while count > 0:
        r = partition.ranges[i]
        skip = first - starts[i]
        take = min(count, r.count - skip)
        out.append(pb.ElementRange(chunk=r.chunk, first=r.first + skip, count=take))
        first += take
        count -= take
        i += 1
    return out
