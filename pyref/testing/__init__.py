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
from ..serializers import Int64, String
from ..writer import SavepointWriter

#: Kafka partition offsets per subtask in :func:`write_seeds`.
SEED_OFFSETS = ([100, 101], [200, 201])
#: URL -> count in :func:`write_seeds`.
SEED_COUNTS = {f"/page/{i}": i for i in range(50)}


def write_seeds(path: str | os.PathLike[str], *, parallelism: int = 2, **writer_options) -> None:
    """The seeds' scenario: a Kafka source whose two subtasks hold two partition
    offsets each (SPLIT_DISTRIBUTE list state) and a per-URL count as keyed state."""
    if parallelism < len(SEED_OFFSETS):
        raise ValueError(f"the seeds' offsets need parallelism >= {len(SEED_OFFSETS)}")
    with SavepointWriter(os.fspath(path), **writer_options) as w:
        source = w.add_operator("kafka-source", parallelism=parallelism)
        offsets = source.list_state("offsets", Int64(), DistributionMode.SPLIT_DISTRIBUTE)
        for subtask, values in enumerate(SEED_OFFSETS):
            offsets.add(subtask, values)
        counter = w.add_operator("url-counter", parallelism=parallelism, key_serializer=String())
        counter.keyed_state("count", Int64()).add(list(SEED_COUNTS), list(SEED_COUNTS.values()))


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

        out.write = short_then_full
        return out
