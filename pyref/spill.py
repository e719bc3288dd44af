"""Rows the writer moves out of memory: runs in an unnamed temporary file, each run's
rows ordered by slot (key group, or list partition), read back a range of slots at a
time. An external merge sort by slot.

Why: with many slots and a bounded buffer, writing what the buffer holds as chunks
makes chunks of about buffer / slots bytes (2 KiB at 32768 key groups and 64 MiB):
hundreds of thousands of tiny chunks whose metadata, held until the commit, grows
with the state, and whose per-chunk work dominates the write. Spilled rows come back
together, so each slot's chunks are made from all of its rows.

Layout of a run: per column, its int32 Arrow offsets (from 0), then its bytes; then
the first row of each slot (int64, slots + 1 of them). In memory the file keeps only
the cost of each slot over all runs (O(slots)) and where each run's parts are; the
merge reads each run's slot table once, keeping the rows at its batch boundaries.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa


@dataclass
class _SpilledRun:
    columns: list[tuple[int, int]]  # per column: file position of its offsets, of its bytes
    row_starts_at: int  # file position of the first row of each slot


class SpillFile:
    """Runs of rows, each ordered by slot, in a temporary file deleted when closed (or
    when the process ends: the file has no name)."""

    def __init__(self, slots: int, directory: str | None = None) -> None:
        self.slots = slots
        self._file = tempfile.TemporaryFile(prefix="pyref-spill-", dir=directory)
        self._runs: list[_SpilledRun] = []
        self._size = 0
        self._costs = np.zeros(slots, dtype=np.int64)  # per slot, over all runs

    def add(self, columns: Sequence[pa.Array], slots: np.ndarray, costs: np.ndarray) -> None:
        """Append a run: compact binary columns whose rows are ordered by ``slots``, and
        each row's cost (what it holds in memory, to read back a budget's worth)."""
        placed = []
        for column in columns:
            offsets = np.frombuffer(column.buffers()[1], dtype=np.int32, count=len(column) + 1, offset=column.offset * 4)
            data = column.buffers()[2]
            start, end = int(offsets[0]), int(offsets[-1])
            placed.append((self._write((offsets - start).astype("<i4").tobytes()),
                           self._write(memoryview(data)[start:end] if end > start else b"")))
        row_starts = np.searchsorted(slots, np.arange(self.slots + 1)).astype("<i8")
        self._runs.append(_SpilledRun(placed, self._write(row_starts.tobytes())))
        self._costs += np.bincount(slots, weights=costs, minlength=self.slots).astype(np.int64)

    def _write(self, data) -> int:
        position = self._size
        view = memoryview(data)
        while view:
            written = os.pwrite(self._file.fileno(), view, self._size)
            view = view[written:]
            self._size += written
        return position

    def _read(self, position: int, length: int) -> bytes:
        out = bytearray()
        while len(out) < length:
            piece = os.pread(self._file.fileno(), length - len(out), position + len(out))
            if not piece:
                raise OSError(f"spill file ends at {position + len(out)}, {length - len(out)} bytes short")
            out += piece
        return bytes(out)

    def batches(self, limit: int) -> Iterator[tuple[int, int, list[tuple[int, int, int]], int]]:
        """Consecutive ranges of slots with rows, each costing at most ``limit`` unless it
        is one slot: ``(first slot, stop slot, [(run, first row, stop row), ...], cost)``."""
        ends = np.cumsum(self._costs)
        boundaries, first = [], int(np.searchsorted(ends, 0, side="right"))  # the first slot with rows
        while first < self.slots:
            done = int(ends[first - 1]) if first else 0
            stop = min(self.slots, max(first + 1, int(np.searchsorted(ends, done + limit, side="right"))))
            boundaries.append((first, stop))
            first = stop + int(np.searchsorted(ends[stop:], ends[stop - 1], side="right"))
        edges = np.array([b for pair in boundaries for b in pair], dtype=np.int64)
        bounds = [np.frombuffer(self._read(run.row_starts_at, 8 * (self.slots + 1)), dtype="<i8")[edges]
                  for run in self._runs]
        for k, (first, stop) in enumerate(boundaries):
            rows = [(i, int(b[2 * k]), int(b[2 * k + 1])) for i, b in enumerate(bounds) if b[2 * k + 1] > b[2 * k]]
            yield first, stop, rows, int(self._costs[first:stop].sum())

    def read(self, run: int, first_row: int, stop_row: int, first_slot: int, stop_slot: int
             ) -> tuple[list[pa.Array], np.ndarray]:
        """Rows ``first_row .. stop_row - 1`` of a run, all of slots ``first_slot .. stop_slot
        - 1``: its columns and each row's slot."""
        spilled = self._runs[run]
        columns = []
        count = stop_row - first_row
        for offsets_at, data_at in spilled.columns:
            offsets = np.frombuffer(self._read(offsets_at + 4 * first_row, 4 * (count + 1)), dtype="<i4")
            data = self._read(data_at + int(offsets[0]), int(offsets[-1] - offsets[0]))
            columns.append(pa.Array.from_buffers(pa.binary(), count, [None, pa.py_buffer(offsets - offsets[0]),
                                                                      pa.py_buffer(data)]))
        if stop_slot - first_slot == 1:
            return columns, np.full(count, first_slot, dtype=np.uint16)
        starts = np.frombuffer(self._read(spilled.row_starts_at + 8 * first_slot, 8 * (stop_slot - first_slot + 1)),
                               dtype="<i8")
        starts = np.clip(starts, first_row, stop_row) - first_row
        return columns, np.repeat(np.arange(first_slot, stop_slot, dtype=np.uint16), np.diff(starts))

    def close(self) -> None:
        self._file.close()
