"""Shared by the reliability tests: a small savepoint and a full read of a savepoint."""

from __future__ import annotations

import os

from pyref import Savepoint, SavepointWriter
from pyref.redistribution import DistributionMode
from pyref.serializers import Int64, ListOf, MapOf, Nullable, String


def write_small(path, *, overwrite: bool = False, generation: int = 0, **options) -> None:
    """Every state kind, in one data file (inline_bytes=0), raw and zstd chunks, ~0.6 KB."""
    options.setdefault("inline_bytes", 0)
    with SavepointWriter(str(path), overwrite=overwrite, **options) as w:
        src = w.add_operator("src", parallelism=2)
        offsets = src.list_state("offsets", Int64(), DistributionMode.SPLIT_DISTRIBUTE)
        offsets.add(0, [100 + generation, 101])
        offsets.add(1, [200])
        union = src.list_state("union", String(), DistributionMode.UNION)
        union.add(1, ["abc" * 12] * 4)  # compressible: a zstd chunk
        counter = w.add_operator("counter", parallelism=2, max_parallelism=4, key_serializer=String())
        counter.keyed_state("count", Int64()).add([f"/p/{i}" for i in range(6)], [generation + i for i in range(6)])
        counter.keyed_state("tags", Nullable(String()), kind="map", user_key_serializer=Int64()).add(
            ["/p/0", "/p/0"], ["a", None], user_keys=[1, 2])
        counter.keyed_state("seen", MapOf(String(), ListOf(Int64())), kind="list").add(["/p/1"], [[{"x": [1]}, {}]])


def read_all(path) -> dict:
    """Open and decode every value of every state; return them (raises on damage)."""
    sp = Savepoint.open(path)
    out = {}
    for op in sp.operators:
        for name in op.list_state_names:
            view = op.list_state(name)
            out[(op.operator_id, name)] = [list(view.partition(i)) for i in range(view.partition_count)]
        for name in op.keyed_state_names:
            out[(op.operator_id, name)] = sorted(map(repr, op.keyed_state(name).items()))
    return out


def data_files(path) -> list[str]:
    directory = os.path.join(str(path), "data")
    return sorted(os.path.join(directory, n) for n in os.listdir(directory)) if os.path.isdir(directory) else []
