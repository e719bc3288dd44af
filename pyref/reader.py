"""Reading a savepoint: open reads the manifest only; state bytes are read per
chunk, when asked for, and every chunk's CRC32C is checked on the way in.

Values decode lazily: iterating a state decodes one value at a time, while the
``*_arrow`` methods decode whole chunks at once for analytics.
"""

from __future__ import annotations

import bisect
import collections
import os
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, overload

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute is used below; it is not imported by "import pyarrow")

from ._proto.savepoint.v1 import manifest_pb2 as pb
from ._proto.savepoint.v1.serializer_pb2 import SerializerSnapshot
from .checksum import crc32c
from .chunk import decode_chunk
from .codecs import decompress
from .descriptions import KIND_NAMES, KeyedStateInfo, ListStateInfo, OperatorInfo, SavepointInfo, serializer_label
from .errors import (
    ConcurrentWriteError,
    CorruptSavepointError,
    IncompatibleSerializerError,
    InvalidArgumentError,
    SavepointError,
    SavepointNotFoundError,
    StorageError,
    locating,
)
from .io import MANIFEST_NAME, LocalIO, SavepointIO, open_io
from .key_groups import KeyGroupRange, compute_key_groups, repeated_run_starts
from .keys import as_key_array, key_type_of
from .manifest import (
    COORDINATOR_COLUMNS,
    DATA_FILE_MAGIC,
    FORMAT_MAJOR,
    LIST_COLUMNS,
    FormatVersion,
    decode_manifest,
    keyed_column_count,
    minor_version_for,
    read_manifest_file,
    state_label,
)
from .parallel import DECODE_WORKERS, ordered_map
from .read_checks import check_serializers
from .redistribution import DistributionMode
from .serializers import Compatibility, ListOf, Serializer, resolve_compatibility, serializer_from_snapshot
from .ttl import TtlConfig, TtlValue, split_timestamps

if TYPE_CHECKING:
    import pandas  # optional: only StateView.to_pandas needs it

    from .broadcast import BroadcastStateView
    from .restore import RestorePlan
    from .timers import TimerServiceView


class _Named(Protocol):
    name: str

#: The namespace of a state without a namespace serializer (spec/format.md §7.7): pass no namespace.
VOID_NAMESPACE = type("VoidNamespace", (), {"__repr__": lambda self: "VOID_NAMESPACE"})()

T = TypeVar("T")

#: A scan (:meth:`ChunkStore.scan`) fetches adjacent chunks of a data file by requests of
#: up to this many bytes, and keeps this many requests in flight.
SCAN_SPAN_BYTES = 16 << 20
SCAN_SPANS_IN_FLIGHT = 4


def _columns(chunk: pb.Chunk, columns: list[pa.BinaryArray]) -> list[pa.BinaryArray]:
    """A chunk's columns as read: what :meth:`ChunkStore.read_many` gives without a ``finish``."""
    return columns


