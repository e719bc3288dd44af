"""HashMap (heap) backend checkpoints against the savepoint-format reader of the same rows, in one run.

    python bench/flink_heap_read.py [--entries 300000] [--shapes value-string-long,...] [--repeat 3] [--dir /tmp]
    PYREF_FLINK_ARCHIVES=... python bench/flink_heap_read.py --flink 2.3.0 [--entries 500000]

Per shape, writes two Flink snapshots of one keyed state holding the same N entries (max
parallelism 128, one subtask, entry i in key group i % 128): a retained checkpoint whose keyed
stream is in the heap backend's layout (``HeapSnapshotStrategy``: per key group its int number,
then per state id an int count and each entry's namespace, key and value as their serializers
write them, nothing length-prefixed; ``KeyGroupsStateHandle``, so the layout is told from the
bytes as for the real heap checkpoints under tests/flink/data/checkpoints/*hashmap*), and a
canonical savepoint of the rows the heap reader makes of it (the savepoint format's
length-prefixed (composite key, value) pairs). Asserts both read as the same rows, then prints,
best of --repeat, rows per second of reading every row (``keyed_subtasks``, the rows an import
transcodes) of each and the heap reader's ratio to the savepoint-format reader.

Shapes (the state types a job's checkpoint holds most):
- value-string-long: String keys, VALUE of Long;
- value-long-pojo: Long keys, VALUE of a POJO {count: long, flag: int, sum: double};
- value-long-tuple: Long keys, VALUE of Tuple2<Long, Long>;
- window-string-long: String keys, TimeWindow namespace, VALUE of Long (a window's aggregate);
- list-string-longs: String keys, LIST of 1 to 3 Longs;
- map-string-string-long: String keys, MAP String -> Long of 2 entries;
- timers-string-window: event-time timers of String keys and TimeWindow namespaces.

--flink VERSION: instead, real Flink (compat_tests/flink/harness.py) runs the corpus job
``bulk-N`` (N String keys, a VALUE of Long and a one-element LIST of Long each, parallelism 2,
max parallelism 128) on the HashMap backend twice in one JVM, once cancelled after a retained
checkpoint and once stopped with a canonical savepoint, and the same rows/s are measured on both.

Measured (2 cores shared with other jobs, so rates vary by up to 2x between runs; 300k entries,
best of 5; heap rows/s and its ratio to the savepoint-format reader in the same run), the
per-entry read (a codec's skip and a DataInput per value) -> the block walks (pyref.flink.heap_walk):
  value-string-long     0.57 M (0.06) -> 5.2 M (0.78)    value-long-pojo         0.39 M (0.03) -> 11.1 M (0.74)
  value-long-tuple      1.08 M (0.07) -> 9.6 M (0.65)    window-string-long      0.71 M (0.09) -> 4.5 M (0.66)
  list-string-longs     0.41 M (0.24) -> 2.6 M (1.58)    map-string-string-long  0.38 M (0.28) -> 2.1 M (1.17)
  timers-string-window  0.75 M (0.15) -> 5.2 M (0.83)
  --flink 2.3.0 --entries 500000 (1M rows, keys of one width): 0.41 M (0.03) -> 6.7 M (0.48)
Strings of several lengths keep a Python step per entry (about 70 ns, of 150 ns an entry); LIST
and MAP states read faster than from the savepoint format, whose numpy walk takes a run of pairs
of one size at a time (lists of 1 to 3 elements make short runs).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import sys
import tempfile
from collections.abc import Callable

from core_bench import timed  # bench/ is the script's directory

from pyref.flink import FlinkSavepoint
from pyref.testing.flink_bytes import (
    LONG,
    P,
    STRING,
    TIME_WINDOW,
    i16,
    i32,
    i64,
    key_group_section,
    keyed_proxy,
    keyed_state_meta,
    list_snapshot,
    map_snapshot,
    metadata,
    operator,
    pojo_snapshot,
    relative_handle,
    savepoint_keyed_handle,
    snapshot,
    string_value,
    subtask,
    timer_queue_meta,
    timer_snapshot,
    tuple_snapshot,
)

MAX_PARALLELISM = 128
INT = P + "IntSerializer$IntSerializerSnapshot"
DOUBLE = P + "DoubleSerializer$DoubleSerializerSnapshot"
VOID = b"\x00"  # VoidNamespace: one byte


def _window(i: int) -> bytes:
    start = (i % 97) * 60_000
    return i64(start) + i64(start + 60_000)


class Shape:
    """One keyed state: its meta info and, per entry, (namespace, key, heap value) and
    the savepoint format's (composite key, value) pairs of it."""

    def __init__(self, meta: bytes, key_serializer: str, entry: Callable[[int], tuple[bytes, bytes, bytes]],
                 pairs: Callable[[bytes, bytes, bytes], list[tuple[bytes, bytes]]]) -> None:
        self.meta, self.key_serializer, self.entry, self.pairs = meta, key_serializer, entry, pairs


