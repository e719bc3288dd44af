"""The rules a protobuf snapshot's descriptor set must pass that the protobuf runtime's
descriptor pool does not check itself (spec/serializers.md §3.11.1).

pyref builds the message type in a private ``DescriptorPool`` (upb), which checks
names, symbols, imports, type resolution, field numbers, oneof indexes, json_name
clashes and most proto3 rules. protoc and the C++ and Java runtimes check more; the
spec lists the union, so that a descriptor set builds in every reader or in none.
These are the checks upb leaves out, run on the descriptor protos with the built pool
at hand for what names resolve to.
"""

from __future__ import annotations

from collections.abc import Iterator

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.descriptor import Descriptor

from pyref.errors import CorruptSavepointError

_F = descriptor_pb2.FieldDescriptorProto
#: Field numbers protobuf keeps for its own implementation.
_IMPLEMENTATION_NUMBERS = range(19000, 20000)
_MAX_FIELD_NUMBER = 2**29 - 1
#: Types a field with ``[packed = true]`` may have: the scalar numeric ones.
_NOT_PACKABLE = {_F.TYPE_STRING, _F.TYPE_BYTES, _F.TYPE_MESSAGE, _F.TYPE_GROUP}
#: Types a map key may have (no floating point, bytes, enum or message).
_MAP_KEY_TYPES = {_F.TYPE_INT32, _F.TYPE_INT64, _F.TYPE_UINT32, _F.TYPE_UINT64, _F.TYPE_SINT32, _F.TYPE_SINT64,
                  _F.TYPE_FIXED32, _F.TYPE_FIXED64, _F.TYPE_SFIXED32, _F.TYPE_SFIXED64, _F.TYPE_BOOL, _F.TYPE_STRING}


def check_descriptor_rules(files: list[descriptor_pb2.FileDescriptorProto],
                           pool: descriptor_pool.DescriptorPool) -> None:
    """Raise :class:`CorruptSavepointError` naming the first rule ``files`` (already added to
    ``pool``) break."""
    closed_enums = {f"{file.package}.{e.name}".lstrip(".") for file in files if file.syntax != "proto3"
                    for e in file.enum_type}
    closed_enums |= {f"{name}.{e.name}" for file in files if file.syntax != "proto3"
                     for name, m in _messages(file) for e in m.enum_type}
    symbols = {name for file in files for name, _ in _messages(file)} | {
        f"{file.package}.{n}".lstrip(".") for file in files for n in [*(e.name for e in file.enum_type),
                                                                   *(v.name for v in file.service)]}
    for file in files:
        if not file.name:
            raise _corrupt("a file has an empty name")
        parts = file.package.split(".") if file.package else []
        for prefix in (".".join(parts[:i]) for i in range(1, len(parts) + 1)):
            if prefix in symbols:
                raise _corrupt(f"package {file.package} of {file.name} clashes with the type {prefix}")
        proto3 = file.syntax == "proto3"
        if proto3:
            _check_proto3_extensions(file, pool)
        if any(m.options.map_entry for m in file.message_type):
            raise _corrupt(f"file {file.name} declares a map entry message outside the message that uses it")
        for enum in [*file.enum_type, *(e for _, m in _messages(file) for e in m.enum_type)]:
            _check_enum(enum)
        for name, msg in _messages(file):
            _check_message(name, msg, pool, proto3, closed_enums)


def _messages(file: descriptor_pb2.FileDescriptorProto) -> Iterator[tuple[str, descriptor_pb2.DescriptorProto]]:
    """(full name, proto) of every message of ``file``, nested ones included."""
    stack = [(f"{file.package}.{m.name}" if file.package else m.name, m) for m in file.message_type]
    while stack:
        name, msg = stack.pop()
        yield name, msg
        stack.extend((f"{name}.{n.name}", n) for n in msg.nested_type)


def _check_proto3_extensions(file: descriptor_pb2.FileDescriptorProto, pool: descriptor_pool.DescriptorPool) -> None:
    """proto3 has extensions only to define options: of descriptor.proto's ``...Options`` messages."""
    prefix = f"{file.package}." if file.package else ""
    extensions = [f"{prefix}{x.name}" for x in file.extension]
    extensions += [f"{name}.{x.name}" for name, msg in _messages(file) for x in msg.extension]
    for name in extensions:
        extendee = pool.FindExtensionByName(name).containing_type.full_name
        if not (extendee.startswith("google.protobuf.") and extendee.endswith("Options")):
            raise _corrupt(f"proto3 extension {name} extends {extendee}, which is not an options message")


def _check_enum(enum: descriptor_pb2.EnumDescriptorProto) -> None:
    numbers = [v.number for v in enum.value]
    if not enum.options.allow_alias and len(set(numbers)) != len(numbers):
        raise _corrupt(f"enum {enum.name} gives one number to two values without allow_alias")