class ChunkStore:
    """Fetches and decodes chunks of one savepoint, through its bases when needed."""

    def __init__(self, io: SavepointIO, manifest: pb.Manifest) -> None:
        self.io = io
        self.manifest = manifest
        self._bases: dict[int, SavepointIO] = {}
        self._checked_sizes: set[int] = set()
        #: Per data file, held by its first read (which checks the file) while others wait.
        self._first_reads: dict[int, threading.Lock] = {}
        self._file_identities: dict[object, int] = {}
        self._lock = threading.Lock()
        self._checked_before_reading = False
        #: Stored bytes fetched so far, for read-amplification accounting.
        self.bytes_read = 0

    def check_before_reading(self, errors: list[str] | None = None) -> None:
        """Once, before any state is read (spec/format.md §5.10): the serializer snapshots and
        key hashes of the whole manifest, then every listed base, used by a chunk or not, so
        that a damaged or replaced base is noticed whatever is read. With ``errors`` (a
        verifier, which reports all damage), a failure is appended there and reading goes on;
        a failing storage or a savepoint replaced meanwhile is raised all the same."""
        if self._checked_before_reading:
            return
        try:
            check_serializers(self.manifest)
            for base in range(1, len(self.manifest.bases) + 1):
                self.base_io(base)
        except (StorageError, ConcurrentWriteError):
            raise
        except SavepointError as exc:
            if errors is None:
                raise
            errors.append(str(exc))
        self._checked_before_reading = True

    def base_io(self, base: int) -> SavepointIO:
        """IO of ``bases[base - 1]``, after checking it is the savepoint that was referenced."""
        if base == 0:
            return self.io
        if base not in self._bases:
            ref = self.manifest.bases[base - 1]
            io = self.io.at_store_path(ref.path) if ref.path else self.io.sibling(ref.directory)
            name = ref.path or ref.directory
            if io.location == self.io.location:  # by name, or through a link: one resolved identity
                raise CorruptSavepointError(f"base {name!r} names this savepoint's own directory",
                                            path=self.io.describe(MANIFEST_NAME))
            data = read_manifest_file(io)
            if data is None:
                raise CorruptSavepointError(f"base savepoint {name!r} is missing; this savepoint refers to "
                                            "its data files", path=io.location)
            found, _ = decode_manifest(data, path=io.describe(MANIFEST_NAME))
            if found.savepoint_id != ref.savepoint_id:
                raise CorruptSavepointError(
                    f"base savepoint {name!r} was replaced (id {found.savepoint_id}, expected "
                    f"{ref.savepoint_id}); the data this savepoint refers to is gone", path=io.location)
            self._bases[base] = io
        return self._bases[base]

    def _check_distinct_file(self, io: SavepointIO, rel: str, index: int) -> None:
        """Two data-file entries must not be one file, through a link or through two bases
        that name one directory (spec/format.md §6.2): chunks of both could then share stored
        bytes despite rule C6. Where the storage has no file identity (object stores), a
        file is its name in its store."""
        identity = io.file_identity(rel)
        if identity is None:
            identity = (io.store_key(), f"{io.store_path()}/{rel}")
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
        self.check_before_reading()
        if chunk.WhichOneof("location") == "inline_data":
            return self._verify(chunk, chunk.inline_data, state)
        r = chunk.range
        return self._unless_replaced(lambda: self._verify(chunk, self._fetch(r.file, r.offset, r.length, state), state),
                                     state)

    def _unless_replaced(self, read: Callable[[], T], state: str) -> T:
        """``read()``; if a data file turns out missing or damaged, first whether the
        savepoint was replaced meanwhile (then :class:`ConcurrentWriteError`)."""
        try:
            return read()
        except (CorruptSavepointError, SavepointNotFoundError) as exc:
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

    def _fetch(self, file: int, offset: int, length: int, state: str) -> bytes:
        """Bytes ``[offset, offset + length)`` of data file ``file``, after checking once that
        the file has the size the manifest records and starts with the data-file magic
        (spec/format.md §6.3). Reads of a file wait for its first read, which checks both."""
        self.check_before_reading()
        io, rel = self.file_location(file)
        with self._lock:
            first_read = self._first_reads.setdefault(file, threading.Lock())
        with first_read:
            data = None if file in self._checked_sizes else self._first_read(io, rel, file, offset, length, state)
        if data is None:
            data = io.read_range(rel, offset, length)
        with self._lock:
            self.bytes_read += length
        return data

    def _first_read(self, io: SavepointIO, rel: str, file: int, offset: int, length: int, state: str) -> bytes:
        """The first read of a file: its size, its identity and its magic checked, the magic
        fetched with the bytes asked for when they start right after it."""
        size, expected = io.size(rel), self.manifest.data_files[file].size
        if size != expected:
            raise CorruptSavepointError(
                "data file is missing" if size is None else f"data file is {size} bytes, manifest says {expected}",
                path=io.describe(rel), state=state)
        self._check_distinct_file(io, rel, file)
        magic = len(DATA_FILE_MAGIC)
        if offset == magic:
            data = io.read_range(rel, 0, magic + length)
            head, data = data[:magic], data[magic:]
        else:
            head, data = io.read_range(rel, 0, magic), io.read_range(rel, offset, length)
        if head != DATA_FILE_MAGIC:
            raise CorruptSavepointError(f"data file does not start with the data-file magic (found {bytes(head).hex()})",
                                        path=io.describe(rel), state=state, byte_range=(0, magic))
        self._checked_sizes.add(file)
        return data

    def _verify(self, chunk: pb.Chunk, stored: bytes, state: str) -> bytes:
        computed = crc32c(stored)
        if computed != chunk.crc32c:
            if chunk.WhichOneof("location") == "range":
                io, rel = self.file_location(chunk.range.file)
                where, byte_range = io.describe(rel), (chunk.range.offset, chunk.range.offset + chunk.range.length)
            else:
                where, byte_range = self.io.describe(MANIFEST_NAME) + " (inline)", None
            raise CorruptSavepointError(f"chunk CRC32C mismatch (stored {chunk.crc32c:#010x}, computed {computed:#010x})",
                                        path=where, state=state, byte_range=byte_range)
        return stored

    @overload
    def scan(self, chunks: Sequence[pb.Chunk], columns: int, state: str) -> Iterator[tuple[int, list[pa.BinaryArray]]]:
        ...

    @overload
    def scan(self, chunks: Sequence[pb.Chunk], columns: int, state: str,
             finish: Callable[[pb.Chunk, list[pa.BinaryArray]], T]) -> Iterator[tuple[int, T]]:
        ...

    def scan(self, chunks: Sequence[pb.Chunk], columns: int, state: str,
             finish: Callable[[pb.Chunk, list[pa.BinaryArray]], Any] = _columns) -> Iterator[tuple[int, Any]]:
        """``(i, finish(chunks[i], read_columns(chunks[i])))`` for every chunk, in storage order (inline chunks,
        then each data file by offset): chunks that follow each other in a file are fetched
        by one request of up to :data:`SCAN_SPAN_BYTES`, which is what a full read wants on
        an object store, where each request costs a round trip. Every chunk is CRC-checked
        and decoded (several at once) like any other read."""
        ranged = sorted((i for i, c in enumerate(chunks) if c.WhichOneof("location") == "range"),
                        key=lambda i: (chunks[i].range.file, chunks[i].range.offset))
        spans: list[list[int]] = []
        span_bytes = 0
        for i in ranged:
            r = chunks[i].range
            last = chunks[spans[-1][-1]].range if spans else None
            if (last is not None and last.file == r.file and last.offset + last.length == r.offset
                    and span_bytes + r.length <= SCAN_SPAN_BYTES):
                spans[-1].append(i)
                span_bytes += r.length
            else:
                spans.append([i])
                span_bytes = r.length

        def stored() -> Iterator[tuple[int, bytes]]:
            yield from ((i, self.read_stored(c, state)) for i, c in enumerate(chunks)
                        if c.WhichOneof("location") == "inline_data")
            # A few spans in flight: memory stays within a few SCAN_SPAN_BYTES. Storage read in
            # the consuming thread (local files) reads its spans there too.
            in_flight = SCAN_SPANS_IN_FLIGHT if self.io.read_concurrency > 1 else 1
            fetched = ordered_map(lambda span: self._read_span([chunks[i] for i in span], state), spans,
                                  workers=in_flight, prefetch=in_flight)
            for span, data in zip(spans, fetched):
                yield from zip(span, data)

        return ordered_map(lambda item: (item[0], finish(chunks[item[0]], self._decode(chunks[item[0]], item[1], columns,
                                                                                         state))),
                           stored(), workers=DECODE_WORKERS)

    def _read_span(self, span: list[pb.Chunk], state: str) -> list[bytes]:
        first, last = span[0].range, span[-1].range

        def read() -> list[bytes]:
            data = memoryview(self._fetch(first.file, first.offset, last.offset + last.length - first.offset, state))
            return [self._verify(c, bytes(data[c.range.offset - first.offset:][:c.range.length]), state) for c in span]

        return self._unless_replaced(read, state)

    def read_columns(self, chunk: pb.Chunk, columns: int, state: str) -> list[pa.BinaryArray]:
        return self._decode(chunk, self.read_stored(chunk, state), columns, state)

    def _decode(self, chunk: pb.Chunk, stored: bytes, columns: int, state: str) -> list[pa.BinaryArray]:
        where = self.describe(chunk)
        payload = decompress(chunk.codec, stored, chunk.raw_length, path=where, state=state)
        return decode_chunk(payload, expected_rows=chunk.row_count, expected_columns=columns, path=where, state=state)

    @overload
    def read_many(self, chunks: Sequence[pb.Chunk], columns: int, state: str) -> Iterator[list[pa.BinaryArray]]:
        ...

    @overload
    def read_many(self, chunks: Sequence[pb.Chunk], columns: int, state: str,
                  finish: Callable[[pb.Chunk, list[pa.BinaryArray]], T]) -> Iterator[T]:
        ...

    def read_many(self, chunks: Sequence[pb.Chunk], columns: int, state: str,
                  finish: Callable[[pb.Chunk, list[pa.BinaryArray]], Any] = _columns) -> Iterator[Any]:
        """``finish(chunk, read_columns(chunk))`` of each chunk, in order: as many fetches in
        flight as the storage serves well (object stores: many), several chunks decoding (and
        finishing: checking their keys, say) at once."""
        fetched = ordered_map(lambda chunk: (chunk, self.read_stored(chunk, state)), chunks,
                              workers=self.io.read_concurrency)
        return ordered_map(lambda item: finish(item[0], self._decode(*item, columns, state)), fetched,
                           workers=DECODE_WORKERS)

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


