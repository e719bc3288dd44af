"""The offsets a legacy ``FlinkKafkaConsumer`` keeps, decoded and encoded back.

The consumer of flink-connector-kafka before 4.0 (Flink 1.x; FLIP-27's ``KafkaSource``
replaced it, :mod:`pyref.flink.sources`) keeps one union list state,
``topic-partition-offset-states``, of ``Tuple2<KafkaTopicPartition, Long>``: an element
per partition a subtask read, the partition written by Flink's ``KryoSerializer`` (Kryo
2.24, references on, the class registered) and the offset as a big-endian long. The
offset is that of the last record the consumer emitted from the partition (it resumes
at the next one) or one of the connector's sentinels (:data:`SENTINELS`).

An element (spec/security.md §5.1 has the byte layout)::

    varint   the class: Kryo registration id + 2 (1: by name, then a name id and the name)
    varint   1, a new object (Kryo's reference marker)
    varint   cachedHash, zigzag: 31 * topic.hashCode() + partition
    varint   partition, zigzag
    varint   1, a new object (the topic string)
    string   topic, Kryo's: 2..63 ASCII characters with the last byte's high bit set, else
             a length (characters + 1; 0x80 flag, 0x40 "more") and each UTF-16 unit in
             1 to 3 bytes, as UTF-8 writes code points up to U+FFFF
    int64    offset, big-endian

A Kryo varint is 7 bits a byte, least significant first, the high bit saying "more";
zigzag maps 0, -1, 1, -2... to 0, 1, 2, 3....
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import ClassVar

from ..errors import InvalidArgumentError
from .datainput import DataInput, decode_utf16_units
from .dataoutput import varint

__all__ = ["CONSUMER_STATE", "KAFKA_TOPIC_PARTITION", "SENTINELS", "KafkaConsumerPartition", "stored_offset",
           "decode_consumer_partition", "encode_consumer_partition"]

#: ``FlinkKafkaConsumerBase.OFFSETS_STATE_NAME``.
CONSUMER_STATE = "topic-partition-offset-states"
#: The Kryo-serialized class of the tuple's first field.
KAFKA_TOPIC_PARTITION = "org.apache.flink.streaming.connectors.kafka.internals.KafkaTopicPartition"
#: ``KafkaTopicPartitionStateSentinel``: offsets that say where to start instead of where the consumer is.
SENTINELS = {-915623761776: "not set", -915623761775: "earliest", -915623761774: "latest",
             -915623761773: "committed"}
#: The sentinels of the starting positions a ``KafkaSplit`` writes as -2, -1 and -3.
_STARTING = {-2: -915623761775, -1: -915623761774, -3: -915623761773}
_BY_NAME = 1  # Kryo's NAME + 2: the class follows by name
_NEW_OBJECT = 1  # Kryo's NOT_NULL reference marker: an object written in full
_LONG = struct.Struct(">q")
_INT32 = 1 << 32
_ELEMENT = "Kafka consumer offset element"
_ASCII_MAX = 63  # Kryo writes 2..63 ASCII characters in its ASCII form


@dataclass(frozen=True)
class KafkaConsumerPartition:
    """A partition a legacy ``FlinkKafkaConsumer`` subtask read: ``offset`` is the last
    record's it emitted (it resumes at ``offset + 1``) or a sentinel (:data:`SENTINELS`);
    ``kryo_registration`` is how the bytes named the class (its Kryo registration id + 2,
    None: by name), kept to write them back alike."""

    kind: ClassVar[str] = "kafka-consumer"
    topic: str
    partition: int
    offset: int
    kryo_registration: int | None = None

    @property
    def split_id(self) -> str:
        return f"{self.topic}-{self.partition}"


def stored_offset(next_offset: int, what: str) -> int:
    """What the consumer stores to resume ``what`` at ``next_offset``: the offset before it,
    or for -2 (earliest), -1 (latest) and -3 (committed, KafkaSource's) the sentinel."""
    if next_offset >= 0:
        return next_offset - 1
    if next_offset not in _STARTING:
        raise InvalidArgumentError(f"Kafka offset {next_offset} for {what}: an offset is >= 0, or -2 (earliest), "
                                   "-1 (latest), -3 (committed)")
    return _STARTING[next_offset]


def _varint32(inp: DataInput, what: str) -> int:
    """A Kryo varint (the project's 7-bit groups, at most 5 bytes) that must fit 32 bits."""
    start = inp.pos
    value = inp.read_varint(f"{_ELEMENT}'s {what}")
    if value >= _INT32:
        raise inp.corrupt(f"{_ELEMENT}: {what} does not fit 32 bits", start, inp.pos - start)
    return value


def _zigzag_int(inp: DataInput, what: str) -> int:
    value = _varint32(inp, what)
    return (value >> 1) ^ -(value & 1)


def _new_object(inp: DataInput, what: str) -> None:
    start = inp.pos
    if _varint32(inp, f"{what} reference") != _NEW_OBJECT:
        raise inp.corrupt(f"{_ELEMENT}: the {what} is not written in full (a null or a back reference)", start,
                          inp.pos - start)


def _kryo_string(inp: DataInput, what: str) -> str:
    """``Output.writeString`` of Kryo 2.24: its ASCII form or a length and UTF-16 units."""
    start = inp.pos
    first = inp.read_ubyte(f"{_ELEMENT}'s {what}")
    if not first & 0x80:  # ASCII: up to the byte with the high bit set
        end = start
        while end < inp.end and inp.data[end] < 0x80:
            end += 1
        if end == inp.end:
            raise inp.corrupt(f"{_ELEMENT}: the {what} has no last character", start, end - start)
        inp.pos = end + 1
        return bytes(inp.data[start:end]).decode("ascii") + chr(inp.data[end] & 0x7F)
    length, shift, b = first & 0x3F, 6, first
    while b & (0x40 if shift == 6 else 0x80):
        if shift > 27:
            raise inp.corrupt(f"{_ELEMENT}: the {what}'s length is longer than 5 bytes", start, inp.pos - start)
        b = inp.read_ubyte(f"{_ELEMENT}'s {what} length")
        length |= (b & 0x7F) << shift
        shift += 7
    if length == 0:
        raise inp.corrupt(f"{_ELEMENT}: the {what} is null", start, inp.pos - start)
    if length - 1 > inp.remaining():  # at least a byte a character
        raise inp.corrupt(f"{_ELEMENT}: the {what} claims {length - 1} characters, more than the bytes left",
                          start, inp.pos - start)
    units = []
    for _ in range(length - 1):
        at = inp.pos
        b = inp.read_ubyte(f"{_ELEMENT}'s {what}")
        if b < 0x80:
            units.append(b)
        elif 0xC0 <= b < 0xE0:
            units.append((b & 0x1F) << 6 | _continuation(inp, what, at))
        elif 0xE0 <= b < 0xF0:
            units.append((b & 0x0F) << 12 | _continuation(inp, what, at) << 6 | _continuation(inp, what, at))
        else:
            raise inp.corrupt(f"{_ELEMENT}: the {what} has a byte 0x{b:02x} that starts no character", at, 1)
    return decode_utf16_units(units)


def _continuation(inp: DataInput, what: str, start: int) -> int:
    b = inp.read_ubyte(f"{_ELEMENT}'s {what}")
    if b & 0xC0 != 0x80:
        raise inp.corrupt(f"{_ELEMENT}: the {what} has a character cut short", start, inp.pos - start)
    return b & 0x3F


def _utf16_units(text: str) -> tuple[int, ...]:
    """``text`` as Java holds it: UTF-16 code units (little-endian bytes read as such on any machine)."""
    data = text.encode("utf-16-le", "surrogatepass")
    return struct.unpack(f"<{len(data) // 2}H", data)


def _java_hash(text: str) -> int:
    """``String.hashCode``: over UTF-16 units, 32-bit."""
    h = 0
    for unit in _utf16_units(text):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - _INT32 if h >= 1 << 31 else h


def _cached_hash(topic: str, partition: int) -> int:
    h = (31 * _java_hash(topic) + partition) & 0xFFFFFFFF
    return h - _INT32 if h >= 1 << 31 else h


def decode_consumer_partition(data: bytes, *, state: str = CONSUMER_STATE,
                              path: str | None = None) -> KafkaConsumerPartition:
    """One element of the consumer's state, read to its last byte; anything else (another
    class by name, a back reference, a ``cachedHash`` that is not the topic's and
    partition's, bytes left over) is a :class:`~pyref.errors.CorruptSavepointError` naming
    the byte range within the element."""
    inp = DataInput(bytes(data), state=state, path=path)
    registration = _varint32(inp, "class")
    if registration == _BY_NAME:
        _varint32(inp, "class name id")
        at = inp.pos
        name = _kryo_string(inp, "class name")
        if name != KAFKA_TOPIC_PARTITION:
            raise inp.corrupt(f"{_ELEMENT}: the class is {name!r}, not {KAFKA_TOPIC_PARTITION}", at, inp.pos - at)
    elif registration < 2:
        raise inp.corrupt(f"{_ELEMENT}: a null KafkaTopicPartition", 0, inp.pos)
    _new_object(inp, "KafkaTopicPartition")
    cached_hash, partition = _zigzag_int(inp, "cachedHash"), _zigzag_int(inp, "partition")
    _new_object(inp, "topic")
    topic = _kryo_string(inp, "topic")
    if cached_hash != _cached_hash(topic, partition):
        raise inp.corrupt(f"{_ELEMENT}: cachedHash {cached_hash} is not that of topic {topic!r} partition "
                          f"{partition} ({_cached_hash(topic, partition)})", 0, inp.pos)
    if inp.remaining() != 8:
        raise inp.corrupt(f"{_ELEMENT}: {inp.remaining()} bytes after the partition, not the offset's 8", inp.pos,
                          inp.remaining())
    at = inp.pos
    offset = inp.read_long(f"{_ELEMENT}'s offset")
    if offset < -1 and offset not in SENTINELS:  # the consumer seeks to offset + 1, which Kafka refuses below 0
        raise inp.corrupt(f"{_ELEMENT}: offset {offset} of topic {topic!r} partition {partition} is neither the last "
                          "record's (>= -1) nor a sentinel", at, 8)
    return KafkaConsumerPartition(topic, partition, offset, registration if registration != _BY_NAME else None)


def _zigzag(value: int) -> bytes:
    return varint(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def _string(text: str) -> bytes:
    units = _utf16_units(text)
    if 1 < len(units) <= _ASCII_MAX and all(u < 0x80 for u in units):
        raw = bytearray(text.encode("ascii"))
        raw[-1] |= 0x80
        return bytes(raw)
    length = len(units) + 1
    head = bytearray([length & 0x3F | 0x80 | (0x40 if length >> 6 else 0)])
    rest = length >> 6
    while rest:
        head.append(rest & 0x7F | (0x80 if rest >> 7 else 0))
        rest >>= 7
    body = bytearray()
    for u in units:
        if u < 0x80:
            body.append(u)
        elif u < 0x800:
            body += bytes([0xC0 | u >> 6, 0x80 | u & 0x3F])
        else:
            body += bytes([0xE0 | u >> 12, 0x80 | u >> 6 & 0x3F, 0x80 | u & 0x3F])
    return bytes(head + body)


def encode_consumer_partition(entry: KafkaConsumerPartition) -> bytes:
    """The bytes the consumer's serializer writes for ``entry``: under the Kryo registration id it
    was read with (else by name)."""
    if not -(1 << 31) <= entry.partition < 1 << 31 or not -(1 << 63) <= entry.offset < 1 << 63:
        raise InvalidArgumentError(f"Kafka partition {entry.partition} (an int) or offset {entry.offset} (a long) "
                                   "out of range")
    head = (varint(entry.kryo_registration) if entry.kryo_registration is not None
            else varint(_BY_NAME) + varint(0) + _string(KAFKA_TOPIC_PARTITION))
    return b"".join([head, varint(_NEW_OBJECT), _zigzag(_cached_hash(entry.topic, entry.partition)),
                     _zigzag(entry.partition), varint(_NEW_OBJECT), _string(entry.topic), _LONG.pack(entry.offset)])
