"""Reading RocksDB native state (SST files) against the canonical-savepoint reader, on the same
state taken by real Flink, in one run.

    PYREF_FLINK_ARCHIVES=... .venv/bin/python bench/flink_native_read.py [--keys 500000] [--version 2.3.0] [--dir /tmp/bench]

Runs the corpus job ``bulk-N`` (jobs/BulkJob.java: N String keys, a VALUE and a one-element LIST
state each, 2N rows, parallelism 2, max parallelism 128, RocksDB) twice in one JVM and stops it
once with a canonical and once with a native-format savepoint of the same state. Then, best of
--repeat, times pyref's read of every keyed row of both (``keyed_subtasks``: the rows an import
transcodes; the native read parses and merges every SST file) and of decoding the VALUE state to
Python (``keyed_state("value").items()``), and prints rows per second of each and their ratio.

Measured (2 cores, Flink 2.3.0, 1M and 2M rows, the streaming merge): canonical 5.6 to 10 M rows/s,
native 0.41 to 0.42 M rows/s at both sizes (4 to 8 %: linear in the rows, not quadratic); decoding the
VALUE state 1.6 to 1.9 M against 0.20 M values/s (a single state's view reads every state's files).
After inlining one-byte varints and taking a key group's rows at a time (400k rows, same machine):
canonical 9.2 M, native 0.80 M rows/s (8.7 %); decoding 1.53 M against 0.36 M values/s.
Key groups resolved as columns and data blocks decoded 64 at once (400k keys, same machine; main's
checkout run right after on its own savepoint): native 0.74 -> 1.61 M rows/s (6.2 -> 12.3 % of
canonical's 11.9 to 13.1 M), decoding 0.35 -> 0.66 M values/s. (Until then core_bench imported the
installed pyref before this checkout's was put on the path.)
Keys and values kept as Arrow columns from the data block on (no bytes object per entry), 256
blocks a batch, trailers read in place (500k keys, same machine loaded by other jobs, this
checkout and the one before run one after the other): rows 0.51 -> 1.94 M rows/s, 0.123 -> 0.286
of canonical's 4.1 to 6.8 M; decoding 0.26 -> 0.65 M values/s, 0.221 -> 0.462. In process CPU
time the read is 0.57 s against canonical's 0.18 s: 0.31 s of it decodes the data blocks (0.16 s
laying down the keys' shared prefixes a step of the restart intervals at a time), 0.07 to
0.14 s sorts the key groups the two flushed files interleave.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import shutil
import sys
import tempfile

# This checkout's harness (compat_tests/) and pyref, ahead of an installed pyref core_bench would import.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from compat_tests.flink import harness  # noqa: E402
from core_bench import timed  # noqa: E402  (bench/ is the script's directory)
from pyref.flink import FlinkSavepoint  # noqa: E402


def take(version: str, keys: int, out: pathlib.Path) -> dict[str, pathlib.Path]:
    """format -> the savepoint of ``bulk-keys`` Flink stopped with in that format."""
    formats = ("canonical", "native")
    tasks = [{"action": "generate", "job": f"bulk-{keys}", "max_parallelism": 128, "timeout_s": 600,
              # Filesystem storage (no periodic checkpoints): the job manager's caps state at 5 MiB.
              "config": harness.flink_config(version, backend="rocksdb", checkpoint_dir=str(out / "checkpoints")),
              "out": str(out / f),
              **({"savepoint_format": f} if f == "native" else {})} for f in formats]
    for f, result in zip(formats, harness.run_tasks(version, tasks, log_dir=out / "logs")):
        if not result["ok"]:
            raise harness.FlinkError(harness.short_error(result["error"]))
        print(json.dumps({"format": f, "flink_seconds": round(result["seconds"], 1)}))
    return {f: out / f / "savepoint" for f in formats}


def read_rows(path: pathlib.Path) -> int:
    with FlinkSavepoint.open(path, uids=["bulk"]) as sp:
        return sum(len(rows.keys) for sub in sp.operator("bulk").keyed_subtasks() for _, rows in sub.states.values())


def decode_values(path: pathlib.Path) -> int:
    with FlinkSavepoint.open(path, uids=["bulk"]) as sp:
        return sum(1 for _ in sp.operator("bulk").keyed_state("value").items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=500_000)
    parser.add_argument("--version", default="2.3.0")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    work = pathlib.Path(tempfile.mkdtemp(prefix="pyref-native-bench-", dir=args.dir))
    try:
        savepoints = take(args.version, args.keys, work)
        rates = {}
        for f, path in savepoints.items():
            size = sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
            for what, fn, expected in (("rows", read_rows, 2 * args.keys), ("decode", decode_values, args.keys)):
                best, count = min(timed(lambda: fn(path)) for _ in range(args.repeat))
                assert count == expected, (f, what, count, expected)
                rates[f, what] = count / best
                print(json.dumps({"format": f, "phase": what, "rows": count, "bytes": size, "seconds": round(best, 3),
                                  "rows_per_s": round(count / best)}))
        for what in ("rows", "decode"):
            print(json.dumps({"phase": what, "native_over_canonical": round(rates["native", what] /
                                                                          rates["canonical", what], 3)}))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
