"""Fragments, the unit of Spark work, without Spark: each carries only its chunks and files."""

from __future__ import annotations

import math
import pickle

import pyarrow as pa
import pytest

from pyref import InvalidArgumentError, Savepoint, SavepointWriter
from pyref._proto.savepoint.v1 import manifest_pb2 as pb
from pyref.key_groups import compute_key_groups
from pyref.restore import plan_list_state
from pyref.serializers import Int64, String
from pyref.spark.fragments import (
    Fragment,
    Run,
    Selection,
    StateScan,
    chunk_fragments,
    coalesce,
    keyed_batches,
    list_batches,
    list_fragments,
    residue_fragments,
)


def _savepoint(tmp_path):
    with SavepointWriter(str(tmp_path / "sp"), chunk_bytes=256, file_bytes=2048, inline_bytes=0) as w:
        op = w.add_operator("op", parallelism=3, key_serializer=String())
        op.keyed_state("count", Int64()).add([f"k{i}" for i in range(500)], list(range(500)))
        offsets = op.list_state("offsets", Int64())
        for subtask in range(3):
            offsets.add(subtask, list(range(subtask * 1000, subtask * 1000 + 40 * (subtask + 1))))
    return Savepoint.open(tmp_path / "sp")


def test_keyed_fragments_carry_only_their_files_and_read_back_every_entry(tmp_path):
    sp = _savepoint(tmp_path)
    op = sp.operator("op").proto
    state = op.keyed_states[0]
    fragments = [pickle.loads(pickle.dumps(f)) for f in chunk_fragments(sp, op, state, target_bytes=1500)]
    assert len(fragments) > 3
    assert sorted(i for f in fragments for i in f.chunk_indices) == list(range(len(state.chunks)))
    for f in fragments:
        manifest, operator = pb.Manifest.FromString(f.manifest), pb.Operator.FromString(f.operator)
        chunks = operator.keyed_states[0].chunks
        assert {c.range.file for c in chunks} == set(range(len(manifest.data_files)))  # nothing else
        assert len(manifest.data_files) < len(sp.manifest.data_files)
    decoded = pa.Table.from_batches([b for f in fragments for b in keyed_batches(f, raw=False)])
    assert decoded.sort_by("key").equals(sp.operator("op").keyed_state("count").to_arrow().sort_by("key"))
    raw = [b for f in fragments for b in keyed_batches(f, raw=True, target_parallelism=2)]
    assert sum(b.num_rows for b in raw) == 500 and raw[0].schema.names == ["key_group", "key", "value", "subtask"]


@pytest.mark.parametrize("new_max_parallelism", [4096, 96, 1000])
def test_residue_fragments_never_share_a_key_group_at_the_new_max_parallelism(tmp_path, new_max_parallelism):
    sp = _savepoint(tmp_path)
    op = sp.operator("op").proto
    state = op.keyed_states[0]
    classes = math.gcd(op.max_parallelism, new_max_parallelism)
    fragments = residue_fragments(sp, op, state, classes, parts=4)
    assert len(fragments) > 1
    assert sorted(i for f in fragments for i in f.chunk_indices) == list(range(len(state.chunks)))
    writer_of: dict[int, int] = {}
    for n, fragment in enumerate(fragments):
        keys = pa.concat_arrays([b.column("key") for b in keyed_batches(fragment, raw=False)])
        for group in set(compute_key_groups(keys, new_max_parallelism, "string").tolist()):
            assert writer_of.setdefault(group, n) == n, f"new key group {group} read by two fragments"


def test_list_fragments_produce_the_restore_plan(tmp_path):
    sp = _savepoint(tmp_path)
    op = sp.operator("op").proto
    state = op.list_states[0]
    for parallelism in (1, 2, 5):
        assignment = plan_list_state(op, parallelism)["offsets"]
        fragments = list_fragments(sp, op, state, assignment, target_bytes=200)
        rows = pa.Table.from_batches([b for f in fragments for b in list_batches(f, raw=False)]).to_pylist()
        plan = sp.restore_plan(parallelism)
        for subtask in range(parallelism):
            mine = sorted((r["index"], r["value"]) for r in rows if r["subtask"] == subtask)
            assert [v for _, v in mine] == list(plan.subtask("op", subtask).list_state("offsets"))
            assert [i for i, _ in mine] == list(range(len(mine)))


def test_coalesce_concatenates_in_order_up_to_the_target_and_drops_empty_batches():
    batches = [pa.record_batch([pa.array(range(start, start + n), pa.int64())], names=["x"])
               for start, n in [(0, 100), (100, 0), (100, 100), (200, 100), (300, 50)]]
    out = list(coalesce(iter(batches), target_bytes=1500))  # 100 int64 rows are 800 bytes
    assert [b.num_rows for b in out] == [200, 150]
    assert pa.Table.from_batches(out).column("x").to_pylist() == list(range(350))
    assert list(coalesce(iter(batches[1:2]), 1)) == []


def test_a_fragment_survives_its_row_form(tmp_path):
    sp = _savepoint(tmp_path)
    op = sp.operator("op").proto
    assignment = plan_list_state(op, 2)["offsets"]
    for fragment in [*chunk_fragments(sp, op, op.keyed_states[0]),
                     *list_fragments(sp, op, op.list_states[0], assignment, target_bytes=200)]:
        names = ["location", "manifest", "operator", "chunk_indices", "runs"]
        row = dict(zip(names, fragment.as_row()))
        row["runs"] = [dict(zip(Run._fields, r)) for r in row["runs"]]  # as Arrow's to_pylist gives structs
        assert Fragment.from_row(row) == fragment


def test_a_typod_state_is_answered_with_the_states_there_are(tmp_path):
    _savepoint(tmp_path)
    with pytest.raises(InvalidArgumentError, match="no such state; operator 'op' has \\['offsets', 'count'\\]"):
        StateScan.plan(str(tmp_path / "sp"), "op", "counts")


def test_keys_select_exactly_the_chunks_whose_bounds_hold_one(tmp_path):
    """Key bounds were checked key by key for every chunk (chunks x keys: 16,000 chunks and 5,000
    keys took 5 s to plan); a sorted search keeps the same chunks: those of the keys' key groups
    whose bounds hold one of the keys."""
    keys = [f"k{i:05d}" for i in range(20_000)]
    with SavepointWriter(str(tmp_path / "sp"), chunk_bytes=256, key_bounds=True, inline_bytes=0) as w:
        w.add_operator("op", parallelism=1, key_serializer=String()).keyed_state("s", Int64()).add(
            keys, list(range(len(keys))))
    op = Savepoint.open(tmp_path / "sp").manifest.operators[0]
    state = op.keyed_states[0]
    wanted = keys[::97] + ["k99999"]  # and a key past every chunk's bounds
    groups = set(compute_key_groups(pa.array(wanted), 128, "string").tolist())
    encoded = [k.encode() for k in wanted]
    expected = [i for i, c in enumerate(state.chunks) if c.key_group in groups
                and any(c.key_bounds.min <= e <= c.key_bounds.max for e in encoded)]
    assert Selection(keys=tuple(wanted)).keyed_chunks(op, state, None).tolist() == expected
    assert 0 < len(expected) < len(state.chunks)
