"""The registry: snapshots of every serializer, user-defined serializers, unknown ids, versions."""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from pyref._proto.savepoint.v1 import serializer_pb2
from pyref.errors import CorruptSavepointError, InvalidArgumentError, UnsupportedFormatError
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
    Serializer,
    String,
    Tuple,
    register_serializer,
    registered_serializer_ids,
    resolve_compatibility,
    serializer_from_snapshot,
    unregister_serializer,
)

Snap = serializer_pb2.SerializerSnapshot


def _point_class():
    f = descriptor_pb2.FileDescriptorProto(name="reg/point.proto", package="reg", syntax="proto3")
    m = f.message_type.add(name="Point")
    m.field.add(name="x", number=1, type=5, label=1)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("reg.Point"))


ALL_BUILT_INS = [
    Int32(), Int64(), Float64(), Boolean(), String(), Bytes(), Json(),
    Nullable(Int32()), Tuple(String(), Int32(), names=("url", "n")), Tuple(Bytes()),
    ListOf(Nullable(String())), MapOf(String(), ListOf(Json())), Protobuf(_point_class()),
]


def test_built_in_ids():
    ids = registered_serializer_ids()
    assert set(ids[:20]) == {
        "int32", "int64", "float64", "boolean", "string", "bytes",
        "nullable", "tuple", "list", "map", "protobuf", "json",
        # format 1.2 (spec/serializers.md §3.13-§3.20)
        "int8", "int16", "float32", "char", "enum", "time-window", "global-window", "opaque",
    }
    assert all("." not in i for i in ids[:20])


@pytest.mark.parametrize("ser", ALL_BUILT_INS, ids=repr)
def test_snapshot_round_trip_for_every_built_in(ser):
    snap = ser.snapshot()
    assert snap.serializer_id == ser.serializer_id and snap.version == ser.version
    wire = Snap.FromString(snap.SerializeToString())
    restored = serializer_from_snapshot(wire)
    assert type(restored) is type(ser) and restored == ser
    assert restored.snapshot().SerializeToString(deterministic=True) == snap.SerializeToString(deterministic=True)


def test_versions_written():
    assert {s.serializer_id: s.snapshot().version for s in ALL_BUILT_INS} == {
        "int32": 1, "int64": 1, "float64": 1, "boolean": 1, "string": 1, "bytes": 1, "json": 1,
        "nullable": 1, "tuple": 2, "list": 1, "map": 1, "protobuf": 1,
    }


# -- unknown ids and versions -----------------------------------------------------------


def test_unknown_ids_are_unsupported_and_named():
    with pytest.raises(UnsupportedFormatError) as e:
        serializer_from_snapshot(Snap(serializer_id="decimal", version=1))
    assert "'decimal'" in str(e.value) and "newer reader" in str(e.value)
    with pytest.raises(UnsupportedFormatError) as e:
        serializer_from_snapshot(Snap(serializer_id="com.example.unknown", version=1))
    assert "'com.example.unknown'" in str(e.value) and "register" in str(e.value)
    nested = ListOf(Int32()).snapshot()
    nested.nested[0].serializer_id = "com.example.unknown"
    with pytest.raises(UnsupportedFormatError):
        serializer_from_snapshot(nested)


@pytest.mark.parametrize(
    "snap",
    [Snap(serializer_id="int32", version=2), Snap(serializer_id="tuple", version=3, nested=[Int32().snapshot()])],
)
def test_newer_snapshot_version_is_unsupported(snap):
    with pytest.raises(UnsupportedFormatError) as e:
        serializer_from_snapshot(snap)
    assert f"version {snap.version} is newer" in str(e.value)


@pytest.mark.parametrize(
    "snap",
    [
        Snap(serializer_id="int32", version=0),
        Snap(serializer_id="", version=1),
        Snap(serializer_id="int32", version=1, nested=[Int32().snapshot()]),
        Snap(serializer_id="string", version=1, field_names=["x"]),
        Snap(serializer_id="json", version=1, custom_configuration=b"x"),
    ],
)
def test_malformed_snapshots_are_corrupt(snap):
    with pytest.raises(CorruptSavepointError):
        serializer_from_snapshot(snap)


def test_not_a_snapshot():
    with pytest.raises(InvalidArgumentError):
        serializer_from_snapshot(b"\x0a\x05int32")
    with pytest.raises(InvalidArgumentError):
        resolve_compatibility(Int32().snapshot(), "int64")


# -- user-defined serializers ----------------------------------------------------------


class Money(Serializer):
    """Amounts in cents of one currency: int64 little-endian; the currency is configuration."""

    serializer_id = "com.example.money"
    version = 1

    def __init__(self, currency: str) -> None:
        self.currency = currency

    @property
    def fixed_width(self):
        return 8

    @property
    def custom_configuration(self) -> bytes:
        return self.currency.encode("ascii")

    def encode(self, value):
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._invalid(value)
        return struct.pack("<q", value)

    def decode(self, data):
        data = bytes(data)
        if len(data) != 8:
            raise CorruptSavepointError(f"com.example.money: expected 8 bytes, got {len(data)}")
        return struct.unpack("<q", data)[0]

    def arrow_type(self):
        return pa.int64()

    @classmethod
    def from_snapshot(cls, snapshot):
        return cls(snapshot.custom_configuration.decode("ascii"))

    def resolve_compatibility(self, old_snapshot):
        if old_snapshot.serializer_id == "int64":
            return CompatibilityResult(Compatibility.COMPATIBLE_AS_IS, self, "int64 cents have the same bytes")
        return super().resolve_compatibility(old_snapshot)


