"""Keys of keyed state: which key serializers are hashable, and keys as Arrow arrays.

The key serializer of an operator selects the key hash (spec/key-groups.md §2),
so key groups agree with Flink's for the same logical key.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa

from ._proto.savepoint.v1 import serializer_pb2
from .errors import InvalidArgumentError, UnsupportedFormatError
from .key_groups import KeyType
from .serializers import Serializer

#: Key serializers with a key hash (spec/key-groups.md §3), each selecting the key type of its name.
_HASHABLE = frozenset({"int32", "int64", "string", "boolean", "bytes", "int8", "int16", "float32", "char"})


def key_type_of(snapshot: serializer_pb2.SerializerSnapshot) -> KeyType:
    """The key type whose hash the serializer's keys use; refuses unhashable serializers."""
    if snapshot.serializer_id in _HASHABLE:
        return snapshot.serializer_id
    if snapshot.serializer_id == "tuple" and snapshot.nested:
        return tuple(key_type_of(f) for f in snapshot.nested)
    raise UnsupportedFormatError(
        f"serializer {snapshot.serializer_id!r} cannot serialize keys: key hashing is defined for int32, int64, "
        "string, boolean, bytes, int8, int16, float32, char and tuples of them (spec/key-groups.md §3); an "
        "operator keyed otherwise needs key groups assigned by its writer (spec/format.md §7.12)")


def _converted(keys: Sequence, serializer: Serializer) -> pa.Array:
    """Python keys whose Arrow form differs from the value (a char's code unit, say)."""
    try:
        return pa.array([serializer._to_arrow_value(k) for k in keys], type=serializer.arrow_type())
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
        raise InvalidArgumentError(f"keys do not fit {serializer.serializer_id}: {exc}") from None


def engine_key_groups(snapshot: serializer_pb2.SerializerSnapshot) -> Callable[[pa.Array, int], np.ndarray] | None:
    """How the key groups of a key serializer's keys follow from their encoded bytes where
    the format calls them writer-assigned (spec/format.md §7.12) but pyref knows the
    engine's hash: Flink SQL's ``BinaryRowData`` keys (key-groups.md §11). None otherwise."""
    from .flink.row_keys import is_row_key, row_key_groups  # lazily: pyref.flink builds on the core

    return row_key_groups if is_row_key(snapshot) else None


def as_key_array(keys: pa.Array | pa.ChunkedArray | Sequence, serializer: Serializer) -> pa.Array:
    """Keys as an Arrow array of the serializer's type (the form hashing and encoding take)."""
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    if not isinstance(keys, pa.Array):
        try:
            keys = pa.array(keys, type=serializer.arrow_type())
        except (pa.ArrowException, TypeError, ValueError, OverflowError):  # ValueError: unencodable text
            keys = _converted(keys, serializer)
    if keys.null_count:
        raise InvalidArgumentError("keys cannot be null")
    return keys

