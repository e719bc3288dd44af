"""A column of tuple encodings split into one column per field, and fields joined back into
tuple encodings, on whole buffers (spec/serializers.md §3.8, §4): how a migration that adds,
removes or moves tuple fields (§5.3) rewrites a column without a Python step per value.

A tuple's encoding is its fields' framed encodings one after the other, so the fields of
all n values are found field by field: a fixed-width field is its next w bytes, a variable
one a u32 length and that many bytes. Each step is a handful of numpy operations over n
positions.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from pyref.errors import CorruptSavepointError

from .base import _U32_MAX, Serializer, binary_from_ranges, binary_input, binary_parts, byte_ranges

__all__ = ["constant_column", "join_fields", "split_fields"]


def constant_column(encoding: bytes, n: int) -> pa.Array:
    """A binary array of ``n`` copies of ``encoding`` (an added field's default, §5.3)."""
    offsets = np.arange(n + 1, dtype=np.int64) * len(encoding)
    return binary_from_ranges(np.tile(np.frombuffer(encoding, np.uint8), n), offsets)


def _corrupt(record: int, what: str) -> CorruptSavepointError:
    return CorruptSavepointError(f"tuple: record {record}: {what}")


def split_fields(fields: Sequence[Serializer], names: Sequence[str], encoded: pa.Array) -> list[pa.Array]:
    """The encodings E of each field of every tuple of ``encoded`` (framed as §4 says for
    ``fields``), one binary array per field. Raises CorruptSavepointError naming the record
    and field for a truncated field, a length prefix past the end, or trailing bytes."""
    encoded = binary_input(encoded, "tuple")
    offsets, data = binary_parts(encoded)
    pos, end = offsets[:-1].astype(np.int64), offsets[1:].astype(np.int64)
    columns = []
    for field, name in zip(fields, names):
        width = field.fixed_width
        if width is None:
            short = np.flatnonzero(end - pos < 4)
            if short.size:
                raise _corrupt(int(short[0]), f"truncated length prefix of field {name!r}")
            lengths = data[pos[:, None] + np.arange(4)].view("<u4").reshape(-1).astype(np.int64)
            pos = pos + 4
        else:
            lengths = np.full(len(pos), width, np.int64)
        over = np.flatnonzero(pos + lengths > end)
        if over.size:
            i = int(over[0])
            raise _corrupt(i, f"field {name!r} needs {int(lengths[i])} bytes, {int(end[i] - pos[i])} remain")
        columns.append(binary_from_ranges(*byte_ranges(data, pos, lengths)))
        pos = pos + lengths
    trailing = np.flatnonzero(pos != end)
    if trailing.size:
        i = int(trailing[0])
        raise _corrupt(i, f"{int(end[i] - pos[i])} trailing bytes after the last field")
    return columns


def join_fields(fields: Sequence[Serializer], columns: Sequence[pa.Array]) -> pa.Array:
    """Tuple encodings from one column of encodings E per field: each value framed (§4) as
    ``fields`` say, the fields of a record one after the other."""
    parts = []
    for field, column in zip(fields, columns):
        offsets, data = binary_parts(binary_input(column, "tuple"))
        lengths = np.diff(offsets).astype(np.int64)
        if field.fixed_width is None:
            too_long = np.flatnonzero(lengths > _U32_MAX)
            if too_long.size:
                raise CorruptSavepointError(f"tuple: record {int(too_long[0])}: a field too long to frame")
            prefixes = lengths.astype("<u4").view(np.uint8).reshape(-1, 4)
            parts.append((prefixes.reshape(-1), np.arange(0, 4 * len(lengths) + 1, 4, dtype=np.int64)))
        parts.append((data, offsets.astype(np.int64)))
    n = len(columns[0]) if columns else 0
    record_lengths = sum((np.diff(o) for _, o in parts), np.zeros(n, np.int64))
    out_offsets = np.zeros(n + 1, np.int64)
    np.cumsum(record_lengths, out=out_offsets[1:])
    out = np.empty(int(out_offsets[-1]), np.uint8)
    at = out_offsets[:-1].copy()  # where each record's next part goes
    for data, offsets in parts:
        lengths = np.diff(offsets)
        # Arrow keeps a column's values one after the other: record r's bytes are at
        # offsets[r] - offsets[0] of this slice, and go to at[r] in the output.
        values = data[offsets[0]:offsets[-1]]
        out[np.arange(len(values), dtype=np.int64) + np.repeat(at - offsets[:-1] + offsets[0], lengths)] = values
        at = at + lengths
    return binary_from_ranges(out, out_offsets)
