"""resolve_compatibility: every rule of spec/serializers.md §5, and migrate_array."""

from __future__ import annotations

import pyarrow as pa
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from pyref._proto.savepoint.v1 import serializer_pb2
from pyref.errors import IncompatibleSerializerError, UnsupportedFormatError
from pyref.serializers import (
    Boolean,
    Bytes,
    Compatibility,
    CompatibilityResult,
    Float64,
    Int32,
    Int64,
    Json,
    ListOf,
    MapOf,
    Nullable,
    Protobuf,
    String,
    Tuple,
    migrate_array,
    resolve_compatibility,
    serializer_from_snapshot,
)

AS_IS = Compatibility.COMPATIBLE_AS_IS
MIGRATE = Compatibility.COMPATIBLE_AFTER_MIGRATION
RECONF = Compatibility.COMPATIBLE_WITH_RECONFIGURED_SERIALIZER
INCOMPATIBLE = Compatibility.INCOMPATIBLE
F = descriptor_pb2.FieldDescriptorProto


def resolve(old, new) -> CompatibilityResult:
    r = resolve_compatibility(old.snapshot(), new)
    assert isinstance(r.reason, str) and r.reason
    return r


# -- same serializer ------------------------------------------------------------------


@pytest.mark.parametrize(
    "ser",
    [
        Int32(), Int64(), Float64(), Boolean(), String(), Bytes(), Json(),
        Nullable(String()), Tuple(String(), Int32(), names=("url", "n")), Tuple(Int32()),
        ListOf(Int64()), MapOf(String(), ListOf(Int32())),
    ],
    ids=repr,
)
def test_same_serializer_is_as_is(ser):
    r = resolve(ser, ser)
    assert r.kind is AS_IS and r.serializer is ser and r.is_compatible


# -- primitives ---------------------------------------------------------------------


def test_int32_to_int64_migrates_with_real_bytes():
    r = resolve(Int32(), Int64())
    assert r.kind is MIGRATE and r.serializer == Int64()
    old_bytes = Int32().encode_array([1, -2, 2**31 - 1])
    assert old_bytes.to_pylist() == [b"\x01\x00\x00\x00", b"\xfe\xff\xff\xff", b"\xff\xff\xff\x7f"]
    new_bytes = migrate_array(serializer_from_snapshot(Int32().snapshot()), r.serializer, old_bytes)
    assert new_bytes.to_pylist() == [
        b"\x01\x00\x00\x00\x00\x00\x00\x00",
        b"\xfe\xff\xff\xff\xff\xff\xff\xff",
        b"\xff\xff\xff\x7f\x00\x00\x00\x00",
    ]
    assert Int64().decode_array(new_bytes).to_pylist() == [1, -2, 2**31 - 1]


@pytest.mark.parametrize(
    "old, new",
    [
        (Int64(), Int32()),
        (String(), Bytes()),
        (Bytes(), String()),
        (Int32(), Float64()),
        (Json(), String()),
        (Int32(), Tuple(Int32())),
        (ListOf(Int32()), MapOf(Int32(), Int32())),
    ],
    ids=repr,
)
def test_different_ids_are_incompatible(old, new):
    r = resolve(old, new)
    assert r.kind is INCOMPATIBLE and not r.is_compatible
    assert old.serializer_id in r.reason and new.serializer_id in r.reason
    with pytest.raises(IncompatibleSerializerError):
        migrate_array(old, new, pa.array([], type=pa.binary()))


def test_json_to_json_is_as_is():
    assert resolve(Json(), Json()).kind is AS_IS


# -- nullable -------------------------------------------------------------------------


def test_x_to_nullable_x_migrates():
    r = resolve(String(), Nullable(String()))
    assert r.kind is MIGRATE
    out = migrate_array(String(), r.serializer, String().encode_array(["a", ""]))
    assert out.to_pylist() == [b"\x01a", b"\x01"]
    r = resolve(Int32(), Nullable(Int64()))  # widening and nullable at once
    assert r.kind is MIGRATE
    out = migrate_array(Int32(), r.serializer, Int32().encode_array([3]))
    assert out.to_pylist() == [b"\x01\x03\x00\x00\x00\x00\x00\x00\x00"]
    assert resolve(Int64(), Nullable(Int32())).kind is INCOMPATIBLE


