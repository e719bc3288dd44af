"""A legacy ``FlinkKafkaConsumer``'s offsets (pyref.flink.kafka_consumer, through
pyref.flink.sources): a real Flink 1.20.3 savepoint of the consumer's state, imported,
inspected and moved with ``pyref set-source-position``; damaged elements as typed errors
naming state, subtask, element and bytes; Kryo serializer snapshots read exactly."""

from __future__ import annotations

import json
import pathlib
import struct

import pytest

from compat_tests.flink.sources.kafka_consumer.test_kafka_consumer_vectors import VECTORS
from pyref import Savepoint
from pyref.cli import main
from pyref.errors import CorruptSavepointError, InvalidArgumentError
from pyref.flink import FlinkSavepoint, import_flink
from pyref.flink.datainput import DataInput
from pyref.flink.kafka_consumer import (CONSUMER_STATE, KafkaConsumerPartition, decode_consumer_partition,
                                        encode_consumer_partition)
from pyref.flink.serializers import read_versioned_snapshot
from pyref.flink.sources import encode_split, kafka_offsets, rewrite_source_splits, source_splits

SAVEPOINT = pathlib.Path(__file__).resolve().parent / "data" / "kafka-consumer-1.20.3" / "savepoint"
OPERATOR = "61252f73469d3ffba207c548d29a0267"  # Flink 1.x stores no uid: the hash of uid "kafka-source"
EARLIEST = -915623761775


def truth() -> list[list[tuple[str, int, int]]]:
    """What KafkaConsumerSavepoint.java gave each of its 2 subtasks: partitions dealt round-robin."""
    every = [("orders", p, 1000 + 10 * p) for p in range(5)] + [("ünï-çødé", p, 7 + p) for p in range(2)]
    return [every[0::2], every[1::2]]


def held(splits) -> list[list[tuple[str, int, int]]]:
    return [[(s.topic, s.partition, s.offset) for s in reader] for reader in splits.readers]


def test_real_savepoint_reads_as_the_job_held_it():
    with FlinkSavepoint.open(SAVEPOINT) as sp:
        op = sp.operator(OPERATOR)
        element = op.list_state(CONSUMER_STATE).element_type
        splits = source_splits(op)
        stored = [list(op.list_state(CONSUMER_STATE).partition(i)) for i in range(2)]
    # Kryo's snapshot is read to its end: the tuple's second field is the Long, not a guess inside Kryo's
    assert element.describe() == ("tuple<kryo:org.apache.flink.streaming.connectors.kafka.internals."
                                  "KafkaTopicPartition,int64>")
    assert splits.source == "kafka-consumer" and splits.enumerator is None
    assert held(splits) == truth()
    assert [[encode_split(s) for s in reader] for reader in splits.readers] == stored


