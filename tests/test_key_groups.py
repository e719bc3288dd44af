"""Key hashing and key-group assignment: the spec's test vectors, run
verbatim, and property tests of the vectorised path against the scalar one."""

from __future__ import annotations

import json
import math
import random
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyref import key_groups as kg
from pyref.errors import InvalidArgumentError
from pyref.key_groups import (
    UPPER_BOUND_MAX_PARALLELISM,
    KeyGroupRange,
    assign_to_key_group,
    check_parallelism,
    compute_key_groups,
    default_max_parallelism,
    java_hash,
    key_group_range,
    murmur_hash,
    operator_index_for_key_group,
)

VECTORS = Path(__file__).resolve().parents[1] / "spec" / "vectors"
FLINK = json.loads((VECTORS / "flink-key-groups.json").read_text(encoding="utf-8"))
EXTRA = json.loads((VECTORS / "java-key-hash-extra.json").read_text(encoding="utf-8"))

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---------------------------------------------------------------------------
# Helpers: JSON vector layout -> Python keys and Arrow arrays
# ---------------------------------------------------------------------------


def key_type_of(json_type: Any) -> kg.KeyType:
    """A vector's "type" (a name or a JSON array of types) as a KeyType."""
    if isinstance(json_type, list):
        return tuple(key_type_of(t) for t in json_type)
    return json_type


def key_of(json_type: Any, json_key: Any) -> Any:
    """A vector's "key" as a Python key (bytes are lowercase hex in JSON)."""
    if isinstance(json_type, list):
        return tuple(key_of(t, k) for t, k in zip(json_type, json_key))
    if json_type == "bytes":
        return bytes.fromhex(json_key)
    return json_key


def arrow_type(key_type: kg.KeyType) -> pa.DataType:
    if isinstance(key_type, tuple):
        return pa.struct([(f"f{i}", arrow_type(t)) for i, t in enumerate(key_type)])
    return {
        "int32": pa.int32(),
        "int64": pa.int64(),
        "string": pa.string(),
        "boolean": pa.bool_(),
        "bytes": pa.binary(),
        "int8": pa.int8(),
        "int16": pa.int16(),
        "float32": pa.float32(),
        "char": pa.uint16(),  # the code unit
    }[key_type]


def to_arrow_value(key: Any, key_type: kg.KeyType) -> Any:
    if isinstance(key_type, tuple):
        return {f"f{i}": to_arrow_value(k, t) for i, (k, t) in enumerate(zip(key, key_type))}
    return ord(key) if key_type == "char" else key


def arrow_keys(keys: list[Any], key_type: kg.KeyType) -> pa.Array:
    return pa.array([to_arrow_value(k, key_type) for k in keys], type=arrow_type(key_type))


def scalar_groups(keys: list[Any], max_parallelism: int, key_type: kg.KeyType) -> list[int]:
    return [assign_to_key_group(k, max_parallelism, key_type) for k in keys]


def assert_vectorised_matches(keys: list[Any], max_parallelism: int, key_type: kg.KeyType) -> None:
    expected = scalar_groups(keys, max_parallelism, key_type)
    got = compute_key_groups(arrow_keys(keys, key_type), max_parallelism, key_type)
    assert got.dtype == np.int32
    assert got.tolist() == expected


# ---------------------------------------------------------------------------
# Flink 2.3.0 vectors, verbatim
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("entry", FLINK["assign_to_key_group"], ids=lambda e: f"{e['type']}:{e['key']!r:.20}:{e['max_parallelism']}")
def test_flink_assign_to_key_group_scalar(entry: dict) -> None:
    assert assign_to_key_group(entry["key"], entry["max_parallelism"], entry["type"]) == entry["key_group"]