def test_nullable_to_x_is_incompatible():
    r = resolve(Nullable(Int64()), Int64())
    assert r.kind is INCOMPATIBLE and "null" in r.reason


def test_nullable_propagates_its_inner_outcome():
    assert resolve(Nullable(Int32()), Nullable(Int64())).kind is MIGRATE
    assert resolve(Nullable(Int64()), Nullable(Int32())).kind is INCOMPATIBLE
    r = resolve(Nullable(Tuple(Int32(), names=("a",))), Nullable(Tuple(Int32())))
    assert r.kind is RECONF and r.serializer == Nullable(Tuple(Int32(), names=("a",)))


# -- tuple ----------------------------------------------------------------------------

NAMED = Tuple(String(), Int32(), names=("url", "n"))


def test_tuple_arity_change_is_incompatible():
    r = resolve(NAMED, Tuple(String(), Int32(), Int32()))
    assert r.kind is INCOMPATIBLE and "arity" in r.reason


def test_tuple_incompatible_field():
    r = resolve(NAMED, Tuple(String(), Bytes(), names=("url", "n")))
    assert r.kind is INCOMPATIBLE and "field 1" in r.reason


def test_tuple_field_migration_with_real_bytes():
    new = Tuple(String(), Int64(), names=("url", "n"))
    r = resolve(NAMED, new)
    assert r.kind is MIGRATE and r.serializer is new
    old_bytes = NAMED.encode_array([("a", 5)])
    out = migrate_array(NAMED, new, old_bytes)
    assert out.to_pylist() == [bytes.fromhex("01 00 00 00 61 05 00 00 00 00 00 00 00")]


def test_incompatible_beats_migration():
    r = resolve(Tuple(Int32(), Int64()), Tuple(Int64(), Int32()))
    assert r.kind is INCOMPATIBLE


def test_positional_tuple_against_named_snapshot_is_reconfigured_with_old_names():
    new = Tuple(String(), Int32())
    r = resolve(NAMED, new)
    assert r.kind is RECONF
    assert r.serializer == NAMED and r.serializer.names == ("url", "n")
    assert r.serializer.decode(NAMED.encode(("a", 1))) == ("a", 1)


def test_renamed_fields_are_as_is():
    new = Tuple(String(), Int32(), names=("path", "count"))
    r = resolve(NAMED, new)
    assert r.kind is AS_IS and r.serializer is new


def test_positional_against_positional_and_v1_snapshots_are_as_is():
    assert resolve(Tuple(Int32(), Int32()), Tuple(Int32(), Int32())).kind is AS_IS
    v1 = serializer_pb2.SerializerSnapshot(
        serializer_id="tuple", version=1, nested=[String().snapshot(), Int32().snapshot()]
    )
    assert resolve_compatibility(v1, NAMED).kind is AS_IS
    assert resolve_compatibility(v1, Tuple(String(), Int32())).kind is AS_IS
    assert resolve_compatibility(v1, Tuple(String(), Int64())).kind is MIGRATE


def test_reconfigured_field_gives_reconfigured_tuple():
    old = Tuple(Tuple(Int32(), names=("inner",)), String(), names=("a", "b"))
    new = Tuple(Tuple(Int32()), String(), names=("x", "y"))
    r = resolve(old, new)
    assert r.kind is RECONF
    assert r.serializer == Tuple(Tuple(Int32(), names=("inner",)), String(), names=("x", "y"))


# -- list and map ---------------------------------------------------------------------