def test_import_keeps_the_elements_and_inspect_shows_them(tmp_path, capsys):
    import_flink(str(SAVEPOINT), str(tmp_path / "imported"))
    splits = source_splits(Savepoint.open(tmp_path / "imported").operator(OPERATOR))
    assert held(splits) == truth()
    assert main(["inspect", str(tmp_path / "imported"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (op,) = [o for o in report["operators"] if o["operator_id"] == OPERATOR]
    assert [(e["topic"], e["partition"], e["offset"]) for e in op["source"]["readers"][1]] == truth()[1]
    assert main(["inspect", str(SAVEPOINT)]) == 0
    assert "reader 1: ünï-çødé/0 offset 7 (resumes at 8)" in capsys.readouterr().out


def test_set_source_position_moves_offsets_as_the_consumer_resumes(tmp_path, capsys):
    """--kafka-offset T:P=N means "read from N on", as for a KafkaSource: the consumer stores N - 1
    (the last record it emitted), and the sentinel for -2 (earliest)."""
    import_flink(str(SAVEPOINT), str(tmp_path / "imported"))
    assert main(["set-source-position", str(tmp_path / "imported"), str(tmp_path / "moved"), OPERATOR,
                 "--kafka-offset", "orders:3=5000", "--kafka-offset", "ünï-çødé:0=-2"]) == 0
    capsys.readouterr()
    moved = held(source_splits(Savepoint.open(tmp_path / "moved").operator(OPERATOR)))
    expected = truth()
    expected[1] = [("orders", 1, 1010), ("orders", 3, 4999), ("ünï-çødé", 0, EARLIEST)]
    assert moved == expected
    assert main(["set-source-position", str(tmp_path / "imported"), str(tmp_path / "x"), OPERATOR,
                 "--kafka-offset", "orders:9=1", "--json"]) == 2
    error = json.loads(capsys.readouterr().out)["error"]
    assert "orders:9" in error and "orders:3" in error and "ünï-çødé:1" in error
    with pytest.raises(InvalidArgumentError, match="-7"):
        rewrite_source_splits(tmp_path / "imported", tmp_path / "y", OPERATOR, kafka_offsets({("orders", 0): -7}))
    assert not (tmp_path / "y").exists()


def test_every_truncation_and_byte_flip_is_a_typed_error_or_a_value():
    data = bytes.fromhex(next(v["bytes"] for v in VECTORS["elements"] if v["topic"] == "ünï-çødé"))
    for end in range(len(data)):
        with pytest.raises(CorruptSavepointError, match="Kafka consumer offset element"):
            decode_consumer_partition(data[:end], state="op/topic-partition-offset-states subtask 0 element 3")
    for at in range(len(data)):
        for flip in (0x01, 0x40, 0x80, 0xFF):
            damaged = data[:at] + bytes([data[at] ^ flip]) + data[at + 1:]
            try:
                entry = decode_consumer_partition(damaged)
            except CorruptSavepointError:
                continue
            assert at >= len(data) - 8 or entry.kryo_registration != 0x57  # only the offset may change silently


@pytest.mark.parametrize("element, says", [
    (bytes.fromhex("5702") + b"\x06\x06\x01\x81" + bytes(8), "not written in full"),  # a back reference
    (bytes.fromhex("5701") + b"\x08\x06\x01\x81" + bytes(8), "cachedHash 4 is not that of topic ''"),
    (bytes.fromhex("5701") + b"\x06\x06\x01\x81" + bytes(9), "9 bytes after the partition"),
    (bytes.fromhex("5701") + b"\x06\x06\x01\x80" + bytes(8), "the topic is null"),
    (bytes.fromhex("5701") + b"\x06\x06\x01\xff\xff\xff\xff\x0f" + bytes(8), "more than the bytes left"),
    (bytes.fromhex("5701") + b"\xff\xff\xff\xff\x7f", "does not fit 32 bits"),
    (bytes.fromhex("5701") + b"\x06\x06\x01\x82\xf8" + bytes(8), "starts no character"),
    (b"\x01\x00\x82\x58" + bytes.fromhex("5701") + b"\x06\x06\x01\x81" + bytes(8), "the class is 'X'"),
    (b"\x00", "a null KafkaTopicPartition"),
])
def test_damaged_elements_say_what(element, says):
    with pytest.raises(CorruptSavepointError, match=says):
        decode_consumer_partition(element)


def test_a_class_written_by_name_reads_and_writes_back():
    entry = KafkaConsumerPartition("orders", 3, 42)
    data = encode_consumer_partition(entry)
    assert data.startswith(b"\x01\x00") and decode_consumer_partition(data) == entry
    with pytest.raises(InvalidArgumentError, match="out of range"):
        encode_consumer_partition(KafkaConsumerPartition("orders", 1 << 31, 0))


def test_kryo_snapshot_with_serializer_instances_is_stepped_over_exactly():
    """A Kryo registration with a serializer instance, and a default serializer instance, are
    Java-serialized, inside frames of Flink's LinkedOptionalMap: read exactly, the snapshot after
    them is found (it was guessed by resynchronising, and a name inside the registrations taken for it)."""
    def utf(text: str) -> bytes:
        return struct.pack(">H", len(text)) + text.encode()

    def optional_map(entries: list[tuple[str, bytes, bytes]]) -> bytes:
        out = struct.pack(">qi", 0x4F2C69A3D70, len(entries))
        for name, key, value in entries:
            out += utf(name) + b"\x01" + struct.pack(">i", len(key)) + key + b"\x01" + struct.pack(">i", len(value)) + value
        return out

    kryo_class = "org.apache.flink.api.java.typeutils.runtime.kryo.KryoSerializerSnapshot"
    java_object = b"\xac\xed\x00\x05sr\x00" + utf("org.apache.flink.api.common.typeutils.base.IntSerializer")[2:]
    kryo = (utf(kryo_class) + struct.pack(">i", 2) + utf("com.example.Event")
            + optional_map([("com.example.Event", utf("com.example.Event"),
                             utf("com.example.Event") + struct.pack(">i", 2) + java_object)])
            + optional_map([("java.util.UUID", utf("java.util.UUID"), java_object)]) + optional_map([]))
    long_snapshot = utf("org.apache.flink.api.common.typeutils.base.LongSerializer$LongSerializerSnapshot") + \
        struct.pack(">i", 3)
    data = kryo + long_snapshot
    inp = DataInput(data, 0, len(data))
    parsed = read_versioned_snapshot(inp, None)
    assert (parsed.kind, parsed.type_name, inp.pos) == ("kryo", "com.example.Event", len(kryo))
    assert read_versioned_snapshot(inp, None).kind == "int64" and inp.pos == len(data)


def test_an_offset_no_consumer_resumes_from_is_corrupt():
    """The consumer seeks to the stored offset + 1: below -1, other than a sentinel, Kafka refuses it (a flipped
    high bit of the offset read as a valid, negative position)."""
    for offset in (-1, 0, EARLIEST, -915623761773):
        assert decode_consumer_partition(encode_consumer_partition(KafkaConsumerPartition("t", 0, offset))).offset == offset
    data = encode_consumer_partition(KafkaConsumerPartition("t", 0, -2))
    with pytest.raises(CorruptSavepointError, match="offset -2 of topic 't' partition 0 is neither") as info:
        decode_consumer_partition(data)
    assert info.value.byte_range == (len(data) - 8, len(data))


def test_elements_naming_the_class_otherwise_than_the_others_are_corrupt(tmp_path):
    """One serializer writes every element of the state: one naming KafkaTopicPartition by another Kryo
    registration (a damaged class byte) read as a valid partition, which Flink would read as another class."""
    with FlinkSavepoint.open(SAVEPOINT) as sp:
        stored = [list(sp.operator(OPERATOR).list_state(CONSUMER_STATE).partition(i)) for i in range(2)]
    assert {e[0] for reader in stored for e in reader} == {0x57}
    data = (SAVEPOINT / "_metadata").read_bytes()
    element = stored[1][2]
    assert data.count(element) == 1
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    (damaged / "_metadata").write_bytes(data.replace(element, b"\x58" + element[1:]))
    with FlinkSavepoint.open(damaged) as sp:
        with pytest.raises(CorruptSavepointError, match="written as Kryo registration 86, the state's first "
                                                        "element's as Kryo registration 85") as info:
            source_splits(sp.operator(OPERATOR))
    assert info.value.state == f"{OPERATOR}/{CONSUMER_STATE} subtask 1 element 2"
