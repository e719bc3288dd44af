"""Bugs found by the reliability work, pinned (see fuzz/README.md for the fuzz ones)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from pyref import Savepoint, SavepointWriter
from pyref.serializers import Float64, Int32, Int64, String, Tuple


def test_rows_of_different_widths_whose_total_is_a_multiple_of_the_first_survive_reordering(tmp_path):
    """writer._take took a column for fixed-width when its total length was n times the
    first row's length (16 + 4 + 28 = 3 x 16), and gathered garbage."""
    values = [[(1, 1.5)], [], [(2, -0.0), (3, 2.5)]]
    with SavepointWriter(str(tmp_path / "sp")) as w:
        op = w.add_operator("op", parallelism=3, max_parallelism=16, key_serializer=Int64())
        op.keyed_state("l", Tuple(Int32(), Float64()), kind="list").add([1, 2, 3], values)  # groups 6, 15, 1
    got = dict(Savepoint.open(tmp_path / "sp").operator("op").keyed_state("l").items())
    assert got == {1: [(1, 1.5)], 2: [], 3: [(2, -0.0), (3, 2.5)]}


def test_random_widths_round_trip_through_key_group_reordering(tmp_path):
    rng = np.random.default_rng(3)
    keys = list(range(2000))
    values = ["x" * int(n) for n in rng.integers(0, 40, size=len(keys))]
    with SavepointWriter(str(tmp_path / "sp")) as w:
        op = w.add_operator("op", parallelism=2, max_parallelism=64, key_serializer=Int64())
        op.keyed_state("s", String()).add(keys, values)
    assert dict(Savepoint.open(tmp_path / "sp").operator("op").keyed_state("s").items()) == dict(zip(keys, values))


def test_keyed_get_works_in_a_fresh_interpreter(tmp_path):
    """reader.get used pa.compute, which "import pyarrow" does not load: AttributeError
    unless something else had imported pyarrow.compute first."""
    code = f"""
import sys
from pyref import SavepointWriter, Savepoint
from pyref.serializers import Int64, String
with SavepointWriter({str(tmp_path / "sp")!r}) as w:
    w.add_operator("op", parallelism=1, key_serializer=String()).keyed_state("c", Int64()).add(["a", "b"], [1, 2])
assert Savepoint.open({str(tmp_path / "sp")!r}).operator("op").keyed_state("c").get("b") == 2
"""
    subprocess.run([sys.executable, "-c", code], check=True)