def test_list_propagates():
    assert resolve(ListOf(Int32()), ListOf(Int64())).kind is MIGRATE
    assert resolve(ListOf(Int64()), ListOf(String())).kind is INCOMPATIBLE
    r = resolve(ListOf(Tuple(Int32(), names=("a",))), ListOf(Tuple(Int32())))
    assert r.kind is RECONF and r.serializer == ListOf(Tuple(Int32(), names=("a",)))
    out = migrate_array(ListOf(Int32()), ListOf(Int64()), ListOf(Int32()).encode_array([[1, 2]]))
    assert ListOf(Int64()).decode_array(out).to_pylist() == [[1, 2]]


def test_map_propagates():
    assert resolve(MapOf(Int32(), String()), MapOf(Int64(), String())).kind is MIGRATE
    assert resolve(MapOf(String(), Int32()), MapOf(String(), Nullable(Int32()))).kind is MIGRATE
    assert resolve(MapOf(String(), Int64()), MapOf(String(), Int32())).kind is INCOMPATIBLE
    r = resolve(MapOf(String(), Tuple(Int32(), names=("a",))), MapOf(String(), Tuple(Int32())))
    assert r.kind is RECONF and r.serializer == MapOf(String(), Tuple(Int32(), names=("a",)))
    old = MapOf(Int32(), String())
    out = migrate_array(old, MapOf(Int64(), String()), old.encode_array([{7: "x"}]))
    assert MapOf(Int64(), String()).decode(out[0].as_py()) == {7: "x"}


# -- protobuf -------------------------------------------------------------------------


def proto(fields, *, nested=(), name="Msg"):
    """Protobuf serializer for message ``evo.<name>`` with ``fields`` = [(name, number, type, label, type_name)]."""
    f = descriptor_pb2.FileDescriptorProto(name="evo.proto", package="evo", syntax="proto3")
    for msg_name, msg_fields in [(name, fields), *nested]:
        m = f.message_type.add(name=msg_name)
        for fname, number, ftype, *rest in msg_fields:
            fd = m.field.add(name=fname, number=number, type=ftype)
            fd.label = rest[0] if rest else F.LABEL_OPTIONAL
            if len(rest) > 1:
                fd.type_name = rest[1]
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    return Protobuf(message_factory.GetMessageClass(pool.FindMessageTypeByName(f"evo.{name}")))


V1 = proto([("id", 1, F.TYPE_STRING), ("count", 2, F.TYPE_INT32)])


def test_protobuf_added_and_removed_fields_are_as_is():
    added = proto([("id", 1, F.TYPE_STRING), ("count", 2, F.TYPE_INT32), ("note", 3, F.TYPE_STRING)])
    r = resolve(V1, added)
    assert r.kind is AS_IS and r.serializer is added
    # and old bytes really read under the new type
    old_msg = V1.message_class(id="a", count=3)
    assert added.decode(V1.encode(old_msg)).count == 3
    removed = proto([("id", 1, F.TYPE_STRING)])
    assert resolve(V1, removed).kind is AS_IS
    renamed = proto([("key", 1, F.TYPE_BYTES), ("n", 2, F.TYPE_UINT64)])  # same wire groups
    assert resolve(V1, renamed).kind is AS_IS


def test_protobuf_field_number_changing_type_is_incompatible():
    changed = proto([("id", 1, F.TYPE_STRING), ("count", 2, F.TYPE_STRING)])
    r = resolve(V1, changed)
    assert r.kind is INCOMPATIBLE
    assert "field number 2" in r.reason and "int32" in r.reason and "string" in r.reason


