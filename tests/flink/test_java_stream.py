"""pyref.flink.java_stream: stepping over Java serialization streams exactly, never reading them.

Real streams: every ``ObjectOutputStream`` in a Flink SQL savepoint's ``_metadata`` (the table
runtime's LogicalTypes, DataTypes, serializers and comparators) and data/java_streams/streams.bin
(written by JavaStreams.java beside it: reference loops, writeObject annotations with block
data, Externalizable, a proxy, enums, classes, arrays of primitives and of arrays)."""

from __future__ import annotations

import gzip
import pathlib
import random
import struct

import pytest

from pyref.errors import CorruptSavepointError, SavepointError, UnsupportedFormatError
from pyref.flink.datainput import DataInput
from pyref.flink.java_stream import JAVA_STREAM_MAGIC, MAX_DEPTH, MAX_HIERARCHY, skip_java_stream

DATA = pathlib.Path(__file__).resolve().parent / "data"
_NESTED_MAGIC = struct.pack(">i", 1333245)


def sql_metadata() -> bytes:
    return gzip.decompress((DATA / "sql" / "2.3.0-hashmap" / "_metadata.gz").read_bytes())


def java_written() -> list[bytes]:
    """streams.bin: each stream after its int length."""
    data, pos, streams = (DATA / "java_streams" / "streams.bin").read_bytes(), 0, []
    while pos < len(data):
        (n,) = struct.unpack_from(">i", data, pos)
        streams.append(data[pos + 4:pos + 4 + n])
        pos += 4 + n
    return streams


def walk(data: bytes) -> tuple[str | None, int]:
    inp = DataInput(data)
    name = skip_java_stream(inp, "test stream")
    return name, inp.pos


def test_each_stream_java_wrote_ends_where_it_ends():
    found = [walk(stream + b"tail") for stream in java_written()]
    assert [end for _, end in found] == [len(stream) for stream in java_written()]
    assert [name for name, _ in found] == [
        "JavaStreams$Node", "java.util.HashMap", "JavaStreams$Custom", "JavaStreams$Ext", "<proxy>", None,
        "java.lang.String", "java.util.concurrent.TimeUnit", "[Ljava.lang.Object;"]


def test_every_stream_of_a_flink_sql_savepoint_is_stepped_over():
    """The table runtime writes these streams back to back or before a NestedSerializersSnapshotDelegate
    (RowData), a boolean (ExternalSerializer), a versioned snapshot or a state's meta info (the
    last, Flink's CheckpointProperties, ends the file): each walk must end exactly at one of those."""
    data = sql_metadata()
    starts = [i for i in range(len(data)) if data.startswith(JAVA_STREAM_MAGIC, i)]
    names = set()
    for start in starts:
        inp = DataInput(data, start)
        names.add(skip_java_stream(inp, "stream"))
        after = data[inp.pos:inp.pos + 4]
        assert after in (JAVA_STREAM_MAGIC, _NESTED_MAGIC, b"") or after[:1] in (b"\x00", b"\x01"), (start, after)
    assert len(starts) > 120
    assert {"org.apache.flink.table.types.logical.VarCharType", "org.apache.flink.table.types.AtomicDataType",
            "org.apache.flink.table.types.logical.ArrayType", "org.apache.flink.table.types.logical.MapType",
            "org.apache.flink.table.runtime.operators.rank.ComparableRecordComparator"} <= names


def real_streams() -> list[bytes]:
    data = sql_metadata()
    chosen = []
    for name in (b"StructuredType", b"ComparableRecordComparator"):
        start = data.rfind(JAVA_STREAM_MAGIC, 0, data.index(name))
        inp = DataInput(data, start)
        skip_java_stream(inp, "stream")
        chosen.append(data[start:inp.pos])
    return chosen + java_written()


@pytest.mark.parametrize("index", range(11))
def test_a_stream_cut_anywhere_is_a_typed_error(index):
    streams = real_streams()
    assert len(streams) == 11
    stream = streams[index]
    for cut in range(len(stream)):
        with pytest.raises(CorruptSavepointError):
            walk(stream[:cut])


def test_damaged_streams_raise_only_typed_errors():
    rng = random.Random(20261124)
    streams = real_streams()
    for _ in range(3000):
        stream = bytearray(rng.choice(streams))
        for _ in range(rng.randint(1, 4)):
            stream[rng.randrange(4, len(stream))] = rng.choice((0x70, 0x71, 0x72, 0x73, 0x75, 0x78, 0x7E, 0xFF,
                                                                 0x00, rng.randrange(256)))
        try:
            walk(bytes(stream))
        except SavepointError:
            pass


# -- hand-built streams, for what no writer produces ------------------------------------------

def utf(text: str) -> bytes:
    return struct.pack(">H", len(text)) + text.encode()


def desc(name: str, flags: int = 0x02, fields: bytes = b"\x00\x00", parent: bytes = b"\x70") -> bytes:
    """TC_CLASSDESC, name, serialVersionUID, flags, fields, no annotation (TC_ENDBLOCKDATA), parent."""
    return b"\x72" + utf(name) + bytes(8) + bytes([flags]) + fields + b"\x78" + parent


