"""Write then read every state kind, mode, serializer and codec."""

from __future__ import annotations

import json
import random

import numpy as np
import pyarrow as pa
import pytest

from pyref import Savepoint, SavepointWriter
from pyref._proto.savepoint.v1 import manifest_pb2 as pb
from pyref.codecs import Codec, may_pay
from pyref.redistribution import DistributionMode
from pyref.serializers import (
    Boolean,
    Bytes,
    Float64,
    Int32,
    Int64,
    Json,
    ListOf,
    MapOf,
    Nullable,
    String,
    Tuple,
)

SERIALIZED_VALUES = [
    (Int32(), [0, -1, 2**31 - 1, -(2**31)]),
    (Int64(), [0, -1, 2**63 - 1, -(2**63)]),
    (Float64(), [0.0, -1.5, 1e300]),
    (Boolean(), [True, False]),
    (String(), ["", "a", "ünïcödé", "日本語", "emoji 😀"]),
    (Bytes(), [b"", b"\x00\xff", b"abc"]),
    (Nullable(String()), [None, "x", None]),
    (Tuple(String(), Int32(), names=("url", "n")), [("a", 1), ("", -2)]),
    (ListOf(Int64()), [[], [1, 2, 3]]),
    (MapOf(String(), Int64()), [{}, {"a": 1, "b": 2}]),
    (Json(), [{"a": [1, 2, None]}, "text", 3, None]),
]


@pytest.mark.parametrize("serializer,values", SERIALIZED_VALUES, ids=lambda x: getattr(x, "serializer_id", ""))
@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_list_state_round_trip_every_serializer(tmp_path, serializer, values, codec):
    with SavepointWriter(str(tmp_path / "sp"), codec=codec, inline_bytes=0) as w:
        op = w.add_operator("op", parallelism=2)
        op.list_state("s", serializer).add(1, values)
    state = Savepoint.open(tmp_path / "sp").operator("op").list_state("s")
    assert list(state.partition(0)) == []
    assert list(state.partition(1)) == values
    assert state.element_counts() == [0, len(values)]


@pytest.mark.parametrize("serializer,values", SERIALIZED_VALUES, ids=lambda x: getattr(x, "serializer_id", ""))
def test_keyed_value_state_round_trip_every_serializer(tmp_path, serializer, values):
    keys = [f"k{i}" for i in range(len(values))]
    with SavepointWriter(str(tmp_path / "sp")) as w:
        op = w.add_operator("op", parallelism=3, key_serializer=String())
        op.keyed_state("s", serializer).add(keys, values)
    state = Savepoint.open(tmp_path / "sp").operator("op").keyed_state("s")
    assert dict(state.items()) == dict(zip(keys, values))
    for k, v in zip(keys, values):
        assert state.get(k) == v
    assert state.get("missing", "default") == "default"


@pytest.mark.parametrize("mode", list(DistributionMode))
def test_every_distribution_mode_round_trips(tmp_path, mode):
    with SavepointWriter(str(tmp_path / "sp")) as w:
        op = w.add_operator("op", parallelism=3)
        st = op.list_state("s", Int64(), mode)
        for sub in range(3):
            st.add(sub, [sub * 10, sub * 10 + 1])
    state = Savepoint.open(tmp_path / "sp").operator("op").list_state("s")
    assert state.mode == mode
    assert [list(state.partition(i)) for i in range(3)] == [[0, 1], [10, 11], [20, 21]]


def test_keyed_list_and_map_state(tmp_path):
    with SavepointWriter(str(tmp_path / "sp")) as w:
        op = w.add_operator("op", parallelism=2, key_serializer=Int64())
        op.keyed_state("carts", String(), kind="list").add([1, 2], [["apple", "pear"], []])
        op.keyed_state("prefs", Int32(), kind="map", user_key_serializer=String()).add(
            [1, 1, 2], [10, 20, 30], user_keys=["a", "b", "a"])
    op = Savepoint.open(tmp_path / "sp").operator("op")
    carts = op.keyed_state("carts")
    assert carts.kind == "list"
    assert carts.get(1) == ["apple", "pear"] and carts.get(2) == []
    prefs = op.keyed_state("prefs")
    assert prefs.get(1) == {"a": 10, "b": 20} and prefs.get(2) == {"a": 30}
    table = prefs.to_arrow()
    assert table.column_names == ["key_group", "key", "user_key", "value"]
    assert sorted(zip(table["key"].to_pylist(), table["user_key"].to_pylist(), table["value"].to_pylist())) == [
        (1, "a", 10), (1, "b", 20), (2, "a", 30)]


def test_tuple_keys_and_arrow_batches(tmp_path):
    keys = pa.array([{"f0": "u", "f1": i} for i in range(1000)], type=pa.struct([("f0", pa.string()), ("f1", pa.int32())]))
    with SavepointWriter(str(tmp_path / "sp"), chunk_bytes=256) as w:
        op = w.add_operator("op", parallelism=4, max_parallelism=32, key_serializer=Tuple(String(), Int32()))
        op.keyed_state("v", Int64()).add(keys, pa.array(range(1000), pa.int64()))
    state = Savepoint.open(tmp_path / "sp").operator("op").keyed_state("v")
    assert len(state.proto.chunks) > 32  # small chunks: several per key group
    table = state.to_arrow()
    assert sorted(table["value"].to_pylist()) == list(range(1000))
    assert state.get(("u", 7)) == 7


