"""The opaque serializer (spec §3.20, format 1.2): an engine's bytes, kept unchanged.

An importer that cannot map a type to a built-in (a Kryo-serialized class, a user's
own serializer) stores its values as they are, with the engine's serializer
snapshot, so that an exporter writes both back byte for byte. Readers decode the
values as byte strings; nothing in the snapshot is ever run.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from pyref._proto.savepoint.v1 import serializer_pb2
from pyref._proto.savepoint.v1.serializer_pb2 import SerializerSnapshot
from pyref.errors import CorruptSavepointError, InvalidArgumentError

from .base import (
    Compatibility,
    CompatibilityResult,
    Serializer,
    binary_input,
    check_builtin_snapshot,
    different_ids,
    is_text,
    register_builtin,
    serializer_from_snapshot,
)
from .primitive import Bytes

__all__ = ["Opaque"]


@register_builtin
class Opaque(Serializer):
    """Values are the engine's bytes; the snapshot carries the engine's serializer (§3.20)."""

    serializer_id = "opaque"
    version = 1

    def __init__(self, engine: str, class_name: str, snapshot: bytes = b"") -> None:
        if not all(isinstance(s, str) and s and is_text(s) for s in (engine, class_name)):
            raise InvalidArgumentError("Opaque needs the engine's name and serializer class name, as text")
        if not isinstance(snapshot, (bytes, bytearray)):
            raise InvalidArgumentError("Opaque's engine snapshot is bytes")
        self.engine = engine
        self.class_name = class_name
        self.engine_snapshot = bytes(snapshot)

    def encode(self, value: Any) -> bytes:
        return Bytes().encode(value)

    def _decode_range(self, mv: memoryview, start: int, end: int) -> bytes:
        return bytes(mv[start:end])

    def encode_array(self, values: Any) -> pa.Array:
        return Bytes().encode_array(values)

    def decode_array(self, arr: pa.Array) -> pa.Array:
        return binary_input(arr, self.serializer_id)

    def snapshot(self) -> serializer_pb2.SerializerSnapshot:
        snap = super().snapshot()
        snap.engine.CopyFrom(serializer_pb2.EngineSerializer(engine=self.engine, class_name=self.class_name,
                                                             snapshot=self.engine_snapshot))
        return snap

    @classmethod
    def from_snapshot(cls, snapshot: SerializerSnapshot) -> Opaque:
        check_builtin_snapshot(snapshot)
        engine = snapshot.engine
        if not snapshot.HasField("engine") or not engine.engine or not engine.class_name:
            raise CorruptSavepointError("opaque snapshot must carry the engine's serializer (engine and class name)")
        return cls(engine.engine, engine.class_name, engine.snapshot)

    def resolve_compatibility(self, old_snapshot: SerializerSnapshot) -> CompatibilityResult:
        """Only the identical engine serializer reads the bytes: same engine, class and snapshot bytes."""
        if old_snapshot.serializer_id != self.serializer_id:
            return different_ids(old_snapshot, self)
        old = serializer_from_snapshot(old_snapshot)
        assert isinstance(old, Opaque)
        if old == self:
            return CompatibilityResult(Compatibility.COMPATIBLE_AS_IS, self, "same engine serializer")
        return CompatibilityResult(Compatibility.INCOMPATIBLE, self,
                                   f"engine serializer changed from {old.engine}:{old.class_name} to "
                                   f"{self.engine}:{self.class_name} (or its snapshot bytes did)")

    def __repr__(self) -> str:
        return f"Opaque({self.engine!r}, {self.class_name!r})"
