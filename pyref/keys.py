"""Keys of keyed state: which key serializers are hashable, and keys as Arrow arrays.

The key serializer of an operator selects the key hash (spec/key-groups.md §2),
so key groups agree with Flink's for the same logical key.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from ._proto.savepoint.v1 import serializer_pb2
from .errors import InvalidArgumentError, UnsupportedFormatError
from .key_groups import KeyType
from .serializers import Serializer

_HASHABLE = {"int32": "int32", "int64": "int64", "string": "string", "boolean": "boolean", "bytes": "bytes"}


def key_type_of(snapshot: serializer_pb2.SerializerSnapshot) -> KeyType:
    """The key type whose hash the serializer's keys use; refuses unhashable serializers."""
    if snapshot.serializer_id in _HASHABLE:
        return _HASHABLE[snapshot.serializer_id]
    if snapshot.serializer_id == "tuple" and snapshot.nested:
        return tuple(key_type_of(f) for f in snapshot.nested)
    raise UnsupportedFormatError(
        f"serializer {snapshot.serializer_id!r} cannot serialize keys: key hashing is defined for int32, int64, "
        "string, boolean, bytes and tuples of them (spec/key-groups.md §2)")


def as_key_array(keys: pa.Array | pa.ChunkedArray | Sequence, serializer: Serializer) -> pa.Array:
    """Keys as an Arrow array of the serializer's type (the form hashing and encoding take)."""
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    if not isinstance(keys, pa.Array):
        try:
            keys = pa.array(keys, type=serializer.arrow_type())
        except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:  # ValueError: unencodable text
            raise InvalidArgumentError(f"keys do not fit {serializer.serializer_id}: {exc}") from None
    if keys.null_count:
        raise InvalidArgumentError("keys cannot be null")
    return keys

