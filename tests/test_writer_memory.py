"""The writer's buffers hold what they account for, and nothing of the caller's batches
(issue 9, item 11: at max parallelism 32768, per-key-group slices kept whole batches
alive, peak RSS grew with the state, and adds were 10x slower than at 128). The format
1.2 parts go through the same buffers: namespace columns, TTL cells, timers, explicit
key groups and broadcast entries.

Speed and RSS are measured by bench/writer_memory.py; these tests check the mechanism."""

from __future__ import annotations

import gc
import types
import weakref

import numpy as np
import pyarrow as pa
import pytest

from pyref import Savepoint, SavepointWriter
from pyref import spill as spill_module
from pyref.key_groups import compute_key_groups
from pyref.serializers import Bytes, Int64, String, TimeWindow
from pyref.ttl import TtlConfig


def _binary(data: np.ndarray, width: int) -> pa.Array:
    n = len(data) // width
    offsets = pa.py_buffer((np.arange(n + 1, dtype=np.int32) * width).tobytes())
    return pa.Array.from_buffers(pa.binary(), n, [None, offsets, pa.py_buffer(data)])


def _held(root) -> tuple[int, int]:
    """Arrow arrays reachable from ``root``, and the bytes they and numpy arrays hold
    (each Arrow buffer once, whole: a slice keeps its parent's buffers alive)."""
    seen, stack, arrays, buffers, numpy_bytes = set(), [root], 0, {}, 0
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType)):
            continue
        seen.add(id(obj))
        if isinstance(obj, pa.Array):
            arrays += 1
            buffers.update((b.address, b.size) for b in obj.buffers() if b is not None)
        elif isinstance(obj, np.ndarray):
            numpy_bytes += obj.nbytes
        else:
            stack.extend(gc.get_referents(obj))
    return arrays, sum(buffers.values()) + numpy_bytes


def _keyed(w: SavepointWriter, max_parallelism: int):
    return w.add_operator("op", parallelism=1, max_parallelism=max_parallelism,
                          key_serializer=Int64()).keyed_state("v", Bytes())


#: Parts that buffer rows by key group, each with how ``add`` feeds it ``keys`` and a value
#: of ``size`` bytes per row: plain keyed state, a windowed (namespaced) TTL state, timers.
_KEY_GROUPED = {
    "keyed": (_keyed, lambda state, keys, size: state.add(keys, [bytes(size)] * len(keys))),
    "namespaced-ttl": (
        lambda w, p: w.add_operator("op", parallelism=1, max_parallelism=p, key_serializer=Int64()).keyed_state(
            "v", Bytes(), namespace_serializer=TimeWindow(), ttl=TtlConfig(60000)),
        lambda state, keys, size: state.add(keys, [bytes(size - 24)] * len(keys),
                                            namespaces=[(0, 60000)] * len(keys),
                                            ttl_timestamps=np.arange(len(keys), dtype=np.int64))),
    "timers": (
        lambda w, p: w.add_operator("op", parallelism=1, max_parallelism=p, key_serializer=Int64()).timer_service(
            "t", "event_time", namespace_serializer=TimeWindow()),
        lambda service, keys, size: service.add(keys, np.arange(len(keys), dtype=np.int64),
                                                [(0, size)] * len(keys))),
}


def test_no_part_of_a_callers_batch_is_kept_after_add_returns(tmp_path):
    """Rows already in key-group order were buffered as slices of the caller's arrays."""
    with SavepointWriter(str(tmp_path / "sp")) as w:
        state = _keyed(w, 32768)
        keys = pa.array(range(5000), pa.int64())
        groups = np.sort(compute_key_groups(keys, 32768, "int64"))  # in order: no sorting copy
        data = np.frombuffer(np.random.default_rng(0).bytes(5000 * 50), dtype=np.uint8).copy()
        alive = weakref.ref(data)
        values = _binary(data, 50)
        state.add_encoded([Int64().encode_array(keys), values], groups)
        assert alive() is not None  # the caller's array itself still holds it
        del values, data
        gc.collect()
        assert alive() is None, "the writer keeps the caller's value bytes alive"
        assert w._budget.used > 5000 * 50