def test_flink_assign_to_key_group_vectorised() -> None:
    batches: dict[tuple[str, int], list[dict]] = defaultdict(list)
    for entry in FLINK["assign_to_key_group"]:
        batches[(entry["type"], entry["max_parallelism"])].append(entry)
    assert batches
    for (key_type, max_parallelism), entries in batches.items():
        keys = [e["key"] for e in entries]
        expected = [e["key_group"] for e in entries]
        array = arrow_keys(keys, key_type)
        assert compute_key_groups(array, max_parallelism, key_type).tolist() == expected
        # The same batch as a chunked array, in one-row chunks.
        chunked = pa.chunked_array([array.slice(i, 1) for i in range(len(array))], type=array.type)
        assert compute_key_groups(chunked, max_parallelism, key_type).tolist() == expected
        if key_type == "string":
            large = array.cast(pa.large_string())
            assert compute_key_groups(large, max_parallelism, key_type).tolist() == expected


def test_flink_strings_infer_key_type() -> None:
    for entry in FLINK["assign_to_key_group"]:
        if entry["type"] == "string":
            assert assign_to_key_group(entry["key"], entry["max_parallelism"]) == entry["key_group"]


@pytest.mark.parametrize("entry", FLINK["key_group_range"], ids=str)
def test_flink_key_group_range(entry: dict) -> None:
    r = key_group_range(entry["max_parallelism"], entry["parallelism"], entry["operator_index"])
    assert (r.first, r.last) == (entry["first_key_group"], entry["last_key_group"])


@pytest.mark.parametrize("entry", FLINK["operator_index_for_key_group"], ids=str)
def test_flink_operator_index_for_key_group(entry: dict) -> None:
    got = operator_index_for_key_group(entry["max_parallelism"], entry["parallelism"], entry["key_group"])
    assert got == entry["operator_index"]


@pytest.mark.parametrize("entry", FLINK["default_max_parallelism"], ids=str)
def test_flink_default_max_parallelism(entry: dict) -> None:
    assert default_max_parallelism(entry["parallelism"]) == entry["default_max_parallelism"]


# ---------------------------------------------------------------------------
# JVM-computed extra vectors (boolean, bytes, tuples, non-BMP strings)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("entry", EXTRA["murmur_hash"], ids=lambda e: str(e["code"]))
def test_extra_murmur_hash(entry: dict) -> None:
    assert murmur_hash(entry["code"]) == entry["murmur_hash"]


@pytest.mark.parametrize("entry", EXTRA["key_hash"], ids=lambda e: f"{e['type']}:{str(e['key'])[:20]}")
def test_extra_key_hash(entry: dict) -> None:
    key_type = key_type_of(entry["type"])
    key = key_of(entry["type"], entry["key"])
    assert java_hash(key, key_type) == entry["java_hash"]
    assert murmur_hash(entry["java_hash"]) == entry["murmur_hash"]


def test_extra_assign_to_key_group_scalar_and_vectorised() -> None:
    batches: dict[tuple[str, int], list[dict]] = defaultdict(list)
    for entry in EXTRA["assign_to_key_group"]:
        key_type = key_type_of(entry["type"])
        key = key_of(entry["type"], entry["key"])
        assert assign_to_key_group(key, entry["max_parallelism"], key_type) == entry["key_group"], entry
        batches[(json.dumps(entry["type"]), entry["max_parallelism"])].append(entry)
    for (json_type, max_parallelism), entries in batches.items():
        key_type = key_type_of(json.loads(json_type))
        keys = [key_of(json.loads(json_type), e["key"]) for e in entries]
        got = compute_key_groups(arrow_keys(keys, key_type), max_parallelism, key_type)
        assert got.tolist() == [e["key_group"] for e in entries], json_type


def test_extra_vectors_cover_the_brief() -> None:
    types = {json.dumps(e["type"]) for e in EXTRA["key_hash"]}
    assert {'"boolean"', '"bytes"', '["string", "int32"]', '["int64", "string", "boolean"]'} <= types
    hex_keys = [e["key"] for e in EXTRA["key_hash"] if e["type"] == "bytes"]
    assert "" in hex_keys and any(int(k[:2], 16) >= 0x80 for k in hex_keys if k)
    assert any(any(ord(c) > 0xFFFF for c in e["key"]) for e in EXTRA["key_hash"] if e["type"] == "string")
    assert any(e["murmur_hash"] == 0 for e in EXTRA["murmur_hash"])  # the Integer.MIN_VALUE fold