def _resolve(label: str, snapshot: SerializerSnapshot, new: Serializer | None) -> Serializer:
    """The serializer to decode stored bytes with, given the caller's new serializer."""
    if new is None:
        return serializer_from_snapshot(snapshot)
    result = resolve_compatibility(snapshot, new)
    if result.kind is Compatibility.INCOMPATIBLE:
        raise IncompatibleSerializerError(
            f"serializer {serializer_label(new.snapshot())!r} cannot read state written with "
            f"{serializer_label(snapshot)!r}: {result.reason}", state=label)
    if result.kind is Compatibility.COMPATIBLE_AFTER_MIGRATION:
        # Stored bytes are in the old layout: decode them with the old serializer, unless the
        # values themselves change (tuple fields added, removed or reordered): those the old
        # serializer would return in the old shape, so only a migration takes them over.
        old = serializer_from_snapshot(snapshot)
        if new.value_converter(old) is not None:
            raise IncompatibleSerializerError(
                f"serializer {new!r} cannot read state written with {old!r} without a migration "
                f"({result.reason}): migrate the savepoint first (pyref migrate, pyref.migrate_state; "
                "spec/serializers.md §5.3)", state=label)
        return old
    return result.serializer


class TableView:
    """A view whose entries are one Arrow table (:meth:`to_arrow`), and so one pandas
    DataFrame (:meth:`to_pandas`): pyref's state views and :mod:`pyref.flink`'s alike."""

    label: str

    def to_arrow(self) -> pa.Table:
        raise NotImplementedError

    def to_pandas(self) -> pandas.DataFrame:
        """:meth:`to_arrow` as a pandas DataFrame (pandas is optional: ``pip install pandas``)."""
        try:
            import pandas  # noqa: F401  (Table.to_pandas needs it; the error below says so first)
        except ImportError:
            raise InvalidArgumentError("to_pandas() needs pandas, which is not installed (pip install pandas); "
                                       "to_arrow() gives the same table without it", state=self.label) from None
        return self.to_arrow().to_pandas()


