"""The protobuf serializer (spec §3.11).

E(v) is ``v.SerializeToString(deterministic=True)``. The snapshot carries the
FileDescriptorSet of every file the message needs; a reader builds the
message class from it in a private descriptor pool, so no code is ever loaded
from a savepoint.
"""

from __future__ import annotations

import warnings
from typing import Any

import pyarrow as pa
from google.protobuf import descriptor as _descriptor
from google.protobuf import descriptor_pb2, descriptor_pool, message, message_factory

from pyref._proto.savepoint.v1 import serializer_pb2
from pyref._proto.savepoint.v1.serializer_pb2 import SerializerSnapshot
from pyref.errors import CorruptSavepointError, InvalidArgumentError

from .descriptor_rules import check_descriptor_rules
from .base import (
    Compatibility,
    CompatibilityResult,
    Serializer,
    binary_input,
    check_builtin_snapshot,
    corrupt,
    different_ids,
    register_builtin,
    serializer_from_snapshot,
)

__all__ = ["Protobuf"]

_FD = _descriptor.FieldDescriptor

_TYPE_NAMES = {
    _FD.TYPE_DOUBLE: "double",
    _FD.TYPE_FLOAT: "float",
    _FD.TYPE_INT64: "int64",
    _FD.TYPE_UINT64: "uint64",
    _FD.TYPE_INT32: "int32",
    _FD.TYPE_FIXED64: "fixed64",
    _FD.TYPE_FIXED32: "fixed32",
    _FD.TYPE_BOOL: "bool",
    _FD.TYPE_STRING: "string",
    _FD.TYPE_GROUP: "group",
    _FD.TYPE_MESSAGE: "message",
    _FD.TYPE_BYTES: "bytes",
    _FD.TYPE_UINT32: "uint32",
    _FD.TYPE_ENUM: "enum",
    _FD.TYPE_SFIXED32: "sfixed32",
    _FD.TYPE_SFIXED64: "sfixed64",
    _FD.TYPE_SINT32: "sint32",
    _FD.TYPE_SINT64: "sint64",
}

#: Wire-compatible groups of field types (§5): a field may move within its group.
_WIRE_GROUP = {
    **dict.fromkeys(("int32", "int64", "uint32", "uint64", "bool", "enum"), "varint"),
    **dict.fromkeys(("sint32", "sint64"), "zigzag"),
    **dict.fromkeys(("fixed32", "sfixed32"), "fixed32"),
    **dict.fromkeys(("fixed64", "sfixed64"), "fixed64"),
    "float": "float",
    "double": "double",
    **dict.fromkeys(("string", "bytes"), "length-delimited"),
    "message": "message",
    "group": "group",
}


def _is_repeated(field: _descriptor.FieldDescriptor) -> bool:
    flag = getattr(field, "is_repeated", None)
    if flag is None:  # protobuf runtimes before is_repeated
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return field.label == _FD.LABEL_REPEATED
    return bool(flag() if callable(flag) else flag)


def _file_descriptor_set(desc: _descriptor.Descriptor) -> descriptor_pb2.FileDescriptorSet:
    """The message's file and every file it imports, dependencies first."""
    out = descriptor_pb2.FileDescriptorSet()
    done: set[str] = set()
    stack: list[tuple[Any, bool]] = [(desc.file, False)]
    while stack:
        f, expanded = stack.pop()
        if f.name in done:
            continue
        if expanded:
            done.add(f.name)
            f.CopyToProto(out.file.add())
        else:
            stack.append((f, True))
            stack.extend((d, False) for d in reversed(f.dependencies) if d.name not in done)
    return out


def _check_text(fds: descriptor_pb2.FileDescriptorSet) -> None:
    """descriptor.proto is proto2: its strings are not checked for UTF-8 when parsed, and a
    name that is not UTF-8 would fail later, untyped, wherever it is first read."""
    stack: list[message.Message] = [fds]
    while stack:
        for field, value in stack.pop().ListFields():
            values = value if _is_repeated(field) else [value]
            if field.type in (_FD.TYPE_MESSAGE, _FD.TYPE_GROUP):
                stack.extend(values)
            elif field.type == _FD.TYPE_STRING and not all(isinstance(v, str) for v in values):
                # The runtime hands back bytes for a proto2 string that is not UTF-8.
                raise CorruptSavepointError(f"protobuf descriptor set: {field.full_name} is not UTF-8 text")


