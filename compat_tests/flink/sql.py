"""The SQL job's savepoints (jobs/SqlJob.java) as pyref sees them: the types of its states,
what every keyed state and timer of a Flink savepoint holds, to compare an export with the
savepoint it came from, and the changelogs of a run and its restore added up."""

from __future__ import annotations

import os

from pyref import TtlConfig
from pyref.flink import FlinkSavepoint

#: The SQL job's states under TTL (its join's STATE_TTL hint: one hour); Flink does not store it.
TTL_DEFAULT = TtlConfig(3_600_000)


_ROW_KEY = "row-data<string-data>"
_JOIN_KEY = "row-data<string-data,int64>"
_TIMESTAMP_ROW = "row-data<string-data,int64,timestamp-data(3)>"
#: A row of the SQL job's view t (k, v, seq, s, rowtime): MATCH_RECOGNIZE's events.
_MATCH_ROW = "row-data<string-data,int64,int64,string-data,timestamp-data(3)>"
#: Every keyed state of the SQL job: (state, key type, stored type, namespace type), sorted.
STATE_TYPES = sorted([
    # group aggregate; TUMBLE and HOP window TVFs (slices by their end); legacy GROUP BY TUMBLE;
    # the last two with COUNT(DISTINCT), a MapView per window (a placeholder in the accumulators)
    ("accState", _ROW_KEY, "row-data<int64,int64,string-data>", "void-namespace"),
    ("window-aggs", _ROW_KEY, "row-data<int64,int64>", "int64"),
    *[(state, _ROW_KEY, stored, window) for window in ("int64", "time-window") for state, stored in (
        ("window-aggs", "row-data<int64,int64,int64,raw-value<void>>"),
        ("distinctAcc_0", "map<external<int32>,external<int64>>"),
        ("distinctAcc_0_null_state", "external<int64>"))],
    # regular join under STATE_TTL
    ("left-records", _JOIN_KEY, "map<row-data<string-data,int64>,ttl<int32>>", "void-namespace"),
    ("right-records", _JOIN_KEY, "map<row-data<string-data,int64,int64>,ttl<int32>>", "void-namespace"),
    # deduplication keeping the last row by rowtime; Top-N (sort key -> rows)
    ("deduplicate-state", _ROW_KEY, _TIMESTAMP_ROW, "void-namespace"),
    ("data-state-with-append", _ROW_KEY, "map<row-data<int64>,list<row-data<string-data,int64,int64>>>",
     "void-namespace"),
    # COUNT(DISTINCT) (a MapView), TIMESTAMP and DECIMAL accumulators
    ("accState", "row-data<int32>", "row-data<int64,timestamp-data(3),timestamp-data(6),decimal-data(38,2),"
     "decimal-data(10,1),raw-value<void>>", "void-namespace"),
    ("distinctAcc_0", "row-data<int32>", "map<external<string-data>,external<int64>>", "void-namespace"),
    ("distinctAcc_0_null_state", "row-data<int32>", "external<int64>", "void-namespace"),
    # interval join: rows by time, and their cleanup times
    ("IntervalJoinLeftCache", _JOIN_KEY, f"map<int64,list<tuple<{_TIMESTAMP_ROW},boolean>>>", "void-namespace"),
    ("IntervalJoinLeftTimerState", _JOIN_KEY, "int64", "void-namespace"),
    ("IntervalJoinRightCache", _JOIN_KEY,
     "map<int64,list<tuple<row-data<string-data,int64,timestamp-data(3),int64>,boolean>>>", "void-namespace"),
    ("IntervalJoinRightTimerState", _JOIN_KEY, "int64", "void-namespace"),
    # deduplication of rows with ARRAY and MAP columns (Java-serialized snapshots only)
    ("deduplicate-state", _ROW_KEY, "row-data<string-data,timestamp-data(3),array-data(BigIntType),"
     "map-data(CharType,BigIntType)>", "void-namespace"),
    # COLLECT (a MULTISET, kept in a MapView) and ARRAY_AGG (its lists inline, RawValueData of a LinkedList)
    ("accState", _ROW_KEY, "row-data<row-data<raw-value<void>>>", "void-namespace"),
    ("agg0$map", _ROW_KEY, "map<external<int64>,external<int32>>", "void-namespace"),
    ("accState", _ROW_KEY, "row-data<row-data<raw-value<linked-list<int64>>,raw-value<linked-list<int64>>>>",
     "void-namespace"),
    # MAX over an updating input (a COUNT per key; MaxWithRetract's MapView)
    ("accState", _ROW_KEY, "row-data<int64>", "void-namespace"),
    ("accState", "row-data<int32>", "row-data<row-data<string-data,int64,raw-value<void>>,int64>", "void-namespace"),
    ("agg0$map", "row-data<int32>", "map<external<string-data>,external<int64>>", "void-namespace"),
    # Top-N over an updating input (a COUNT and a COLLECT per key; RetractableTopN's rows, with a
    # MULTISET column, and its SortedMap)
    ("accState", _ROW_KEY, "row-data<int64,row-data<raw-value<void>>>", "void-namespace"),
    ("agg1$map", _ROW_KEY, "map<external<int32>,external<int32>>", "void-namespace"),
    ("data-state", "row-data", "map<row-data<int64,string-data>,list<row-data<string-data,int64,"
     "map-data(IntType,IntType)>>>", "void-namespace"),
    ("sorted-map", "row-data", "sorted-map<row-data<int64,string-data>,int64>", "void-namespace"),
    # OVER aggregation, ROWS BETWEEN 2 PRECEDING AND CURRENT ROW: SUM, and MIN (retracting: a MapView)
    ("accState", _ROW_KEY, "row-data<int64,int64,row-data<int64,int64,raw-value<void>>,int64>", "void-namespace"),
    ("agg2$map", _ROW_KEY, "map<external<int64>,external<int64>>", "void-namespace"),
    ("inputState", _ROW_KEY, "map<int64,list<row-data<string-data,int64,int64,timestamp-data(3)>>>",
     "void-namespace"),
    ("lastTriggeringTsState", _ROW_KEY, "int64", "void-namespace"),
    ("processedCountState", _ROW_KEY, "int64", "void-namespace"),
    # MATCH_RECOGNIZE: flink-cep's CepOperator over RowData events (the rows of t) partitioned by k
    ("nfaStateName", _ROW_KEY, "cep-nfa-state<cep-dewey-number,cep-node-id<cep-event-id>,cep-event-id>",
     "void-namespace"),
    ("sharedBuffer-entries-with-lockable-edges", _ROW_KEY, "map<cep-node-id<cep-event-id>,cep-lockable<"
     "cep-shared-buffer-node<cep-shared-buffer-edge<cep-node-id<cep-event-id>,cep-dewey-number>>>>", "void-namespace"),
    ("sharedBuffer-events", _ROW_KEY, f"map<cep-event-id,cep-lockable<{_MATCH_ROW}>>", "void-namespace"),
    ("sharedBuffer-events-count", _ROW_KEY, "map<int64,int32>", "void-namespace"),
    ("eventQueuesStateName", _ROW_KEY, f"map<int64,list<{_MATCH_ROW}>>", "void-namespace"),
])
#: Deduplication keeping the first row by rowtime: Flink 2 keeps it until a watermark passes it.
KEEP_FIRST_TYPES = {
    "1": [("deduplicate-state", _ROW_KEY, _TIMESTAMP_ROW, "void-namespace")],
    "2": [("already-emitted-state-boolean", _ROW_KEY, "boolean", "void-namespace"),
          ("waiting-to-emit-on-timer", _ROW_KEY, _TIMESTAMP_ROW, "void-namespace")],
}