class StateView(TableView):
    """What every state view offers: a one-line ``repr`` (from :meth:`summary`), and all
    its entries as one Arrow table (:meth:`to_arrow`) or pandas DataFrame (:meth:`to_pandas`)."""

    def summary(self) -> str:
        """What the manifest says of the state, in one line: serializers, counts, sizes."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.label} {self.summary()}>"


class PartitionedView(StateView):
    """A state stored as partitions of element ranges over unkeyed chunks: list state
    (spec/format.md §5.3) and, format 1.2, broadcast state (§5.8)."""

    def __init__(self, store: ChunkStore, operator: pb.Operator, state: pb.ListState | pb.BroadcastState,
                 columns: int) -> None:
        self._store = store
        self.proto = state
        self.name = state.name
        self.label = state_label(operator, state.name)
        self._columns = columns

    @property
    def partition_count(self) -> int:
        return len(self.proto.partitions)

    def element_counts(self) -> list[int]:
        """Elements (rows) per partition (per subtask; per origin subtask for UNION)."""
        return [sum(r.count for r in p.ranges) for p in self.proto.partitions]

    def _check_partition(self, index: int) -> Sequence[pb.ElementRange]:
        if not 0 <= index < self.partition_count:
            raise InvalidArgumentError(f"partition {index} of {self.partition_count}", state=self.label)
        ranges: Sequence[pb.ElementRange] = self.proto.partitions[index].ranges
        return ranges

    def read_rows(self, ranges: Sequence[pb.ElementRange]) -> Iterator[list[pa.BinaryArray]]:
        """Serialized rows of ``ranges``, one list of Arrow column slices per range;
        consecutive ranges of one chunk share a single read."""
        runs: list[tuple[int, list[pb.ElementRange]]] = []
        for r in ranges:
            if runs and runs[-1][0] == r.chunk:
                runs[-1][1].append(r)
            else:
                runs.append((r.chunk, [r]))
        indexes = [index for index, _ in runs]
        for (_, run), columns in zip(runs, self._store.read_indexed(self.proto.chunks, indexes, self._columns,
                                                                    self.label)):
            for r in run:
                yield [c.slice(r.first, r.count) for c in columns]


    def scan_rows(self) -> Iterator[tuple[int, int, list[pa.BinaryArray]]]:
        """``(partition, index in it of the first row, row columns)`` of every range of every
        partition, read in storage order (:meth:`ChunkStore.scan`): each chunk is fetched
        and decoded once however many partitions share it (UNION and BROADCAST lists, a
        broadcast map every subtask holds), in few large requests. Ranges come in storage
        order, not partition order."""
        uses: dict[int, list[tuple[int, int, pb.ElementRange]]] = {}
        for p, partition in enumerate(self.proto.partitions):
            index = 0
            for r in partition.ranges:
                uses.setdefault(r.chunk, []).append((p, index, r))
                index += r.count
        read = list(uses)
        for i, columns in self._store.scan([self.proto.chunks[c] for c in read], self._columns, self.label):
            for p, index, r in uses[read[i]]:
                yield p, index, [c.slice(r.first, r.count) for c in columns]

    @staticmethod
    def _rows_batch(partition: int, index: int, cells: Sequence[pa.Array], names: Sequence[str]) -> pa.RecordBatch:
        """One range's rows as ``subtask, index, *names`` (the schema of pyref.spark's list reads)."""
        count = len(cells[0])
        return pa.record_batch([pa.array(np.full(count, partition, np.int32)),
                                pa.array(np.arange(index, index + count, dtype=np.int64)), *cells],
                               names=["subtask", "index", *names])

    def scan_batches(self) -> Iterator[pa.RecordBatch]:
        raise NotImplementedError

    def _cell_fields(self) -> list[pa.Field]:
        """The decoded columns after ``subtask, index``."""
        raise NotImplementedError

    def to_arrow(self) -> pa.Table:
        """Every partition's rows, decoded: ``subtask, index, ...`` in state order (by
        subtask, then index), each chunk read once however many partitions share it."""
        schema = pa.schema([pa.field("subtask", pa.int32()), pa.field("index", pa.int64()), *self._cell_fields()])
        table = pa.Table.from_batches(list(self.scan_batches()), schema=schema)
        return table.sort_by([("subtask", "ascending"), ("index", "ascending")])


class ListStateView(PartitionedView):
    """One operator list state."""

    def __init__(self, store: ChunkStore, operator: pb.Operator, state: pb.ListState,
                 serializer: Serializer | None = None) -> None:
        super().__init__(store, operator, state, LIST_COLUMNS)
        self.mode = DistributionMode(state.mode)
        self.serializer = _resolve(self.label, state.element_serializer, serializer)

    def read_encoded(self, ranges: Sequence[pb.ElementRange]) -> Iterator[pa.BinaryArray]:
        """Serialized elements of ``ranges``, one Arrow slice per range."""
        for (column,) in self.read_rows(ranges):
            yield column

    def iter_ranges(self, ranges: Sequence[pb.ElementRange]) -> Iterator[Any]:
        decode = self.serializer.decode
        for column in self.read_encoded(ranges):
            with locating(state=self.label):
                values = [decode(column[i].as_buffer()) for i in range(len(column))]
            yield from values

    def partition(self, index: int) -> Iterator[Any]:
        """Lazily decoded elements of partition ``index``."""
        return self.iter_ranges(self._check_partition(index))

    def scan_batches(self) -> Iterator[pa.RecordBatch]:
        """Every element of every partition, decoded: ``subtask, index, value``, one batch per
        range, read in storage order (:meth:`PartitionedView.scan_rows`)."""
        for p, index, (column,) in self.scan_rows():
            with locating(state=self.label):
                values = self.serializer.decode_array(column)
            yield self._rows_batch(p, index, [values], ["value"])

    def _cell_fields(self) -> list[pa.Field]:
        return [pa.field("value", self.serializer.arrow_type())]

    @property
    def info(self) -> ListStateInfo:
        return ListStateInfo.of(self.proto)

    def summary(self) -> str:
        return self.info.summary()

    def arrow_ranges(self, ranges: Sequence[pb.ElementRange]) -> pa.Array:
        with locating(state=self.label):
            parts = [self.serializer.decode_array(c) for c in self.read_encoded(ranges)]
        return pa.concat_arrays(parts) if parts else pa.array([], type=self.serializer.arrow_type())


@dataclass(frozen=True)
class CheckedKeys:
    """The keys a chunk's key check decoded: every row's, or (``starts``) only the first
    row's of each run of equal keys."""

    decoded: pa.Array
    starts: np.ndarray | None
    rows: int

    def every_row(self) -> pa.Array:
        """The decoded key of every row of the chunk."""
        if self.starts is None:
            return self.decoded
        runs = np.diff(self.starts, append=self.rows)
        return self.decoded.take(pa.array(np.repeat(np.arange(len(self.starts), dtype=np.int32), runs)))