# ---------------------------------------------------------------------------
# Hand-checked values (the worked examples of spec/key-groups.md)
# ---------------------------------------------------------------------------


def test_worked_examples() -> None:
    assert java_hash("user-42", "string") == -147182656
    assert murmur_hash(-147182656) == 1600933524
    assert assign_to_key_group("user-42", 128) == 1600933524 % 128 == 20
    assert java_hash(9876543210123, "int64") == -1881568656
    assert murmur_hash(-1881568656) == 711197755
    assert assign_to_key_group(9876543210123, 128, "int64") == 711197755 % 128 == 59


def test_worked_example_of_changing_the_max_parallelism() -> None:
    # spec/key-groups.md §8.1
    assert [assign_to_key_group("user-42", m) for m in (128, 4096, 1000, 96)] == [20, 3732, 524, 84]


def test_java_hash_definitions() -> None:
    assert java_hash(-1, "int32") == -1
    assert java_hash(-1, "int64") == 0  # -1 ^ (-1 >>> 32) == 0xffffffff00000000
    assert java_hash(2**32, "int64") == 1
    assert java_hash(True, "boolean") == 1231 and java_hash(False, "boolean") == 1237
    assert java_hash(b"", "bytes") == 1 and java_hash("", "string") == 0
    assert java_hash(b"\xff", "bytes") == 31 - 1  # signed byte -1
    assert java_hash("\U0001F600", "string") == 0xD83D * 31 + 0xDE00  # surrogate pair
    assert java_hash(("a", 1), ("string", "int32")) == 31 * 97 + 1
    assert java_hash((7,), ("int32",)) == 7


# ---------------------------------------------------------------------------
# Vectorised == scalar (hypothesis)
# ---------------------------------------------------------------------------

max_parallelisms = st.sampled_from([1, 2, 7, 128, 1000, 4096, UPPER_BOUND_MAX_PARALLELISM])
int32s = st.integers(INT32_MIN, INT32_MAX)
int64s = st.integers(INT64_MIN, INT64_MAX)
# Short text over all of Unicode (hypothesis leaves out surrogates), plus
# repeated text to reach long keys cheaply.
short_texts = st.text(max_size=12)
texts = st.one_of(
    short_texts,
    st.text(alphabet=st.characters(max_codepoint=0x7F), max_size=40),
    st.builds(lambda s, n: s * n, st.text(min_size=1, max_size=5), st.integers(20, 400)),
)
byte_strings = st.one_of(st.binary(max_size=40), st.builds(lambda b, n: b * n, st.binary(min_size=1, max_size=4), st.integers(20, 300)))


@PROPERTY
@given(st.lists(texts, max_size=30), max_parallelisms)
def test_vectorised_strings(keys: list[str], max_parallelism: int) -> None:
    assert_vectorised_matches(keys, max_parallelism, "string")


@PROPERTY
@given(st.lists(int32s, max_size=30), max_parallelisms)
def test_vectorised_int32(keys: list[int], max_parallelism: int) -> None:
    assert_vectorised_matches(keys, max_parallelism, "int32")


@PROPERTY
@given(st.lists(int64s, max_size=30), max_parallelisms)
def test_vectorised_int64(keys: list[int], max_parallelism: int) -> None:
    assert_vectorised_matches(keys, max_parallelism, "int64")


@PROPERTY
@given(st.lists(byte_strings, max_size=30), max_parallelisms)
def test_vectorised_bytes(keys: list[bytes], max_parallelism: int) -> None:
    assert_vectorised_matches(keys, max_parallelism, "bytes")
    large = arrow_keys(keys, "bytes").cast(pa.large_binary())
    assert compute_key_groups(large, max_parallelism, "bytes").tolist() == scalar_groups(keys, max_parallelism, "bytes")