def _check_message(name: str, msg: descriptor_pb2.DescriptorProto, pool: descriptor_pool.DescriptorPool,
                   proto3: bool, closed_enums: set[str]) -> None:
    built = pool.FindMessageTypeByName(name)
    symbols = [*(f.name for f in msg.field), *(n.name for n in msg.nested_type), *(e.name for e in msg.enum_type),
               *(o.name for o in msg.oneof_decl), *(v.name for e in msg.enum_type for v in e.value),
               *(x.name for x in msg.extension)]
    if len(set(symbols)) != len(symbols):
        raise _corrupt(f"message {name} defines a name twice (fields, nested types, enums, enum values, oneofs "
                       "and extensions share one scope)")
    for r in [*msg.reserved_range, *msg.extension_range]:
        if not 1 <= r.start < r.end <= _MAX_FIELD_NUMBER + 1:
            raise _corrupt(f"message {name} has a reserved or extension range [{r.start}, {r.end})")
    for field in msg.field:
        where = f"field {name}.{field.name}"
        if field.number in _IMPLEMENTATION_NUMBERS:
            raise _corrupt(f"{where} has number {field.number}, reserved for the protobuf implementation")
        if any(r.start <= field.number < r.end for r in msg.reserved_range) or field.name in msg.reserved_name:
            raise _corrupt(f"{where} uses a reserved number or name")
        if any(r.start <= field.number < r.end for r in msg.extension_range):
            raise _corrupt(f"{where} has a number inside an extension range")
        resolved = built.fields_by_name[field.name]
        wants_enum = field.type == _F.TYPE_ENUM
        if (wants_enum and resolved.enum_type is None
                or field.type in (_F.TYPE_MESSAGE, _F.TYPE_GROUP) and resolved.message_type is None):
            raise _corrupt(f"{where}: its type {field.type_name!r} is not a {'enum' if wants_enum else 'message'}")
        if proto3 and resolved.enum_type is not None and resolved.enum_type.full_name in closed_enums:
            raise _corrupt(f"{where} of a proto3 message has the proto2 (closed) enum {resolved.enum_type.full_name}")
        if proto3 and field.type == _F.TYPE_GROUP:
            raise _corrupt(f"{where} is a group, which proto3 does not have")
        if field.options.packed and (field.label != _F.LABEL_REPEATED or field.type in _NOT_PACKABLE):
            raise _corrupt(f"{where} is packed but not a repeated scalar numeric field")
    _check_oneofs_consecutive(name, msg)
    for nested in msg.nested_type:
        if nested.options.map_entry:
            _check_map_entry(f"{name}.{nested.name}", nested, msg, built)


def _check_oneofs_consecutive(name: str, msg: descriptor_pb2.DescriptorProto) -> None:
    seen: set[int] = set()
    previous = None
    for field in msg.field:
        index = field.oneof_index if field.HasField("oneof_index") else None
        if index is not None and index != previous and index in seen:
            raise _corrupt(f"fields of oneof {msg.oneof_decl[index].name} in message {name} are not consecutive")
        if index is not None:
            seen.add(index)
        previous = index


def _check_map_entry(name: str, entry: descriptor_pb2.DescriptorProto, parent: descriptor_pb2.DescriptorProto,
                     built_parent: Descriptor) -> None:
    """As protoc generates them: key = 1 of a key type, value = 2, both optional, nothing else,
    and used only by repeated fields named so that the entry's name is theirs in CamelCase + Entry."""
    keys = [f for f in entry.field if f.number == 1 and f.name == "key" and f.label == _F.LABEL_OPTIONAL]
    values = [f for f in entry.field if f.number == 2 and f.name == "value" and f.label == _F.LABEL_OPTIONAL]
    users = [f for f in parent.field if (built_parent.fields_by_name[f.name].message_type is not None
                                         and built_parent.fields_by_name[f.name].message_type.full_name == name)]
    if (len(entry.field) != 2 or not keys or not values or keys[0].type not in _MAP_KEY_TYPES
            or entry.nested_type or entry.enum_type or entry.extension or entry.oneof_decl or not users
            or any(f.label != _F.LABEL_REPEATED or f"{_camel(f.name)}Entry" != entry.name for f in users)):
        raise _corrupt(f"map entry {name} is not shaped as protobuf's map fields are (key = 1 of a key type, "
                       "value = 2, used by a repeated field whose name it carries)")


def _camel(name: str) -> str:
    """protoc's CamelCase of a field name: "_" dropped, the letter after it and the first upper case."""
    out, upper = [], True
    for c in name:
        if c == "_":
            upper = True
        else:
            out.append(c.upper() if upper else c)
            upper = False
    return "".join(out)


def _corrupt(reason: str) -> CorruptSavepointError:
    return CorruptSavepointError(f"protobuf descriptor set does not build: {reason}")