class KeyGroupedView(StateView):
    """A state stored in key-group chunks ordered by key group: keyed state (spec/format.md
    §5.4) and, format 1.2, timers (§5.7). A key-group range is a slice of the chunk list."""

    #: The operator's key serializer, set by each kind of view.
    key_serializer: Serializer

    def __init__(self, store: ChunkStore, operator: pb.Operator, state: pb.KeyedState | pb.TimerService,
                 columns: int) -> None:
        self._store = store
        self.proto = state
        self.max_parallelism = operator.max_parallelism
        #: Format 1.2: key groups assigned by the writer are taken from the chunks, never computed (§7.12).
        self.writer_assigned_key_groups = operator.key_groups == pb.KEY_GROUPS_FROM_WRITER
        self.key_type = None if self.writer_assigned_key_groups else key_type_of(operator.key_serializer)
        self._columns = columns

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
        groups: list[int] = np.unique(self.chunk_key_groups).tolist()
        return groups

    def read_encoded(self, chunks: Sequence[pb.Chunk]) -> Iterator[tuple[int, list[pa.BinaryArray]]]:
        """``(key group, columns)`` of each chunk, in order, keys checked."""
        return self._store.read_many(chunks, self._columns, self.label, self._checked_encoded)

    def scan_encoded(self) -> Iterator[tuple[int, list[pa.BinaryArray]]]:
        """``(key group, columns)`` of every chunk, in storage order (:meth:`ChunkStore.scan`)."""
        return (encoded for _, encoded in self._store.scan(self.proto.chunks, self._columns, self.label,
                                                            self._checked_encoded))

    def _checked_encoded(self, chunk: pb.Chunk, columns: list[pa.BinaryArray]) -> tuple[int, list[pa.BinaryArray]]:
        """A chunk's key group and columns, its keys checked; run by the threads that decode chunks."""
        self._check_keys(chunk, columns[0])
        return chunk.key_group, columns

    def _check_keys(self, chunk: pb.Chunk, keys: pa.BinaryArray) -> CheckedKeys | None:
        """Every key of a chunk lies within its key bounds (spec/format.md §7.6) and, unless the
        writer assigned the key groups, belongs to its key group (§7.1): readers check both
        whenever they read a chunk's rows, so every reader gives one answer about the chunk.
        Returns the keys it decoded for that, so that a caller need not decode them again."""
        if not len(keys) or (self.key_type is None and not chunk.HasField("key_bounds")):
            return None
        rows, every_key = len(keys), keys
        # Equal keys have equal encodings (§7.1): the first row of each run of equal encodings
        # stands for the run, so a key under N namespaces is checked once.
        starts = repeated_run_starts(keys)
        if starts is not None:
            keys = keys.take(pa.array(starts))
        if chunk.HasField("key_bounds"):
            lowest, highest = (v.as_py() for v in pa.compute.min_max(keys).values())
            bounds = chunk.key_bounds
            if lowest < bounds.min or highest > bounds.max:
                outside = lowest if lowest < bounds.min else highest
                raise CorruptSavepointError(f"a key of the chunk ({outside.hex()}) lies outside its key bounds "
                                            f"[{bounds.min.hex()}, {bounds.max.hex()}]",
                                            path=self._store.describe(chunk), state=self.label)
        if self.key_type is None:
            return None
        try:
            decoded = self.key_serializer.decode_array(keys)
        except CorruptSavepointError:
            if starts is not None:  # name the record by its row in the chunk, not in the runs
                self.key_serializer.decode_array(every_key)
            raise
        groups = compute_key_groups(decoded, self.max_parallelism, self.key_type)
        wrong = np.flatnonzero(groups != chunk.key_group)
        if wrong.size:
            first = int(wrong[0])
            row = first if starts is None else int(starts[first])
            raise CorruptSavepointError(f"row {row}: its key belongs to key group {int(groups[first])}, not to the "
                                        f"chunk's key group {chunk.key_group}", path=self._store.describe(chunk),
                                        state=self.label)
        if decoded is keys:  # decoding is the identity (byte-string keys): every row's key is the column itself
            return CheckedKeys(every_key, None, rows)
        return CheckedKeys(decoded, starts, rows)

    def scan_key_groups(self) -> Iterator[tuple[int, list[pa.BinaryArray]]]:
        """:meth:`read_key_groups` of every key group, in storage order: a key group comes
        once all its chunks are read, so only key groups whose chunks are apart in storage
        (in two data files, or a base's) wait in memory."""
        waiting = collections.Counter(self.chunk_key_groups.tolist())
        parts: dict[int, list[list[pa.BinaryArray]]] = {}
        for group, columns in self.scan_encoded():
            parts.setdefault(group, []).append(columns)
            waiting[group] -= 1
            if not waiting[group]:
                held = parts.pop(group)
                yield group, held[0] if len(held) == 1 else [pa.concat_arrays(c) for c in zip(*held)]

    def read_key_groups(self, chunks: Sequence[pb.Chunk]) -> Iterator[tuple[int, list[pa.BinaryArray]]]:
        """The columns of each key group's chunks (consecutive in ``chunks``) concatenated."""
        group, parts = 0, list[list[pa.BinaryArray]]()
        for chunk_group, columns in self.read_encoded(chunks):
            if parts and chunk_group != group:
                yield group, [pa.concat_arrays(c) for c in zip(*parts)]
                parts = []
            group = chunk_group
            parts.append(columns)
        if parts:
            yield group, [pa.concat_arrays(c) for c in zip(*parts)]


