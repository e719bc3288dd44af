"""Large state: write and read a multi-GB savepoint with the core writer and reader,
measuring peak RSS per phase (each phase in its own process).

    python bench/large_state.py --gb 10 --dir /tmp/large-state      # ~10 GB, deleted afterwards
    python bench/large_state.py --gb 0.5 --keep                      # quick look, kept

Keyed state of 16-byte keys and 1 KiB values (incompressible: stored raw), added in
batches of ``--batch`` entries. Phases:

  write    SavepointWriter, default chunk (1 MiB) and buffer (64 MiB) sizes
  read     every chunk read, CRC-checked and decoded (decode_array), one chunk at a time
  restore  restore plan at ``--restore-parallelism``; subtask 0 reads its key groups only:
           bytes read vs its planned share vs total / parallelism (read amplification)

Prints one JSON object per phase and a summary; peak RSS is the process's VmHWM.
The target is < 1 GiB peak RSS in every phase, whatever the state size.
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

VALUE_BYTES = 1024
KEY_BYTES = 16
PARALLELISM = 4
MAX_PARALLELISM = 128


def _phase_write(path: str, entries: int, batch: int) -> dict:
    import numpy as np
    import pyarrow as pa

    from pyref import SavepointWriter
    from pyref.serializers import Bytes

    rng = np.random.default_rng(42)
    pool = rng.integers(0, 256, size=2 * batch * VALUE_BYTES, dtype=np.uint8)  # values are windows of it
    value_offsets = np.arange(batch + 1, dtype=np.int32) * VALUE_BYTES
    key_offsets = np.arange(batch + 1, dtype=np.int32) * KEY_BYTES
    t0 = time.monotonic()
    with SavepointWriter(path) as w:
        op = w.add_operator("op", parallelism=PARALLELISM, max_parallelism=MAX_PARALLELISM, key_serializer=Bytes())
        state = op.keyed_state("kv", Bytes())
        done = 0
        while done < entries:
            n = min(batch, entries - done)
            ids = np.arange(done, done + n, dtype=">u8")
            keys = np.empty((n, 2), dtype=">u8")
            keys[:, 0] = ids
            keys[:, 1] = ids * np.uint64(0x9E3779B97F4A7C15)
            key_array = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(key_offsets[: n + 1]),
                                                               pa.py_buffer(keys.view(np.uint8))])
            start = int(rng.integers(0, batch)) * VALUE_BYTES
            values = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(value_offsets[: n + 1]),
                                                            pa.py_buffer(pool[start:start + n * VALUE_BYTES])])
            state.add(key_array, values)
            done += n
    elapsed = time.monotonic() - t0
    size = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(path) for f in fs)
    return {"phase": "write", "entries": entries, "bytes_on_disk": size, "seconds": round(elapsed, 1),
            "mb_per_s": round(size / elapsed / 1e6, 1), "peak_rss_bytes": peak_rss_bytes()}


def _phase_read(path: str) -> dict:
    from pyref import Savepoint

    t0 = time.monotonic()
    sp = Savepoint.open(path)
    view = sp.operator("op").keyed_state("kv")
    entries = value_bytes = 0
    for _, columns in view.read_encoded(view.proto.chunks):
        keys = view.key_serializer.decode_array(columns[0])
        values = view.value_serializer.decode_array(columns[1])
        entries += len(keys)
        value_bytes += values.nbytes
    elapsed = time.monotonic() - t0
    return {"phase": "read", "entries": entries, "bytes_read": sp.store.bytes_read, "seconds": round(elapsed, 1),
            "mb_per_s": round(sp.store.bytes_read / elapsed / 1e6, 1), "peak_rss_bytes": peak_rss_bytes()}


def _phase_restore(path: str, parallelism: int) -> dict:
    from pyref import Savepoint

    t0 = time.monotonic()
    sp = Savepoint.open(path)
    sub = sp.restore_plan(parallelism).subtask("op", 0)
    view = sp.operator("op").keyed_state("kv")
    chunks = sub.keyed_chunks("kv")
    entries = 0
    for _, columns in view.read_encoded(chunks):
        entries += len(view.value_serializer.decode_array(columns[1]))
    elapsed = time.monotonic() - t0
    total = sum(c.range.length for c in view.proto.chunks if c.WhichOneof("location") == "range")
    planned = sub.planned_bytes()
    groups = sub.key_group_range
    return {"phase": "restore", "parallelism": parallelism, "subtask": 0,
            "key_groups": f"{groups.first}..{groups.last}", "entries": entries,
            "bytes_read": sp.store.bytes_read, "planned_share_bytes": planned, "total_state_bytes": total,
            "read_amplification": round(sp.store.bytes_read / planned, 4) if planned else None,
            "share_of_total": round(sp.store.bytes_read / total, 4), "fair_share": round(1 / parallelism, 4),
            "seconds": round(elapsed, 1), "peak_rss_bytes": peak_rss_bytes()}


def _run_phase(args: list[str]) -> dict:
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--phase", *args],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"phase {args[0]} failed:\n{proc.stderr}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["peak_rss_mib"] = round(result["peak_rss_bytes"] / 2**20, 1)
    print(json.dumps(result), flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gb", type=float, default=10.0, help="state size in GB of values (10^9 bytes)")
    parser.add_argument("--dir", default=None, help="parent directory of the savepoint (default: a temp dir)")
    parser.add_argument("--batch", type=int, default=65536, help="entries per add() call")
    parser.add_argument("--restore-parallelism", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the savepoint")
    parser.add_argument("--phase", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        name, path, *rest = args.phase
        if name == "write":
            out = _phase_write(path, int(rest[0]), int(rest[1]))
        elif name == "read":
            out = _phase_read(path)
        else:
            out = _phase_restore(path, int(rest[0]))
        print(json.dumps(out))
        return
    parent = tempfile.mkdtemp(prefix="pyref-large-", dir=args.dir)
    path = os.path.join(parent, "sp")
    entries = int(args.gb * 1e9 / VALUE_BYTES)
    try:
        results = [_run_phase(["write", path, str(entries), str(args.batch)]),
                   _run_phase(["read", path]),
                   _run_phase(["restore", path, str(args.restore_parallelism)])]
    finally:
        if not args.keep:
            shutil.rmtree(parent, ignore_errors=True)
    peak = max(r["peak_rss_bytes"] for r in results)
    print(json.dumps({"summary": True, "gb": args.gb, "entries": entries,
                      "bytes_on_disk": results[0]["bytes_on_disk"], "peak_rss_mib": round(peak / 2**20, 1),
                      "under_1_gib": peak < 2**30, "read_amplification": results[2]["read_amplification"],
                      "restore_share_of_total": results[2]["share_of_total"],
                      "kept": path if args.keep else None}))


if __name__ == "__main__":
    main()