def _value_pairs(namespace: bytes, key: bytes, value: bytes) -> list[tuple[bytes, bytes]]:
    return [(key + namespace, value)]


def _list_pairs(namespace: bytes, key: bytes, value: bytes) -> list[tuple[bytes, bytes]]:
    n = int.from_bytes(value[:4], "big")
    return [(key + namespace, b",".join(value[4 + 8 * e:12 + 8 * e] for e in range(n)))]


def _map_pairs(namespace: bytes, key: bytes, value: bytes) -> list[tuple[bytes, bytes]]:
    pairs, at = [], 4
    for _ in range(int.from_bytes(value[:4], "big")):
        user_key_end = at + value[at]  # ASCII StringValue: its length byte is length + 1
        pairs.append((key + namespace + value[at:user_key_end], value[user_key_end:user_key_end + 9]))
        at = user_key_end + 9
    return pairs


def _timer_pairs(namespace: bytes, key: bytes, value: bytes) -> list[tuple[bytes, bytes]]:
    return [(value, b"")]


def _flipped(timestamp: int) -> bytes:
    """A timer's timestamp as TimerSerializer writes it: its sign bit flipped, so bytes sort by time."""
    return i64(timestamp - 2**63)


def _string_key(i: int) -> bytes:
    return string_value(f"user-{i}")  # of several lengths: ids of one width walk faster (see --flink)


SHAPES: dict[str, Shape] = {
    "value-string-long": Shape(keyed_state_meta("s", "VALUE", snapshot(LONG)), STRING,
                               lambda i: (VOID, _string_key(i), i64(i)), _value_pairs),
    "value-long-pojo": Shape(
        keyed_state_meta("s", "VALUE", pojo_snapshot("org.example.Stats", [
            ("count", snapshot(LONG)), ("flag", snapshot(INT)), ("sum", snapshot(DOUBLE))])), LONG,
        lambda i: (VOID, i64(i), b"\x02" + b"\x00" + i64(i) + b"\x00" + i32(i & 7) + b"\x00" + i64(i * 3)),
        _value_pairs),
    "value-long-tuple": Shape(keyed_state_meta("s", "VALUE", tuple_snapshot([snapshot(LONG), snapshot(LONG)])), LONG,
                              lambda i: (VOID, i64(i), i64(i) + i64(-i)), _value_pairs),
    "window-string-long": Shape(keyed_state_meta("s", "VALUE", snapshot(LONG), snapshot(TIME_WINDOW)), STRING,
                                lambda i: (_window(i), _string_key(i), i64(i)), _value_pairs),
    "list-string-longs": Shape(keyed_state_meta("s", "LIST", list_snapshot(snapshot(LONG))), STRING,
                               lambda i: (VOID, _string_key(i), i32(1 + i % 3) + b"".join(
                                   i64(i + e) for e in range(1 + i % 3))), _list_pairs),
    "map-string-string-long": Shape(keyed_state_meta("s", "MAP", map_snapshot(snapshot(STRING), snapshot(LONG))),
                                    STRING, lambda i: (VOID, _string_key(i), i32(2) + string_value("clicks") + b"\x00"
                                                       + i64(i) + string_value("views") + b"\x00" + i64(2 * i)),
                                    _map_pairs),
    "timers-string-window": Shape(timer_queue_meta("_timer_state/event_window-timers",
                                                   timer_snapshot(snapshot(STRING), snapshot(TIME_WINDOW))), STRING,
                                  lambda i: (b"", b"", _flipped((i % 97) * 60_000 + 59_999) + _string_key(i)
                                             + _window(i)), _timer_pairs),
}


def _write(path: str, keyed_handle: bytes, version: int) -> None:
    os.makedirs(path)
    with open(os.path.join(path, "_metadata"), "wb") as f:
        f.write(metadata([operator(bytes(16), 1, MAX_PARALLELISM, [subtask(0, None, keyed_handle)])], version=version))


def make_snapshots(root: str, shape: Shape, n: int) -> tuple[str, str]:
    """(heap checkpoint, canonical savepoint) of the shape's n entries."""
    proxy = keyed_proxy(snapshot(shape.key_serializer), [shape.meta])
    entries: list[list[tuple[bytes, bytes, bytes]]] = [[] for _ in range(MAX_PARALLELISM)]
    for i in range(n):
        entries[i % MAX_PARALLELISM].append(shape.entry(i))
    heap, heap_offsets = bytearray(proxy), []
    unified, unified_offsets = bytearray(proxy), []
    for kg, group in enumerate(entries):
        heap_offsets.append(len(heap))
        heap += i32(kg) + i16(0) + i32(len(group)) + b"".join(ns + key + value for ns, key, value in group)
        prefix = bytes([kg])
        pairs = [(prefix + k, v) for ns, key, value in group for k, v in shape.pairs(ns, key, value)]
        unified_offsets.append(len(unified) if pairs else 0)
        if pairs:
            unified += key_group_section([(0, pairs)])
    paths = []
    for name, stream, offsets, handle_type, version in (("heap", heap, heap_offsets, b"\x03", 3),
                                                         ("savepoint", unified, unified_offsets, b"\x07", 4)):
        path = os.path.join(root, name)
        _write(path, handle_type + savepoint_keyed_handle(0, offsets, relative_handle("keyed", len(stream)))[1:],
               version)
        with open(os.path.join(path, "keyed"), "wb") as f:
            f.write(stream)
        paths.append(path)
    return paths[0], paths[1]