def _load_message_class(fds: descriptor_pb2.FileDescriptorSet, message_name: str) -> type[message.Message]:
    """Build ``message_name`` from ``fds`` in a private descriptor pool."""
    _check_text(fds)
    by_name: dict[str, descriptor_pb2.FileDescriptorProto] = {}
    for f in fds.file:
        if f.name in by_name:
            raise CorruptSavepointError(f"protobuf descriptor set lists file {f.name!r} twice")
        by_name[f.name] = f
    order: list[descriptor_pb2.FileDescriptorProto] = []
    state: dict[str, int] = {}  # 1 visiting, 2 done
    for root in by_name:
        stack = [(root, False)]
        while stack:
            name, expanded = stack.pop()
            if expanded:
                state[name] = 2
                order.append(by_name[name])
                continue
            if state.get(name) == 2:
                continue
            if state.get(name) == 1:
                raise CorruptSavepointError(f"protobuf descriptor set has an import cycle through {name!r}")
            state[name] = 1
            stack.append((name, True))
            for dep in by_name[name].dependency:
                if dep not in by_name:
                    raise CorruptSavepointError(
                        f"protobuf descriptor set misses file {dep!r} imported by {name!r}"
                    )
                if state.get(dep) == 1:
                    raise CorruptSavepointError(f"protobuf descriptor set has an import cycle through {dep!r}")
                if state.get(dep) != 2:
                    stack.append((dep, False))
    pool = descriptor_pool.DescriptorPool()
    try:
        for f in order:
            pool.Add(f)
    except (TypeError, ValueError, KeyError) as e:
        raise CorruptSavepointError(f"protobuf descriptor set does not build: {e}") from e
    check_descriptor_rules(order, pool)
    try:
        desc = pool.FindMessageTypeByName(message_name)
    except KeyError:
        raise CorruptSavepointError(
            f"protobuf descriptor set does not define message {message_name!r}"
        ) from None
    return message_factory.GetMessageClass(desc)


