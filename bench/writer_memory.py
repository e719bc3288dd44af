"""Writer memory and time against the number of key groups (issue 9, item 11).

    python bench/writer_memory.py                    # 96 and 288 MiB of state
    python bench/writer_memory.py --mib 32 96        # quicker
    python bench/writer_memory.py --part windowed    # format 1.2: namespaced TTL state, or timers

Writes keyed state (16-byte keys, 112-byte values, batches of 100 000 entries) with
the default writer options (``--part windowed``: a namespaced TTL state, 16-byte keys,
16-byte windows, 96-byte TTL cells; ``--part timers``: a namespaced timer service,
16-byte keys and windows, 8-byte timestamps; both added encoded, with their key groups), each run in its own process, at max parallelism 128 and
32768, and at 32768 with an 8 MiB buffer. Prints, per run, wall time and peak RSS
(VmHWM, the process's own baseline subtracted: what the write added), then the ratios
measured in this run:

- time at 32768 / time at 128, same state (target: close to 1);
- RSS growth per MiB of state between the smallest and the largest state (target: ~0,
  memory is bounded by the buffer budget, not the state size; give sizes above the
  64 MiB budget, below it the buffer is still filling).
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

BATCH = 100_000
#: Bytes of each column of a row, per part written.
COLUMN_BYTES = {"keyed": (16, 112), "windowed": (16, 16, 96), "timers": (16, 16, 8)}


def child(path: str, mib: int, max_parallelism: int, buffer_mib: int | None, part: str) -> None:
    import numpy as np
    import pyarrow as pa

    from pyref import SavepointWriter
    from pyref.key_groups import compute_key_groups
    from pyref.serializers import Bytes, TimeWindow
    from pyref.ttl import TtlConfig

    rng = np.random.default_rng(0)

    def binary(data: np.ndarray, width: int) -> pa.Array:
        n = len(data) // width
        offsets = pa.py_buffer((np.arange(n + 1, dtype=np.int32) * width).tobytes())
        return pa.Array.from_buffers(pa.binary(), n, [None, offsets, pa.py_buffer(data.tobytes())])

    baseline = peak_rss_bytes()
    widths = COLUMN_BYTES[part]
    batches = max(1, (mib << 20) // (BATCH * sum(widths)))
    options = {} if buffer_mib is None else {"buffer_bytes": buffer_mib << 20}
    start = time.perf_counter()
    with SavepointWriter(path, **options) as w:
        op = w.add_operator("op", parallelism=1, max_parallelism=max_parallelism, key_serializer=Bytes())
        if part == "timers":
            state = op.timer_service("timers", "event_time", namespace_serializer=TimeWindow())
        elif part == "windowed":
            state = op.keyed_state("state", Bytes(), namespace_serializer=TimeWindow(), ttl=TtlConfig(60000))
        else:
            state = op.keyed_state("state", Bytes())
        for _ in range(batches):
            columns = [binary(rng.integers(0, 256 if i == 0 else 16, BATCH * width, dtype=np.uint8), width)
                       for i, width in enumerate(widths)]
            if part == "keyed":
                state.add(*columns)
            else:  # cells of the right widths, not decoded by the writer: what is measured is the buffering
                state.add_encoded(columns, compute_key_groups(columns[0], max_parallelism, op.key_type))
    seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "rss": peak_rss_bytes() - baseline,
                      "state": batches * BATCH * sum(widths)}))


def run(root: str, mib: int, max_parallelism: int, buffer_mib: int | None, part: str) -> dict:
    path = os.path.join(root, f"sp-{mib}-{max_parallelism}-{buffer_mib}")
    proc = subprocess.run([sys.executable, __file__, "--child", path, str(mib), str(max_parallelism),
                           str(buffer_mib or 0), part], capture_output=True, text=True, check=True)
    shutil.rmtree(path, ignore_errors=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        path, mib, max_parallelism, buffer_mib, part = sys.argv[2:7]
        child(path, int(mib), int(max_parallelism), int(buffer_mib) or None, part)
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mib", type=int, nargs="+", default=[96, 288],
                        help="state sizes to write (whole batches of 100 000 rows)")
    parser.add_argument("--part", choices=sorted(COLUMN_BYTES), default="keyed", help="what is written")
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="pyref-writer-bench-", dir=args.dir)
    print(f"python {sys.version.split()[0]}; pyref from {os.path.dirname(__import__('pyref').__file__)}")
    try:
        results = {}
        for mib in args.mib:
            for max_parallelism, buffer_mib in ((128, None), (32768, None), (32768, 8)):
                r = results[mib, max_parallelism, buffer_mib] = run(root, mib, max_parallelism, buffer_mib, args.part)
                print(f"  {r['state'] / 2**20:6.0f} MiB state, max parallelism {max_parallelism:5}, buffer "
                      f"{'64' if buffer_mib is None else buffer_mib} MiB: {r['seconds']:6.2f} s, "
                      f"+{r['rss'] / 2**20:5.0f} MiB RSS")
        for mib in args.mib:
            low, high = results[mib, 128, None], results[mib, 32768, None]
            print(f"time at 32768 / time at 128, {mib} MiB: {high['seconds'] / low['seconds']:.2f}x")
        small, large = min(args.mib), max(args.mib)
        if results[small, 128, None]["state"] != results[large, 128, None]["state"]:
            for max_parallelism, buffer_mib in ((128, None), (32768, None), (32768, 8)):
                a, b = results[small, max_parallelism, buffer_mib], results[large, max_parallelism, buffer_mib]
                slope = (b["rss"] - a["rss"]) / (b["state"] - a["state"])
                print(f"RSS growth per MiB of state, max parallelism {max_parallelism}, buffer "
                      f"{'64' if buffer_mib is None else buffer_mib} MiB: {slope:.2f} MiB/MiB")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