def _keyed(sp: FlinkSavepoint):
    """The one operator with keyed state."""
    return next(op for op in sp.operators if any(s.managed_keyed_state for s in op.state.subtasks))


def read_rows(path: str) -> int:
    with FlinkSavepoint.open(path) as sp:
        return sum(len(rows.keys) for sub in _keyed(sp).keyed_subtasks() for _, rows in sub.states.values())


def all_rows(path: str) -> tuple[str | None, list, list]:
    with FlinkSavepoint.open(path) as sp:
        op = _keyed(sp)
        parts = [rows for sub in op.keyed_subtasks() for _, rows in sub.states.values()]
        return (op.keyed_layout(op.state.subtasks[0].index), [k for r in parts for k in r.keys.to_pylist()],
                [v for r in parts for v in r.values.to_pylist()])


def take_real(version: str, keys: int, out: pathlib.Path) -> tuple[str, str]:
    """(retained HashMap checkpoint, canonical savepoint) of the job ``bulk-keys`` run by Flink ``version``."""
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # the harness: compat_tests/ of this checkout
    from compat_tests.flink import harness
    from compat_tests.flink.checkpoints import CheckpointCase, checkpoint_config

    job = f"bulk-{keys}"
    case = CheckpointCase("hashmap-bulk", job, "hashmap", False, "0")
    checkpoints = out / "checkpoints"
    tasks = [{"action": "generate", "job": job, "max_parallelism": MAX_PARALLELISM, "timeout_s": 600,
              "config": checkpoint_config(version, case, checkpoints), "out": str(out / "checkpointed"),
              "checkpoint_dir": str(checkpoints)},
             {"action": "generate", "job": job, "max_parallelism": MAX_PARALLELISM, "timeout_s": 600,
              # Filesystem storage: the job manager's caps state at 5 MiB.
              "config": harness.flink_config(version, backend="hashmap", checkpoint_dir=str(out / "unused")),
              "out": str(out / "canonical")}]
    for result in harness.run_tasks(version, tasks, log_dir=out / "logs"):
        if not result["ok"]:
            raise harness.FlinkError(harness.short_error(result["error"]))
    retained = [p for p in checkpoints.glob("*/chk-*") if (p / "_metadata").is_file()]
    assert len(retained) == 1, retained
    return str(retained[0]), str(out / "canonical" / "savepoint")


def measure(name: str, heap: str, unified: str, repeat: int, entries: int) -> None:
    """Both read as the same rows; print the best rows/s of each and their ratio."""
    heap_layout, heap_keys, heap_values = all_rows(heap)
    unified_layout, unified_keys, unified_values = all_rows(unified)
    assert (heap_layout, unified_layout) == ("heap", "savepoint-format"), (heap_layout, unified_layout)
    assert sorted(zip(heap_keys, heap_values)) == sorted(zip(unified_keys, unified_values)), name
    rates = {}
    for what, path in (("heap", heap), ("savepoint", unified)):
        best, rows = min(timed(lambda: read_rows(path)) for _ in range(repeat))
        assert rows == len(heap_keys)
        rates[what] = rows / best
    print(json.dumps({"shape": name, "entries": entries, "rows": len(heap_keys),
                      "heap_rows_per_s": round(rates["heap"]), "savepoint_rows_per_s": round(rates["savepoint"]),
                      "heap_over_savepoint": round(rates["heap"] / rates["savepoint"], 3)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=300_000)
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", default=None)
    parser.add_argument("--flink", metavar="VERSION", help="measure a real Flink checkpoint of the job bulk-N")
    args = parser.parse_args()
    if args.flink:
        root = tempfile.mkdtemp(prefix="pyref-heap-bench-", dir=args.dir)
        try:
            heap, unified = take_real(args.flink, args.entries, pathlib.Path(root))
            measure(f"flink-{args.flink}-bulk", heap, unified, args.repeat, args.entries)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        return
    for name in args.shapes.split(","):
        root = tempfile.mkdtemp(prefix="pyref-heap-bench-", dir=args.dir)
        try:
            heap, unified = make_snapshots(root, SHAPES[name], args.entries)
            measure(name, heap, unified, args.repeat, args.entries)
        finally:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
