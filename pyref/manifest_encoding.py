"""What the manifest's protobuf encoding may hold beyond what a parser checks
(spec/format.md §4.5): 32-bit fields whose varint holds a wider number.

Protobuf parsers read a ``uint32``, ``int32`` or enum field from a varint of up to
64 bits and keep its low 32 bits, so ``parallelism`` encoded as 2³² + 1 reads as 1.
The format refuses such a manifest as corrupt. To find one without walking the wire
bytes in Python, the body is parsed a second time with a *wide* copy of the schemas
in which every such field is 64 bits wide: the two parses serialize to the same bytes
exactly when no field was cut.
"""

from __future__ import annotations

from functools import cache

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from ._proto.savepoint.v1 import manifest_pb2, serializer_pb2

#: Field types a parser cuts to 32 bits, and the 64-bit type of the same wire encoding
#: that keeps every bit (an enum is an int32 on the wire).
_WIDENED = {
    descriptor_pb2.FieldDescriptorProto.TYPE_UINT32: descriptor_pb2.FieldDescriptorProto.TYPE_UINT64,
    descriptor_pb2.FieldDescriptorProto.TYPE_INT32: descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
    descriptor_pb2.FieldDescriptorProto.TYPE_ENUM: descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
}


def _widen(messages) -> None:
    for message in messages:
        for field in message.field:
            if field.type in _WIDENED:
                field.type = _WIDENED[field.type]
                field.ClearField("type_name")
        _widen(message.nested_type)


@cache
def _wide_manifest_class():
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(descriptor_pb2.DESCRIPTOR.serialized_pb)
    for module in (serializer_pb2, manifest_pb2):
        file = descriptor_pb2.FileDescriptorProto.FromString(module.DESCRIPTOR.serialized_pb)
        _widen(file.message_type)
        pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("savepoint.v1.Manifest"))


def has_cut_varints(body: bytes | memoryview, manifest: manifest_pb2.Manifest) -> bool:
    """True if a 32-bit field of ``body`` (parsed into ``manifest``) holds a varint that
    does not fit its type: its value was cut to 32 bits."""
    wide = _wide_manifest_class()()
    wide.ParseFromString(body)
    return wide.SerializeToString(deterministic=True) != manifest.SerializeToString(deterministic=True)