@pytest.mark.parametrize("part", sorted(_KEY_GROUPED))
@pytest.mark.parametrize("max_parallelism", [128, 32768])
def test_buffered_bytes_are_what_the_buffers_hold_whatever_the_key_groups(tmp_path, max_parallelism, part):
    """The budget counts every byte held (cells, offsets, slots), so it bounds memory; the
    number of arrays held grows with the adds, not with adds x key groups. The same for a
    namespaced TTL state (a namespace column, timestamp-prefixed cells) and for timers."""
    adds, rows = 10, 2000
    rng = np.random.default_rng(1)
    open_part, add = _KEY_GROUPED[part]
    with SavepointWriter(str(tmp_path / "sp"), buffer_bytes=1 << 20, chunk_bytes=256 << 10) as w:
        state = open_part(w, max_parallelism)
        _, empty = _held(w.operators)  # what an empty state holds whatever is added (counters)
        for i in range(adds):
            keys = pa.array(rng.integers(0, 2**40, rows), pa.int64())
            add(state, keys, 80)
            arrays, held = _held(w.operators)
            # What is held beyond the buffered rows is per key group, fixed (spilled rows' costs).
            assert w._budget.used <= held - empty <= w._budget.used + 8 * max_parallelism
            assert w._budget.used <= 1 << 20
            assert arrays <= state.columns * (i + 1)  # the state's columns per add at most
    op = Savepoint.open(tmp_path / "sp").manifest.operators[0]
    (stored,) = [*op.keyed_states, *op.timer_services]
    assert sum(c.row_count for c in stored.chunks) == adds * rows


@pytest.mark.parametrize("max_parallelism", [128, 32768])
def test_flush_rounds_and_spills_keep_each_key_groups_rows_in_the_order_they_came(tmp_path, max_parallelism):
    """Rows of a key group wait across rounds (128 key groups: written as chunks; 32768:
    too many for the buffer, spilled and merged); the last value written for a key wins."""
    with SavepointWriter(str(tmp_path / "sp"), buffer_bytes=64 << 10, chunk_bytes=4 << 10) as w:
        state = _keyed(w, max_parallelism)
        for generation in range(20):
            keys = list(range(0, 2000, 1 + generation % 3))
            state.add(keys, [f"{generation}:{k}".encode() * 3 for k in keys])
        # One key group over the whole budget: merged a piece at a time.
        state.add([7] * 4000, [f"hot:{i}".encode() * 4 for i in range(4000)])
    view = Savepoint.open(tmp_path / "sp").operator("op").keyed_state("v")
    last = {}
    for generation in range(20):
        for k in range(0, 2000, 1 + generation % 3):
            last[k] = f"{generation}:{k}".encode() * 3
    last[7] = b"hot:3999" * 4
    assert all(view.get(k) == last[k] for k in range(0, 2000, 7))
    assert max(c.raw_length for c in view.proto.chunks) < 3 * (4 << 10)  # chunks cut at the chunk size
    assert sum(c.row_count for c in view.proto.chunks) == sum(len(range(0, 2000, 1 + g % 3)) for g in range(20)) + 4000


def _spills(monkeypatch) -> list[int]:
    """Rows each spill run takes (pyref/spill.py), recorded as the writer spills."""
    runs = []
    original = spill_module.SpillFile.add

    def add(self, columns, slots, costs):
        runs.append(len(slots))
        return original(self, columns, slots, costs)

    monkeypatch.setattr(spill_module.SpillFile, "add", add)
    return runs


def test_namespaced_ttl_rows_and_timers_spill_and_merge_in_the_order_they_came(tmp_path, monkeypatch):
    """At 32768 key groups a small buffer spills; every (key, window) keeps its last value
    and TTL timestamp, every timer comes back once, with explicit (writer-assigned) key
    groups taken as given."""
    spilled = _spills(monkeypatch)
    windows = [(0, 60000), (60000, 120000)]
    last, timers = {}, set()
    with SavepointWriter(str(tmp_path / "sp"), buffer_bytes=64 << 10, chunk_bytes=4 << 10) as w:
        op = w.add_operator("op", parallelism=2, max_parallelism=32768, key_serializer=String(), key_groups="writer")
        state = op.keyed_state("v", Bytes(), namespace_serializer=TimeWindow(), ttl=TtlConfig(60000))
        service = op.timer_service("t", "event_time", namespace_serializer=TimeWindow())
        for generation in range(12):
            keys = [f"k{k}" for k in range(0, 1500, 1 + generation % 3)]
            groups = [(7 * k) % 32768 for k in range(0, 1500, 1 + generation % 3)]  # not a hash pyref knows
            window = [windows[(k + generation) % 2] for k in range(len(keys))]
            values = [f"{generation}:{k}".encode() * 3 for k in keys]
            state.add(keys, values, namespaces=window, ttl_timestamps=[generation] * len(keys), key_groups=groups)
            service.add(keys, [generation * 1000 + (k % 5) for k in range(len(keys))], window, key_groups=groups)
            last.update({(k, n): (v, generation) for k, n, v in zip(keys, window, values)})
            timers.update((k, n, generation * 1000 + (i % 5)) for i, (k, n) in enumerate(zip(keys, window)))
    assert spilled, "the rows of 32768 key groups did not go through the spill file"
    sp = Savepoint.open(tmp_path / "sp")
    view = sp.operator("op").keyed_state("v")
    assert all(view.get(k, namespace=n, key_group=(7 * int(k[1:])) % 32768, with_ttl=True) == last[k, n]
               for k, n in list(last)[::37])
    assert {(k, n): (v, t) for k, n, v, t in view.items(with_ttl=True)}.keys() == last.keys()
    assert set(sp.operator("op").timer_service("t").timers()) == timers
    assert max(c.raw_length for c in view.proto.chunks) < 3 * (4 << 10)  # chunks cut at the chunk size
    assert [c.key_group for c in view.proto.chunks] == sorted(c.key_group for c in view.proto.chunks)


