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


def restore_differences(truth: dict, dump: dict, *, fired: bool = True) -> list[str]:
    """Everything in which the restored job's view differs from what the savepoint holds (empty: none).
    ``fired``: the dump lists the timers that fired after the restore (a real Flink job's does; a
    restore plan's, which runs nothing, does not)."""
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
        if fired:
            event_time = [t for t in expected["timers"] if t["domain"] == "event_time"]
            problems += _keyed_rows(f"{uid} fired event-time timers", event_time, got.get("fired_timers", []), p,
                                    max_p)
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


# -- comparing decoded values with the truth ---------------------------------

#: Stands for a value of a composite type with a Kryo part in the middle (a POJO with a
#: java.util.List field...): Flink stores no length for the Kryo part, so a reader keeps the
#: value's stored bytes; the truth's decoded form is not compared, everything around it is.
UNDECODED = "<stored bytes of a composite with an opaque part>"


def json_text(value) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def sorted_pairs(pairs: list) -> list:
    """Map entries as the truth lists them: sorted by the key's JSON text."""
    return sorted(pairs, key=lambda p: json_text(p[0]))


def entry_order(entry: dict) -> str:
    """The truth's order of keyed entries: subtask, key group, key, namespace."""
    return json_text([entry["subtask"], entry["key_group"], entry["key"], entry["namespace"]])


def same(ours, truth) -> bool:
    """Equality, with a Kryo value compared by the bytes Flink stored for it, and a
    64-bit integer equal whether the truth wrote it as a number or as a decimal
    string (the truth writer leaves Long.MIN_VALUE a number)."""
    if ours == UNDECODED:
        return truth is not None
    if isinstance(truth, dict) and set(truth) == {"class", "fields", "bytes"}:
        return ours == truth["bytes"]
    if isinstance(ours, (int, str)) and isinstance(truth, (int, str)) and type(ours) is not type(truth):
        try:
            return not isinstance(ours, bool) and int(ours) == int(truth)
        except ValueError:
            return False
    if isinstance(truth, dict) and isinstance(ours, dict):
        return truth.keys() == ours.keys() and all(same(ours[k], truth[k]) for k in truth)
    if isinstance(truth, list) and isinstance(ours, list):
        return len(truth) == len(ours) and all(same(a, b) for a, b in zip(ours, truth))
    if isinstance(truth, float) or isinstance(ours, float):
        return isinstance(ours, (int, float)) and isinstance(truth, (int, float)) and float(ours) == float(truth)
    return ours == truth


def assert_same(ours, truth, what: str) -> None:
    assert same(ours, truth), f"{what}:\n ours:  {json_text(ours)[:2000]}\n truth: {json_text(truth)[:2000]}"
