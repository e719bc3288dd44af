"""pyref's FLIP-27 source decoders and encoders against the sources' own serializers: every
vector in ``vectors.json`` (written once by ``generate.py`` from NumberSequenceSource,
FileSource and KafkaSource classes) decodes to the values that made it and encodes back to
its bytes exactly."""

from __future__ import annotations

import json
import pathlib

import pytest

from compat_tests._build import sha256_file
from pyref.flink.sources import (
    EnumeratorSplit,
    EnumeratorState,
    FileSplit,
    FileUri,
    KafkaSplit,
    NumberSequenceSplit,
    decode_coordinator_state,
    decode_split,
    encode_coordinator_state,
    encode_split,
)

HERE = pathlib.Path(__file__).resolve().parent
VECTORS = json.loads((HERE / "vectors.json").read_text(encoding="utf-8"))
#: The vectors are never regenerated or edited.
VECTORS_SHA256 = "32a5d2c5bf843c411cf62ad40bf3f71e33d5a589687013c26a861df92dfc2363"


def split_of(source: str, fields: dict):
    if source == "number-sequence":
        return NumberSequenceSplit(**fields)
    if source == "kafka":
        return KafkaSplit(**fields)
    path = FileUri(**fields["path"]) if fields["path"] is not None else None
    position = tuple(fields["reader_position"]) if fields["reader_position"] is not None else None
    return FileSplit(**{**fields, "path": path, "hostnames": tuple(fields["hostnames"]),
                        "reader_position": position})


def enumerator_of(vector: dict) -> EnumeratorState:
    splits = tuple(EnumeratorSplit(split_of(vector["source"], s["split"]), s["status"], s["subtask"])
                   for s in vector["splits"])
    optional = {name: tuple(vector[name]) if isinstance(vector.get(name), list) else vector.get(name)
                for name in ("initial_discovery_finished", "processed_paths", "subtasks")}
    return EnumeratorState(vector["serializer_version"], splits, **optional)


def test_vectors_are_as_written():
    assert sha256_file(HERE / "vectors.json") == VECTORS_SHA256


def test_every_source_and_kafka_version_is_covered():
    assert {v["source"] for v in VECTORS["splits"]} == {"number-sequence", "kafka", "file"}
    assert sorted(v["serializer_version"] for v in VECTORS["enumerators"] if v["source"] == "kafka") == [0, 1, 2, 3, 3]


@pytest.mark.parametrize("vector", VECTORS["splits"], ids=lambda v: f"{v['source']}-{v['name']}")
def test_split_decodes_to_its_values_and_encodes_to_its_bytes(vector):
    stored = bytes.fromhex(vector["bytes"])
    expected = split_of(vector["source"], vector["split"])
    assert decode_split(stored) == expected  # recognised without being told the source
    assert decode_split(stored, vector["source"]) == expected
    assert encode_split(expected) == stored


@pytest.mark.parametrize("vector", VECTORS["enumerators"], ids=lambda v: f"{v['source']}-{v['name']}")
def test_enumerator_decodes_to_its_values_and_encodes_to_its_bytes(vector):
    stored = bytes.fromhex(vector["coordinator_state"])
    expected = enumerator_of(vector)
    assert decode_coordinator_state(stored, vector["source"]) == expected
    assert encode_coordinator_state(vector["source"], expected) == stored


def test_file_path_reads_as_its_uri():
    paths = {v["name"]: str(split_of("file", v["split"]).path) for v in VECTORS["splits"] if v["source"] == "file"}
    assert paths == {"0000000001": "file:/data/in/part-0.csv",
                     "0000000002": "hdfs://reader@namenode:8020/logs/2026/äpfel.txt?v=2#frag",
                     "0000000003": "s3://bucket/x.json"}
