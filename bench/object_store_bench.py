"""Object-store benchmark: pyref against pyarrow Parquet through the same S3 server, in one run.

    python bench/object_store_bench.py [--entries 12500000] [--codec zstd] [--repeat 2]

Starts moto's S3 server on 127.0.0.1 (the ``test`` extra) and writes the same table
(16 B keys, 64 B values; 12.5 M entries are 1 GB raw) both ways: a savepoint through
obstore (``s3://``, multipart uploads, ranged GETs) and one Parquet file through
pyarrow's S3 filesystem. Prints ratios against Parquet measured in the same run
(higher is better):
- write: Parquet write time / pyref write time, same codec;
- read: Parquet full read time / pyref full read time (decoded to Arrow; pyref scans
  in storage order, ``scan_batches``: Parquet's reader too returns rows in file order);
- with --state-order, also the full read in key-group order (``to_arrow``): one ranged
  GET per chunk, which moto's server answers in time proportional to the whole object
  (it reads the object for every ranged GET), so expect minutes at 1 GB;
- restore: bytes a subtask restoring at a new parallelism fetched from the server
  (manifest included, counted by a proxy in front of it) / the stored bytes of its
  key groups.
Targets (issue 15): write and read >= 1.0x, restore <= 1.05.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import pyarrow.fs as pafs
import pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from core_bench import make_table, read_pyref, timed, write_pyref  # noqa: E402

from pyref import Savepoint  # noqa: E402
from pyref.io import ObjectStoreIO  # noqa: E402
from pyref.testing.s3 import TEST_CREDENTIALS, FaultProxy, S3Server  # noqa: E402

BUCKET = "pyref-bench"


def scan_pyref(location) -> int:
    """A full read of the state in storage order; the number of entries."""
    view = Savepoint.open(location).operator("op").keyed_state("state")
    return sum(batch.num_rows for batch in view.scan_batches())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=12_500_000)
    parser.add_argument("--codec", default="zstd", choices=["zstd", "none"])
    parser.add_argument("--parallelism", type=int, default=4, help="parallelism the savepoint is written at")
    parser.add_argument("--restore-parallelism", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=2, help="best of N for each timing")
    parser.add_argument("--state-order", action="store_true", help="also time the full read in key-group order")
    args = parser.parse_args()

    with S3Server() as server:
        server.create_bucket(BUCKET)
        os.environ.update(server.env())
        arrow_s3 = pafs.S3FileSystem(access_key=TEST_CREDENTIALS["AWS_ACCESS_KEY_ID"],
                                     secret_key=TEST_CREDENTIALS["AWS_SECRET_ACCESS_KEY"], region="us-east-1",
                                     endpoint_override=server.endpoint.removeprefix("http://"), scheme="http")
        table = make_table(args.entries)
        pq_codec = "zstd" if args.codec == "zstd" else "none"
        t_pq_w = t_sp_w = t_pq_r = t_sp_r = float("inf")
        for i in range(args.repeat):
            pq_path, sp_url = f"{BUCKET}/parquet-{i}/t.parquet", f"s3://{BUCKET}/pyref-{i}/sp"
            t_pq_w = min(t_pq_w, timed(lambda: pq.write_table(table, pq_path, compression=pq_codec,
                                                              filesystem=arrow_s3))[0])
            t_sp_w = min(t_sp_w, timed(lambda: write_pyref(table, sp_url, args.codec, args.parallelism))[0])
        for _ in range(args.repeat):
            t_pq_r = min(t_pq_r, timed(lambda: pq.read_table(pq_path, filesystem=arrow_s3).num_rows)[0])
            t, rows = timed(lambda: scan_pyref(sp_url))
            assert rows == args.entries, rows
            t_sp_r = min(t_sp_r, t)
        t_state = timed(lambda: read_pyref(sp_url))[0] if args.state_order else None

        with FaultProxy(server.endpoint) as proxy:
            # How each full read asks: number and size of its GETs (moto reads the whole object
            # for every ranged GET, so on this server the count, not the bytes, sets the time).
            proxied_s3 = pafs.S3FileSystem(access_key=TEST_CREDENTIALS["AWS_ACCESS_KEY_ID"],
                                           secret_key=TEST_CREDENTIALS["AWS_SECRET_ACCESS_KEY"], region="us-east-1",
                                           endpoint_override=proxy.endpoint.removeprefix("http://"), scheme="http")
            with proxy.counting() as parquet_gets:
                pq.read_table(pq_path, filesystem=proxied_s3)
            with proxy.counting() as pyref_gets:
                scan_pyref(ObjectStoreIO(sp_url, endpoint=proxy.endpoint))
            ratios = []
            for index in range(args.restore_parallelism):
                io = ObjectStoreIO(sp_url, endpoint=proxy.endpoint)  # what a restoring subtask does, counted
                with proxy.counting() as exchanges:
                    sub = Savepoint.open(io).restore_plan(args.restore_parallelism).subtask("op", index)
                    assert sub.keyed_arrow("state").num_rows > 0
                fetched = sum(e.body_bytes for e in exchanges if e.method == "GET")
                ratios.append((fetched, sub.planned_bytes()))

        sizes = {"parquet": arrow_s3.get_file_info(pq_path).size,
                 "savepoint": sum(f.size for f in Savepoint.open(sp_url).manifest.data_files)}
        print(f"{args.entries:,} entries (16 B keys, 64 B values, {table.nbytes / 1e9:.2f} GB raw), codec "
              f"{args.codec}, through moto's S3 server on 127.0.0.1, best of {args.repeat}")
        print(f"  stored: parquet {sizes['parquet'] / 1e6:.1f} MB, savepoint data files {sizes['savepoint'] / 1e6:.1f} MB")
        print(f"  write: parquet {t_pq_w:.2f}s, pyref {t_sp_w:.2f}s  -> ratio {t_pq_w / t_sp_w:.2f}x (target >= 1.0)")
        print(f"  read:  parquet {t_pq_r:.2f}s, pyref {t_sp_r:.2f}s  -> ratio {t_pq_r / t_sp_r:.2f}x (target >= 1.0)")
        if t_state is not None:
            print(f"  read in key-group order (to_arrow): pyref {t_state:.2f}s  -> ratio {t_pq_r / t_state:.2f}x")
        for name, exchanges in (("parquet", parquet_gets), ("pyref", pyref_gets)):
            gets = [e.body_bytes for e in exchanges if e.method == "GET"]
            print(f"  full read of {name}: {len(gets)} GETs, {sum(gets) / max(len(gets), 1) / 1e6:.2f} MB each on average")
        worst = max(f / s for f, s in ratios)
        print(f"  restore {args.parallelism} -> {args.restore_parallelism}: bytes fetched / share, worst subtask "
              f"{worst:.4f} (target <= 1.05; per subtask "
              f"{[f'{f / 1e6:.1f}/{s / 1e6:.1f} MB' for f, s in ratios]})")


if __name__ == "__main__":
    main()
