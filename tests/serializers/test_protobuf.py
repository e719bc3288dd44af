"""The protobuf serializer, with message types built at test time from descriptor_pb2."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from hypothesis import given
from hypothesis import strategies as st

from pyref._proto.savepoint.v1 import serializer_pb2
from pyref.errors import CorruptSavepointError, InvalidArgumentError
from pyref.serializers import ListOf, Protobuf, serializer_from_snapshot
from serializer_spec_tables import spec_hex_examples

F = descriptor_pb2.FieldDescriptorProto


def field(name, number, ftype, *, repeated=False, type_name=None):
    f = F(name=name, number=number, type=ftype, label=F.LABEL_REPEATED if repeated else F.LABEL_OPTIONAL)
    if type_name:
        f.type_name = type_name
    return f


def point_file():
    f = descriptor_pb2.FileDescriptorProto(name="example/point.proto", package="example", syntax="proto3")
    f.message_type.add(name="Point", field=[field("x", 1, F.TYPE_INT32), field("y", 2, F.TYPE_INT32)])
    return f


def shop_files():
    """shop/money.proto (Money) and shop/cart.proto (Cart imports Money, has a map and a nested type)."""
    money = descriptor_pb2.FileDescriptorProto(name="shop/money.proto", package="shop", syntax="proto3")
    money.message_type.add(
        name="Money", field=[field("currency", 1, F.TYPE_STRING), field("cents", 2, F.TYPE_INT64)]
    )
    cart = descriptor_pb2.FileDescriptorProto(
        name="shop/cart.proto", package="shop", syntax="proto3", dependency=["shop/money.proto"]
    )
    msg = cart.message_type.add(name="Cart")
    item = msg.nested_type.add(
        name="Item",
        field=[field("sku", 1, F.TYPE_STRING), field("price", 2, F.TYPE_MESSAGE, type_name=".shop.Money")],
    )
    assert item
    entry = msg.nested_type.add(name="TagsEntry", field=[field("key", 1, F.TYPE_STRING), field("value", 2, F.TYPE_STRING)])
    entry.options.map_entry = True
    msg.field.extend(
        [
            field("id", 1, F.TYPE_STRING),
            field("items", 2, F.TYPE_MESSAGE, repeated=True, type_name=".shop.Cart.Item"),
            field("tags", 3, F.TYPE_MESSAGE, repeated=True, type_name=".shop.Cart.TagsEntry"),
            field("total", 4, F.TYPE_MESSAGE, type_name=".shop.Money"),
        ]
    )
    return money, cart


def build(files, name):
    pool = descriptor_pool.DescriptorPool()
    for f in files:
        pool.Add(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(name))


Point = build([point_file()], "example.Point")
Cart = build(shop_files(), "shop.Cart")


def a_cart():
    c = Cart(id="c-1")
    it = c.items.add(sku="ab")
    it.price.currency, it.price.cents = "EUR", 1250
    c.tags["b"] = "2"
    c.tags["a"] = "1"
    c.total.cents = 1250
    return c


def test_spec_example_bytes():
    hexstr = "08 01 10 ff ff ff ff ff ff ff ff ff 01"
    ser = Protobuf(Point)
    assert ser.encode(Point(x=1, y=-1)).hex(" ") == hexstr
    assert ser.decode(bytes.fromhex(hexstr)) == Point(x=1, y=-1)
    assert spec_hex_examples("3.11") == {hexstr}


def test_round_trip_and_determinism():
    ser = Protobuf(Cart)
    c = a_cart()
    data = ser.encode(c)
    assert data == c.SerializeToString(deterministic=True)
    back = ser.decode(data)
    assert isinstance(back, Cart) and back == c
    assert ser.fixed_width is None and ser.arrow_type() == pa.binary()


@given(st.integers(-(2**31), 2**31 - 1), st.integers(-(2**31), 2**31 - 1))
def test_point_round_trip(x, y):
    ser = Protobuf(Point)
    assert ser.decode(ser.encode(Point(x=x, y=y))) == Point(x=x, y=y)


def test_snapshot_carries_every_needed_file_dependencies_first():
    snap = Protobuf(Cart).snapshot()
    assert (snap.serializer_id, snap.version) == ("protobuf", 1)
    assert snap.protobuf.message_name == "shop.Cart"
    assert [f.name for f in snap.protobuf.file_descriptor_set.file] == ["shop/money.proto", "shop/cart.proto"]


def test_restore_builds_the_class_from_the_snapshot_only():
    ser = Protobuf(Cart)
    wire = serializer_pb2.SerializerSnapshot.FromString(ser.snapshot().SerializeToString())
    restored = serializer_from_snapshot(wire)
    assert isinstance(restored, Protobuf) and restored.message_name == "shop.Cart"
    assert restored.message_class is not Cart  # built in a private pool
    c = a_cart()
    back = restored.decode(ser.encode(c))
    assert back.SerializeToString(deterministic=True) == c.SerializeToString(deterministic=True)
    assert restored.encode(c) == ser.encode(c)  # accepts the program's own class too
    assert serializer_from_snapshot(restored.snapshot()) == restored
    with pytest.raises(KeyError):
        descriptor_pool.Default().FindMessageTypeByName("shop.Cart")


def test_other_constructors():
    assert Protobuf.from_descriptor(Point.DESCRIPTOR).encode(Point(x=1)) == b"\x08\x01"
    money, cart = shop_files()
    fds = descriptor_pb2.FileDescriptorSet(file=[cart, money])  # any order is accepted
    ser = Protobuf.from_descriptor_set(fds, "shop.Cart")
    assert ser.decode(Protobuf(Cart).encode(a_cart())).id == "c-1"
    with pytest.raises(InvalidArgumentError):
        Protobuf(int)
    with pytest.raises(InvalidArgumentError):
        Protobuf.from_descriptor("shop.Cart")


def test_unknown_fields_are_kept():
    ser = Protobuf(Point)
    data = b"\x08\x01" + b"\x18\x05"  # field 3 is unknown to Point
    assert ser.encode(ser.decode(data)) == data


def test_vectorised_and_nested():
    ser = Protobuf(Point)
    pts = [Point(x=1), Point(y=2), Point()]
    enc = ser.encode_array(pts)
    assert enc.to_pylist() == [p.SerializeToString(deterministic=True) for p in pts]
    dec = ser.decode_array(enc)
    assert dec.type == pa.binary() and dec.to_pylist() == enc.to_pylist()
    assert ser.encode_array(dec).equals(enc)  # from Arrow: serialized messages
    lst = ListOf(Protobuf(Point))
    assert lst.decode(lst.encode(pts)) == pts
    assert lst.decode_array(lst.encode_array([pts])).to_pylist() == [enc.to_pylist()]


def test_bad_values():
    ser = Protobuf(Point)
    with pytest.raises(InvalidArgumentError) as e:
        ser.encode(a_cart())
    assert "shop.Cart is not example.Point" in str(e.value)
    with pytest.raises(InvalidArgumentError):
        ser.encode({"x": 1})


@pytest.mark.parametrize("data", [b"\x08", b"\xff", b"\x0a\x05ab", b"\x08\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01"])
def test_corrupt_messages(data):
    with pytest.raises(CorruptSavepointError) as e:
        Protobuf(Point).decode(data)
    assert "not a valid example.Point message" in str(e.value)
    with pytest.raises(CorruptSavepointError) as e:
        Protobuf(Point).decode_array(pa.array([b"", data]))
    assert "record 1" in str(e.value)


def _snap(files, name):
    s = serializer_pb2.SerializerSnapshot(serializer_id="protobuf", version=1)
    s.protobuf.file_descriptor_set.file.extend(files)
    s.protobuf.message_name = name
    return s


def test_corrupt_descriptor_sets():
    money, cart = shop_files()
    cyc_a = descriptor_pb2.FileDescriptorProto(name="a.proto", dependency=["b.proto"])
    cyc_b = descriptor_pb2.FileDescriptorProto(name="b.proto", dependency=["a.proto"])
    bad_type = point_file()
    bad_type.message_type[0].field[0].type_name = ".nowhere.Missing"
    bad_type.message_type[0].field[0].type = F.TYPE_MESSAGE
    cases = {
        "misses file 'shop/money.proto'": _snap([cart], "shop.Cart"),
        "lists file 'shop/money.proto' twice": _snap([money, money, cart], "shop.Cart"),
        "does not define message 'shop.Nope'": _snap([money, cart], "shop.Nope"),
        "import cycle": _snap([cyc_a, cyc_b], "a.X"),
        "does not build": _snap([bad_type], "example.Point"),
        "no message_name": _snap([point_file()], ""),
    }
    for fragment, snap in cases.items():
        with pytest.raises(CorruptSavepointError) as e:
            serializer_from_snapshot(snap)
        assert fragment in str(e.value)
    with pytest.raises(CorruptSavepointError):  # protobuf config on another family
        s = _snap([point_file()], "example.Point")
        s.serializer_id = "bytes"
        serializer_from_snapshot(s)
