"""Exporting a savepoint to Flink (pyref.flink.export_savepoint) against pyref's own write of
the same rows, in one run; and the same export as a Spark job on local[2].

    python bench/flink_export.py [--entries 7000000] [--value-bytes 100] [--no-spark] [--dir /tmp/bench]

The savepoint: one operator at parallelism 4, max parallelism 128, String keys
("key-000000001"), a VALUE state of Long and a VALUE state of String (--value-bytes
ASCII characters), about 1 GB of keyed state with the defaults. Prints:
- write: pyref's own write of those rows (SavepointWriter, default codec zstd);
- export: the core export of that savepoint to Flink 2.3 (reading pyref's chunks,
  transcoding to Flink's encodings, writing the four keyed streams and _metadata),
  its MB/s of Flink state and the ratio write time / export time (target >= 0.5x);
- spark: the export as a Spark job on local[2] (one task per Flink subtask), and its
  ratio to the core export.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile

import numpy as np
import pyarrow as pa
from _process import peak_rss_bytes
from core_bench import dir_bytes, timed  # bench/ is the script's directory

from pyref import SavepointWriter
from pyref.flink import export_savepoint
from pyref.serializers import Int64, String

PARALLELISM = 4
MAX_PARALLELISM = 128


def _strings(chars: np.ndarray) -> pa.Array:
    """Fixed-width ASCII rows as an Arrow string array, without a Python object per row."""
    n, width = chars.shape
    offsets = np.arange(n + 1, dtype=np.int64) * width
    return pa.Array.from_buffers(pa.large_string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(chars.tobytes())])


def rows(n: int, value_bytes: int, seed: int = 7) -> tuple[pa.Array, pa.Array, pa.Array]:
    digits = (np.arange(n)[:, None] // 10 ** np.arange(8, -1, -1)) % 10 + ord("0")
    keys = np.hstack([np.tile(np.frombuffer(b"key-", np.uint8), (n, 1)), digits.astype(np.uint8)])
    letters = np.random.default_rng(seed).integers(ord("a"), ord("z") + 1, (n, value_bytes), dtype=np.uint8)
    return _strings(keys), pa.array(np.arange(n, dtype=np.int64) * 3), _strings(letters)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=7_000_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--no-spark", action="store_true")
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="pyref-flink-export-bench-", dir=args.dir)
    try:
        keys, counts, names = rows(args.entries, args.value_bytes)
        source, target = os.path.join(root, "pyref"), os.path.join(root, "flink")
        state_bytes = keys.nbytes * 2 + counts.nbytes + names.nbytes - 3 * 8 * (args.entries + 1)

        def write() -> None:
            with SavepointWriter(source, overwrite=True) as w:
                op = w.add_operator("op", parallelism=PARALLELISM, max_parallelism=MAX_PARALLELISM,
                                    key_serializer=String())
                op.keyed_state("count", Int64()).add(keys, counts)
                op.keyed_state("name", String()).add(keys, names)

        def export() -> None:
            export_savepoint(source, target, flink_version="2.3", overwrite=True)

        t_write = t_export = float("inf")
        for _ in range(args.repeat):
            t_write = min(t_write, timed(write)[0])
            t_export = min(t_export, timed(export)[0])
        flink_bytes = dir_bytes(target)
        print(f"{args.entries:,} keys x 2 states: {state_bytes / 1e9:.2f} GB of keys and values, pyref savepoint "
              f"{dir_bytes(source) / 1e9:.2f} GB (zstd), Flink savepoint {flink_bytes / 1e9:.2f} GB")
        print(f"  write:  pyref's own write of the rows  {t_write:6.1f}s  ({state_bytes / 1e6 / t_write:.0f} MB/s)")
        print(f"  export: to Flink 2.3, core             {t_export:6.1f}s  ({flink_bytes / 1e6 / t_export:.0f} MB/s)"
              f"  -> {t_write / t_export:.2f}x pyref's write throughput (target >= 0.5x)")
        print(f"  peak RSS of this process: {peak_rss_bytes() / 1e9:.2f} GB")
        if not args.no_spark:
            from pyref.spark import export_flink, spark_session

            spark = spark_session("local[2]", app_name="pyref flink export bench",
                                  **{"spark.ui.showConsoleProgress": "false"})
            spark.sparkContext.setLogLevel("ERROR")
            t_spark, _ = timed(lambda: export_flink(spark, source, target, flink_version="2.3", overwrite=True,
                                                    progress=False))
            spark.stop()
            print(f"  spark:  to Flink 2.3, local[2]         {t_spark:6.1f}s  ({flink_bytes / 1e6 / t_spark:.0f} MB/s)"
                  f"  -> {t_export / t_spark:.2f}x the core export")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
