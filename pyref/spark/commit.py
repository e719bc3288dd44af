"""Parallel writes, one commit: executors write chunks, the driver commits the manifest.

Each task of a write job runs the core writer on its share of one state and
never commits: it returns a *partial manifest* (its data files and the chunks
in them), which is all the driver collects. The driver merges the partials into
the target manifest and publishes it (:func:`pyref.writer.publish`) only after
every task of every job succeeded. All data files of a build carry its job
prefix, so afterwards the driver deletes every file of the build that the
committed manifest does not list: files of failed, retried or speculative task
attempts, or all of them when the build failed.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from .._proto.savepoint.v1 import manifest_pb2 as pb
from ..codecs import Codec
from ..io import SavepointIO, open_io
from ..writer import (
    DEFAULT_BUFFER_BYTES,
    DEFAULT_CHUNK_BYTES,
    DEFAULT_FILE_BYTES,
    DEFAULT_INLINE_BYTES,
    ChunkSink,
    SavepointWriter,
)
from .fragments import Fragment, coalesce, part_of
from .frames import fragment_tasks


@dataclass(frozen=True)
class WriteOptions:
    """The core writer's options, for every task of a build."""

    codec: str = "zstd"
    chunk_bytes: int = DEFAULT_CHUNK_BYTES
    buffer_bytes: int = DEFAULT_BUFFER_BYTES
    file_bytes: int = DEFAULT_FILE_BYTES
    inline_bytes: int = DEFAULT_INLINE_BYTES
    key_bounds: bool = False
    sort_keys: bool = False


@dataclass(frozen=True)
class Job:
    """Where a build writes and the prefix naming its data files."""

    location: str
    options: WriteOptions
    file_prefix: str

    @classmethod
    def new(cls, location: str, options: WriteOptions) -> Job:
        return cls(location, options, f"spark-{uuid.uuid4().hex[:16]}-")

    def writer(self) -> SavepointWriter:
        # overwrite=True: a task never commits, it only adds files beside whatever is there.
        return SavepointWriter(self.location, overwrite=True, file_prefix=self.file_prefix, **asdict(self.options))

    def sink(self) -> ChunkSink:
        o = self.options
        return ChunkSink(open_io(self.location), codec=Codec.parse(o.codec), file_bytes=o.file_bytes,
                         inline_bytes=o.inline_bytes, file_prefix=self.file_prefix)

    def delete_unreferenced(self, io: SavepointIO, manifest: pb.Manifest | None) -> None:
        """Delete the build's data files that ``manifest`` (None: nothing committed) does not list."""
        keep = {f.path for f in manifest.data_files if f.base == 0} if manifest is not None else set()
        for rel in io.list_files("data"):
            if rel.startswith(f"data/{self.file_prefix}") and rel not in keep:
                io.delete(rel)


#: What a write task returns: its partial manifest, serialized.
_PARTIAL_SCHEMA = "partial binary"
#: Input a write task hands the core writer at once. Spark's batches (10,000 rows) would
#: cut into thousands of key groups a few rows at a time; bigger ones amortise that.
_FEED_BYTES = 16 << 20


def write_partial(job: Job, open_state: Callable, feed: Callable, batches: Iterator[pa.RecordBatch]) -> bytes:
    """A task's share of one state through the core writer, never committed: its partial
    manifest, serialized."""
    writer = job.writer()
    try:
        state = open_state(writer)
        for batch in coalesce(batches, _FEED_BYTES):
            feed(state, batch)
        partial_manifest = writer.build_manifest()
    except BaseException:
        writer.abort()  # best effort; the driver deletes whatever is left
        raise
    return partial_manifest.SerializeToString()


