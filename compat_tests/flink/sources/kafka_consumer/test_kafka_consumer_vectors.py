"""pyref's reader and writer of a legacy ``FlinkKafkaConsumer``'s offsets against the consumer's
own serializer: every element in ``vectors.json`` (written once by ``generate.py`` with Flink
1.20.3's ``TupleSerializer`` and ``KryoSerializer``, Kryo 2.24) decodes to the values that made
it and encodes back to its bytes exactly."""

from __future__ import annotations

import json
import pathlib

import pytest

from compat_tests._build import sha256_file
from pyref.flink.kafka_consumer import decode_consumer_partition, encode_consumer_partition

HERE = pathlib.Path(__file__).resolve().parent
VECTORS = json.loads((HERE / "vectors.json").read_text(encoding="utf-8"))
#: The vectors are never regenerated or edited.
VECTORS_SHA256 = "a4a80b984cd20564a9795b88769454c3237dca88dbd5af23444f855db0c6fc45"


def test_vectors_are_as_written():
    assert sha256_file(HERE / "vectors.json") == VECTORS_SHA256


def test_every_string_form_is_covered():
    """Kryo writes a topic in its ASCII form (2..63 ASCII characters) or as UTF-8 behind a length
    of one, two or three bytes: each is among the vectors."""
    topics = {v["topic"] for v in VECTORS["elements"]}
    assert {"", "t", "x" * 63, "y" * 64, "a" * 9000} <= topics
    assert any(ord(c) > 0xFFFF for t in topics for c in t) and any("\0" in t for t in topics)


@pytest.mark.parametrize("vector", VECTORS["elements"], ids=lambda v: f"{v['topic'][:12]}-{v['partition']}")
def test_vector_decodes_and_encodes_back(vector):
    data = bytes.fromhex(vector["bytes"])
    entry = decode_consumer_partition(data)
    assert (entry.topic, entry.partition, entry.offset) == (vector["topic"], vector["partition"], vector["offset"])
    assert encode_consumer_partition(entry) == data