class KeyedStateView(KeyGroupedView):
    """One keyed state. Format 1.2: rows may have a namespace (a column after the key) and
    a TTL (a last-access timestamp before every value), spec/format.md §7.7, §7.8."""

    def __init__(self, store: ChunkStore, operator: pb.Operator, key_serializer: Serializer, state: pb.KeyedState,
                 value_serializer: Serializer | None = None, user_key_serializer: Serializer | None = None) -> None:
        super().__init__(store, operator, state, keyed_column_count(state))
        self.name = state.name
        self.label = state_label(operator, state.name)
        self.kind = KIND_NAMES[state.kind]
        self.key_serializer = key_serializer
        self.value_serializer = _resolve(self.label, state.value_serializer, value_serializer)
        self.user_key_serializer = (_resolve(self.label, state.user_key_serializer, user_key_serializer)
                                    if state.kind == pb.MAP else None)
        self.namespace_serializer = (serializer_from_snapshot(state.namespace_serializer)
                                     if state.HasField("namespace_serializer") else None)
        self.ttl = TtlConfig.from_proto(state.ttl) if state.HasField("ttl") else None
        element = TtlValue(self.value_serializer) if self.ttl is not None and state.kind == pb.LIST else None
        self._stored_value = (ListOf.of_list_state(element or self.value_serializer) if state.kind == pb.LIST
                              else self.value_serializer)

    @property
    def namespaced(self) -> bool:
        return self.namespace_serializer is not None

    @property
    def info(self) -> KeyedStateInfo:
        return KeyedStateInfo.of(self.proto)

    def summary(self) -> str:
        return self.info.summary()

    def _row_serializers(self) -> list[Serializer]:
        """The serializers of the columns before the value: key, [namespace], [user key]."""
        return [self.key_serializer, *([self.namespace_serializer] if self.namespace_serializer is not None else []),
                *([self.user_key_serializer] if self.user_key_serializer is not None else [])]

    def _split_values(self, column: pa.Array) -> tuple[pa.Array, np.ndarray | None]:
        """The value cells without their TTL timestamps (VALUE-like and MAP), and the timestamps."""
        if self.ttl is None or self.kind == "list":
            return column, None
        stamps, values = split_timestamps(column, self.label)
        return values, stamps

    def iter_chunks(self, chunks: Sequence[pb.Chunk], *, with_ttl: bool = False) -> Iterator[tuple[Any, ...]]:
        """Lazily decoded entries: (key, [namespace], [user_key], value), with the namespace in a
        namespaced state and the user key in MAP state; ``with_ttl`` appends the last-access
        timestamp (for LIST state, the list of the elements' timestamps)."""
        decoders = [s.decode for s in self._row_serializers()]
        for _, columns in self.read_encoded(chunks):
            values, stamps = self._split_values(columns[-1])
            for i in range(len(values)):
                row = [d(c[i].as_buffer()) for d, c in zip(decoders, columns)]
                value = self._stored_value.decode(values[i].as_buffer())
                if self.ttl is not None and self.kind == "list":
                    row += [[v for _, v in value], *([[s for s, _ in value]] if with_ttl else [])]
                else:
                    row += [value, *([int(stamps[i])] if with_ttl and stamps is not None else [])]
                yield tuple(row)

    def items(self, *, with_ttl: bool = False) -> Iterator[tuple[Any, ...]]:
        return self.iter_chunks(self.proto.chunks, with_ttl=with_ttl)

    def key_group_of(self, key: Any) -> int:
        if self.writer_assigned_key_groups:
            raise InvalidArgumentError("the writer assigned this operator's key groups; no hash computes them "
                                       "(spec/format.md §7.12)", state=self.label)
        assert self.key_type is not None  # hashed key groups: the operator's keys have a key type
        keys = as_key_array([key], self.key_serializer)
        return int(compute_key_groups(keys, self.max_parallelism, self.key_type)[0])

    def _lookup_chunks(self, key: Any, wanted: bytes, key_group: int | None) -> list[pb.Chunk]:
        if self.writer_assigned_key_groups and key_group is None:
            return list(self.proto.chunks)  # no hash: every chunk may hold the key
        group = self.key_group_of(key) if key_group is None or not self.writer_assigned_key_groups else key_group
        if key_group is not None and key_group != group:
            raise InvalidArgumentError(f"key {key!r} is in key group {group}, not {key_group}", state=self.label)
        # Format 1.1 key bounds let a lookup skip chunks that cannot hold the key.
        return [c for c in self.chunks_in(KeyGroupRange(group, group))
                if not c.HasField("key_bounds") or c.key_bounds.min <= wanted <= c.key_bounds.max]

    def get(self, key: Any, default: Any = None, *, namespace: Any = VOID_NAMESPACE, key_group: int | None = None,
            with_ttl: bool = False) -> Any:
        """The state of one key (value, list, or dict for MAP), reading only its key group's chunks.

        A namespaced state needs ``namespace`` (spec/format.md §7.7). With writer-assigned key
        groups the key group cannot be computed: give ``key_group``, or every chunk is read.
        ``with_ttl`` returns ``(value, last_access_ms)`` (lists and dicts of such pairs for
        LIST and MAP state) for a state with a TTL. A map with two user keys that are equal
        Python values (0.0 and -0.0) is refused: a dict cannot hold both (:func:`python_map`).
        """
        if (namespace is VOID_NAMESPACE) == self.namespaced:
            raise InvalidArgumentError("a namespaced state needs namespace=..., and only it takes one",
                                       state=self.label)
        with locating(state=self.label):  # a key or namespace of another type than the state's
            wanted = self.key_serializer.encode(key)
            wanted_namespace = (self.namespace_serializer.encode(namespace) if self.namespace_serializer is not None
                                else None)
        # Rows of the key, in stored order; the last row of a (user) key wins (spec/format.md §7.1).
        # Keys, namespaces and user keys are told apart by their bytes, the same in every language.
        latest: dict[bytes, tuple[Any, int | None]] = {}
        for _, columns in self.read_encoded(self._lookup_chunks(key, wanted, key_group)):
            matches = pa.compute.equal(columns[0], pa.scalar(wanted, pa.binary()))
            if wanted_namespace is not None:
                matches = pa.compute.and_(matches, pa.compute.equal(columns[1], pa.scalar(wanted_namespace,
                                                                                          pa.binary())))
            hits = np.flatnonzero(matches.to_numpy(zero_copy_only=False))
            if not hits.size:
                continue
            values, stamps = self._split_values(columns[-1].take(pa.array(hits)))
            for j, i in enumerate(hits.tolist()):
                user_key = columns[-2][i].as_py() if self.user_key_serializer is not None else b""
                latest[user_key] = (values[j].as_buffer(), None if stamps is None else int(stamps[j]))
        if not latest:
            return default
        decoded = {k: self._decode_value(v, stamp, with_ttl) for k, (v, stamp) in latest.items()}
        if self.user_key_serializer is None:
            return decoded[b""]
        return python_map(((self.user_key_serializer.decode(k), v) for k, v in decoded.items()), "user keys",
                          self.label)

    def _decode_value(self, cell: Any, stamp: int | None, with_ttl: bool) -> Any:
        value = self._stored_value.decode(cell)
        if self.ttl is not None and self.kind == "list":
            return value if with_ttl else [v for _, v in value]
        return (value, stamp) if with_ttl and stamp is not None else value

    def _arrow_columns(self) -> tuple[list[str], list[pa.DataType]]:
        names = ["key_group", "key", *(["namespace"] if self.namespaced else []),
                 *(["user_key"] if self.user_key_serializer else []), "value"]
        types = [pa.int32(), *(s.arrow_type() for s in self._row_serializers())]
        if self.ttl is not None and self.kind == "list":
            types += [pa.list_(self.value_serializer.arrow_type()), pa.list_(pa.int64())]
        else:
            types += [self._stored_value.arrow_type(), *([pa.int64()] if self.ttl is not None else [])]
        return names + (["ttl_timestamp"] if self.ttl is not None else []), types

    def arrow_batches(self, chunks: Sequence[pb.Chunk]) -> Iterator[pa.RecordBatch]:
        """Entries decoded to Arrow, one record batch per chunk, as they are read:
        key_group, key[, namespace][, user_key], value[, ttl_timestamp]."""
        return self._store.read_many(chunks, self._columns, self.label, self._checked_batch)

    def scan_batches(self) -> Iterator[pa.RecordBatch]:
        """Every entry, as :meth:`arrow_batches` decodes them, read in storage order
        (:meth:`KeyGroupedView.scan_encoded`): a full read in few large requests, for
        analytics on object stores. Batches come in storage order, not key-group order;
        where the order of a key's rows matters, :meth:`to_arrow` gives state order."""
        return (batch for _, batch in self._store.scan(self.proto.chunks, self._columns, self.label,
                                                        self._checked_batch))

    def _checked_batch(self, chunk: pb.Chunk, columns: list[pa.BinaryArray]) -> pa.RecordBatch:
        """A chunk's rows, keys checked, decoded to a record batch; run by the threads that
        decode chunks, so that checking and decoding overlap with reading the next chunks."""
        names, types = self._arrow_columns()
        checked = self._check_keys(chunk, columns[0])
        with locating(state=self.label):
            return self._batch(names, types, chunk.key_group, columns, checked)

    def _batch(self, names: list[str], types: list[pa.DataType], group: int, columns: list[pa.BinaryArray],
               checked: CheckedKeys | None) -> pa.RecordBatch:
        """One chunk's rows (of key group ``group``) decoded to a record batch."""
        arrays = [pa.array(np.full(len(columns[0]), group, dtype=np.int32)),
                  checked.every_row() if checked is not None else self.key_serializer.decode_array(columns[0])]
        arrays += [s.decode_array(c) for s, c in zip(self._row_serializers()[1:], columns[1:])]
        values, stamps = self._split_values(columns[-1])
        if self.ttl is not None and self.kind == "list":
            cells = [self._stored_value.decode(values[i].as_buffer()) for i in range(len(values))]
            arrays += [pa.array([[self.value_serializer._to_arrow_value(v) for _, v in c] for c in cells], types[-2]),
                       pa.array([[s for s, _ in c] for c in cells], pa.list_(pa.int64()))]
        else:
            arrays.append(self._stored_value.decode_array(values))
            if stamps is not None:
                arrays.append(pa.array(stamps, pa.int64()))
        return pa.record_batch(arrays, names=names)

    def arrow_chunks(self, chunks: Sequence[pb.Chunk]) -> pa.Table:
        """Entries decoded to Arrow: key_group, key[, namespace][, user_key], value[, ttl_timestamp]."""
        batches = list(self.arrow_batches(chunks))
        if not batches:
            names, types = self._arrow_columns()
            return pa.schema([pa.field(n, t) for n, t in zip(names, types)]).empty_table()
        return pa.Table.from_batches(batches)

    def to_arrow(self) -> pa.Table:
        """Every entry, decoded (:meth:`arrow_chunks`), in state order."""
        return self.arrow_chunks(self.proto.chunks)


