"""The SQL job's savepoints (jobs/SqlJob.java) as pyref sees them: what every keyed state
and timer of a Flink savepoint holds, to compare an export with the savepoint it came from,
and the changelogs of a run and its restore added up."""

from __future__ import annotations

import os

from pyref import TtlConfig
from pyref.flink import FlinkSavepoint

#: The SQL job's states under TTL (its join's STATE_TTL hint: one hour); Flink does not store it.
TTL_DEFAULT = TtlConfig(3_600_000)


def keyed_contents(path: str | os.PathLike[str]) -> dict[str, list[str]]:
    """Every keyed state and timer queue of every operator ("operator id/state"): its rows
    (key group, key, namespace, value or timer, all as Flink's bytes where pyref keeps them
    opaque), sorted."""
    contents = {}
    with FlinkSavepoint.open(path) as savepoint:
        for op in savepoint.operators:
            op_id = op.operator_id
            for name in op.keyed_state_names:
                contents[f"{op_id}/{name}"] = sorted(map(repr, op.keyed_state(name).to_arrow().to_pylist()))
            for service, domain in op.timer_services:
                contents[f"{op_id}/{domain}/{service}"] = sorted(map(repr, op.timers(service, domain).to_arrow().to_pylist()))
    return contents


def added_up(*changelogs: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """Signed row multisets by query, added (rows whose count comes to 0 dropped)."""
    total: dict[str, dict[str, int]] = {}
    for changelog in changelogs:
        for query, rows in changelog.items():
            into = total.setdefault(query, {})
            for row, n in rows.items():
                into[row] = into.get(row, 0) + n
                if not into[row]:
                    del into[row]
    return total
