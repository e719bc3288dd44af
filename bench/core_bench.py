"""Core benchmark: pyref against pyarrow Parquet on the same table, in one run.

    python bench/core_bench.py [--entries 5000000] [--codec zstd] [--dir /tmp/bench]

Prints ratios against the reference measured in the same run (higher is better
for throughput ratios):
- write: Parquet write time / pyref write time of N keyed entries (16 B keys,
  64 B values), same codec;
- read: Parquet full read time / pyref full read time (decoded to Arrow);
- read amplification: bytes a subtask reads when restoring at a new
  parallelism (manifest included) / the stored bytes of its key groups;
- rescale: state bytes written by a rescale (should be 0);
- windowed (format 1.2): keys x 10 one-minute windows each, a count per (key, window)
  as keyed state under time-window namespaces; write and read ratios against Parquet
  of the same rows (key, window start, window end, count).
Targets (issue 2, issue 10): write and read >= 1.0x, amplification <= 1.05, rescale 0 bytes.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pyref import Savepoint, SavepointWriter, rescale
from pyref.serializers import Bytes, Int64, TimeWindow

BATCH = 500_000


def make_table(n: int, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    keys = rng.integers(0, 256, size=(n, 16), dtype=np.uint8).tobytes()
    values = rng.integers(0, 16, size=(n, 64), dtype=np.uint8).tobytes()  # compressible, like real state

    def binary(data: bytes, width: int) -> pa.Array:
        offsets = pa.py_buffer((np.arange(n + 1, dtype=np.int32) * width).tobytes())
        return pa.Array.from_buffers(pa.binary(), n, [None, offsets, pa.py_buffer(data)])

    return pa.table({"key": binary(keys, 16), "value": binary(values, 64)})


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def dir_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def write_pyref(table: pa.Table, path: str, codec: str, parallelism: int) -> None:
    with SavepointWriter(path, codec=codec) as w:
        op = w.add_operator("op", parallelism=parallelism, key_serializer=Bytes())
        state = op.keyed_state("state", Bytes())
        for batch in table.to_batches(BATCH):
            state.add(batch.column(0), batch.column(1))


def read_pyref(path: str) -> int:
    view = Savepoint.open(path).operator("op").keyed_state("state")
    return view.to_arrow().num_rows


WINDOWS = 10
MINUTE = 60_000


def make_windowed_table(keys: int, seed: int = 1) -> pa.Table:
    """Every key in each of WINDOWS consecutive one-minute windows, with a count."""
    rng = np.random.default_rng(seed)
    n = keys * WINDOWS
    key_bytes = np.repeat(rng.integers(0, 256, size=(keys, 16), dtype=np.uint8), WINDOWS, axis=0).tobytes()
    offsets = pa.py_buffer((np.arange(n + 1, dtype=np.int32) * 16).tobytes())
    starts = np.tile(np.arange(WINDOWS, dtype=np.int64) * MINUTE, keys)
    return pa.table({"key": pa.Array.from_buffers(pa.binary(), n, [None, offsets, pa.py_buffer(key_bytes)]),
                     "window_start": starts, "window_end": starts + MINUTE,
                     "count": rng.integers(0, 1000, size=n, dtype=np.int64)})


def write_windowed(table: pa.Table, path: str, codec: str, parallelism: int) -> None:
    with SavepointWriter(path, codec=codec) as w:
        op = w.add_operator("op", parallelism=parallelism, key_serializer=Bytes())
        state = op.keyed_state("count", Int64(), namespace_serializer=TimeWindow())
        for batch in table.to_batches(BATCH):
            windows = pa.StructArray.from_arrays([batch.column(1), batch.column(2)], names=["start", "end"])
            state.add(batch.column(0), batch.column(3), namespaces=windows)


def read_windowed(path: str) -> int:
    return Savepoint.open(path).operator("op").keyed_state("count").to_arrow().num_rows


def compare_with_parquet(label: str, table: pa.Table, root: str, write, read, codec: str, repeat: int) -> None:
    """Best-of-``repeat`` write and read of ``table`` by pyref and by Parquet; prints the ratios."""
    pq_path, sp_path = os.path.join(root, f"{label}.parquet"), os.path.join(root, label)
    pq_codec = "zstd" if codec == "zstd" else "none"
    t_pq_w = t_sp_w = t_pq_r = t_sp_r = float("inf")
    for _ in range(repeat):
        t_pq_w = min(t_pq_w, timed(lambda: pq.write_table(table, pq_path, compression=pq_codec))[0])
        shutil.rmtree(sp_path, ignore_errors=True)
        t_sp_w = min(t_sp_w, timed(lambda: write(table, sp_path))[0])
    for _ in range(repeat):
        t_pq_r = min(t_pq_r, timed(lambda: pq.read_table(pq_path).num_rows)[0])
        t, rows = timed(lambda: read(sp_path))
        assert rows == table.num_rows, rows
        t_sp_r = min(t_sp_r, t)
    print(f"  {label} sizes: parquet {os.path.getsize(pq_path) / 1e6:.1f} MB, savepoint "
          f"{dir_bytes(sp_path) / 1e6:.1f} MB")
    print(f"  {label} write: parquet {t_pq_w:.2f}s, pyref {t_sp_w:.2f}s  -> ratio {t_pq_w / t_sp_w:.2f}x "
          "(target >= 1.0)")
    print(f"  {label} read:  parquet {t_pq_r:.2f}s, pyref {t_sp_r:.2f}s  -> ratio {t_pq_r / t_sp_r:.2f}x "
          "(target >= 1.0)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=5_000_000)
    parser.add_argument("--codec", default="zstd", choices=["zstd", "none"])
    parser.add_argument("--parallelism", type=int, default=4, help="parallelism the savepoint is written at")
    parser.add_argument("--restore-parallelism", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=3, help="best of N for each timing")
    parser.add_argument("--windowed-keys", type=int, default=500_000,
                        help="keys of the windowed case (each in 10 windows; 0 skips it)")
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()

    root = tempfile.mkdtemp(prefix="pyref-bench-", dir=args.dir)
    try:
        table = make_table(args.entries)
        pq_path, sp_path = os.path.join(root, "t.parquet"), os.path.join(root, "sp")
        pq_codec = "zstd" if args.codec == "zstd" else "none"
        t_pq_w = t_sp_w = t_pq_r = t_sp_r = float("inf")
        for _ in range(args.repeat):
            t_pq_w = min(t_pq_w, timed(lambda: pq.write_table(table, pq_path, compression=pq_codec))[0])
            shutil.rmtree(sp_path, ignore_errors=True)
            t_sp_w = min(t_sp_w, timed(lambda: write_pyref(table, sp_path, args.codec, args.parallelism))[0])
        for _ in range(args.repeat):
            t_pq_r = min(t_pq_r, timed(lambda: pq.read_table(pq_path).num_rows)[0])
            t, rows = timed(lambda: read_pyref(sp_path))
            assert rows == args.entries, rows
            t_sp_r = min(t_sp_r, t)

        sp = Savepoint.open(sp_path)
        manifest_bytes = os.path.getsize(os.path.join(sp_path, "_manifest"))
        plan = sp.restore_plan(args.restore_parallelism)
        amplifications = []
        for sub in plan.subtasks("op"):
            fresh = Savepoint.open(sp_path)  # what a restoring subtask does: open, then read its share
            share = sum(c.range.length for c in sub.keyed_chunks("state") if c.HasField("range"))
            fresh_sub = fresh.restore_plan(args.restore_parallelism).subtask("op", sub.index)
            rows = fresh_sub.keyed_arrow("state").num_rows
            amplifications.append((manifest_bytes + fresh.store.bytes_read) / share)
            assert rows > 0

        target = os.path.join(root, "sp-rescaled")
        rescale(sp_path, target, args.restore_parallelism)
        data = os.path.join(target, "data")  # state bytes live in data files; _manifest and .lock are not state
        rescale_state_bytes = dir_bytes(data) if os.path.isdir(data) else 0

        mb = table.nbytes / 1e6
        print(f"{args.entries:,} entries (16 B keys, 64 B values, {mb:.0f} MB raw), codec {args.codec}")
        print(f"  sizes: parquet {os.path.getsize(pq_path) / 1e6:.1f} MB, savepoint {dir_bytes(sp_path) / 1e6:.1f} MB")
        print(f"  write: parquet {t_pq_w:.2f}s, pyref {t_sp_w:.2f}s  -> ratio {t_pq_w / t_sp_w:.2f}x (target >= 1.0)")
        print(f"  read:  parquet {t_pq_r:.2f}s, pyref {t_sp_r:.2f}s  -> ratio {t_pq_r / t_sp_r:.2f}x (target >= 1.0)")
        print(f"  read amplification restoring {args.parallelism} -> {args.restore_parallelism}: max "
              f"{max(amplifications):.4f} (target <= 1.05; per subtask {[round(a, 4) for a in amplifications]})")
        print(f"  rescale: {rescale_state_bytes} state bytes written, manifest "
              f"{os.path.getsize(os.path.join(target, '_manifest'))} bytes (target 0 state bytes)")
        if args.windowed_keys:
            windowed = make_windowed_table(args.windowed_keys)
            print(f"windowed: {args.windowed_keys:,} keys x {WINDOWS} windows = {windowed.num_rows:,} counts "
                  f"(16 B keys, time-window namespace, int64 count), codec {args.codec}")
            compare_with_parquet("windowed", windowed, root,
                                 lambda table, path: write_windowed(table, path, args.codec, args.parallelism),
                                 read_windowed, args.codec, args.repeat)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