@pytest.mark.parametrize(
    "old_type, new_type, kind",
    [
        (F.TYPE_INT32, F.TYPE_INT64, AS_IS),
        (F.TYPE_BOOL, F.TYPE_ENUM, AS_IS),
        (F.TYPE_SINT32, F.TYPE_SINT64, AS_IS),
        (F.TYPE_FIXED32, F.TYPE_SFIXED32, AS_IS),
        (F.TYPE_FIXED64, F.TYPE_SFIXED64, AS_IS),
        (F.TYPE_STRING, F.TYPE_BYTES, AS_IS),
        (F.TYPE_INT32, F.TYPE_SINT32, INCOMPATIBLE),
        (F.TYPE_FIXED32, F.TYPE_FLOAT, INCOMPATIBLE),
        (F.TYPE_FLOAT, F.TYPE_DOUBLE, INCOMPATIBLE),
        (F.TYPE_FIXED64, F.TYPE_DOUBLE, INCOMPATIBLE),
        (F.TYPE_INT64, F.TYPE_FIXED64, INCOMPATIBLE),
    ],
)
def test_protobuf_wire_groups(old_type, new_type, kind):
    def one(t):
        if t == F.TYPE_ENUM:
            f = descriptor_pb2.FileDescriptorProto(name="evo.proto", package="evo", syntax="proto3")
            f.enum_type.add(name="E").value.add(name="E_ZERO", number=0)
            f.message_type.add(name="Msg").field.add(name="v", number=1, type=t, label=F.LABEL_OPTIONAL, type_name=".evo.E")
            pool = descriptor_pool.DescriptorPool()
            pool.Add(f)
            return Protobuf(message_factory.GetMessageClass(pool.FindMessageTypeByName("evo.Msg")))
        return proto([("v", 1, t)])
    assert resolve(one(old_type), one(new_type)).kind is kind


def test_protobuf_cardinality_change_is_incompatible():
    repeated = proto([("id", 1, F.TYPE_STRING), ("count", 2, F.TYPE_INT32, F.LABEL_REPEATED)])
    r = resolve(V1, repeated)
    assert r.kind is INCOMPATIBLE and "field number 2" in r.reason and "repeated" in r.reason


def test_protobuf_nested_messages_compared_recursively():
    def with_inner(inner_type):
        return proto(
            [("inner", 1, F.TYPE_MESSAGE, F.LABEL_OPTIONAL, ".evo.Inner")],
            nested=[("Inner", [("x", 1, inner_type)])],
        )
    assert resolve(with_inner(F.TYPE_INT32), with_inner(F.TYPE_UINT32)).kind is AS_IS
    r = resolve(with_inner(F.TYPE_INT32), with_inner(F.TYPE_DOUBLE))
    assert r.kind is INCOMPATIBLE and "evo.Msg.inner" in r.reason and "double" in r.reason


def test_protobuf_recursive_types_terminate():
    def tree(value_type):
        return proto(
            [("value", 1, value_type), ("children", 2, F.TYPE_MESSAGE, F.LABEL_REPEATED, ".evo.Node")],
            name="Node",
        )
    assert resolve(tree(F.TYPE_INT32), tree(F.TYPE_INT64)).kind is AS_IS
    assert resolve(tree(F.TYPE_INT32), tree(F.TYPE_STRING)).kind is INCOMPATIBLE


def test_protobuf_against_other_ids():
    assert resolve(V1, Bytes()).kind is INCOMPATIBLE
    assert resolve(Bytes(), V1).kind is INCOMPATIBLE


# -- snapshot versions and migrate_array edge cases ---------------------------------


def test_newer_old_snapshot_version_is_unsupported():
    newer = serializer_pb2.SerializerSnapshot(serializer_id="int64", version=2)
    with pytest.raises(UnsupportedFormatError):
        resolve_compatibility(newer, Int64())
    newer_tuple = serializer_pb2.SerializerSnapshot(serializer_id="tuple", version=3)
    with pytest.raises(UnsupportedFormatError):
        resolve_compatibility(newer_tuple, Tuple(Int32()))


def test_unknown_old_id_against_a_different_new_id_is_incompatible():
    old = serializer_pb2.SerializerSnapshot(serializer_id="com.example.gone", version=1)
    r = resolve_compatibility(old, Int64())
    assert r.kind is INCOMPATIBLE and "com.example.gone" in r.reason


def test_migrate_array_without_byte_changes_returns_the_input():
    data = String().encode_array(["a"])
    assert migrate_array(String(), String(), data) is data
    named = Tuple(Int32(), names=("a",))
    data = named.encode_array([(1,)])
    assert migrate_array(named, Tuple(Int32()), data) is data
