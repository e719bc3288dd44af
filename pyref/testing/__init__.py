"""Helpers for tests of pyref and of other implementations: ready-made savepoints,
the protobuf varint for hand-building bytes no writer produces, and a storage whose
disk fills up.

Shipped with the library (like zarr.testing) so downstream projects can write
the same scenarios the reference tests use.
"""

from __future__ import annotations

import os

from ..errors import StorageError
from ..io import LocalIO, OutputFile
from ..redistribution import DistributionMode
from ..serializers import Int64, String, TimeWindow, Window
from ..writer import SavepointWriter

#: Kafka partition offsets per subtask in :func:`write_seeds`.
SEED_OFFSETS = ([100, 101], [200, 201])
#: URL -> count in :func:`write_seeds`.
SEED_COUNTS = {f"/page/{i}": i for i in range(50)}
#: Tumbling windows of one minute, of which the last is still open (format 1.2 windowed seeds).
SEED_WINDOWS = tuple(Window(w * 60_000, (w + 1) * 60_000) for w in range(3))
#: (URL, window) -> hits in the window, for :func:`write_seeds` with ``windowed=True``: a URL
#: is counted in the windows it was visited in (every URL in the open one).
SEED_WINDOW_COUNTS = {(url, window): i % 7 + w for i, url in enumerate(SEED_COUNTS)
                      for w, window in enumerate(SEED_WINDOWS) if w == len(SEED_WINDOWS) - 1 or i % (w + 2) == 0}
#: (URL, window, timestamp): the event-time timer pending for each URL, at the end of the open window.
SEED_TIMERS = tuple((url, SEED_WINDOWS[-1], SEED_WINDOWS[-1].end - 1) for url in SEED_COUNTS)


def write_seeds(path: str | os.PathLike[str], *, parallelism: int = 2, windowed: bool = False,
                **writer_options) -> None:
    """The seeds' scenario: a Kafka source whose two subtasks hold two partition
    offsets each (SPLIT_DISTRIBUTE list state) and a per-URL count as keyed state.

    ``windowed`` (format 1.2) adds a window counter: hits per URL in tumbling one-minute
    windows (keyed state under time-window namespaces, :data:`SEED_WINDOW_COUNTS`) and
    the event-time timer pending for each URL's open window (:data:`SEED_TIMERS`)."""
    with SavepointWriter(os.fspath(path), **writer_options) as w:
        add_seeds(w, parallelism=parallelism, windowed=windowed)


def add_seeds(w: SavepointWriter, *, parallelism: int = 2, windowed: bool = False) -> None:
    """The operators of :func:`write_seeds`, added to an open writer (beside others)."""
    if parallelism < len(SEED_OFFSETS):
        raise ValueError(f"the seeds' offsets need parallelism >= {len(SEED_OFFSETS)}")
    source = w.add_operator("kafka-source", parallelism=parallelism)
    offsets = source.list_state("offsets", Int64(), DistributionMode.SPLIT_DISTRIBUTE)
    for subtask, values in enumerate(SEED_OFFSETS):
        offsets.add(subtask, values)
    counter = w.add_operator("url-counter", parallelism=parallelism, key_serializer=String())
    counter.keyed_state("count", Int64()).add(list(SEED_COUNTS), list(SEED_COUNTS.values()))
    if windowed:
        windows = w.add_operator("window-counter", parallelism=parallelism, key_serializer=String())
        counts = windows.keyed_state("count", Int64(), namespace_serializer=TimeWindow())
        counts.add([url for url, _ in SEED_WINDOW_COUNTS], list(SEED_WINDOW_COUNTS.values()),
                   namespaces=[window for _, window in SEED_WINDOW_COUNTS])
        windows.timer_service("window-timers", "event_time", TimeWindow()).add(
            [url for url, _, _ in SEED_TIMERS], [t for _, _, t in SEED_TIMERS], [w for _, w, _ in SEED_TIMERS])


def write_seeds_with_spark(spark, path: str | os.PathLike[str]) -> None:
    """:func:`write_seeds` with ``windowed=True``, bootstrapped from DataFrames with
    :class:`pyref.spark.SavepointBuilder` (the main job's Spark path)."""
    from ..spark import SavepointBuilder

    rows = [(subtask, position, offset)
            for subtask, values in enumerate(SEED_OFFSETS) for position, offset in enumerate(values)]
    offsets = spark.createDataFrame(rows, "subtask int, position int, offset long")
    counts = spark.createDataFrame(list(SEED_COUNTS.items()), "url string, hits long")
    windowed = spark.createDataFrame(
        [(url, {"start": w.start, "end": w.end}, hits) for (url, w), hits in SEED_WINDOW_COUNTS.items()],
        "url string, window struct<start: long, end: long>, hits long")
    timers = spark.createDataFrame([(url, {"start": w.start, "end": w.end}, t) for url, w, t in SEED_TIMERS],
                                   "url string, window struct<start: long, end: long>, fires long")
    with SavepointBuilder(spark, os.fspath(path), overwrite=True) as b:
        b.add_operator("kafka-source", parallelism=2)
        b.add_list_state("kafka-source", "offsets", offsets, Int64(), DistributionMode.SPLIT_DISTRIBUTE,
                         value="offset", order_by="position")
        b.add_operator("url-counter", parallelism=2, key_serializer=String())
        b.add_keyed_state("url-counter", "count", counts, Int64(), key="url", value="hits")
        b.add_operator("window-counter", parallelism=2, key_serializer=String())
        b.add_keyed_state("window-counter", "count", windowed, Int64(), namespace_serializer=TimeWindow(), key="url",
                          namespace="window", value="hits")
        b.add_timers("window-counter", "window-timers", "event_time", timers, namespace_serializer=TimeWindow(),
                     key="url", namespace="window", timestamp="fires")


def varint(n: int) -> bytes:
    """``n >= 0`` as a protobuf base-128 varint, for hand-built protobuf bytes (unknown
    fields, nesting deeper than a writer would go)."""
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


class DiskFullOnce(LocalIO):
    """Local storage with ``room`` bytes left, once: the write that crosses it lands
    partly and fails with ENOSPC (as write(2) does on a full disk), then space is freed
    and later writes succeed. What a writer whose caller ignores the error must survive."""

    def __init__(self, root: str | os.PathLike[str], room: int) -> None:
        super().__init__(root)
        self.room: float = room

    def create(self, rel: str) -> OutputFile:
        out = super().create(rel)
        write = out.write

        def short_then_full(data: bytes) -> None:
            if len(data) > self.room:
                write(bytes(data[:int(self.room)]))
                self.room = float("inf")
                raise StorageError("cannot write: No space left on device", path=self.describe(rel))
            self.room -= len(data)
            write(data)

        out.write = short_then_full  # type: ignore[method-assign]  # this one file fills the disk
        return out