@PROPERTY
@given(st.lists(st.booleans(), max_size=30), max_parallelisms)
def test_vectorised_booleans(keys: list[bool], max_parallelism: int) -> None:
    assert_vectorised_matches(keys, max_parallelism, "boolean")


def _value_strategy(key_type: kg.KeyType) -> st.SearchStrategy:
    if isinstance(key_type, tuple):
        return st.tuples(*(_value_strategy(t) for t in key_type))
    return {
        "int32": int32s,
        "int64": int64s,
        "string": short_texts,
        "boolean": st.booleans(),
        "bytes": st.binary(max_size=12),
        "int8": st.integers(-(2**7), 2**7 - 1),
        "int16": st.integers(-(2**15), 2**15 - 1),
        "float32": st.floats(width=32),
        "char": st.integers(0, 0xFFFF).map(chr),  # lone surrogates included
    }[key_type]


scalar_types = st.sampled_from(sorted(kg.SCALAR_KEY_TYPES))
tuple_types = st.recursive(
    scalar_types,
    lambda inner: st.lists(inner, min_size=1, max_size=3).map(tuple),
    max_leaves=6,
).filter(lambda t: isinstance(t, tuple))


@PROPERTY
@given(st.data(), tuple_types, max_parallelisms)
def test_vectorised_tuples(data: st.DataObject, key_type: tuple, max_parallelism: int) -> None:
    keys = data.draw(st.lists(_value_strategy(key_type), max_size=20))
    assert_vectorised_matches(keys, max_parallelism, key_type)


def test_vectorised_batches_and_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    # Tiny batch limits force many batches, the byte cut, and a row larger
    # than the byte budget; sliced arrays exercise non-zero Arrow offsets.
    monkeypatch.setattr(kg, "_BATCH_ROWS", 7)
    monkeypatch.setattr(kg, "_BATCH_BYTES", 50)
    rng = random.Random(1234)
    alphabet = "ab-_09xyzé日\U0001F600"
    strings = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30))) for _ in range(200)]
    strings[17] = "k" * 500
    blobs = [rng.randbytes(rng.randint(0, 30)) for _ in range(200)]
    ints = [rng.randint(INT64_MIN, INT64_MAX) for _ in range(200)]
    for keys, key_type in ((strings, "string"), (blobs, "bytes"), (ints, "int64")):
        array = arrow_keys(keys, key_type)
        expected = scalar_groups(keys, 4096, key_type)
        assert compute_key_groups(array, 4096, key_type).tolist() == expected
        assert compute_key_groups(array.slice(13, 101), 4096, key_type).tolist() == expected[13:114]
    tuple_type = ("string", ("bytes", "int64"))
    keys = list(zip(strings, zip(blobs, ints)))
    array = arrow_keys(keys, tuple_type)
    expected = scalar_groups(keys, 128, tuple_type)
    assert compute_key_groups(array, 128, tuple_type).tolist() == expected
    assert compute_key_groups(array.slice(50, 60), 128, tuple_type).tolist() == expected[50:110]


def test_vectorised_other_arrow_layouts() -> None:
    blobs = [b"\x80\x81", b"\x00\xff", b"ab"]
    fixed = pa.array(blobs, type=pa.binary(2))
    assert compute_key_groups(fixed, 128, "bytes").tolist() == scalar_groups(blobs, 128, "bytes")
    assert compute_key_groups(pa.array([], type=pa.string()), 128, "string").tolist() == []
    assert compute_key_groups(pa.array(["", ""]), 7, "string").tolist() == scalar_groups(["", ""], 7, "string")
    assert compute_key_groups(pa.chunked_array([], type=pa.int32()), 7, "int32").tolist() == []