@dataclass(repr=False)
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
    def uid(self) -> str:
        """Format 1.2: the uid the job gave the operator ("" when unknown)."""
        return self.proto.uid

    @property
    def engine_operator_id(self) -> bytes:
        """Format 1.2: the engine's own id of the operator (b"" when unknown)."""
        return self.proto.engine_operator_id

    @property
    def writer_assigned_key_groups(self) -> bool:
        """Format 1.2: the writer assigned the key groups; no hash recomputes them (spec/format.md §7.12)."""
        return self.proto.key_groups == pb.KEY_GROUPS_FROM_WRITER

    @property
    def info(self) -> OperatorInfo:
        """What the manifest says of the operator and its states (no state bytes read)."""
        return OperatorInfo.of(self.proto)

    def __repr__(self) -> str:
        return f"<OperatorView {self.operator_id!r} {self.info.summary()}>"

    @property
    def list_state_names(self) -> list[str]:
        return [s.name for s in self.proto.list_states]

    @property
    def keyed_state_names(self) -> list[str]:
        return [s.name for s in self.proto.keyed_states]

    @property
    def broadcast_state_names(self) -> list[str]:
        return [s.name for s in self.proto.broadcast_states]

    @cached_property
    def key_serializer(self) -> Serializer | None:
        return serializer_from_snapshot(self.proto.key_serializer) if self.proto.HasField("key_serializer") else None

    def _keys(self) -> Serializer:
        """The key serializer, which an operator with keyed state or timers has (rule O4)."""
        if self.key_serializer is None:
            raise InvalidArgumentError(f"operator {self.operator_id!r} has no keys (no key serializer)")
        return self.key_serializer

    def _find(self, states: Iterable[_Named], name: str) -> Any:
        states = list(states)
        for s in states:
            if s.name == name:
                return s
        there = ", ".join(repr(s.name) for s in states) or "none"
        raise InvalidArgumentError(f"operator {self.operator_id!r} has no such state (of this type it has {there})",
                                   state=f"{self.operator_id}/{name}")

    def list_state(self, name: str, serializer: Serializer | None = None) -> ListStateView:
        """A list state; with ``serializer``, resolved against the stored snapshot."""
        self._store.check_before_reading()
        return ListStateView(self._store, self.proto, self._find(self.proto.list_states, name), serializer)

    def keyed_state(self, name: str, value_serializer: Serializer | None = None,
                    user_key_serializer: Serializer | None = None) -> KeyedStateView:
        self._store.check_before_reading()
        return KeyedStateView(self._store, self.proto, self._keys(), self._find(self.proto.keyed_states, name),
                              value_serializer, user_key_serializer)

    def broadcast_state(self, name: str) -> BroadcastStateView:
        """Format 1.2: a broadcast map state (spec/format.md §5.8)."""
        from .broadcast import BroadcastStateView  # builds on this module

        self._store.check_before_reading()
        return BroadcastStateView(self._store, self.proto, self._find(self.proto.broadcast_states, name))

    @property
    def timer_services(self) -> list[TimerServiceView]:
        """Format 1.2: the operator's timer services (spec/format.md §5.7)."""
        from .timers import TimerServiceView  # builds on this module

        self._store.check_before_reading()
        return [TimerServiceView(self._store, self.proto, self._keys(), s) for s in self.proto.timer_services]

    def timer_service(self, name: str, domain: str | None = None) -> TimerServiceView:
        """Format 1.2: the timer service ``name`` (of ``domain``, "event_time" or "processing_time",
        needed only when both domains have a service of that name)."""
        from .timers import TimerServiceView, find_timer_service

        self._store.check_before_reading()
        return TimerServiceView(self._store, self.proto, self._keys(),
                                find_timer_service(self.proto, name, domain))

    @cached_property
    def coordinator_state(self) -> bytes | None:
        """Format 1.2: the operator coordinator's state, bytes only the engine interprets
        (spec/format.md §7.11); None when there is none."""
        self._store.check_before_reading()
        if not self.proto.HasField("coordinator_state"):
            return None
        (column,) = self._store.read_columns(self.proto.coordinator_state, COORDINATOR_COLUMNS,
                                             f"{self.operator_id} (coordinator state)")
        state: bytes = column[0].as_py()
        return state


