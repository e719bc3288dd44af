"""The key types format 1.2 adds (int8, int16, float32, char): the JVM's vectors
(spec/vectors/java-key-hash-1.2.json), scalar and vectorised."""

from __future__ import annotations

import json
import struct
from collections import defaultdict
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from pyref.key_groups import assign_to_key_group, compute_key_groups, java_hash, murmur_hash
from pyref.keys import as_key_array, key_type_of
from pyref.serializers import Char, Float32, Int8, Int16, Tuple

VECTORS = json.loads((Path(__file__).resolve().parents[1] / "spec" / "vectors" / "java-key-hash-1.2.json")
                     .read_text(encoding="utf-8"))
ARROW = {"int8": pa.int8(), "int16": pa.int16(), "float32": pa.float32(), "char": pa.uint16()}


def key_type(json_type):
    return tuple(key_type(t) for t in json_type) if isinstance(json_type, list) else json_type


def python_key(json_type, json_key):
    if isinstance(json_type, list):
        return tuple(python_key(t, k) for t, k in zip(json_type, json_key))
    if json_type == "float32":
        return struct.unpack("<f", bytes.fromhex(json_key)[::-1])[0]
    if json_type == "char":
        return chr(json_key)
    return json_key


def arrow_keys(json_type, json_keys) -> pa.Array:
    if isinstance(json_type, list):
        fields = [arrow_keys(t, [k[i] for k in json_keys]) for i, t in enumerate(json_type)]
        return pa.StructArray.from_arrays(fields, names=[f"f{i}" for i in range(len(fields))])
    if json_type == "float32":  # the exact bits, NaN payloads included
        bits = np.array([int(k, 16) for k in json_keys], np.uint32)
        return pa.array(bits.view(np.float32), pa.float32())
    return pa.array(json_keys, ARROW[json_type])


@pytest.mark.parametrize("entry", VECTORS["key_hash"], ids=lambda e: f"{e['type']}:{e['key']}")
def test_java_hash(entry):
    kt = key_type(entry["type"])
    assert java_hash(python_key(entry["type"], entry["key"]), kt) == entry["java_hash"]
    assert murmur_hash(entry["java_hash"]) == entry["murmur_hash"]


def test_key_groups_scalar_and_vectorised():
    batches = defaultdict(list)
    for e in VECTORS["assign_to_key_group"]:
        batches[(json.dumps(e["type"]), e["max_parallelism"])].append(e)
    for (json_type, max_parallelism), entries in batches.items():
        json_type = json.loads(json_type)
        kt = key_type(json_type)
        expected = [e["key_group"] for e in entries]
        assert [assign_to_key_group(python_key(json_type, e["key"]), max_parallelism, kt) for e in entries] == expected
        keys = arrow_keys(json_type, [e["key"] for e in entries])
        assert compute_key_groups(keys, max_parallelism, kt).tolist() == expected


def test_serializers_select_the_new_key_types():
    assert [key_type_of(s.snapshot()) for s in (Int8(), Int16(), Float32(), Char())] == [
        "int8", "int16", "float32", "char"]
    assert key_type_of(Tuple(Int8(), Char()).snapshot()) == ("int8", "char")
    # Python keys of a char serializer are one-character strings; their Arrow form is the code unit.
    assert as_key_array(["a", "\ud800"], Char()).to_pylist() == [97, 0xD800]
