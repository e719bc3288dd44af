"""Key groups of Flink SQL keys: the table runtime's ``BinaryRowData``, hashed by its bytes.

Flink assigns a key to ``murmur_hash(key.hashCode()) % max_parallelism``
(spec/key-groups.md §5). The table runtime's keys are ``BinaryRowData``, whose
``hashCode`` is ``BinarySegmentUtils.hashByWords`` over the row's bytes: MurmurHash3
x86_32 with seed 42 of its 4-byte words, each read in the JVM's native (little-endian)
order, the length in bytes mixed in last. It is the same code in every Flink release
from 1.13 to 2.3 (spec/key-groups.md §11). ``RowDataSerializer`` and
``BinaryRowDataSerializer`` both write a key as its length (a big-endian int) then those
bytes, so the key group follows from the stored key alone: a rescale to a new max
parallelism and a write of new keys can place SQL keys as Flink does.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .._proto.savepoint.v1 import serializer_pb2
from ..errors import CorruptSavepointError, InvalidArgumentError
from ..key_groups import binary_parts, key_groups_of_cells, murmur3_by_words

__all__ = ["ROW_KEY_CLASSES", "ROW_HASH_SEED", "is_row_key", "binary_row_hash", "row_key_groups"]

_T = "org.apache.flink.table.runtime.typeutils."
#: The snapshot classes of Flink's serializers of SQL keys (``BinaryRowData`` on the wire).
ROW_KEY_CLASSES = frozenset({_T + "RowDataSerializer$RowDataSerializerSnapshot",
                             _T + "BinaryRowDataSerializer$BinaryRowDataSerializerSnapshot"})
#: ``MurmurHashUtils.DEFAULT_SEED``, the seed of ``BinaryRowData.hashCode``.
ROW_HASH_SEED = 42


def is_row_key(snapshot: serializer_pb2.SerializerSnapshot) -> bool:
    """Whether a pyref key serializer is Flink's serializer of SQL keys, kept opaque
    (an import's): its keys' key groups are :func:`row_key_groups`."""
    return (snapshot.serializer_id == "opaque" and snapshot.engine.engine == "flink"
            and snapshot.engine.class_name in ROW_KEY_CLASSES)


def binary_row_hash(row: bytes) -> int:
    """``BinaryRowData.hashCode()`` of a row's bytes (without the length Flink writes
    before them), as a signed 32-bit int."""
    if len(row) % 4:
        raise InvalidArgumentError(f"a BinaryRowData is whole 8-byte words; {len(row)} bytes is not")
    code = int(murmur3_by_words(np.frombuffer(bytes(row), np.uint8), np.zeros(1), np.array([len(row)]),
                                ROW_HASH_SEED)[0])
    return code - (1 << 32) if code & 0x80000000 else code


def row_key_groups(keys: pa.Array | pa.ChunkedArray, max_parallelism: int, state: str | None = None) -> np.ndarray:
    """Flink's key group of every SQL key (int32), each a binary cell as Flink's serializer
    wrote it: the row's length as a big-endian int, then its bytes. A cell whose length
    does not say so, or a row that is not whole words, is corrupt (``state`` names where)."""
    return key_groups_of_cells(keys, max_parallelism, lambda cells: _row_hashes(cells, state))


def _row_hashes(cells: pa.Array, state: str | None) -> np.ndarray:
    """``BinaryRowData.hashCode`` (uint32) of every cell's row, its length checked."""
    offsets, data = binary_parts(cells)
    starts, lengths = offsets[:-1], np.diff(offsets)
    short = np.flatnonzero(lengths < 4)
    if short.size:
        i = int(short[0])
        raise CorruptSavepointError(f"SQL key {cells[i].as_py().hex()} is {int(lengths[i])} bytes, too short for "
                                    "the row length Flink writes first (bytes 0..3)", state=state)
    # The big-endian int before each row, signed as Java reads it.
    stated = data[starts[:, None] + np.arange(4)].copy().view(">i4")[:, 0].astype(np.int64)
    bad = np.flatnonzero((stated != lengths - 4) | (stated % 4 != 0))
    if bad.size:
        i = int(bad[0])
        raise CorruptSavepointError(
            f"SQL key {cells[i].as_py()[:24].hex()}...: its bytes 0..3 give a row of {int(stated[i])} bytes, but "
            f"{int(lengths[i]) - 4} follow (a BinaryRowData is whole 8-byte words)", state=state)
    return murmur3_by_words(data, starts + 4, lengths - 4, ROW_HASH_SEED)