def test_broadcast_entries_are_buffered_within_the_budget_and_shared_once(tmp_path, monkeypatch):
    """Broadcast entries wait in the same buffers, spilled like the rest: one slot per
    subtask and one more for the map every subtask shares, whose chunks every partition
    refers to."""
    spilled = _spills(monkeypatch)
    parallelism = 300
    shared = {}
    with SavepointWriter(str(tmp_path / "sp"), buffer_bytes=64 << 10, chunk_bytes=4 << 10) as w:
        state = w.add_operator("op", parallelism=parallelism).broadcast_state("b", String(), Bytes())
        for subtask in range(parallelism):
            state.add(subtask, [f"own-{subtask}-{i}" for i in range(8)], [bytes(16)] * 8)
            if subtask % 30 == 29:  # shared entries come between, and wait with the rest
                batch = {f"shared-{subtask}-{i}": bytes([i]) * 8 for i in range(100)}
                state.add_all(list(batch), list(batch.values()))
                shared.update(batch)
            assert w._budget.used <= 64 << 10
    assert spilled, "300 slots of small maps in a 64 KiB buffer are spilled"
    view = Savepoint.open(tmp_path / "sp").operator("op").broadcast_state("b")
    in_every = set.intersection(*({r.chunk for r in p.ranges} for p in view.proto.partitions))
    assert sum(view.proto.chunks[c].row_count for c in in_every) == len(shared)  # stored once
    for subtask in (0, 149, 299):
        assert view.partition(subtask) == {**shared, **{f"own-{subtask}-{i}": bytes(16) for i in range(8)}}


@pytest.mark.parametrize("rows_per_add", [50, 5000])
def test_a_key_groups_rows_come_back_in_the_order_they_came_from_any_number_of_runs(tmp_path, monkeypatch,
                                                                                    rows_per_add):
    """Each add is kept ordered by key group, and a round writes a key group's pieces of every
    run in turn; many small adds (more pieces than MAX_PIECES_PER_SLOT a key group) are merged
    into one run first. Either way every key group's rows are stored in the order they were
    added, keys repeating in runs (a key under several windows) included."""
    from pyref import writer as writer_module

    merges = []
    original = writer_module._BufferedState._merged
    monkeypatch.setattr(writer_module._BufferedState, "_merged",
                        lambda self: merges.append(len(self._runs)) or original(self))
    total = 20_000
    keys = np.repeat(np.arange(total // 4, dtype=np.int64), 4)  # each key 4 times in a row
    with SavepointWriter(str(tmp_path / "sp"), buffer_bytes=1 << 20, chunk_bytes=16 << 10) as w:
        state = w.add_operator("op", parallelism=2, max_parallelism=128, key_serializer=Int64()).keyed_state(
            "v", Int64(), namespace_serializer=TimeWindow())
        for start in range(0, total, rows_per_add):
            part = slice(start, start + rows_per_add)
            state.add(pa.array(keys[part]), pa.array(np.arange(total, dtype=np.int64)[part]),
                      namespaces=[(i % 4, i % 4 + 1) for i in range(start, min(start + rows_per_add, total))])
    assert (merges != []) == (rows_per_add == 50)  # only many small adds need merging
    table = Savepoint.open(tmp_path / "sp").operator("op").keyed_state("v").to_arrow()
    assert table.num_rows == total
    groups, sequence = table.column("key_group").to_numpy(), table.column("value").to_numpy()
    assert (np.diff(groups) >= 0).all()  # state order: by key group
    for group in np.unique(groups):
        stored = sequence[groups == group]
        assert (np.diff(stored) > 0).all(), f"key group {group}: rows out of the order they came"
    expected = compute_key_groups(pa.array(keys), 128, "int64")
    assert (expected[sequence] == groups).all()