def _write_task(job: Job, open_state: Callable, feed: Callable, prepare: Callable | None,
                batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    written = write_partial(job, open_state, feed, batches if prepare is None else prepare(batches))
    yield pa.record_batch([pa.array([written], pa.binary())], names=["partial"])


def write_partials(df: DataFrame, job: Job, open_state: Callable, feed: Callable,
                   prepare: Callable | None = None) -> list[pb.Manifest]:
    """Run a write task on every partition of ``df``: ``open_state(writer)`` adds the
    operator and state to the task's core writer, ``feed(state, batch)`` adds a batch
    (after ``prepare(batches)``, a check of the task's rows, if given)."""
    return _partials(df.mapInArrow(partial(_write_task, job, open_state, feed, prepare), _PARTIAL_SCHEMA))


@dataclass(frozen=True)
class FragmentRows:
    """Rows that ``read(fragment)`` makes of each fragment, in the task that writes them."""

    fragments: Sequence[Fragment]
    read: Callable[[Fragment], Iterator[pa.RecordBatch]]


def write_fragment_partials(spark: SparkSession, job: Job, fragments: Sequence[Fragment], read: Callable[..., Any],
                            open_state: Callable[..., Any], feed: Callable[..., Any]) -> list[pb.Manifest]:
    """As :func:`write_partials`, each task's input being ``read(fragment)`` of its own
    fragment, in the same Python worker: a rewrite with no shuffle and no Arrow
    round trip through the JVM."""
    write = partial(_write_task, job, open_state, feed, None)
    return _partials(fragment_tasks(spark, fragments, read, _PARTIAL_SCHEMA, consume=write))


def _partials(df: DataFrame) -> list[pb.Manifest]:
    return [pb.Manifest.FromString(r.partial) for r in df.collect()]


def _map_chunks_task(job: Job, fn: Callable, fragment: Fragment) -> Iterator[pa.RecordBatch]:
    sink = job.sink()
    try:
        store, op = fragment.open()
        state = part_of(op)
        chunks = [fn(store, op, state, chunk, sink, index)
                  for chunk, index in zip(state.chunks, fragment.chunk_indices)]
        files = sink.close()  # completes every chunk (codec, CRC, location)
    except BaseException:
        sink.abort()
        raise
    # A partial manifest: the task's files, and the new chunks (in fragment order) in its one state.
    result = pb.Manifest(data_files=files)
    result.operators.add().list_states.add().chunks.extend(chunks)
    yield pa.record_batch([pa.array([list(fragment.chunk_indices)], pa.list_(pa.int64())),
                           pa.array([result.SerializeToString()], pa.binary())], names=["indices", "partial"])


def map_chunks(spark: SparkSession, job: Job, fragments: Sequence[Fragment],
               fn: Callable[..., Any]) -> list[tuple[list[int], pb.Manifest]]:
    """Run ``fn(store, operator, state, chunk, sink, index) -> new chunk`` on every chunk of
    ``fragments`` (``index``: the chunk's index in the whole state), one fragment per task;
    returns (chunk indices, partial manifest) per task."""
    if not fragments:
        return []
    results = fragment_tasks(spark, fragments, partial(_map_chunks_task, job, fn),
                             "indices array<bigint>, partial binary").collect()
    return [(list(r.indices), pb.Manifest.FromString(r.partial)) for r in results]


# --------------------------------------------------------------------------
# Driver side: merging partial manifests into the target
# --------------------------------------------------------------------------


def adopt(manifest: pb.Manifest, partial_manifest: pb.Manifest, chunks: Iterable[pb.Chunk]) -> list[pb.Chunk]:
    """Add the partial's data files to ``manifest``; its chunks, pointing at them there."""
    offset = len(manifest.data_files)
    manifest.data_files.extend(partial_manifest.data_files)
    manifest.optional_features.extend(f for f in partial_manifest.optional_features
                                      if f not in manifest.optional_features)  # e.g. chunk key bounds
    adopted = []
    for chunk in chunks:
        c = pb.Chunk()
        c.CopyFrom(chunk)
        if c.WhichOneof("location") == "range":
            c.range.file += offset
        adopted.append(c)
    return adopted


def merge_keyed(manifest: pb.Manifest, state: pb.KeyedState | pb.TimerService, partials: Sequence[pb.Manifest]) -> None:
    """Set ``state``'s chunks (a keyed state's or, format 1.2, a timer service's) to those of the
    partials (each wrote whole key groups)."""
    written = [(p, (p.operators[0].keyed_states or p.operators[0].timer_services)[0]) for p in partials]
    chunks = [c for p, part in written for c in adopt(manifest, p, part.chunks)]
    del state.chunks[:]
    state.chunks.extend(sorted(chunks, key=lambda c: c.key_group))  # stable: a group's chunks keep their order


def merge_list(manifest: pb.Manifest, state: pb.ListState | pb.BroadcastState, partials: Sequence[pb.Manifest],
               parallelism: int) -> None:
    """Set ``state``'s chunks and partitions (a list state's or, format 1.2, a broadcast state's)
    to those of the partials (each wrote whole subtasks, or the map all subtasks share)."""
    del state.chunks[:]
    partitions = [pb.Partition() for _ in range(parallelism)]
    for p in partials:
        written = (p.operators[0].list_states or p.operators[0].broadcast_states)[0]
        base = len(state.chunks)
        state.chunks.extend(adopt(manifest, p, written.chunks))
        for i, written_partition in enumerate(written.partitions):
            for r in written_partition.ranges:
                partitions[i].ranges.append(pb.ElementRange(chunk=base + r.chunk, first=r.first, count=r.count))
    del state.partitions[:]
    state.partitions.extend(partitions)


def replace_chunks(manifest: pb.Manifest, state: pb.KeyedState | pb.ListState,
                   results: Sequence[tuple[list[int], pb.Manifest]]) -> None:
    """Put the chunks :func:`map_chunks` returned in place of the ones they were made from."""
    for indices, p in results:
        for i, chunk in zip(indices, adopt(manifest, p, p.operators[0].list_states[0].chunks)):
            state.chunks[i].CopyFrom(chunk)
