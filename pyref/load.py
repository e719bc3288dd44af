"""How an operator's keyed state spreads over key groups and subtasks, from the manifest
alone: the stored bytes of every keyed and timer chunk counted in its key group, and a
subtask's load as the sum over the key groups it restores. O(chunks + max parallelism)
numpy work and no data file read (spec/format.md §5.9), whatever the savepoint's size.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._proto.savepoint.v1 import manifest_pb2 as pb
from .key_groups import key_group_bounds


def stored_length(chunk: pb.Chunk) -> int:
    """The bytes a chunk occupies in storage (its range, or its inline bytes)."""
    return chunk.range.length if chunk.WhichOneof("location") == "range" else len(chunk.inline_data)


@dataclass(frozen=True)
class SubtaskLoad:
    """The bytes each subtask restores at one parallelism."""

    parallelism: int
    bytes: np.ndarray

    @property
    def skew(self) -> float:
        """Largest load over the mean load (1.0 is even; 0.0 when nothing is stored)."""
        mean = float(self.bytes.mean())
        return float(self.bytes.max()) / mean if mean else 0.0

    @property
    def idle(self) -> int:
        """Subtasks that restore no keyed bytes at all."""
        return int((self.bytes == 0).sum())


@dataclass(frozen=True)
class KeyGroupLoad:
    """Stored bytes of an operator's keyed state and timers per key group."""

    operator_id: str
    max_parallelism: int
    bytes: np.ndarray

    @classmethod
    def of(cls, op: pb.Operator) -> KeyGroupLoad:
        chunks = [c for state in [*op.keyed_states, *op.timer_services] for c in state.chunks]
        groups = np.fromiter((c.key_group for c in chunks), np.int64, len(chunks))
        sizes = np.fromiter((stored_length(c) for c in chunks), np.int64, len(chunks))
        return cls(op.operator_id, op.max_parallelism,
                   np.bincount(groups, weights=sizes, minlength=op.max_parallelism).astype(np.int64))

    def at(self, parallelism: int) -> SubtaskLoad:
        """The load of every subtask at ``parallelism`` (key groups assigned as Flink does)."""
        firsts, lasts = key_group_bounds(self.max_parallelism, parallelism)
        total = np.concatenate([[0], np.cumsum(self.bytes)])
        return SubtaskLoad(parallelism, total[lasts + 1] - total[firsts])

    def histogram(self) -> list[tuple[int, int, int]]:
        """Key groups by size, in powers of two: ``(low, high, count)`` with ``low <= bytes <
        high``, the first bin holding the empty key groups (``(0, 1, n)``); only the bins from
        the smallest to the largest occupied one, so at most 65."""
        bins = np.zeros(len(self.bytes), np.int64)
        stored = self.bytes > 0
        bins[stored] = np.frexp(self.bytes[stored].astype(np.float64))[1]  # 2**(e-1) <= bytes < 2**e
        counts = np.bincount(bins, minlength=1)
        occupied = np.flatnonzero(counts)
        return [(0 if b == 0 else 1 << (b - 1), 1 << b, int(counts[b]))
                for b in range(int(occupied[0]), int(occupied[-1]) + 1)]