def stream(content: bytes) -> bytes:
    return JAVA_STREAM_MAGIC + content


def ref(handle: int) -> bytes:
    return b"\x71" + struct.pack(">i", 0x7E0000 + handle)


def test_a_back_reference_to_a_class_descriptor_still_gives_its_fields():
    point = desc("P", fields=b"\x00\x02" + b"I" + utf("x") + b"J" + utf("y"))
    array = b"\x75" + desc("[LP;") + struct.pack(">i", 2)
    # [P(x, y), P by its descriptor's handle]: 4 + 8 bytes of fields each (handles: [LP;, the array, P).
    data = stream(array + b"\x73" + point + bytes(12) + b"\x73" + ref(2) + bytes(12))
    assert walk(data + b"!") == ("[LP;", len(data))


def test_an_object_that_refers_to_itself_is_one_step():
    node = desc("N", fields=b"\x00\x01" + b"L" + utf("next") + b"\x74" + utf("LN;"))
    data = stream(b"\x73" + node + ref(2))  # handles: N, "LN;", the object
    assert walk(data) == ("N", len(data))


@pytest.mark.parametrize("content, match", [
    (b"\x75" + desc("[I") + struct.pack(">i", 0x7FFFFFFF), "array length"),
    (b"\x75" + desc("[Ljava.lang.Object;") + struct.pack(">i", -1), "array length"),
    (b"\x73" + desc("W", flags=0x03) + b"\x7A" + struct.pack(">i", 0x7FFFFFF0), "block data length"),
    (b"\x7C" + struct.pack(">q", 1 << 62), "string length"),
    (b"\x72" + utf("F") + bytes(8) + b"\x02" + struct.pack(">h", 30000), "field count"),
    (b"\x73" + ref(5), "handle 5 of 0"),
    (b"\x73" + b"\x72" + utf("S") + bytes(8) + b"\x02\x00\x00\x78" + ref(0), "not a class descriptor"),
    (b"\x73" + desc("X", fields=b"\x00\x01Q" + utf("q")), "field type code"),
    (b"\x79\x78", "where an object belongs"),
])
def test_impossible_counts_and_references_are_corrupt(content, match):
    with pytest.raises(CorruptSavepointError, match=match):
        walk(stream(content))


@pytest.mark.parametrize("content, match", [
    (b"\x73" + desc("E", flags=0x04), "Externalizable written without block data"),
    (b"\x7B" + b"\x73" + desc("java.io.IOException"), "exception"),
    (b"\x75" + desc("[[Ljava.lang.Object;") + struct.pack(">i", 1) + (
        b"\x75" + ref(0) + struct.pack(">i", 1)) * MAX_DEPTH + b"\x70", "nested more than"),
])
def test_streams_only_their_classes_could_read_are_refused(content, match):
    with pytest.raises(UnsupportedFormatError, match=match):
        walk(stream(content))


def test_nesting_up_to_the_bound_is_stepped_over_and_the_bound_is_cheap():
    nested = b"\x75" + desc("[[Ljava.lang.Object;") + struct.pack(">i", 1) + (
        b"\x75" + ref(0) + struct.pack(">i", 1)) * (MAX_DEPTH - 2) + b"\x70"
    assert walk(stream(nested)) == ("[[Ljava.lang.Object;", len(nested) + 4)
    # A hostile chain of a million nested arrays stops at the bound, not at Python's recursion limit.
    with pytest.raises(UnsupportedFormatError):
        walk(stream(b"\x75" + desc("[[I") + struct.pack(">i", 1) + (b"\x75" + ref(0) + struct.pack(">i", 1)) * 10**6))


def test_a_reset_before_the_object_clears_the_handles():
    assert walk(stream(b"\x79\x74" + utf("s"))) == ("java.lang.String", 9)
    with pytest.raises(CorruptSavepointError, match="handle 0 of 0"):
        walk(stream(b"\x74" + utf("s")).replace(b"\x74", b"\x79" + ref(0), 1))


def test_class_hierarchies_are_bounded_and_acyclic():
    # A descriptor whose superclass is itself (its handle exists before its superclass is read).
    with pytest.raises(CorruptSavepointError, match="not a class descriptor"):
        walk(stream(b"\x73" + desc("C", parent=ref(0))))
    # Classes each extending the one before: fine up to the bound, refused past it.
    def chain(n: int) -> bytes:
        classes = [b"\x76" + desc("C0")] + [b"\x76" + desc(f"C{i}", parent=ref(2 + 2 * (i - 1))) for i in range(1, n)]
        return stream(b"\x75" + desc("[Ljava.lang.Class;") + struct.pack(">i", n) + b"".join(classes))
    assert walk(chain(MAX_HIERARCHY))[1] == len(chain(MAX_HIERARCHY))
    with pytest.raises(UnsupportedFormatError, match="hierarchy"):
        walk(chain(MAX_HIERARCHY + 1))


def test_not_a_stream():
    with pytest.raises(CorruptSavepointError, match="no Java serialization stream"):
        walk(b"\xac\xed\x00\x04\x70")