class Reversed(Serializer):
    """Wraps another serializer and stores its bytes reversed (a user composite)."""

    serializer_id = "org.example.reversed"
    version = 2

    def __init__(self, inner: Serializer) -> None:
        self.inner = inner

    @property
    def nested_serializers(self):
        return (self.inner,)

    def encode(self, value):
        return self.inner.encode(value)[::-1]

    def decode(self, data):
        return self.inner.decode(bytes(data)[::-1])

    @classmethod
    def from_snapshot(cls, snapshot):
        return cls(serializer_from_snapshot(snapshot.nested[0]))


@pytest.fixture
def registered():
    register_serializer(Money)
    register_serializer(Reversed)
    yield
    unregister_serializer("com.example.money")
    unregister_serializer("org.example.reversed")


def test_user_serializer_round_trips(registered):
    eur = Money("EUR")
    assert eur.decode(eur.encode(1250)) == 1250
    snap = eur.snapshot()
    assert (snap.serializer_id, snap.version, snap.custom_configuration) == ("com.example.money", 1, b"EUR")
    restored = serializer_from_snapshot(Snap.FromString(snap.SerializeToString()))
    assert isinstance(restored, Money) and restored.currency == "EUR" and restored == eur
    # vectorised defaults loop over values
    arr = eur.encode_array([1, -2])
    assert eur.decode_array(arr).to_pylist() == [1, -2]
    assert eur.encode_array(pa.array([1, -2])).equals(arr)
    # inside composites: fixed width, so framed without a length prefix
    t = Tuple(Money("EUR"), String())
    assert t.encode((1, "a")) == struct.pack("<q", 1) + b"\x01\x00\x00\x00a"
    assert serializer_from_snapshot(t.snapshot()) == t
    with pytest.raises(CorruptSavepointError):
        eur.decode(b"\x00")


def test_user_composite_with_nested_snapshot(registered):
    ser = Reversed(ListOf(String()))
    assert ser.encode(["ab"]) == (b"\x01\x00\x00\x00" + b"\x02\x00\x00\x00ab")[::-1]
    snap = ser.snapshot()
    assert snap.version == 2 and snap.nested[0].serializer_id == "list"
    restored = serializer_from_snapshot(snap)
    assert restored == ser and restored.decode(ser.encode(["x", "y"])) == ["x", "y"]
    # default Arrow representation of a user serializer: its encoded bytes
    arr = ser.encode_array([["a"]])
    assert ser.decode_array(arr).equals(arr)
    lst = ListOf(Reversed(Int32()))
    assert lst.decode(lst.encode([1, 2])) == [1, 2]
    newer = Snap(serializer_id="org.example.reversed", version=3, nested=[Int32().snapshot()])
    with pytest.raises(UnsupportedFormatError):
        serializer_from_snapshot(newer)


def test_user_serializer_resolution(registered):
    eur = Money("EUR")
    assert resolve_compatibility(eur.snapshot(), Money("EUR")).kind is Compatibility.COMPATIBLE_AS_IS
    r = resolve_compatibility(eur.snapshot(), Money("USD"))
    assert r.kind is Compatibility.INCOMPATIBLE and "configuration" in r.reason
    assert resolve_compatibility(Int64().snapshot(), eur).kind is Compatibility.COMPATIBLE_AS_IS  # override
    assert resolve_compatibility(eur.snapshot(), Int64()).kind is Compatibility.INCOMPATIBLE
    assert resolve_compatibility(Reversed(Int32()).snapshot(), Reversed(Int32())).kind is Compatibility.COMPATIBLE_AS_IS
    assert resolve_compatibility(Reversed(Int32()).snapshot(), Reversed(Int64())).kind is Compatibility.INCOMPATIBLE


def test_unregistered_user_serializer_cannot_be_restored():
    snap = Money("EUR").snapshot()
    with pytest.raises(UnsupportedFormatError) as e:
        serializer_from_snapshot(snap)
    assert "com.example.money" in str(e.value)


def _cls(sid, **extra):
    ns = {
        "serializer_id": sid,
        "encode": lambda self, v: b"",
        "decode": lambda self, d: None,
        "from_snapshot": classmethod(lambda cls, s: cls()),
    }
    ns.update(extra)
    return type("X", (Serializer,), ns)


@pytest.mark.parametrize(
    "cls, fragment",
    [
        (_cls("int64"), "reserved for built-in"),
        (_cls("money"), "must be reverse-DNS and contain a dot"),
        (_cls("com..money"), "not a reverse-DNS name"),
        (_cls("com.example.mo ney"), "not a reverse-DNS name"),
        (_cls("com.example.x", version=0), "version must be an integer >= 1"),
        (type("NoSnap", (Serializer,), {"serializer_id": "com.example.nosnap", "encode": lambda s, v: b""}), "from_snapshot"),
        (int, "expects a Serializer subclass"),
    ],
)
def test_bad_registrations(cls, fragment):
    with pytest.raises(InvalidArgumentError) as e:
        register_serializer(cls)
    assert fragment in str(e.value)


def test_duplicate_registration(registered):
    with pytest.raises(InvalidArgumentError) as e:
        register_serializer(_cls("com.example.money"))
    assert "already registered" in str(e.value)
    with pytest.raises(InvalidArgumentError):
        unregister_serializer("int64")
    with pytest.raises(InvalidArgumentError):
        unregister_serializer("com.example.never")


def test_register_is_a_class_decorator():
    @register_serializer
    class Tmp(Serializer):
        serializer_id = "net.example.tmp"

        def encode(self, value):
            return b""

        def decode(self, data):
            return None

        @classmethod
        def from_snapshot(cls, snapshot):
            return cls()

    try:
        assert isinstance(serializer_from_snapshot(Tmp().snapshot()), Tmp)
        assert "net.example.tmp" in registered_serializer_ids()
    finally:
        unregister_serializer("net.example.tmp")
