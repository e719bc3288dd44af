"""The writer's buffers hold what they account for, and nothing of the caller's batches
(issue 9, item 11: at max parallelism 32768, per-key-group slices kept whole batches
alive, peak RSS grew with the state, and adds were 10x slower than at 128).

Speed and RSS are measured by bench/writer_memory.py; these tests check the mechanism."""

from __future__ import annotations

import gc
import types
import weakref

import numpy as np
import pyarrow as pa
import pytest

from pyref import Savepoint, SavepointWriter
from pyref.key_groups import compute_key_groups
from pyref.serializers import Bytes, Int64


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


@pytest.mark.parametrize("max_parallelism", [128, 32768])
def test_buffered_bytes_are_what_the_buffers_hold_whatever_the_key_groups(tmp_path, max_parallelism):
    """The budget counts every byte held (cells, offsets, slots), so it bounds memory; the
    number of arrays held grows with the adds, not with adds x key groups."""
    adds, rows = 10, 2000
    rng = np.random.default_rng(1)
    with SavepointWriter(str(tmp_path / "sp"), buffer_bytes=1 << 20, chunk_bytes=256 << 10) as w:
        state = _keyed(w, max_parallelism)
        _, empty = _held(w.operators)  # what an empty state holds whatever is added (counters)
        for i in range(adds):
            keys = pa.array(rng.integers(0, 2**40, rows), pa.int64())
            state.add(keys, [bytes(80)] * rows)
            arrays, held = _held(w.operators)
            # What is held beyond the buffered rows is per key group, fixed (spilled rows' costs).
            assert w._budget.used <= held - empty <= w._budget.used + 8 * max_parallelism
            assert w._budget.used <= 1 << 20
            assert arrays <= 2 * (i + 1)  # two columns (key, value) per add at most
    assert sum(c.row_count for c in Savepoint.open(tmp_path / "sp").manifest.operators[0].keyed_states[0].chunks) == (
        adds * rows)


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
