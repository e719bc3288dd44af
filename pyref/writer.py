"""Writing a savepoint: stream states of many subtasks into chunks, then commit.

Memory is bounded by the buffer budget (default 64 MiB) and the chunk size, not
by the state size: added rows are copied into the writer's buffers (nothing of the
caller's batches is kept) and written as chunks of their key group (or list
partition) when a slot has a chunk's worth or the budget is exceeded. With more
slots than the budget can fill with useful chunks (32768 key groups), rows are
spilled to an unnamed temporary file and merged per slot at the commit
(:mod:`pyref.spill`).

Commit protocol (spec/format.md §10): data files get fresh unique names, are
made durable, and only then is the manifest published: on local files written
aside and renamed over the old one under an exclusive lock, on object stores by
one conditional write (§10.5). A reader therefore sees the previous savepoint or
the complete new one, never a mix; a failed or killed writer leaves at most
unreferenced data files, which no reader looks at.

A writer is *open* until it commits or aborts. An error while it buffers, flushes
or writes may leave a state half added or a data file half written, so it makes
the writer *failed*: a failed writer refuses to commit and can only be aborted.
"""

from __future__ import annotations

import contextlib
import functools
import operator
import os
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (makes pa.compute available)

from . import __version__
from ._proto.savepoint.v1 import manifest_pb2 as pb
from .checksum import crc32c
from .chunk import encode_chunk
from .codecs import MAX_RAW_LENGTH, Codec, compress, may_pay, pays
from .derived import check_not_a_base
from .errors import ConcurrentWriteError, CorruptSavepointError, InvalidArgumentError, SavepointError, locating
from .io import MANIFEST_NAME, UNLOCKED_WRITE_DEADLINE_S, SavepointIO, is_data_file_path, open_io
from .key_groups import check_parallelism, compute_key_groups, default_max_parallelism, key_group_range
from .keys import as_key_array, engine_key_groups, key_type_of
from .manifest import DATA_FILE_MAGIC, MAX_MANIFEST_BYTES, declare_features, decode_manifest, encode_manifest
from .parallel import WORKERS, ordered_map
from .reader import Savepoint
from .redistribution import DistributionMode
from .serializers import ListOf, Serializer
from .spill import SpillFile
from .storage import refuse_non_directory_target
from .storage.base import OutputFile

if TYPE_CHECKING:
    from .broadcast import BroadcastStateWriter
    from .timers import TimerServiceWriter
from .ttl import TtlConfig, TtlValue, prefix_timestamps

DEFAULT_CHUNK_BYTES = 1 << 20
DEFAULT_BUFFER_BYTES = 64 << 20
DEFAULT_FILE_BYTES = 256 << 20
DEFAULT_INLINE_BYTES = 1024
#: Payloads smaller than this are compressed in the calling thread: handing a few KiB
#: to a worker costs more than compressing them (thousands of key groups make such chunks).
THREADED_PAYLOAD_BYTES = 64 << 10


class ChunkSink:
    """Stores chunk payloads: compressed, checksummed, appended to rolling data
    files (or inlined in the manifest when tiny). Usable on its own by parallel
    writers (the Spark tasks), each with its own sink and file names.

    Compression runs on worker threads while the caller goes on buffering; the
    returned :class:`pb.Chunk` is completed (location, codec, CRC) by the time
    :meth:`close` returns. At most a few chunks wait, so memory stays bounded.
    """

    def __init__(self, io: SavepointIO, *, codec: Codec = Codec.ZSTD, file_bytes: int = DEFAULT_FILE_BYTES,
                 inline_bytes: int = DEFAULT_INLINE_BYTES, workers: int = WORKERS, file_prefix: str = "") -> None:
        self.io = io
        # Names the files of one job (e.g. a Spark job id) so its driver can find them all. Data
        # files are data/<name>.svd, one segment (spec/format.md §6.2): only those are ever deleted.
        if not isinstance(file_prefix, str) or any(c in file_prefix for c in "/\\:\x00"):
            raise InvalidArgumentError(f"file_prefix {file_prefix!r} must be text without '/', '\\', ':' or NUL")
        self.file_prefix = file_prefix
        self.codec = codec
        self.file_bytes = file_bytes
        self.inline_bytes = inline_bytes
        self.files: list[pb.DataFile] = []
        self._out: OutputFile | None = None
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="pyref-compress") if workers > 1 else None
        self._in_flight: deque[tuple[pb.Chunk, Future[Any]]] = deque()
        self._limit = 2 * workers

    def _compress(self, payload: bytes) -> tuple[bytes, Codec, int]:
        stored = compress(self.codec, payload) if may_pay(self.codec, payload) else payload
        if not pays(len(payload), len(stored)):  # barely compressible: keep it raw
            return payload, Codec.NONE, crc32c(payload)
        return stored, self.codec, crc32c(stored)

    def put(self, payload: bytes, row_count: int, key_group: int = 0) -> pb.Chunk:
        chunk = pb.Chunk(key_group=key_group, row_count=row_count, raw_length=len(payload))
        if self._pool is None or len(payload) < THREADED_PAYLOAD_BYTES:
            self._store(chunk, *self._compress(payload))
            return chunk
        self._in_flight.append((chunk, self._pool.submit(self._compress, payload)))
        while len(self._in_flight) > self._limit:
            self._complete_one()
        return chunk

    def _complete_one(self) -> None:
        chunk, future = self._in_flight.popleft()
        self._store(chunk, *future.result())

    def flush(self) -> None:
        """Complete every chunk returned so far (location, codec, CRC)."""
        while self._in_flight:
            self._complete_one()

    def _store(self, chunk: pb.Chunk, stored: bytes, codec: Codec, crc: int) -> None:
        chunk.codec = cast(pb.Codec, codec)  # pyref's Codec has the proto enum's values
        chunk.crc32c = crc
        if len(stored) <= self.inline_bytes:
            chunk.inline_data = stored
            return
        out = self._file_for(len(stored))
        chunk.range.file = len(self.files) - 1
        chunk.range.offset = out.tell()
        chunk.range.length = len(stored)
        out.write(stored)

    def put_stored(self, chunk: pb.Chunk, stored: bytes) -> pb.Chunk:
        """Store an existing chunk's stored bytes unchanged (copying between savepoints)."""
        copy = pb.Chunk()
        copy.CopyFrom(chunk)
        if chunk.WhichOneof("location") == "inline_data":
            return copy
        self.flush()
        out = self._file_for(len(stored))
        copy.range.file = len(self.files) - 1
        copy.range.offset = out.tell()
        out.write(stored)
        return copy

    def _file_for(self, length: int) -> OutputFile:
        """The data file to append ``length`` bytes to: the current one, or a new one when they would not fit."""
        if self._out is None or self._out.tell() + length > self.file_bytes:
            return self._roll()
        return self._out

    def _roll(self) -> OutputFile:
        self._close_current()
        self._out = out = self.io.create(f"data/{self.file_prefix}{uuid.uuid4().hex}.svd")
        # Listed before its first write, so that an abort after a failed write deletes it.
        self.files.append(pb.DataFile(path=out.path))
        out.write(DATA_FILE_MAGIC)
        return out

    def _close_current(self) -> None:
        if self._out is not None:
            self.files[-1].size = self._out.tell()
            self._out.close()
            self._out = None

    def close(self) -> list[pb.DataFile]:
        self.flush()
        self._shutdown()
        self._close_current()
        return self.files

    def _shutdown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def abort(self) -> None:
        """Delete every file written so far (best effort: it runs after another error)."""
        self._in_flight.clear()
        self._shutdown()
        out, self._out = self._out, None
        if out is not None:
            with contextlib.suppress(OSError, SavepointError):
                out.close()
        for f in self.files:
            with contextlib.suppress(OSError, SavepointError):
                self.io.delete(f.path)