# ---------------------------------------------------------------------------
# Runs of repeated keys: each run's first key is hashed, its group repeated
# ---------------------------------------------------------------------------


def _in_runs(keys: list[Any], lengths: list[int]) -> list[Any]:
    """Each key repeated as many times as ``lengths`` says (cycled), as a key under many
    namespaces is stored."""
    return [k for k, n in zip(keys, lengths * len(keys)) for _ in range(n)]


run_lengths = st.lists(st.integers(1, 6), min_size=1, max_size=5)


@PROPERTY
@given(st.lists(texts, min_size=1, max_size=12), run_lengths, max_parallelisms)
def test_repeated_strings_hash_by_runs_like_one_by_one(keys: list[str], lengths: list[int],
                                                        max_parallelism: int) -> None:
    assert_vectorised_matches(_in_runs(keys, lengths), max_parallelism, "string")


@PROPERTY
@given(st.lists(byte_strings, min_size=1, max_size=12), run_lengths, max_parallelisms)
def test_repeated_bytes_hash_by_runs_like_one_by_one(keys: list[bytes], lengths: list[int],
                                                      max_parallelism: int) -> None:
    assert_vectorised_matches(_in_runs(keys, lengths), max_parallelism, "bytes")


@PROPERTY
@given(st.data(), tuple_types, run_lengths, max_parallelisms)
def test_repeated_tuples_hash_by_runs_like_one_by_one(data: st.DataObject, key_type: tuple, lengths: list[int],
                                                       max_parallelism: int) -> None:
    keys = data.draw(st.lists(_value_strategy(key_type), min_size=1, max_size=10))
    assert_vectorised_matches(_in_runs(keys, lengths), max_parallelism, key_type)


def test_runs_are_hashed_once_where_keys_repeat_and_row_by_row_where_they_do_not() -> None:
    """The run path is taken where it pays, and gives every row the key group of its own
    key: variable-width and non-ASCII keys, tuples, sliced arrays, runs cut by a batch."""
    strings = _in_runs(["k", "kéy-日本", "\U0001F600x", "", "a much longer key of its own"], [10, 3])
    array = arrow_keys(strings, "string")
    assert kg._run_starts(array, "string").tolist() == [0, 10, 13, 23, 26]
    assert kg._run_starts(arrow_keys(list("abcdefgh"), "string"), "string") is None  # no repeats
    assert kg._run_starts(arrow_keys([1, 1, 1, 1], "int64"), "int64") is None  # a number hashes cheaper
    expected = scalar_groups(strings, 32768, "string")
    assert compute_key_groups(array, 32768, "string").tolist() == expected
    assert compute_key_groups(array.slice(5, 20), 32768, "string").tolist() == expected[5:25]
    # A tuple's row repeats only if every field does: "b" then "b", 1 then 2 are two runs.
    tuple_type = ("string", "int64")
    pairs = [("a", 1)] * 4 + [("b", 1)] * 4 + [("b", 2)] * 4 + [("a", 1)] * 4
    assert kg._run_starts(arrow_keys(pairs, tuple_type), tuple_type).tolist() == [0, 4, 8, 12]
    assert compute_key_groups(arrow_keys(pairs, tuple_type), 4096, tuple_type).tolist() == \
        scalar_groups(pairs, 4096, tuple_type)
    # Floats compare by bits: 0.0 and -0.0 are equal numbers with different hashes.
    zeros = [("z", 0.0)] * 3 + [("z", -0.0)] * 3
    starts = kg._run_starts(arrow_keys(zeros, ("string", "float32")), ("string", "float32"))
    assert starts.tolist() == [0, 3]
    assert compute_key_groups(arrow_keys(zeros, ("string", "float32")), 32768, ("string", "float32")).tolist() == \
        scalar_groups(zeros, 32768, ("string", "float32"))


@PROPERTY
@given(st.integers(0, 24), st.lists(st.integers(0, 3), min_size=0, max_size=40), st.integers(0, 3),
       st.sampled_from([pa.binary(), pa.large_binary()]))