def expected_state_types(flink_version: str) -> list[tuple[str, str, str, str]]:
    return sorted(STATE_TYPES + KEEP_FIRST_TYPES[flink_version.split(".")[0]])


def state_types(path: str | os.PathLike[str]) -> list[tuple[str, str, str, str]]:
    """Each keyed state of a savepoint as (state, key type, stored type, namespace type), sorted."""
    with FlinkSavepoint.open(path) as savepoint:
        return sorted((name, op.key_type.describe(), op.keyed_state(name).stored_type.describe(),
                       op.keyed_state(name).namespace_type.describe())
                      for op in savepoint.operators for name in op.keyed_state_names)


def keyed_contents(path: str | os.PathLike[str]) -> dict[str, list[str]]:
    """Every keyed state and timer queue of every operator ("operator id/state"): its rows
    (key group, key, namespace, value or timer, all as Flink's bytes where pyref keeps them
    opaque), sorted."""
    contents = {}
    with FlinkSavepoint.open(path) as savepoint:
        for op in savepoint.operators:
            op_id = op.operator_id
            for name in op.keyed_state_names:
                contents[f"{op_id}/{name}"] = sorted(map(repr, op.keyed_state(name).to_arrow(raw=True).to_pylist()))
            for service, domain in op.timer_services:
                contents[f"{op_id}/{domain}/{service}"] = sorted(map(repr, op.timers(service, domain).to_arrow(raw=True).to_pylist()))
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