@dataclass
class _Budget:
    limit: int
    used: int = 0


_Method = TypeVar("_Method", bound=Callable[..., Any])


def _fails_writer(method: _Method) -> _Method:
    """Make the writer failed when ``method`` raises after it may have changed buffers or
    files. An :class:`InvalidArgumentError` comes from the argument checks, which run
    before anything changes, and leaves the writer open. Errors of a state's method name
    the state (a serializer refusing a value knows neither)."""

    @functools.wraps(method)
    def guarded(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            with locating(state=getattr(self, "label", None)):
                return method(self, *args, **kwargs)
        except InvalidArgumentError:
            raise
        except BaseException as exc:
            (self if isinstance(self, SavepointWriter) else self._writer)._fail(exc)
            raise

    return cast(_Method, guarded)


def check_text(value: object, what: str) -> str:
    """``value`` if it is text that UTF-8 can encode (names are protobuf strings)."""
    if not isinstance(value, str):
        raise InvalidArgumentError(f"{what} must be a str, got {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidArgumentError(f"{what} {value!r} is not valid Unicode text ({exc.reason})") from None
    return value


def check_subtask(subtask: object, parallelism: int, label: str) -> int:
    """``subtask`` as an index ``0 <= subtask < parallelism`` (an int, not "0" or 0.0)."""
    if isinstance(subtask, bool):
        raise InvalidArgumentError(f"subtask must be an int, got {subtask!r}", state=label)
    try:
        index = operator.index(subtask)  # type: ignore[arg-type]  # anything else is the TypeError below
    except TypeError:
        raise InvalidArgumentError(f"subtask must be an int, got {subtask!r}", state=label) from None
    if not 0 <= index < parallelism:
        raise InvalidArgumentError(f"subtask {index} outside parallelism {parallelism}", state=label)
    return index


def _split_rows(sizes: np.ndarray, target: int) -> list[tuple[int, int]]:
    """Cut rows into consecutive runs of about ``target`` bytes (at least one row each)."""
    n = len(sizes)
    if n == 0:
        return []
    ends = np.cumsum(sizes, dtype=np.int64)
    runs, start, base = [], 0, 0
    while start < n:
        stop = int(np.searchsorted(ends, base + target, side="right"))
        stop = max(stop, start + 1)
        runs.append((start, stop))
        base = int(ends[stop - 1])
        start = stop
    return runs


def _chunk_target(chunk_bytes: int, columns: int) -> int:
    """What the rows of one chunk may cost, each row its cells and its offsets (4 bytes a
    column): the chunk size, and never more than a payload may hold (2^31 - 1 bytes with its
    header and first offsets, spec/format.md §7), so that only a single row can overflow."""
    return min(chunk_bytes, MAX_RAW_LENGTH - 8 - 4 * columns)


def _offsets(column: pa.Array) -> np.ndarray:
    """The int32 offsets (``len + 1``) of a binary column, a view."""
    return np.frombuffer(column.buffers()[1], dtype=np.int32, count=len(column) + 1, offset=column.offset * 4)


def _pieces(column: pa.Array | pa.ChunkedArray) -> list[pa.Array]:
    return column.chunks if isinstance(column, pa.ChunkedArray) else [column]


def _byte_sizes(columns: Sequence[pa.Array | pa.ChunkedArray]) -> np.ndarray:
    sizes = np.zeros(len(columns[0]), dtype=np.int64)
    for c in columns:
        sizes += np.concatenate([np.diff(_offsets(p)) for p in _pieces(c)] or [np.zeros(0, np.int32)])
    return sizes


def _data_bytes(columns: Sequence[pa.Array | pa.ChunkedArray]) -> int:
    """The cell bytes of all rows of ``columns``."""
    return sum(int(o[-1] - o[0]) for c in columns for o in map(_offsets, _pieces(c)) if len(o) > 1)


@dataclass
class _Run:
    """Rows ordered by slot, each slot's rows in the order they came: the rows of one ``add``
    copied out of the caller's arrays (a buffer never keeps a caller's batch alive through
    a slice of it), or what a flush round left of them."""

    columns: list[pa.Array]
    slots: np.ndarray  # each row's slot (key group or subtask), uint16, non-decreasing
    nbytes: int  # bytes its buffers hold


def _sorted_run(columns: Sequence[pa.Array], slots: np.ndarray) -> _Run:
    """A copy of the rows ordered by slot (stable: each slot's rows in the order they came)."""
    if bool((slots[1:] >= slots[:-1]).all()):
        copied = [_compact(c) for c in columns]
    else:
        order = np.argsort(slots, kind="stable")  # uint16: a radix sort
        copied, slots = [_take(c, order) for c in columns], slots[order]
    return _Run(copied, slots, _held_bytes(copied) + slots.nbytes)


def _compact(column: pa.Array) -> pa.Array:
    """A copy of a binary column holding exactly its rows (offsets from 0, its bytes only)."""
    offsets = _offsets(column)
    start, end = int(offsets[0]), int(offsets[-1])
    data = (np.frombuffer(column.buffers()[2], dtype=np.uint8, count=end - start, offset=start).copy()
            if end > start else np.zeros(0, np.uint8))
    return pa.Array.from_buffers(pa.binary(), len(column), [None, pa.py_buffer(offsets - start),
                                                             pa.py_buffer(data)])


#: The most cell bytes one binary column holds: its offsets are int32.
MAX_COLUMN_BYTES = 2**31 - 1


def _fitting_groups(runs: list[_Run]) -> list[list[_Run]]:
    """``runs`` in order, cut into groups whose concatenated columns each hold at most
    :data:`MAX_COLUMN_BYTES` (a run on its own always does)."""
    groups: list[list[_Run]] = []
    held = np.zeros(0, dtype=np.int64)
    for run in runs:
        sizes = np.array([_data_bytes([c]) for c in run.columns], dtype=np.int64)
        if groups and bool((held + sizes <= MAX_COLUMN_BYTES).all()):
            groups[-1].append(run)
            held += sizes
        else:
            groups.append([run])
            held = sizes
    return groups


def _take_chunked(column: pa.ChunkedArray, order: pa.Array) -> pa.ChunkedArray:
    """``column.take(order)``, also when the column holds more than :data:`MAX_COLUMN_BYTES`
    (pyarrow's take first concatenates the chunks, which then overflows): gathered with int64
    offsets, then cut into binary arrays that fit."""
    if _data_bytes([column]) <= MAX_COLUMN_BYTES:
        return column.take(order)
    wide = pa.chunked_array([c.cast(pa.large_binary()) for c in column.chunks], pa.large_binary()).take(order)
    sizes = _byte_sizes([column])[order.to_numpy()]
    return pa.chunked_array([wide.slice(a, b - a).combine_chunks().cast(pa.binary())
                             for a, b in _split_rows(sizes, MAX_COLUMN_BYTES)], pa.binary())


def _held_bytes(columns: Sequence[pa.Array]) -> int:
    return sum(b.size for c in columns for b in c.buffers() if b is not None)


#: A budget round that would write slots averaging less than this share of a chunk
#: spills instead (pyref/spill.py): smaller chunks would be made only for want of memory.
MIN_CHUNK_SHARE = 1 / 8


def _row_pieces(first: int, stop: int, slot_cost: int, limit: int) -> list[tuple[int, int]]:
    """Rows ``first .. stop - 1`` of a slot whose rows cost ``slot_cost`` in all, cut into
    pieces of at most about ``limit``."""
    step = max(1, (stop - first) * limit // slot_cost)
    return [(a, min(a + step, stop)) for a in range(first, stop, step)]


def _row_costs(columns: Sequence[pa.Array]) -> np.ndarray:
    """What each buffered row holds: its cells, a 4-byte offset per column, a 2-byte slot."""
    return _byte_sizes(columns) + 4 * len(columns) + 2


#: A flush round writes a slot from the pieces the runs hold of it; where the runs are so
#: many that the slots would average more pieces than this, it merges them into one first.
MAX_PIECES_PER_SLOT = 8


class _BufferedState:
    """Rows wait, copied and ordered by slot (key group, or list partition), one run per
    add. A flush round writes the fullest slots as chunks, each slot's rows in the order
    they came (its pieces of each run, run after run, joined by the chunk's encoding), and
    keeps the rest of each run. A round runs when the writer's budget
    needs memory back, or when slots of a chunk's worth hold half of what is buffered; it
    costs O(buffered rows) and writes at least half of them, while an add costs a few
    whole-array operations whatever the number of slots.

    When the slots a budget round would write are too small to make good chunks (many
    slots, a small buffer), the buffered rows are spilled to a temporary file instead
    (:mod:`pyref.spill`), and from then on every round spills; the final flush reads the
    runs back a budget's worth of slots at a time. Memory stays at the budget, and chunks
    stay as large as each slot's rows allow, whatever the state size."""

    def __init__(self, writer: SavepointWriter, operator: OperatorWriter, name: str, slots: int) -> None:
        self._writer = writer
        self.operator = operator
        self.name = name
        self.chunks: list[pb.Chunk] = []
        self._runs: list[_Run] = []
        #: Bytes the buffered rows hold (counted in the writer's budget).
        self.buffered = 0
        self._slot_bytes = np.zeros(slots, dtype=np.int64)  # buffered row costs per slot
        self._ready = 0  # buffered row costs in slots of a chunk's worth or more
        self._spill: SpillFile | None = None

    @property
    def label(self) -> str:
        return f"{self.operator.operator_id}/{self.name}"

    def _append(self, columns: list[pa.Array], slots: np.ndarray) -> None:
        # Slots are < 32768 (key groups, subtasks): uint16, radix-sortable.
        run = _sorted_run(columns, np.asarray(slots).astype(np.uint16))
        self._count(run.slots, _row_costs(run.columns))
        self._hold(run)
        if self._spill is None and self._ready and 2 * self._ready >= self.buffered:
            self.flush_round(keep_bytes=self.buffered - self._ready)

    def _count(self, slots: np.ndarray, costs: np.ndarray) -> None:
        """Add rows to the per-slot byte counts and to the bytes of ready slots."""
        chunk_bytes = self._writer.chunk_bytes
        if len(slots) * 4 >= len(self._slot_bytes):
            self._slot_bytes += np.bincount(slots, weights=costs, minlength=len(self._slot_bytes)).astype(np.int64)
            self._ready = int(self._slot_bytes[self._slot_bytes >= chunk_bytes].sum())
            return
        touched = np.unique(slots)
        before = self._slot_bytes[touched]
        np.add.at(self._slot_bytes, slots, costs)
        after = self._slot_bytes[touched]
        self._ready += int(after[after >= chunk_bytes].sum() - before[before >= chunk_bytes].sum())

    def _hold(self, run: _Run) -> None:
        self._runs.append(run)
        self.buffered += run.nbytes
        self._writer._budget.used += run.nbytes

    def flush_round(self, keep_bytes: int = 0) -> None:
        """Write the fullest slots as chunks until the rows left cost at most
        ``keep_bytes`` (0: write everything); a slot of a chunk's worth or more always goes.
        A round that would only make small chunks spills everything instead."""
        per_slot = self._slot_bytes
        fullest = np.argsort(-per_slot, kind="stable")
        left = int(per_slot.sum()) - np.cumsum(per_slot[fullest])  # bytes left after writing the k + 1 fullest
        count = 0 if per_slot.sum() <= keep_bytes else int(np.searchsorted(-left, -keep_bytes)) + 1
        count = max(count, int((per_slot >= self._writer.chunk_bytes).sum()))
        if count == 0:
            return
        small = per_slot[fullest[:count]].sum() < count * self._writer.chunk_bytes * MIN_CHUNK_SHARE
        if self._spill is not None or (keep_bytes and small):
            self._spill_buffered()
            return
        written = np.zeros(len(per_slot), dtype=bool)
        written[fullest[:count]] = True
        chosen = np.flatnonzero(written).astype(np.uint16)
        first, stop = self._slot_rows(self._runs, chosen)
        if int((stop > first).sum()) > MAX_PIECES_PER_SLOT * count:  # many small adds: merged, one piece a slot
            for run in self._merged():
                self._hold(run)
            first, stop = self._slot_rows(self._runs, chosen)
        self._write_runs(self._runs, chosen, first, stop)
        per_slot[written] = 0
        for run in self._release():  # the rows of the slots not written stay, in their runs
            kept = np.flatnonzero(~written[run.slots])
            if len(kept) == len(run.slots):
                self._hold(run)
            elif kept.size:
                columns = [_take(c, kept) for c in run.columns]
                self._hold(_Run(columns, run.slots[kept], _held_bytes(columns) + run.slots[kept].nbytes))

    @staticmethod
    def _slot_rows(runs: Sequence[_Run], slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per run (rows of the result) and slot of ``slots`` (columns): where the run's rows
        of the slot start and stop."""
        first = np.stack([np.searchsorted(r.slots, slots, side="left") for r in runs])
        return first, np.stack([np.searchsorted(r.slots, slots, side="right") for r in runs])

    def _write_runs(self, runs: Sequence[_Run], slots: np.ndarray, first: np.ndarray, stop: np.ndarray) -> None:
        """Write the rows of ``slots`` (ascending) the runs hold, between ``first`` and ``stop``
        (:meth:`_slot_rows`): each slot's pieces, run after run, as the chunks of that slot."""
        slot_index, run_index = np.nonzero((stop > first).T)  # slot by slot, runs in order
        starts, stops = first[run_index, slot_index].tolist(), stop[run_index, slot_index].tolist()
        bounds = [0, *(np.flatnonzero(np.diff(slot_index)) + 1).tolist(), len(slot_index)]
        for a, b in zip(bounds, bounds[1:]):
            pieces = [[c.slice(starts[i], stops[i] - starts[i]) for c in runs[run_index[i]].columns]
                      for i in range(a, b)]
            self._write_slot(int(slots[slot_index[a]]), pieces)

    def _release(self) -> list[_Run]:
        """Every buffered run, out of the budget."""
        runs, self._runs = self._runs, []
        self._writer._budget.used -= self.buffered
        self.buffered = 0
        self._ready = 0
        return runs

    def _merged(self) -> list[_Run]:
        """Every buffered row as few runs (out of the budget): consecutive runs merged into one
        while each of its columns' bytes fit int32 offsets, which a budget above 2 GiB outgrows."""
        merged = []
        for group in _fitting_groups(self._release()):
            if len(group) == 1:
                merged.append(group[0])
                continue
            merged.append(_sorted_run([pa.concat_arrays([r.columns[i] for r in group])
                                       for i in range(len(group[0].columns))],
                                      np.concatenate([r.slots for r in group])))
        return merged

    def _spill_buffered(self) -> None:
        if not self._runs:
            return
        if self._spill is None:
            self._spill = SpillFile(len(self._slot_bytes))
        self._slot_bytes[:] = 0
        for run in self._merged():
            self._spill.add(run.columns, run.slots, _row_costs(run.columns))

    def _merge_spilled(self) -> None:
        """Write every spilled row as chunks: slots in order, each slot's rows in the order
        they came (run after run), about half a budget's worth of rows in memory at a time."""
        spill, self._spill = self._spill, None
        assert spill is not None  # called once something was spilled
        try:
            limit = max(1, self._writer._budget.limit // 2)
            for first, stop, rows, cost in spill.batches(limit):
                if cost > limit:  # one slot over the budget: its rows a piece at a time
                    for run, a, b in rows:
                        for start, end in _row_pieces(a, b, cost, limit):
                            self._write_slot(first, [spill.read(run, start, end, first, stop)[0]])
                    continue
                runs = [_Run(*spill.read(run, a, b, first, stop), nbytes=0) for run, a, b in rows]
                slots = np.arange(first, stop, dtype=np.uint16)
                self._write_runs(runs, slots, *self._slot_rows(runs, slots))
        finally:
            spill.close()

    def discard(self) -> None:
        """Drop what is buffered or spilled (the writer aborts)."""
        if self._runs:
            self._release()
        if self._spill is not None:
            self._spill.close()
            self._spill = None

    def _write_slot(self, slot: int, pieces: list[list[pa.Array]]) -> None:
        """The rows of one slot, given as pieces (each a run of rows of every column) in
        order, cut into chunks of about the chunk size."""
        rows = self._arrange([pa.chunked_array([p[i] for p in pieces], pa.binary()) for i in range(len(pieces[0]))])
        count = len(rows[0])
        target = _chunk_target(self._writer.chunk_bytes, len(rows))
        # Most slots make one chunk: their size comes from the pieces' first and last offsets.
        fits = _data_bytes(rows) + 4 * len(rows) * count <= target
        cuts = [(0, count)] if fits else _split_rows(_byte_sizes(rows) + 4 * len(rows), target)
        for first, end in cuts:
            cells = [c.slice(first, end - first) for c in rows]
            chunk = self._writer._sink.put(encode_chunk(cells), end - first, key_group=self._key_group(slot))
            self._describe(chunk, cells)
            self._emit(slot, chunk)

    def _arrange(self, columns: list[pa.ChunkedArray]) -> list[pa.ChunkedArray]:
        """The rows of one slot in the order they are stored."""
        return columns

    def _describe(self, chunk: pb.Chunk, pieces: list[pa.ChunkedArray]) -> None:
        """Add what a reader may use to skip the chunk."""

    def _key_group(self, slot: int) -> int:
        return 0

    def _emit(self, slot: int, chunk: pb.Chunk) -> None:
        self.chunks.append(chunk)

    def flush(self) -> None:
        self.flush_round()
        if self._spill is not None:
            self._merge_spilled()


class ListStateWriter(_BufferedState):
    """Appends elements to the partitions of one operator list state."""

    def __init__(self, writer: SavepointWriter, operator: OperatorWriter, name: str, mode: DistributionMode,
                 serializer: Serializer) -> None:
        super().__init__(writer, operator, name, slots=operator.parallelism)
        self.mode = DistributionMode.parse(mode)
        self.serializer = serializer
        self.partitions = [pb.Partition() for _ in range(operator.parallelism)]

    @_fails_writer
    def add(self, subtask: int, elements: Iterable[Any] | pa.Array) -> None:
        """Append elements (Python values or an Arrow array) to ``subtask``'s list."""
        self.add_encoded(subtask, self.serializer.encode_array(_values(elements)))

    @_fails_writer
    def add_encoded(self, subtask: int, encoded: pa.Array) -> None:
        """Append already serialized elements (a binary array)."""
        self._writer._check_open()
        subtask = check_subtask(subtask, len(self.partitions), self.label)
        encoded = _binary(encoded)
        if len(encoded):
            self._append([encoded], np.full(len(encoded), subtask, dtype=np.uint16))
            self._writer._relieve_budget()

    def _emit(self, slot: int, chunk: pb.Chunk) -> None:
        self.chunks.append(chunk)
        self.partitions[slot].ranges.append(pb.ElementRange(chunk=len(self.chunks) - 1, count=chunk.row_count))

    def to_proto(self) -> pb.ListState:
        return pb.ListState(name=self.name, mode=cast(pb.DistributionMode, self.mode),
                            element_serializer=self.serializer.snapshot(),
                            chunks=self.chunks, partitions=self.partitions)


class _KeyGroupedState(_BufferedState):
    """Rows buffered per key group and cut into key-group chunks: keyed state and timers
    (spec/format.md §7.1, §7.9)."""

    #: Columns of a row, checked on every add.
    columns: int

    def __init__(self, writer: SavepointWriter, operator: OperatorWriter, name: str) -> None:
        super().__init__(writer, operator, name, slots=operator.max_parallelism)

    def _key_groups(self, key_array: pa.Array, key_groups: Sequence[int] | np.ndarray | None,
                    subtask: int | None) -> np.ndarray:
        """The key group of every key: hashed (spec/key-groups.md §5), or given by the caller
        when the operator's key groups are assigned by its writer (spec/format.md §7.12)."""
        op = self.operator
        if op.writer_assigned_key_groups and key_groups is None and op.engine_key_groups is not None:
            try:
                groups = op.engine_key_groups(key_array, op.max_parallelism)
            except CorruptSavepointError as exc:  # the caller's keys, not a savepoint's
                raise InvalidArgumentError(str(exc), state=self.label) from None
        elif op.writer_assigned_key_groups:
            if key_groups is None:
                raise InvalidArgumentError(f"operator {op.operator_id!r} has writer-assigned key groups: pass "
                                           "key_groups", state=self.label)
            groups = np.asarray(key_groups, dtype=np.int64)
            if groups.shape != (len(key_array),):
                raise InvalidArgumentError(f"{len(groups)} key groups for {len(key_array)} keys", state=self.label)
        elif key_groups is not None:
            raise InvalidArgumentError("key_groups are given only for an operator whose writer assigns them "
                                       "(add_operator(..., key_groups='writer'))", state=self.label)
        else:
            assert op.key_type is not None  # hashed key groups
            groups = compute_key_groups(key_array, op.max_parallelism, op.key_type)
        if subtask is not None:
            subtask = check_subtask(subtask, op.parallelism, self.label)
            own = key_group_range(op.max_parallelism, op.parallelism, subtask)
            outside = (groups < own.first) | (groups > own.last)
            if outside.any():
                bad = int(np.argmax(outside))
                raise InvalidArgumentError(
                    f"key {key_array[bad].as_py()!r} belongs to key group {int(groups[bad])}, outside subtask "
                    f"{subtask}'s range {own.first}..{own.last}", state=self.label)
        return groups

    @_fails_writer
    def add_encoded(self, columns: Sequence[pa.Array], key_groups: np.ndarray) -> None:
        """Add serialized columns in the state's column order whose key groups are known."""
        self._writer._check_open()
        columns = [_binary(c) for c in columns]
        if len(columns) != self.columns:
            raise InvalidArgumentError(f"{len(columns)} columns given, the state's rows have {self.columns}",
                                       state=self.label)
        if len({len(c) for c in columns}) != 1 or len(columns[0]) != len(key_groups):
            raise InvalidArgumentError("keys, values and user keys differ in length", state=self.label)
        if len(key_groups) == 0:
            return
        key_groups = np.asarray(key_groups)
        if key_groups.min() < 0 or key_groups.max() >= self.operator.max_parallelism:
            raise InvalidArgumentError("key group out of range", state=self.label)
        self._append(columns, key_groups)
        self._writer._relieve_budget()

    def _key_group(self, slot: int) -> int:
        return slot

    def _arrange(self, columns: list[pa.ChunkedArray]) -> list[pa.ChunkedArray]:
        if not self._writer.sort_keys:
            return columns
        # Sorted rows make the key bounds of a flush's chunks disjoint (stable: the last write of a key stays last).
        order = pa.compute.sort_indices(columns[0])
        return [_take_chunked(c, order) for c in columns]

    def _describe(self, chunk: pb.Chunk, pieces: list[pa.ChunkedArray]) -> None:
        if self._writer.key_bounds:
            bounds = pa.compute.min_max(pieces[0])
            chunk.key_bounds.min = bounds["min"].as_py()
            chunk.key_bounds.max = bounds["max"].as_py()

    def sorted_chunks(self) -> list[pb.Chunk]:
        return sorted(self.chunks, key=lambda c: c.key_group)  # stable: a key group's chunks keep their order


#: Keyed state kinds by name (spec/format.md §5.4); "reducing" and "aggregating" are format 1.2.
KEYED_KINDS = {"value": pb.VALUE, "list": pb.LIST, "map": pb.MAP, "reducing": pb.REDUCING,
               "aggregating": pb.AGGREGATING}


class KeyedStateWriter(_KeyGroupedState):
    """Adds entries of one keyed state, grouped into key-group chunks."""

    def __init__(self, writer: SavepointWriter, operator: OperatorWriter, name: str, kind: pb.KeyedStateKind,
                 value_serializer: Serializer, user_key_serializer: Serializer | None,
                 namespace_serializer: Serializer | None = None, ttl: TtlConfig | None = None) -> None:
        super().__init__(writer, operator, name)
        self.kind = kind
        self.value_serializer = value_serializer
        self.user_key_serializer = user_key_serializer
        self.namespace_serializer = namespace_serializer
        self.ttl = ttl
        self.columns = 2 + (kind == pb.MAP) + (namespace_serializer is not None)
        # LIST state stores each key's whole list as one value (spec/format.md §7.1); with a
        # TTL, each element (and every other value) is a TTL cell (§7.8).
        element = TtlValue(value_serializer) if ttl is not None else value_serializer
        self._stored_value = ListOf.of_list_state(element) if kind == pb.LIST else value_serializer

    @_fails_writer
    def add(self, keys: Sequence[Any] | pa.Array, values: Sequence[Any] | pa.Array,
            user_keys: Sequence[Any] | pa.Array | None = None, *, namespaces: Sequence[Any] | pa.Array | None = None,
            ttl_timestamps: Sequence[Any] | np.ndarray | None = None,
            subtask: int | None = None, key_groups: Sequence[int] | np.ndarray | None = None) -> None:
        """Add entries: ``values[i]`` under ``keys[i]`` (and ``user_keys[i]`` for MAP state,
        ``namespaces[i]`` for a namespaced state, ``ttl_timestamps[i]`` for a TTL state: the
        last-access time in ms, for LIST state one per element or one for the whole list).

        With ``subtask``, every key must belong to that subtask's key-group range,
        as in a Flink snapshot where each subtask writes only its own key groups.
        ``key_groups`` are required, and only allowed, for an operator whose key
        groups its writer assigns (spec/format.md §7.12).
        """
        op = self.operator
        key_array = as_key_array(keys, op.keys())
        if (user_keys is None) != (self.kind != pb.MAP):
            raise InvalidArgumentError("user_keys are required for MAP state and only for it", state=self.label)
        if (namespaces is None) != (self.namespace_serializer is None):
            raise InvalidArgumentError("namespaces are required for a state with a namespace serializer and only "
                                       "for it", state=self.label)
        if (ttl_timestamps is None) != (self.ttl is None):
            raise InvalidArgumentError("ttl_timestamps are required for a state with a TTL and only for it",
                                       state=self.label)
        columns = [op.keys().encode_array(key_array)]
        if self.namespace_serializer is not None and namespaces is not None:
            columns.append(self.namespace_serializer.encode_array(_values(namespaces)))
        if self.user_key_serializer is not None and user_keys is not None:
            columns.append(self.user_key_serializer.encode_array(_values(user_keys)))
        columns.append(self._encode_values(values, ttl_timestamps))
        self.add_encoded(columns, self._key_groups(key_array, key_groups, subtask))

    def _encode_values(self, values: Sequence[Any] | pa.Array,
                       ttl_timestamps: Sequence[Any] | np.ndarray | None) -> pa.Array:
        if self.ttl is None:
            return self._stored_value.encode_array(_values(values))
        assert ttl_timestamps is not None  # checked by add: a TTL state takes them
        if self.kind != pb.LIST:
            return prefix_timestamps(ttl_timestamps, self.value_serializer.encode_array(_values(values)))
        values = values.to_pylist() if isinstance(values, (pa.Array, pa.ChunkedArray)) else list(values)
        if len(ttl_timestamps) != len(values):
            raise InvalidArgumentError(f"{len(ttl_timestamps)} TTL timestamps for {len(values)} lists",
                                       state=self.label)
        cells = []
        for elements, stamps in zip(values, ttl_timestamps):
            stamps = [stamps] * len(elements) if isinstance(stamps, (int, np.integer)) else list(stamps)
            if len(stamps) != len(elements):
                raise InvalidArgumentError(f"{len(stamps)} TTL timestamps for a list of {len(elements)}",
                                           state=self.label)
            cells.append(list(zip(stamps, elements)))
        return self._stored_value.encode_array(cells)

    def to_proto(self) -> pb.KeyedState:
        state = pb.KeyedState(name=self.name, kind=self.kind, value_serializer=self.value_serializer.snapshot(),
                              chunks=self.sorted_chunks())
        if self.user_key_serializer is not None:
            state.user_key_serializer.CopyFrom(self.user_key_serializer.snapshot())
        if self.namespace_serializer is not None:
            state.namespace_serializer.CopyFrom(self.namespace_serializer.snapshot())
        if self.ttl is not None:
            state.ttl.CopyFrom(self.ttl.to_proto())
        return state


def _take(column: pa.Array, order: np.ndarray) -> pa.Array:
    """Rows ``order`` (any subset, in any order) of a binary column; a numpy gather when
    all rows are one width."""
    offsets = _offsets(column)
    width = int(offsets[1] - offsets[0]) if len(column) else 0
    if width and bool((np.diff(offsets) == width).all()):
        data = np.frombuffer(column.buffers()[2], dtype=np.uint8, count=width * len(column), offset=int(offsets[0]))
        # One fixed-size element per row: numpy copies each row as a unit.
        gathered = np.take(data.view(np.dtype((np.void, width))), order)
        new_offsets = np.arange(len(order) + 1, dtype=np.int32) * width
        return pa.Array.from_buffers(pa.binary(), len(order), [None, pa.py_buffer(new_offsets), pa.py_buffer(gathered)])
    return column.take(pa.array(order))


def _values(values: Sequence[Any] | pa.Array) -> Sequence[Any] | pa.Array:
    return values if isinstance(values, (pa.Array, pa.ChunkedArray)) else list(values)


def _binary(column: pa.Array) -> pa.Array:
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if not pa.types.is_binary(column.type):
        column = column.cast(pa.binary())
    if column.null_count:
        # Buffering copies offsets and bytes, not validity: a null would be stored as an empty cell.
        raise InvalidArgumentError("encoded cells cannot be null; nullable values are encoded by their serializer "
                                   "(Nullable)")
    return column


class OperatorWriter:
    def __init__(self, writer: SavepointWriter, operator_id: str, parallelism: int, max_parallelism: int,
                 key_serializer: Serializer | None, name: str, *, uid: str = "", engine_operator_id: bytes = b"",
                 key_groups: str = "hashed") -> None:
        self._writer = writer
        self.operator_id = operator_id
        self.name = name
        self.parallelism = parallelism
        self.max_parallelism = max_parallelism
        self.key_serializer = key_serializer
        # Format 1.2 (spec/format.md §5.2, §7.12): identity, and who assigns key groups.
        self.uid = uid
        self.engine_operator_id = engine_operator_id
        if key_groups not in ("hashed", "writer"):
            raise InvalidArgumentError(f"key_groups is 'hashed' or 'writer', got {key_groups!r}")
        self.writer_assigned_key_groups = key_groups == "writer"
        hashed = key_serializer is not None and not self.writer_assigned_key_groups
        self.key_type = key_type_of(key_serializer.snapshot()) if key_serializer is not None and hashed else None
        #: Writer-assigned key groups pyref computes when the caller gives none (Flink SQL keys).
        self.engine_key_groups = (engine_key_groups(key_serializer.snapshot())
                                  if key_serializer is not None and self.writer_assigned_key_groups else None)
        self.list_states: dict[str, ListStateWriter] = {}
        self.keyed_states: dict[str, KeyedStateWriter] = {}
        self.broadcast_states: dict[Any, Any] = {}
        self.timer_services: dict[Any, Any] = {}
        #: The operator coordinator's state (spec/format.md §7.11), or None.
        self.coordinator_state: bytes | None = None
        self._coordinator_chunk: pb.Chunk | None = None

    def _check_name(self, name: str) -> None:
        self._writer._check_open()
        check_text(name, "state name")
        if not name or name in self.list_states or name in self.keyed_states or name in self.broadcast_states:
            raise InvalidArgumentError(f"state name {name!r} is empty or already used in operator {self.operator_id!r}")

    def _check_keyed(self) -> None:
        if self.key_serializer is None:
            raise InvalidArgumentError(f"operator {self.operator_id!r} was added without a key serializer")

    def list_state(self, name: str, serializer: Serializer,
                   mode: DistributionMode = DistributionMode.SPLIT_DISTRIBUTE) -> ListStateWriter:
        self._check_name(name)
        state = ListStateWriter(self._writer, self, name, mode, serializer)
        self.list_states[name] = state
        return state

    def keyed_state(self, name: str, value_serializer: Serializer, *, kind: str = "value",
                    user_key_serializer: Serializer | None = None, namespace_serializer: Serializer | None = None,
                    ttl: TtlConfig | None = None) -> KeyedStateWriter:
        """A keyed state: ``kind`` is "value", "list" (value_serializer serializes one
        element), "map" (needs ``user_key_serializer``), or (format 1.2) "reducing" or
        "aggregating" (stored like "value"). Format 1.2: ``namespace_serializer`` gives
        every row a namespace (a window, say), ``ttl`` a time-to-live."""
        self._check_name(name)
        self._check_keyed()
        if kind not in KEYED_KINDS:
            raise InvalidArgumentError(f"unknown keyed state kind {kind!r}; choose one of {sorted(KEYED_KINDS)}")
        if (user_key_serializer is None) != (kind != "map"):
            raise InvalidArgumentError("a user_key_serializer is required for map state and only for it")
        if ttl is not None and not isinstance(ttl, TtlConfig):
            raise InvalidArgumentError("ttl must be a pyref.ttl.TtlConfig")
        state = KeyedStateWriter(self._writer, self, name, KEYED_KINDS[kind], value_serializer, user_key_serializer,
                                 namespace_serializer, ttl)
        self.keyed_states[name] = state
        return state

    def keys(self) -> Serializer:
        """The key serializer, which every operator with keyed state or timers has (checked as they are added)."""
        assert self.key_serializer is not None
        return self.key_serializer

    def timer_service(self, name: str, domain: str | int, namespace_serializer: Serializer | None = None
                      ) -> TimerServiceWriter:
        """Format 1.2: a timer service of ``domain`` "event_time" or "processing_time" (spec/format.md §5.7)."""
        from .timers import TimerServiceWriter  # builds on this module

        self._writer._check_open()
        check_text(name, "timer service name")
        self._check_keyed()
        service = TimerServiceWriter(self._writer, self, name, domain, namespace_serializer)
        if not name or (name, service.domain) in self.timer_services:
            raise InvalidArgumentError(f"timer service {name!r} ({domain}) is unnamed or already in operator "
                                       f"{self.operator_id!r}")
        self.timer_services[(name, service.domain)] = service
        return service

    def broadcast_state(self, name: str, key_serializer: Serializer, value_serializer: Serializer
                        ) -> BroadcastStateWriter:
        """Format 1.2: a broadcast map state, of which every subtask holds a copy (spec/format.md §5.8)."""
        from .broadcast import BroadcastStateWriter  # builds on this module

        self._check_name(name)
        state = BroadcastStateWriter(self._writer, self, name, key_serializer, value_serializer)
        self.broadcast_states[name] = state
        return state

    def states(self) -> list[_BufferedState]:
        return [*self.list_states.values(), *self.keyed_states.values(), *self.timer_services.values(),
                *self.broadcast_states.values()]

    def store_coordinator_state(self) -> None:
        """Hand the coordinator state to the sink as a chunk of one cell (spec/format.md §7.11)."""
        if self.coordinator_state is not None:
            cell = pa.array([bytes(self.coordinator_state)], pa.binary())
            self._coordinator_chunk = self._writer._sink.put(encode_chunk([cell]), 1)

    def to_proto(self) -> pb.Operator:
        op = pb.Operator(operator_id=self.operator_id, name=self.name, parallelism=self.parallelism,
                         max_parallelism=self.max_parallelism,
                         list_states=[s.to_proto() for s in self.list_states.values()],
                         keyed_states=[s.to_proto() for s in self.keyed_states.values()],
                         timer_services=[s.to_proto() for s in self.timer_services.values()],
                         broadcast_states=[s.to_proto() for s in self.broadcast_states.values()],
                         uid=self.uid, engine_operator_id=self.engine_operator_id,
                         key_groups=pb.KEY_GROUPS_FROM_WRITER if self.writer_assigned_key_groups
                         else pb.KEY_GROUPS_HASHED)
        if self.keyed_states or self.timer_services:
            op.key_serializer.CopyFrom(self.keys().snapshot())
        if self._coordinator_chunk is not None:
            op.coordinator_state.CopyFrom(self._coordinator_chunk)
        return op


class SavepointWriter:
    """Writes a new savepoint at ``path``.

    Use as a context manager: the savepoint is committed when the block ends
    without an exception and aborted (its data files removed) otherwise::

        with SavepointWriter("/savepoints/sp-1") as w:
            src = w.add_operator("kafka-source", parallelism=2)
            offsets = src.list_state("offsets", Int64())
            offsets.add(0, [10, 11])
            offsets.add(1, [20, 21])

    An existing savepoint at ``path`` is refused unless ``overwrite=True``; it is
    replaced only by the atomic commit, and its data files are deleted after it. One
    that registered shallow savepoints use as their base is refused unless also
    ``force=True``, which breaks them (spec/format.md §8.4).
    """

    def __init__(self, path: str | os.PathLike[str] | SavepointIO, *, overwrite: bool = False,
                 codec: str | Codec = Codec.ZSTD,
                 chunk_bytes: int = DEFAULT_CHUNK_BYTES, buffer_bytes: int = DEFAULT_BUFFER_BYTES,
                 file_bytes: int = DEFAULT_FILE_BYTES, inline_bytes: int = DEFAULT_INLINE_BYTES,
                 file_prefix: str = "", key_bounds: bool = False, sort_keys: bool = False, force: bool = False) -> None:
        if chunk_bytes < 1 or buffer_bytes < chunk_bytes:
            raise InvalidArgumentError("need 1 <= chunk_bytes <= buffer_bytes")
        self.io = open_io(path)
        self.chunk_bytes = chunk_bytes
        # Format 1.1 (spec/format.md §7.6): key bounds per keyed chunk; sorting makes them disjoint.
        self.key_bounds = key_bounds or sort_keys
        self.sort_keys = sort_keys
        self._force = force
        self._previous = read_previous(self.io, overwrite, force=force)
        self._sink = ChunkSink(self.io, codec=Codec.parse(codec), file_bytes=file_bytes, inline_bytes=inline_bytes,
                               file_prefix=file_prefix)
        self._budget = _Budget(buffer_bytes)
        self.operators: dict[str, OperatorWriter] = {}
        #: "open", then "failed" (an error may have left a half-written state), "committed",
        #: "aborted", or "in doubt" (the commit failed at a point where it may have landed).
        self.status = "open"
        self._failure: BaseException | None = None

    def _check_open(self) -> None:
        if self.status == "failed":
            raise InvalidArgumentError(f"this writer failed ({type(self._failure).__name__}: {self._failure}); "
                                       "it cannot commit, only abort")
        if self.status != "open":
            raise InvalidArgumentError(f"this writer is {self.status}: it takes no more operators, states or entries")

    def _fail(self, exc: BaseException) -> None:
        if self.status == "open":
            self.status, self._failure = "failed", exc

    def add_operator(self, operator_id: str, parallelism: int, *, max_parallelism: int | None = None,
                     key_serializer: Serializer | None = None, name: str = "", uid: str = "",
                     engine_operator_id: bytes = b"", key_groups: str = "hashed") -> OperatorWriter:
        """An operator; format 1.2 adds its ``uid`` and ``engine_operator_id`` (informative) and
        ``key_groups="writer"``: keys are not hashed here, the caller gives every row's key
        group (spec/format.md §7.12), and the key serializer may be any serializer. Keys of
        Flink SQL (an import's key serializer) given without key groups are placed by
        Flink's hash (:mod:`pyref.flink.row_keys`)."""
        self._check_open()
        check_text(operator_id, "operator id")
        check_text(name, "operator name")
        check_text(uid, "operator uid")
        if not isinstance(engine_operator_id, bytes):
            raise InvalidArgumentError(f"engine_operator_id must be bytes, got {type(engine_operator_id).__name__}")
        if not operator_id or operator_id in self.operators:
            raise InvalidArgumentError(f"operator id {operator_id!r} is empty or already used")
        max_parallelism = default_max_parallelism(parallelism) if max_parallelism is None else max_parallelism
        check_parallelism(parallelism, max_parallelism)
        op = OperatorWriter(self, operator_id, parallelism, max_parallelism, key_serializer, name, uid=uid,
                            engine_operator_id=engine_operator_id, key_groups=key_groups)
        self.operators[operator_id] = op
        return op

    def _relieve_budget(self) -> None:
        # Over budget: flush rounds on the states holding the most until half the budget is
        # free. A round copies what its state holds, so freeing half keeps the copying
        # amortised to a few times the state size.
        if self._budget.used <= self._budget.limit:
            return
        target = self._budget.limit // 2
        for state in sorted(self._states(), key=lambda s: s.buffered, reverse=True):
            if self._budget.used <= target:
                break
            state.flush_round(keep_bytes=max(0, state.buffered - (self._budget.used - target)))

    def _states(self) -> list[_BufferedState]:
        return [s for op in self.operators.values() for s in op.states()]

    @_fails_writer
    def build_manifest(self) -> pb.Manifest:
        self._check_open()
        for state in self._states():
            state.flush()
        for op in self.operators.values():
            op.store_coordinator_state()
        files = self._sink.close()
        manifest = pb.Manifest(savepoint_id=str(uuid.uuid4()), created_by=f"pyref {__version__}",
                               created_at_ms=int(time.time() * 1000), data_files=files,
                               operators=[op.to_proto() for op in self.operators.values()])
        declare_features(manifest)
        return manifest

    def commit(self) -> Savepoint:
        """Flush everything and atomically publish the savepoint; returns it, open (its
        manifest is ``.manifest``). A failed writer refuses: it aborts (removing its
        files) and raises, the previous savepoint stays as it was."""
        if self.status == "failed":
            failure = self._failure
            self.abort()
            raise InvalidArgumentError(f"this writer failed earlier ({type(failure).__name__}: {failure}); nothing "
                                       "was committed and its data files were removed") from failure
        self._check_open()
        try:
            manifest = self.build_manifest()
        except BaseException:
            self.abort()
            raise
        try:
            publish(self.io, manifest, self._previous, self.abort, force=self._force)
        finally:
            if self.status == "open":  # not aborted by publish: published, or perhaps published
                self.status = "in doubt"
        self.status = "committed"
        delete_replaced(self.io, manifest, self._previous)
        return Savepoint.written(self.io, manifest)

    def abort(self) -> None:
        """Remove the data files written so far; the target stays as it was."""
        if self.status in ("open", "failed"):
            self.status = "aborted"
            for state in self._states():
                state.discard()
            self._sink.abort()

    def __enter__(self) -> SavepointWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()


def read_previous(io: SavepointIO, overwrite: bool, *, force: bool = False) -> bytes | None:
    """The manifest a new commit will replace; refuses to replace one unless ``overwrite``,
    and one that registered savepoints use as a base unless ``force`` (spec/format.md §8.4)."""
    refuse_non_directory_target(io, "target")
    size = io.size(MANIFEST_NAME)
    if size is None:
        return None
    if not overwrite:
        raise InvalidArgumentError("a savepoint already exists here; pass overwrite=True (--overwrite) to replace it",
                                   path=io.location)
    if size > MAX_MANIFEST_BYTES:  # not a manifest: reading it whole could exhaust memory
        raise CorruptSavepointError(f"the _manifest here is {size} bytes, longer than any manifest; remove it first",
                                    path=io.describe(MANIFEST_NAME))
    previous = io.read_file(MANIFEST_NAME)
    check_not_a_base(io, previous, force=force)
    return previous


def publish(io: SavepointIO, manifest: pb.Manifest, previous: bytes | None, abort: Callable[[], None], *,
            force: bool = False) -> None:
    """Commit ``manifest`` atomically in place of ``previous`` (spec/format.md §10).

    ``abort`` (deleting the new data files) runs only when the manifest was certainly
    not published; if the outcome of the manifest write is unknown, the data files
    stay, at worst as unreferenced leftovers. Unless ``force``, a savepoint registered as
    derived from ``previous`` since the writer started still refuses the commit (§10.2 step 4).
    """
    try:
        declare_features(manifest)  # exactly the features the content uses; they set the label (§9.4)
        data = encode_manifest(manifest)
        # Round-trip through the reader's validation: never publish what a reader would refuse.
        decode_manifest(data, path=io.describe(MANIFEST_NAME))
    except BaseException:
        abort()
        raise
    writing = False
    try:
        with io.commit_lock():
            check_files_present(io, manifest)
            check_not_a_base(io, previous, force=force)
            writing = True
            io.commit_manifest(data, previous)
    except BaseException as exc:
        if not writing or isinstance(exc, ConcurrentWriteError):
            abort()  # refused before anything was written
        raise


def check_files_present(io: SavepointIO, manifest: pb.Manifest) -> None:
    """Prove, just before publishing (under the commit lock where there is one), that every
    new data file is still there with its size: ``pyref clean`` or a person may have
    deleted files of a writer that ran long (spec/format.md §10.2 step 4). Without a lock,
    a file older than the writer's deadline may be taken for a leftover by a cleanup at
    any moment, so the commit is refused (spec/format.md §10.5)."""
    own = [f for f in manifest.data_files if f.base == 0]
    oldest = time.time() - UNLOCKED_WRITE_DEADLINE_S
    for f, found in zip(own, ordered_map(io.stat, [f.path for f in own])):
        if found is None or found.size != f.size:
            state = "is missing" if found is None else f"is {found.size} bytes, not {f.size}"
            raise ConcurrentWriteError(f"data file {f.path} of this commit {state}: another process (pyref "
                                       "clean?) deleted or changed it; nothing was committed", path=io.location)
        if not io.has_commit_lock and found.modified is not None and found.modified < oldest:
            raise ConcurrentWriteError(
                f"data file {f.path} of this commit was written more than {UNLOCKED_WRITE_DEADLINE_S / 3600:g} hours "
                "ago; on a store without a commit lock a cleanup may delete it as a leftover (spec/format.md §10.5), "
                "so nothing was committed: run the write again", path=io.location)


def delete_replaced(io: SavepointIO, manifest: pb.Manifest, previous: bytes | None) -> None:
    """After a commit, delete the data files only the replaced savepoint used.

    Best effort: a file left behind is unreferenced and harmless.
    """
    if previous is None:
        return
    try:
        old, _ = decode_manifest(previous, path=io.describe(MANIFEST_NAME))
    except SavepointError:
        return  # the replaced manifest was unreadable; leave its files alone
    keep = {f.path for f in manifest.data_files if f.base == 0}
    for f in old.data_files:
        # Only files directly in data/: a manifest listing "_manifest" must not delete the new one.
        if f.base == 0 and f.path not in keep and is_data_file_path(f.path):
            with contextlib.suppress(OSError, SavepointError):
                io.delete(f.path)