def test_byte_runs_of_fixed_width_cells(width: int, cells: list[int], cut: int, arrow_type: pa.DataType) -> None:
    """Cells of one width are compared as numpy rows (by 8, 4, 2 or 1 bytes at a time, so
    every width, sliced arrays and large offsets are covered); each cell differs from
    another only in its last byte, which the row comparison must not miss."""
    values = [bytes(width - 1) + bytes([c]) if width else b"" for c in cells]
    array = pa.array(values, arrow_type).slice(min(cut, len(values)))
    values = values[min(cut, len(values)):]
    expected = [values[i] == values[i - 1] for i in range(1, len(values))]
    assert kg.binary_same_as_previous(array).tolist() == expected
    assert kg.run_starts(array).tolist() == [i for i in range(len(values)) if i == 0 or not expected[i - 1]]


@PROPERTY
@given(st.lists(st.sampled_from([b"", b"a", b"ab", b"b", b"abc"]), max_size=30))
def test_byte_runs_of_cells_of_several_widths(values: list[bytes]) -> None:
    expected = [values[i] == values[i - 1] for i in range(1, len(values))]
    assert kg.binary_same_as_previous(pa.array(values, pa.binary())).tolist() == expected
    assert kg.run_starts(pa.array(values, pa.binary())).tolist() == \
        [i for i in range(len(values)) if i == 0 or not expected[i - 1]]


def test_runs_cut_by_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kg, "_BATCH_ROWS", 7)
    keys = _in_runs([f"key-{i}-é" for i in range(40)], [5, 1, 9])
    array = arrow_keys(keys, "string")
    assert compute_key_groups(array, 128, "string").tolist() == scalar_groups(keys, 128, "string")
    assert compute_key_groups(pa.chunked_array([array.slice(0, 33), array.slice(33)]), 128, "string").tolist() == \
        scalar_groups(keys, 128, "string")


def test_a_null_in_a_run_of_keys_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="null"):
        compute_key_groups(pa.array(["a", "a", "a", None, None, "b", "b", "b"]), 128, "string")
    with pytest.raises(InvalidArgumentError, match="null"):
        compute_key_groups(pa.array([{"s": "a", "f": 1.0}] * 3 + [{"s": "a", "f": None}] * 3,
                                    pa.struct([("s", pa.string()), ("f", pa.float32())])), 128, ("string", "float32"))


# ---------------------------------------------------------------------------
# Key-group ranges
# ---------------------------------------------------------------------------


@PROPERTY
@given(st.integers(1, UPPER_BOUND_MAX_PARALLELISM), st.data())
def test_ranges_partition_the_key_groups(max_parallelism: int, data: st.DataObject) -> None:
    parallelism = data.draw(st.integers(1, min(max_parallelism, 64)))
    ranges = [key_group_range(max_parallelism, parallelism, i) for i in range(parallelism)]
    assert ranges[0].first == 0 and ranges[-1].last == max_parallelism - 1
    for a, b in zip(ranges, ranges[1:]):
        assert a.last + 1 == b.first
    for g in data.draw(st.lists(st.integers(0, max_parallelism - 1), max_size=10)):
        assert g in ranges[operator_index_for_key_group(max_parallelism, parallelism, g)]


def test_key_group_range_class() -> None:
    r = KeyGroupRange(3, 6)
    assert len(r) == 4 and list(r) == [3, 4, 5, 6]
    assert 3 in r and 6 in r and 7 not in r and 2 not in r and "3" not in r
    assert r.intersection(KeyGroupRange(5, 9)) == KeyGroupRange(5, 6)
    empty = r.intersection(KeyGroupRange(7, 9))
    assert empty == KeyGroupRange.empty() and len(empty) == 0 and list(empty) == []
    assert 0 not in empty
    with pytest.raises(InvalidArgumentError):
        KeyGroupRange(-1, 3)
    with pytest.raises(InvalidArgumentError):
        KeyGroupRange(5, 3)
    with pytest.raises(AttributeError):
        r.first = 0  # type: ignore[misc]


