"""What the per-read key checks cost (spec/format.md §7.1, §7.6): a full Arrow scan of a
keyed state with the checks, against the same scan with them switched off, in one run.

    python bench/key_checks.py [--keys 500000] [--repeat 3]

Prints both times and their ratio (checked / unchecked; lower is better). Readers must make
the checks (issue 13); the ratio says what they cost where decoding is cheapest.
"""

from __future__ import annotations

import argparse
import pathlib
import tempfile
import time

import numpy as np

from pyref import Savepoint, SavepointWriter
from pyref.reader import KeyGroupedView
from pyref.serializers import Int64, String


def scan_seconds(path: pathlib.Path) -> float:
    view = Savepoint.open(str(path)).operator("op").keyed_state("count")
    start = time.perf_counter()
    sum(b.num_rows for b in view.scan_batches())
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", type=int, default=500_000)
    parser.add_argument("--repeat", type=int, default=3, help="best of N for each timing")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        path = pathlib.Path(root) / "sp"
        with SavepointWriter(str(path)) as w:
            op = w.add_operator("op", parallelism=4, max_parallelism=128, key_serializer=String())
            op.keyed_state("count", Int64()).add([f"user-{i}" for i in range(args.keys)], np.arange(args.keys))
        checks = KeyGroupedView._check_keys
        checked, unchecked = [], []
        try:
            for _ in range(args.repeat):
                KeyGroupedView._check_keys = checks
                checked.append(scan_seconds(path))
                KeyGroupedView._check_keys = lambda self, chunk, keys: None
                unchecked.append(scan_seconds(path))
        finally:
            KeyGroupedView._check_keys = checks
    c, u = min(checked), min(unchecked)
    print(f"scan of {args.keys:,} string keys: with key checks {c:.3f}s, without {u:.3f}s -> ratio {c / u:.2f}")


if __name__ == "__main__":
    main()