def test_many_small_adds_are_buffered_into_few_chunks(tmp_path):
    with SavepointWriter(str(tmp_path / "sp")) as w:
        st = w.add_operator("op", parallelism=1).list_state("s", Int64())
        for i in range(1000):
            st.add(0, [i])
    state = Savepoint.open(tmp_path / "sp").operator("op").list_state("s")
    assert len(state.proto.chunks) == 1
    assert list(state.partition(0)) == list(range(1000))


def test_buffer_budget_bounds_memory_by_flushing_largest_groups(tmp_path):
    n = 20_000
    with SavepointWriter(str(tmp_path / "sp"), chunk_bytes=1 << 20, buffer_bytes=1 << 20) as w:
        op = w.add_operator("op", parallelism=1, max_parallelism=4096, key_serializer=Int64())
        st = op.keyed_state("v", Bytes())
        for start in range(0, n, 1000):
            st.add(pa.array(range(start, start + 1000), pa.int64()), [b"x" * 100] * 1000)
            assert w._budget.used <= w._budget.limit
    state = Savepoint.open(tmp_path / "sp").operator("op").keyed_state("v")
    assert sum(c.row_count for c in state.proto.chunks) == n


def test_inline_small_state_lives_in_the_manifest(tmp_path):
    with SavepointWriter(str(tmp_path / "sp"), inline_bytes=4096) as w:
        w.add_operator("op", parallelism=1).list_state("s", String()).add(0, ["small"])
    sp = Savepoint.open(tmp_path / "sp")
    assert sp.manifest.operators[0].list_states[0].chunks[0].WhichOneof("location") == "inline_data"
    assert not (tmp_path / "sp" / "data").exists()
    assert list(sp.operator("op").list_state("s").partition(0)) == ["small"]


def test_json_values_decode_to_arrow_strings(tmp_path):
    with SavepointWriter(str(tmp_path / "sp")) as w:
        w.add_operator("op", parallelism=1).list_state("s", Json()).add(0, [{"b": 1}])
    arr = Savepoint.open(tmp_path / "sp").operator("op").list_state("s").arrow_ranges(
        Savepoint.open(tmp_path / "sp").manifest.operators[0].list_states[0].partitions[0].ranges)
    assert json.loads(arr[0].as_py()) == {"b": 1}


def test_incompressible_payloads_are_judged_by_slices_before_being_compressed_whole():
    rng = np.random.default_rng(3)
    noise = rng.bytes(1 << 20)
    assert not may_pay(Codec.ZSTD, noise)  # already compressed or encrypted state: kept raw
    assert may_pay(Codec.ZSTD, noise[:256 << 10])  # small payloads are always tried whole
    assert may_pay(Codec.ZSTD, bytes(rng.integers(0, 16, size=1 << 20, dtype=np.uint8)))  # 4 bits a byte
    # Rows of 1 KiB random and 1 KiB zeros: each slice saves about half, so the payload is compressed.
    assert may_pay(Codec.ZSTD, b"".join(noise[i:i + 1024] + bytes(1024) for i in range(0, 1 << 19, 1024)))
    assert may_pay(Codec.NONE, noise)


def test_large_chunks_of_noise_are_stored_raw_and_read_back(tmp_path):
    rng = np.random.default_rng(5)
    noise = [rng.bytes(4096) for _ in range(512)]  # 2 MiB of values: chunks of 1 MiB
    with SavepointWriter(str(tmp_path / "sp"), codec="zstd") as w:
        op = w.add_operator("op", parallelism=1, max_parallelism=1, key_serializer=Int64())
        op.keyed_state("noise", Bytes()).add(list(range(512)), noise)
        op.keyed_state("zeros", Bytes()).add(list(range(512)), [bytes(4096)] * 512)
    sp = Savepoint.open(tmp_path / "sp").operator("op")
    assert {c.codec for c in sp.keyed_state("noise").proto.chunks} == {pb.NONE}
    assert {c.codec for c in sp.keyed_state("zeros").proto.chunks} == {pb.ZSTD}
    assert sp.keyed_state("noise").to_arrow().column("value").to_pylist() == noise


def test_map_state_last_row_of_a_user_key_wins(tmp_path):
    with SavepointWriter(str(tmp_path / "sp")) as w:
        op = w.add_operator("op", parallelism=1, key_serializer=String())
        op.keyed_state("m", Int64(), kind="map", user_key_serializer=String()).add(
            ["k", "k", "k"], [1, 2, 3], user_keys=["a", "b", "a"])
    assert Savepoint.open(tmp_path / "sp").operator("op").keyed_state("m").get("k") == {"a": 3, "b": 2}


def test_compression_is_kept_only_when_it_saves_an_eighth(tmp_path):
    # spec/format.md §7.3: chunks that barely shrink are stored raw, sparing every read
    # a decompression. 1 KiB values: ~97 % random bytes (zstd saves ~3 %), or repeated.
    rng = random.Random(7)
    noisy = [bytes(rng.getrandbits(8) for _ in range(1000)) + b"\0" * 24 for _ in range(64)]
    with SavepointWriter(str(tmp_path / "sp"), codec="zstd", inline_bytes=0) as w:
        op = w.add_operator("op", parallelism=1)
        op.list_state("noisy", Bytes()).add(0, noisy)
        op.list_state("repeated", Bytes()).add(0, [b"abc" * 300] * 64)
    sp = Savepoint.open(tmp_path / "sp")
    noisy_chunks = sp.operator("op").list_state("noisy").proto.chunks
    assert {c.codec for c in noisy_chunks} == {pb.NONE}
    assert {c.codec for c in sp.operator("op").list_state("repeated").proto.chunks} == {pb.ZSTD}
    assert list(sp.operator("op").list_state("noisy").partition(0)) == noisy
