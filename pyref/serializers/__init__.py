"""Serializers: how a state's keys, values and elements become bytes.

Normative text: spec/serializers.md. Every serializer writes a snapshot stored
beside the state; :func:`serializer_from_snapshot` restores it through a
registry of classes the program registered (built-ins, plus user-defined ones
added with :func:`register_serializer`), and :func:`resolve_compatibility`
decides whether a new serializer can take over an old state.
"""

from .base import (
    MAX_NESTING_DEPTH,
    MAX_TUPLE_FIELDS,
    Compatibility,
    CompatibilityResult,
    Serializer,
    decode_framed,
    encode_framed,
    migrate_array,
    register_serializer,
    registered_serializer_ids,
    resolve_compatibility,
    serializer_from_snapshot,
    unregister_serializer,
)
from .composite import ListOf, MapOf, Nullable, Tuple
from .json import Json
from .primitive import Boolean, Bytes, Float64, Int32, Int64, String
from .protobuf import Protobuf

__all__ = [
    "MAX_NESTING_DEPTH",
    "MAX_TUPLE_FIELDS",
    "Boolean",
    "Bytes",
    "Compatibility",
    "CompatibilityResult",
    "Float64",
    "Int32",
    "Int64",
    "Json",
    "ListOf",
    "MapOf",
    "Nullable",
    "Protobuf",
    "Serializer",
    "String",
    "Tuple",
    "decode_framed",
    "encode_framed",
    "migrate_array",
    "register_serializer",
    "registered_serializer_ids",
    "resolve_compatibility",
    "serializer_from_snapshot",
    "unregister_serializer",
]
