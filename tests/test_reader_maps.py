"""Maps handed out as Python dicts: a MAP state's map (``get``) and a broadcast partition.

Their keys are distinct by their encodings (spec/format.md §7.1, rule B5), but two
encodings may decode to equal Python values: float 0.0 and -0.0 (distinct keys in Java,
whose Double.equals compares bits). A dict keeps one of them, so a read would silently
drop an entry and give its value to the other key; the reader refuses instead."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyref import Savepoint, SavepointWriter
from pyref.errors import InvalidArgumentError
from pyref.serializers import Float64, Int64, String, Tuple


def _savepoint(path: Path, user_keys: list, broadcast_keys: list) -> Savepoint:
    with SavepointWriter(path) as w:
        op = w.add_operator("op", parallelism=2, max_parallelism=4, key_serializer=String())
        op.keyed_state("m", Int64(), kind="map", user_key_serializer=Float64()).add(
            ["a"] * len(user_keys), list(range(len(user_keys))), [k[1] for k in user_keys])
        op.keyed_state("t", Int64(), kind="map", user_key_serializer=Tuple(String(), Float64())).add(
            ["a"] * len(user_keys), list(range(len(user_keys))), user_keys)
        op.broadcast_state("b", Float64(), Int64()).add_all(broadcast_keys, list(range(len(broadcast_keys))))
    return Savepoint.open(path)


def test_user_keys_equal_only_in_python_are_refused_not_merged(tmp_path: Path) -> None:
    savepoint = _savepoint(tmp_path / "sp", [("x", 0.0), ("x", -0.0)], [0.0, -0.0])
    op = savepoint.operator("op")
    for name in ("m", "t"):
        view = op.keyed_state(name)
        assert [row[-1] for row in view.items()] == [0, 1]  # two entries, as stored
        with pytest.raises(InvalidArgumentError, match="equal as Python values"):
            view.get("a")
    broadcast = op.broadcast_state("b")
    assert broadcast.to_arrow().num_rows == 4
    with pytest.raises(InvalidArgumentError, match="equal as Python values"):
        broadcast.partition(0)
    with pytest.raises(InvalidArgumentError, match="equal as Python values"):
        savepoint.restore_plan(1).subtask("op", 0).broadcast_state("b")


def test_maps_of_keys_distinct_in_python_read_as_dicts(tmp_path: Path) -> None:
    savepoint = _savepoint(tmp_path / "sp", [("x", 0.0), ("x", 1.5), ("x", 0.0)], [-0.0, 1.5])
    op = savepoint.operator("op")
    assert op.keyed_state("m").get("a") == {0.0: 2, 1.5: 1}  # the last row of a user key wins
    assert op.keyed_state("t").get("a") == {("x", 0.0): 2, ("x", 1.5): 1}
    assert op.broadcast_state("b").partition(1) == {-0.0: 0, 1.5: 1}
