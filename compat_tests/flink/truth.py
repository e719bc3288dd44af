"""Compare what a restored Flink job read (harness.restore_and_dump) with a truth.json.

Flink's rules for a restore (corpus/README.md, "truth.json"): SPLIT_DISTRIBUTE list state stays
with its subtask at the same parallelism and is re-cut otherwise; UNION state goes whole to every
subtask, its subtasks' runs in an order Flink does not define; BROADCAST state is the same on
every subtask; keyed state and timers go to the subtask whose key-group range holds their key
group. After the restore the job's end of input fires every event-time timer.
"""

from __future__ import annotations

import json
from collections import Counter


def _text(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _without_subtask(rows: list[dict]) -> Counter:
    return Counter(_text({k: v for k, v in row.items() if k != "subtask"}) for row in rows)


def operator_index(key_group: int, parallelism: int, max_parallelism: int) -> int:
    """The subtask that restores ``key_group`` (Flink's KeyGroupRangeAssignment)."""
    return key_group * parallelism // max_parallelism


def restore_differences(truth: dict, dump: dict) -> list[str]:
    """Everything in which the restored job's view differs from what the savepoint holds (empty: none)."""
    problems: list[str] = []
    for uid, expected in sorted(truth["operators"].items()):
        got = dump["operators"].get(uid)
        if got is None:
            problems.append(f"{uid}: not in the restored job")
            continue
        p, max_p = got["parallelism"], got["max_parallelism"]
        if expected["key_type"] is not None and max_p != expected["max_parallelism"]:
            problems.append(f"{uid}: restored with max parallelism {max_p}, written with {expected['max_parallelism']}")
        problems += _operator_state(uid, expected, got)
        for name, state in expected["keyed_state"].items():
            restored = got["keyed_state"].get(name)
            if restored is None:
                problems.append(f"{uid}/{name}: keyed state not restored")
                continue
            problems += _keyed_rows(f"{uid}/{name}", state["entries"], restored["entries"], p, max_p)
        problems += _keyed_rows(f"{uid} timers", expected["timers"], got["timers"], p, max_p)
        event_time = [t for t in expected["timers"] if t["domain"] == "event_time"]
        problems += _keyed_rows(f"{uid} fired event-time timers", event_time, got.get("fired_timers", []), p, max_p)
    return problems


def _operator_state(uid: str, expected: dict, got: dict) -> list[str]:
    problems = []
    p_old, p_new = expected["parallelism"], got["parallelism"]
    for name, state in expected["operator_state"].items():
        restored = got["operator_state"].get(name)
        if restored is None:
            problems.append(f"{uid}/{name}: operator state not restored")
            continue
        old, new = state["subtasks"], restored["subtasks"]
        everything = Counter(_text(x) for sub in old for x in sub)
        if state["mode"] == "UNION":
            wrong = [i for i, sub in enumerate(new) if Counter(_text(x) for x in sub) != everything]
            if wrong:
                problems.append(f"{uid}/{name}: UNION subtasks {wrong} do not hold every element once")
        elif state["mode"] == "BROADCAST":
            wrong = [i for i, sub in enumerate(new) if sub != old[i % p_old]]
            if wrong:
                problems.append(f"{uid}/{name}: BROADCAST subtasks {wrong} differ from the copy they restore")
        elif p_old == p_new:
            if new != old:
                problems.append(f"{uid}/{name}: {new} restored, {old} written")
        elif Counter(_text(x) for sub in new for x in sub) != everything:
            problems.append(f"{uid}/{name}: the elements restored at parallelism {p_new} are not those written")
    return problems


def _keyed_rows(what: str, expected: list[dict], got: list[dict], parallelism: int, max_parallelism: int) -> list[str]:
    problems = []
    if _without_subtask(expected) != _without_subtask(got):
        missing = _without_subtask(expected) - _without_subtask(got)
        extra = _without_subtask(got) - _without_subtask(expected)
        problems.append(f"{what}: {sum(missing.values())} written but not restored, {sum(extra.values())} restored "
                        f"but not written; e.g. {list(missing)[:2]} / {list(extra)[:2]}")
    misplaced = [r for r in got if r["subtask"] != operator_index(r["key_group"], parallelism, max_parallelism)]
    if misplaced:
        problems.append(f"{what}: {len(misplaced)} restored outside their key group's subtask, e.g. {misplaced[0]}")
    return problems