@register_builtin
class Protobuf(Serializer):
    """A protobuf message, deterministically serialized (§3.11).

    ``Protobuf(MessageClass)``, ``Protobuf.from_descriptor(descriptor)`` or
    ``Protobuf.from_descriptor_set(file_descriptor_set, "pkg.Message")``.
    Decoded values are instances of the message class.
    """

    serializer_id = "protobuf"
    version = 1

    def __init__(self, message_class: type[message.Message]) -> None:
        if not (isinstance(message_class, type) and issubclass(message_class, message.Message)):
            raise InvalidArgumentError(
                f"Protobuf expects a protobuf message class, got {message_class!r}"
            )
        self.message_class = message_class
        self.descriptor: _descriptor.Descriptor = message_class.DESCRIPTOR
        self.message_name: str = self.descriptor.full_name
        self._fds = _file_descriptor_set(self.descriptor)

    @classmethod
    def from_descriptor(cls, descriptor: _descriptor.Descriptor) -> Protobuf:
        if not isinstance(descriptor, _descriptor.Descriptor):
            raise InvalidArgumentError(f"expected a message Descriptor, got {type(descriptor).__name__}")
        return cls(message_factory.GetMessageClass(descriptor))

    @classmethod
    def from_descriptor_set(
        cls, file_descriptor_set: descriptor_pb2.FileDescriptorSet, message_name: str
    ) -> Protobuf:
        """Build from a descriptor set, e.g. one read from a snapshot (private pool)."""
        fds = descriptor_pb2.FileDescriptorSet()
        fds.CopyFrom(file_descriptor_set)
        self = cls(_load_message_class(fds, message_name))
        self._fds = fds  # keep the stored set verbatim
        return self

    # -- values -------------------------------------------------------------

    def encode(self, value: Any) -> bytes:
        if not isinstance(value, message.Message):
            raise self._invalid(value)
        if value.DESCRIPTOR.full_name != self.message_name:
            raise self._invalid(value, f"message {value.DESCRIPTOR.full_name} is not {self.message_name}")
        try:
            return value.SerializeToString(deterministic=True)
        except message.EncodeError as e:
            raise self._invalid(value, str(e)) from e

    def _decode_range(self, mv: memoryview, start: int, end: int) -> message.Message:
        msg = self.message_class()
        try:
            msg.ParseFromString(bytes(mv[start:end]))
        except (message.DecodeError, RuntimeError, ValueError) as e:
            raise corrupt(self.serializer_id, f"not a valid {self.message_name} message ({e})", start) from None
        return msg

    def arrow_type(self) -> pa.DataType:
        return pa.binary()

    def _to_arrow_value(self, value: Any) -> Any:
        return value.SerializeToString(deterministic=True)

    def _from_arrow_value(self, item: Any) -> Any:
        if isinstance(item, (bytes, bytearray)):
            try:
                return self.decode(bytes(item))
            except CorruptSavepointError as e:
                raise InvalidArgumentError(e.reason) from e
        return item

    def decode_array(self, arr: pa.Array) -> pa.Array:
        arr = binary_input(arr, self.serializer_id)
        for i, b in enumerate(arr.to_pylist()):  # validate every record parses
            try:
                self.decode(b)
            except CorruptSavepointError as e:
                raise CorruptSavepointError(f"record {i}: {e.reason}") from e
        return arr

    # -- snapshots ----------------------------------------------------------

    def snapshot(self) -> serializer_pb2.SerializerSnapshot:
        snap = super().snapshot()
        snap.protobuf.file_descriptor_set.CopyFrom(self._fds)
        snap.protobuf.message_name = self.message_name
        return snap

    @classmethod
    def from_snapshot(cls, snapshot: SerializerSnapshot) -> Protobuf:
        check_builtin_snapshot(snapshot, protobuf=True)
        cfg = snapshot.protobuf
        if not cfg.message_name:
            raise CorruptSavepointError("protobuf snapshot has no message_name")
        return cls.from_descriptor_set(cfg.file_descriptor_set, cfg.message_name)

    def resolve_compatibility(self, old_snapshot: SerializerSnapshot) -> CompatibilityResult:
        if old_snapshot.serializer_id != "protobuf":
            return different_ids(old_snapshot, self)
        old = serializer_from_snapshot(old_snapshot)
        assert isinstance(old, Protobuf)
        problem = _compare_messages(old.descriptor, self.descriptor)
        if problem:
            return CompatibilityResult(Compatibility.INCOMPATIBLE, self, problem)
        return CompatibilityResult(
            Compatibility.COMPATIBLE_AS_IS,
            self,
            f"protobuf {old.message_name} -> {self.message_name}: every shared field number keeps "
            f"a wire-compatible type; added or removed fields are wire compatible",
        )

    def __repr__(self) -> str:
        return f"Protobuf({self.message_name})"


def _compare_messages(old: _descriptor.Descriptor, new: _descriptor.Descriptor) -> str | None:
    """None when every field number in both has the same cardinality and wire group."""
    seen: set[tuple[str, str]] = set()
    stack = [(old, new, old.full_name)]
    while stack:
        o, n, path = stack.pop()
        if (o.full_name, n.full_name) in seen:
            continue
        seen.add((o.full_name, n.full_name))
        for number in sorted(o.fields_by_number):
            of = o.fields_by_number[number]
            nf = n.fields_by_number.get(number)
            if nf is None:
                continue
            ot, nt = _TYPE_NAMES[of.type], _TYPE_NAMES[nf.type]
            where = f"protobuf field number {number} of {path} ({of.name} -> {nf.name})"
            if _is_repeated(of) != _is_repeated(nf):
                cardinality = {True: "repeated", False: "singular"}
                return (f"{where} changed cardinality from {cardinality[_is_repeated(of)]} to "
                        f"{cardinality[_is_repeated(nf)]}")
            if _WIRE_GROUP[ot] != _WIRE_GROUP[nt]:
                return f"{where} changed type from {ot} to {nt}, which is not wire compatible"
            if ot in ("message", "group"):
                stack.append((of.message_type, nf.message_type, f"{path}.{of.name}"))
    return None
