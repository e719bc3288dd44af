"""A user's script against pyref's public API, type-checked with ``mypy --strict`` (tests/test_typing.py).

Writes a small savepoint, reads it back, plans a restore, describes and verifies it, and
rescales it: ``python examples/typed_usage.py DIR``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pyref
from pyref import DistributionMode, KeyGroupRange, Savepoint, SavepointWriter, TtlConfig, VerifyReport, describe, verify
from pyref.descriptions import KeyedStateInfo, SavepointInfo
from pyref.restore import PlanSummary, SubtaskRestore
from pyref.serializers import Int64, String, Tuple


def write(location: Path) -> None:
    with SavepointWriter(location) as w:
        source = w.add_operator("kafka-source", parallelism=2)
        offsets = source.list_state("offsets", Int64(), DistributionMode.SPLIT_DISTRIBUTE)
        offsets.add(0, [100, 101])
        offsets.add(1, [200, 201])
        counter = w.add_operator("url-counter", parallelism=2, key_serializer=String())
        counter.keyed_state("count", Int64()).add(["/a", "/b"], [3, 5])
        visits = Tuple(String(), Int64(), names=["referrer", "hits"])
        counter.keyed_state("visits", visits, ttl=TtlConfig(60_000)).add(["/a"], [("/home", 7)], ttl_timestamps=[1_000])


def read(location: Path) -> dict[str, object]:
    sp: Savepoint = Savepoint.open(location)
    counts = sp.operator("url-counter").keyed_state("count")
    info: KeyedStateInfo = counts.info
    hits: object = counts.get("/a")
    visit = sp.operator("url-counter").keyed_state("visits").get("/a")
    offsets = sp.operator("kafka-source").list_state("offsets")
    sub: SubtaskRestore = sp.restore_plan(4).subtask("url-counter", 3)
    groups: KeyGroupRange = sub.key_group_range
    summary: PlanSummary = sp.restore_plan({"url-counter": 4}).summary()
    described: SavepointInfo = describe(sp)
    report: VerifyReport = verify(sp)
    return {"hits": hits, "referrer": visit.referrer, "entries": info.entries, "repr": repr(counts),
            "offsets": offsets.to_arrow().column("value").to_pylist(), "key_groups": (groups.first, groups.last),
            "subtask_3": list(sub.keyed_state("count")),
            "planned_bytes": summary.operators[0].subtasks[0].planned_bytes,
            "operators": [op.operator_id for op in described.operators], "verified": report.ok}


def main(directory: Path) -> dict[str, object]:
    location = directory / "sp-1"
    write(location)
    result = read(location)
    pyref.rescale(location, directory / "sp-1-p4", 4)
    result["rescaled"] = Savepoint.open(directory / "sp-1-p4").operator("url-counter").parallelism
    return result


if __name__ == "__main__":
    print(main(Path(sys.argv[1])))
