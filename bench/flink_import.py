"""Importing a Flink savepoint (pyref.flink.import_flink) against pyref's own write of the
same rows, the Spark import on local[2], and peak RSS, in one run.

    python bench/flink_import.py                       # ~1 GB Flink savepoint (deleted afterwards)
    python bench/flink_import.py --gb 0.1 --no-spark   # quick look

The Flink savepoint is made by the exact-layout synthetic builder (the byte layout of
Flink's canonical savepoint as pyref.testing.flink_bytes writes it, checked against real
Flink savepoints by the corpus tests): writing 1 GB of keyed state with a real Flink job
takes a JVM, a cluster and far longer than the import it measures. One keyed operator,
parallelism 8, max parallelism 128, String keys "key-000000001", key groups from Flink's
hash, three states per key: VALUE Long ``count``, VALUE String ``page`` (64 ASCII chars),
LIST Long ``history`` (two elements). Each phase runs in its own process:

  import   pyref.flink.import_flink, default options (zstd, 64 MiB batches of key groups)
  write    SavepointWriter of the same rows from Arrow columns (String keys hashed,
           Int64 / String / list<int64> values, zstd): pyref's own write throughput
  spark    pyref.spark.import_flink on local[2] (one task per state handle)

Prints one JSON object per phase, then the ratio import throughput / write throughput
(target >= 0.5) and the import's peak RSS (target < 1 GiB).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from _process import peak_rss_bytes  # bench/ is on sys.path: the scripts run as files

PARALLELISM = 8
MAX_PARALLELISM = 128
PAGE = 64
BYTES_PER_KEY = 31 + 88 + 40  # the three (key, value) pairs of a key, framed as Flink frames them


def _rows(ids):
    """Every row of keys ``ids`` (a numpy array), derived from the id alone: key name bytes
    (n, 13), count, page bytes (n, 64), history (n, 2)."""
    import numpy as np

    digits = (ids[:, None] // 10 ** np.arange(8, -1, -1)) % 10
    names = np.hstack([np.frombuffer(b"key-", np.uint8)[None, :].repeat(len(ids), 0), (48 + digits).astype(np.uint8)])
    mixed = ids[:, None].astype(np.uint32) * np.uint32(2654435761) + np.arange(PAGE, dtype=np.uint32) * np.uint32(40503)
    page = (97 + (mixed >> np.uint32(7)) % np.uint32(26)).astype(np.uint8)
    history = np.stack([ids * 3, ids * 3 + 1], axis=1).astype(np.int64)
    return names.astype(np.uint8), ids.astype(np.int64), page, history


def _binary(cells) -> "pa.Array":
    import numpy as np
    import pyarrow as pa

    n, width = cells.shape
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(np.arange(n + 1, dtype=np.int32) * width),
                                                  pa.py_buffer(np.ascontiguousarray(cells).tobytes())])


def _phase_generate(path: str, keys: int) -> dict:
    import numpy as np
    import pyarrow as pa

    from pyref.key_groups import compute_key_groups
    from pyref.testing.flink_bytes import (LONG, STRING, keyed_proxy, keyed_state_meta, list_snapshot, metadata,
                                           operator, relative_handle, savepoint_keyed_handle, snapshot, subtask)

    t0 = time.monotonic()
    ids = np.arange(keys, dtype=np.int64)
    groups = np.empty(keys, np.int64)
    for start in range(0, keys, 1 << 20):  # Flink's key group of every key, a million at a time
        names = _rows(ids[start:start + (1 << 20)])[0]
        groups[start:start + len(names)] = compute_key_groups(_binary(names).cast(pa.string()), MAX_PARALLELISM,
                                                              "string")
    proxy = keyed_proxy(snapshot(STRING), [keyed_state_meta("count", "VALUE", snapshot(LONG)),
                                           keyed_state_meta("page", "VALUE", snapshot(STRING)),
                                           keyed_state_meta("history", "LIST", list_snapshot(snapshot(LONG)))])
    per_subtask = MAX_PARALLELISM // PARALLELISM
    handles = []
    for index in range(PARALLELISM):
        first = index * per_subtask
        mine = np.flatnonzero((groups >= first) & (groups < first + per_subtask))
        mine = mine[np.argsort(groups[mine], kind="stable")]
        names, count, page, history = _rows(ids[mine])
        n = len(mine)
        kg = groups[mine].astype(np.uint8)[:, None]
        # Composite key: key group, StringValue (length + 1, ASCII), the void namespace.
        key = np.hstack([kg, np.full((n, 1), 14, np.uint8), names, np.zeros((n, 1), np.uint8)])

        def records(value):
            return np.hstack([_i32(key.shape[1], n), key, _i32(value.shape[1], n), value])

        runs = [records(count.astype(">i8").view(np.uint8).reshape(n, 8)),
                records(np.hstack([np.full((n, 1), PAGE + 1, np.uint8), page])),
                records(np.hstack([history[:, :1].astype(">i8").view(np.uint8).reshape(n, 8),
                                   np.full((n, 1), ord(","), np.uint8),
                                   history[:, 1:].astype(">i8").view(np.uint8).reshape(n, 8)]))]
        bounds = np.searchsorted(groups[mine], np.arange(first, first + per_subtask + 1))
        offsets, position = [], len(proxy)
        name = f"keyed-{index}"
        with open(os.path.join(path, name), "wb") as f:
            f.write(proxy)
            for g in range(per_subtask):
                lo, hi = bounds[g], bounds[g + 1]
                if lo == hi:
                    offsets.append(0)
                    continue
                offsets.append(position)
                for state_id, run in enumerate(runs):
                    block = run[lo:hi].copy()
                    block[-1, 4] |= 0x80  # "meta data follows" on the last pair before a new state id
                    f.write(state_id.to_bytes(2, "big"))
                    f.write(block.tobytes())
                    position += 2 + block.size
                f.write(b"\xff\xff")
                position += 2
        handles.append(subtask(index, None, savepoint_keyed_handle(first, offsets, relative_handle(name, position))))
    with open(os.path.join(path, "_metadata"), "wb") as f:
        f.write(metadata([operator(bytes(16), PARALLELISM, MAX_PARALLELISM, handles)]))
    return {"phase": "generate", "keys": keys, "rows": 3 * keys, "bytes": _size(path),
            "seconds": round(time.monotonic() - t0, 1)}


def _i32(value: int, n: int):
    import numpy as np

    return np.full((n, 4), np.frombuffer(int(value).to_bytes(4, "big"), np.uint8), np.uint8)


def _size(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def _phase_import(source: str, target: str) -> dict:
    from pyref.flink import import_flink

    t0 = time.monotonic()
    report = import_flink(source, target, uids={"0" * 32: "op"})
    elapsed = time.monotonic() - t0
    return {"phase": "import", "rows": report.rows, "seconds": round(elapsed, 2),
            "rows_per_s": round(report.rows / elapsed), "mb_per_s": round(_size(source) / elapsed / 1e6, 1),
            "bytes_written": _size(target), "peak_rss_bytes": peak_rss_bytes()}


def _phase_write(target: str, keys: int, batch: int) -> dict:
    import numpy as np
    import pyarrow as pa

    from pyref import SavepointWriter
    from pyref.serializers import Int64, String

    t0 = time.monotonic()
    rows = 0
    with SavepointWriter(target) as w:
        op = w.add_operator("op", PARALLELISM, max_parallelism=MAX_PARALLELISM, key_serializer=String())
        count = op.keyed_state("count", Int64())
        page = op.keyed_state("page", String())
        history = op.keyed_state("history", Int64(), kind="list")
        for start in range(0, keys, batch):
            names, counts, pages, histories = _rows(np.arange(start, min(start + batch, keys), dtype=np.int64))
            key_array = _binary(names).cast(pa.string())
            count.add(key_array, pa.array(counts))
            page.add(key_array, _binary(pages).cast(pa.string()))
            history.add(key_array, pa.FixedSizeListArray.from_arrays(pa.array(histories.reshape(-1)), 2)
                        .cast(pa.list_(pa.int64())))
            rows += 3 * len(names)
    elapsed = time.monotonic() - t0
    return {"phase": "write", "rows": rows, "seconds": round(elapsed, 2), "rows_per_s": round(rows / elapsed),
            "bytes_written": _size(target), "peak_rss_bytes": peak_rss_bytes()}


def _phase_spark(source: str, target: str) -> dict:
    from pyref.spark import import_flink, spark_session

    spark = spark_session("local[2]", app_name="pyref flink import bench", **{"spark.ui.enabled": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    try:
        t0 = time.monotonic()
        report = import_flink(spark, source, target, uids={"0" * 32: "op"}, progress=False)
        elapsed = time.monotonic() - t0
    finally:
        spark.stop()
    return {"phase": "spark", "rows": report.rows, "seconds": round(elapsed, 2),
            "rows_per_s": round(report.rows / elapsed), "mb_per_s": round(_size(source) / elapsed / 1e6, 1),
            "driver_peak_rss_bytes": peak_rss_bytes()}


def _run_phase(args: list[str]) -> dict:
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--phase", *args], check=True,
                          capture_output=True, text=True)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    for key in [k for k in result if k.endswith("peak_rss_bytes")]:
        result[key.replace("_bytes", "_mib")] = round(result.pop(key) / 2**20, 1)
    print(json.dumps(result), flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gb", type=float, default=1.0, help="size of the Flink savepoint (default 1)")
    parser.add_argument("--batch", type=int, default=1 << 18, help="keys per add of the write phase")
    parser.add_argument("--no-spark", action="store_true")
    parser.add_argument("--dir", default=None)
    parser.add_argument("--phase", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        name, *rest = args.phase
        phase = {"generate": lambda: _phase_generate(rest[0], int(rest[1])),
                 "import": lambda: _phase_import(rest[0], rest[1]),
                 "write": lambda: _phase_write(rest[0], int(rest[1]), int(rest[2])),
                 "spark": lambda: _phase_spark(rest[0], rest[1])}[name]
        print(json.dumps(phase()))
        return
    root = tempfile.mkdtemp(prefix="pyref-flink-import-bench-", dir=args.dir)
    try:
        flink = os.path.join(root, "flink")
        os.mkdir(flink)
        keys = int(args.gb * 1e9 / BYTES_PER_KEY)
        _run_phase(["generate", flink, str(keys)])
        imported = _run_phase(["import", flink, os.path.join(root, "imported")])
        written = _run_phase(["write", os.path.join(root, "written"), str(keys), str(args.batch)])
        summary = {"flink_bytes": _size(flink), "rows": imported["rows"],
                   "import_vs_write_throughput": round(written["seconds"] / imported["seconds"], 2),
                   "import_peak_rss_mib": imported["peak_rss_mib"], "write_peak_rss_mib": written["peak_rss_mib"]}
        if not args.no_spark:
            spark = _run_phase(["spark", flink, os.path.join(root, "spark")])
            summary["spark_vs_import_throughput"] = round(imported["seconds"] / spark["seconds"], 2)
        print(json.dumps({"summary": summary}))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