# ---------------------------------------------------------------------------
# Argument validation
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        lambda: java_hash(2**31, "int32"),
        lambda: java_hash(INT32_MIN - 1, "int32"),
        lambda: java_hash(2**63, "int64"),
        lambda: java_hash(True, "int32"),
        lambda: java_hash(1.5, "int64"),
        lambda: java_hash(b"x", "string"),
        lambda: java_hash("x", "bytes"),
        lambda: java_hash(1, "boolean"),
        lambda: java_hash(("a",), ("string", "int32")),
        lambda: java_hash("a", ("string",)),
        lambda: java_hash(1, "float"),
        lambda: java_hash((), ()),
        lambda: java_hash(1, ["int32"]),
        lambda: assign_to_key_group(42, 128),
        lambda: assign_to_key_group(("a", 1), 128),
        lambda: assign_to_key_group(1.0, 128),
        lambda: assign_to_key_group((), 128),
        lambda: assign_to_key_group("a", 0),
        lambda: assign_to_key_group("a", UPPER_BOUND_MAX_PARALLELISM + 1),
        lambda: murmur_hash(2**31),
        lambda: compute_key_groups(pa.array([1], pa.int64()), 128, "int32"),
        lambda: compute_key_groups(pa.array([1], pa.int32()), 128, "int64"),
        lambda: compute_key_groups(pa.array(["a", None]), 128, "string"),
        lambda: compute_key_groups(pa.array([b"a"]), 128, "string"),
        lambda: compute_key_groups(pa.array(["a"]), 128, "bytes"),
        lambda: compute_key_groups(pa.array([1], pa.int8()), 128, "boolean"),
        lambda: compute_key_groups(pa.array([{"a": 1}], pa.struct([("a", pa.int32())])), 128, ("int32", "int32")),
        lambda: compute_key_groups(pa.array([1], pa.int32()), 128, ("int32",)),
        lambda: compute_key_groups([1, 2], 128, "int32"),
        lambda: compute_key_groups(pa.array([1], pa.int32()), 0, "int32"),
        lambda: check_parallelism(0, 128),
        lambda: check_parallelism(129, 128),
        lambda: check_parallelism(1, UPPER_BOUND_MAX_PARALLELISM + 1),
        lambda: check_parallelism(True, 128),
        lambda: key_group_range(128, 4, 4),
        lambda: key_group_range(128, 4, -1),
        lambda: key_group_range(2, 4, 0),
        lambda: operator_index_for_key_group(128, 4, 128),
        lambda: operator_index_for_key_group(128, 4, -1),
        lambda: operator_index_for_key_group(128, 0, 0),
        lambda: default_max_parallelism(0),
        lambda: default_max_parallelism(UPPER_BOUND_MAX_PARALLELISM + 1),
    ],
)
def test_invalid_arguments(call: Any) -> None:
    with pytest.raises(InvalidArgumentError):
        call()


def test_error_messages_name_the_values() -> None:
    with pytest.raises(InvalidArgumentError, match="parallelism=200.*max_parallelism=128"):
        check_parallelism(200, 128)
    with pytest.raises(InvalidArgumentError, match="explicit key_type"):
        assign_to_key_group(7, 128)


@PROPERTY
@given(max_parallelisms, max_parallelisms)
def test_key_groups_agree_modulo_the_gcd_of_two_max_parallelisms(old: int, new: int) -> None:
    # spec/key-groups.md §8.1: what lets a max-parallelism change run without a shuffle.
    keys = pa.array([f"user-{i}" for i in range(2000)])
    d = math.gcd(old, new)
    np.testing.assert_array_equal(compute_key_groups(keys, old, "string") % d,
                                  compute_key_groups(keys, new, "string") % d)
