"""The reader checks every row's key group (spec/format.md §7.1) while hashing only the first
key of each run of equal keys: a key under many namespaces is stored in consecutive rows.
Equal keys share a key group, so a misplaced key can only start a run; these tests put
one there and expect the reader to name its row."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from pyref import Savepoint, SavepointWriter
from pyref.errors import CorruptSavepointError
from pyref.key_groups import assign_to_key_group
from pyref.serializers import Int64, String, TimeWindow

MAX_PARALLELISM = 128
HOME = "ключ-α"  # the key whose group every row claims
HOME_GROUP = assign_to_key_group(HOME, MAX_PARALLELISM)
STRANGER = next(k for k in (f"other-日本-{i}" for i in range(100))
                if assign_to_key_group(k, MAX_PARALLELISM) != HOME_GROUP)


def _windowed(tmp_path, keys: list[str]):
    """A namespaced state whose rows (key, window i) all claim HOME's key group."""
    path = tmp_path / "sp"
    with SavepointWriter(path) as w:
        op = w.add_operator("op", parallelism=2, max_parallelism=MAX_PARALLELISM, key_serializer=String())
        state = op.keyed_state("count", Int64(), namespace_serializer=TimeWindow())
        windows = [(60_000 * i, 60_000 * (i + 1)) for i in range(len(keys))]
        state.add_encoded([String().encode_array(keys), TimeWindow().encode_array(windows),
                           Int64().encode_array(list(range(len(keys))))], np.full(len(keys), HOME_GROUP))
    return Savepoint.open(path).operator("op").keyed_state("count")


def test_rows_whose_keys_repeat_read_back(tmp_path):
    view = _windowed(tmp_path, [HOME] * 10)
    assert view.to_arrow().column("key").to_pylist() == [HOME] * 10
    assert view.get(HOME, namespace=(120_000, 180_000)) == 2


@pytest.mark.parametrize("keys, row", [
    ([HOME] * 5 + [STRANGER] * 5, 5),  # a run of another key after a run
    ([HOME] * 4 + [STRANGER] + [HOME] * 5, 4),  # one row between two runs
    ([STRANGER] * 3 + [HOME] * 7, 0),  # the first run
    ([HOME] * 9 + [STRANGER], 9),  # the last row
])
def test_a_key_of_another_group_at_a_run_boundary_is_reported_at_its_row(tmp_path, keys, row):
    view = _windowed(tmp_path, keys)
    group = assign_to_key_group(STRANGER, MAX_PARALLELISM)
    expected = f"row {row}: its key belongs to key group {group}, not to the chunk's key group {HOME_GROUP}"
    with pytest.raises(CorruptSavepointError, match=expected):
        view.to_arrow()
    with pytest.raises(CorruptSavepointError, match=expected):
        list(view.scan_batches())


NEIGHBOURS = [k for k in (f"home-{i}" for i in range(20_000)) if assign_to_key_group(k, MAX_PARALLELISM) == HOME_GROUP][:80]


@pytest.mark.parametrize("keys, row", [
    (NEIGHBOURS + [HOME] * 50 + [STRANGER] * 5, 130),  # the first rows differ, later ones repeat
    ([HOME] * 70 + NEIGHBOURS[:40] + [STRANGER] + NEIGHBOURS[40:], 110),  # the first rows repeat, later ones differ
])
def test_the_first_rows_do_not_decide_the_answer(tmp_path, keys, row):
    """Whether a chunk's keys are checked by runs is decided from its first rows; either way
    every row is checked and read back."""
    good = [k for k in keys if k != STRANGER]
    assert _windowed(tmp_path / "good", good).to_arrow().column("key").to_pylist() == good
    view = _windowed(tmp_path / "bad", keys)
    with pytest.raises(CorruptSavepointError, match=f"row {row}: its key belongs to key group"):
        view.to_arrow()


def test_a_malformed_key_in_a_run_is_named_by_its_row_in_the_chunk(tmp_path) -> None:
    """Keys are decoded once per run of equal encodings; a bad encoding is still reported at
    its first row in the chunk."""
    with SavepointWriter(tmp_path / "sp") as w:
        op = w.add_operator("op", parallelism=1, max_parallelism=1, key_serializer=String())
        state = op.keyed_state("count", Int64(), namespace_serializer=TimeWindow())
        keys = pa.array(["a"] * 4 + ["\u00e9"] * 4)
        windows = pa.StructArray.from_arrays([pa.array(range(8), pa.int64()), pa.array(range(1, 9), pa.int64())],
                                             names=["start", "end"])
        state.add(keys, pa.array(range(8), pa.int64()), namespaces=windows)
    view = Savepoint.open(tmp_path / "sp").operator("op").keyed_state("count")
    (chunk,) = view.proto.chunks
    (columns,) = list(view._store.read_many([chunk], view._columns, view.label))
    encoded = columns[0].to_pylist()
    assert encoded[4] == encoded[7] != encoded[3]
    # The second run's key with its UTF-8 broken (0xc3 0xa9 -> 0xc3 0x28), as a corrupt file would hold it.
    broken = pa.array(encoded[:4] + [encoded[4].replace(b"\xc3\xa9", b"\xc3\x28")] * 4, pa.binary())
    with pytest.raises(CorruptSavepointError, match="record 4 "):
        view._check_keys(chunk, broken)