FLINK_METADATA_NAME = "_metadata"  # a Flink savepoint's one file at its root


def _holds_flink_metadata(io: SavepointIO) -> bool:
    """Only for a hint: a location no savepoint can be at (a file, say) stays *not found*."""
    try:
        return io.stat(FLINK_METADATA_NAME) is not None
    except SavepointError:
        return False


def savepoints_below(io: SavepointIO, most: int = 3) -> str:
    """Only for a not-found error's hint (elsewhere the store's :meth:`SavepointIO.absence_hint`),
    on local disks: "; a savepoint is one level down: ..."
    naming subdirectories that hold one (pyref's, a Flink savepoint or a retained checkpoint),
    the highest-numbered first (a job's checkpoint directory holds chk-N, shared/, taskowned/),
    else two levels down (Flink's checkpoint directory holds a directory per job id, each its
    chk-N); or, where nothing is at the path, that it is not there (and that ``~`` was not
    expanded). A bounded look: a hint never costs a walk of a large tree."""
    if not isinstance(io, LocalIO):
        return io.absence_hint()
    if not os.path.lexists(io.root):
        # A quoted "~/..." reaches pyref unexpanded (as it reaches Flink and Spark): say so.
        tilde = "; '~' is not expanded (only a shell expands it, unquoted)" if "~" in io.root.split(os.sep) else ""
        return f"; the path does not exist{tilde}"
    if os.path.isfile(io.root):  # a savepoint's _manifest (or Flink's _metadata) given for the savepoint
        return f"; the path is a file: give the savepoint's directory ({os.path.dirname(io.location) or '.'})" \
            if os.path.basename(io.root) in (MANIFEST_NAME, FLINK_METADATA_NAME) else "; the path is a file"
    children = _subdirectories(io.root, 10_000)
    found = [name for name in children if _holds_savepoint(os.path.join(io.root, name))]
    levels = "one level"
    if not found:
        levels = "two levels"
        found = [os.path.join(name, grandchild) for name in children[:100]
                 for grandchild in _subdirectories(os.path.join(io.root, name), 1_000)
                 if _holds_savepoint(os.path.join(io.root, name, grandchild))]
    number = re.compile(r"\d+$")
    found.sort(key=lambda name: (-int(m.group()) if (m := number.search(name)) else 1, name))
    return f"; a savepoint is {levels} down: {', '.join(os.path.join(io.location, d) for d in found[:most])}" \
        if found else ""


def _subdirectories(directory: str, most: int) -> list[str]:
    """The names of up to ``most`` entries of ``directory`` that are directories (links not followed)."""
    try:
        with os.scandir(directory) as entries:
            return [e.name for _, e in zip(range(most), entries) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []


def _holds_savepoint(directory: str) -> bool:
    return any(os.path.isfile(os.path.join(directory, name)) for name in (MANIFEST_NAME, FLINK_METADATA_NAME))


def read_committed(io: SavepointIO) -> tuple[bytes, pb.Manifest, FormatVersion]:
    """The committed manifest: its bytes, decoded and validated, and its format version."""
    data = read_manifest_file(io)
    if data is None:
        # Flink users hand pyref their Flink savepoints first: say which commands read those.
        hint = ("; it is a Flink savepoint (_metadata): pyref inspect, verify, plan and import-flink read it, "
                "as do pyref.flink.FlinkSavepoint and pyref.spark.read_state; import it for the rest"
                if _holds_flink_metadata(io) else "")
        hint = hint or savepoints_below(io)
        raise SavepointNotFoundError(f"no committed savepoint here (no _manifest){hint}", path=io.location)
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
    def written(cls, io: SavepointIO, manifest: pb.Manifest) -> Savepoint:
        """The savepoint a writer just committed at ``io``, open without reading it back."""
        return cls(io, manifest, FormatVersion(FORMAT_MAJOR, minor_version_for(manifest)))

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
    def info(self) -> SavepointInfo:
        """What the savepoint holds, from its manifest (:func:`pyref.inspection.describe`)."""
        return SavepointInfo.of(self.manifest, location=self.location, format_version=str(self.version))

    def __repr__(self) -> str:
        return f"<Savepoint {self.location} {self.info.summary()}>"

    @property
    def operators(self) -> list[OperatorView]:
        return [OperatorView(self.store, op) for op in self.manifest.operators]

    def operator(self, operator_id: str) -> OperatorView:
        for op in self.manifest.operators:
            if op.operator_id == operator_id:
                return OperatorView(self.store, op)
        raise InvalidArgumentError(f"savepoint has no operator {operator_id!r}; its operators: "
                                   f"{', '.join(repr(op.operator_id) for op in self.manifest.operators)}",
                                   path=self.location)

    def restore_plan(self, parallelism: int | Mapping[str, int]) -> RestorePlan:
        """Which key groups and list elements each subtask restores at a new parallelism."""
        from .restore import RestorePlan

        return RestorePlan(self, parallelism)


def python_map(entries: Iterable[tuple[Any, Any]], what: str, label: str) -> dict[Any, Any]:
    """The entries of a map whose keys are distinct by their encodings, as a dict. Two keys
    may still be equal as Python values (float 0.0 and -0.0, distinct keys in Java too): a
    dict would keep one entry and give it the other's value, so they are refused."""
    out: dict[Any, Any] = {}
    for key, value in entries:
        if key in out:
            raise InvalidArgumentError(f"two {what} with different encodings are equal as Python values ({key!r}): "
                                       "a dict cannot hold both; read the rows with items() or to_arrow()",
                                       state=label)
        out[key] = value
    return out


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
