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
from .enum import Enum
from .json import Json
from .opaque import Opaque
from .primitive import Boolean, Bytes, Char, Float32, Float64, Int8, Int16, Int32, Int64, String
from .protobuf import Protobuf
from .window import GlobalWindow, TimeWindow, Window

__all__ = [
    "MAX_NESTING_DEPTH",
    "MAX_TUPLE_FIELDS",
    "Boolean",
    "Bytes",
    "Char",
    "Compatibility",
    "CompatibilityResult",
    "Enum",
    "Float32",
    "Float64",
    "GlobalWindow",
    "Int8",
    "Int16",
    "Int32",
    "Int64",
    "Json",
    "ListOf",
    "MapOf",
    "Nullable",
    "Opaque",
    "Protobuf",
    "Serializer",
    "String",
    "TimeWindow",
    "Tuple",
    "Window",
    "decode_framed",
    "encode_framed",
    "migrate_array",
    "register_serializer",
    "registered_serializer_ids",
    "resolve_compatibility",
    "serializer_from_snapshot",
    "unregister_serializer",
]
