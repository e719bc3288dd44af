"""Flink savepoint reading (pyref.flink) against pyref's own read of the same rows, in one run.

    python bench/flink_read.py [--entries 2000000] [--compress] [--dir /tmp/bench]

Writes a canonical Flink savepoint of N keys as Flink's full-snapshot writer
lays it out (String keys "key-000000001", a VALUE state of Long and a LIST
state of two Longs, max parallelism 128, 2 subtasks, key groups from Flink's
own hash), and the same rows (composite key bytes -> value bytes) as a pyref
savepoint. Prints, best of --repeat:
- walk: time to find every (key, value) pair of both states (pyref.flink's
  numpy walk over all key groups at once) and its MB/s;
- columns: time to split keys into key / namespace and build the Arrow
  binary columns the importer transcodes;
- decode: time to decode the VALUE state's keys and values to Python;
- ratios: pyref's own write time and read time of the same rows
  (to Arrow, codec none) / Flink read time (walk + columns of both states),
  higher is better. An import writes what it reads, so its throughput is
  bounded by 1 / (1 / read ratio + 1) of pyref's write throughput.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile

import numpy as np
import pyarrow as pa
from core_bench import timed  # bench/ is the script's directory

from pyref import Savepoint, SavepointWriter
from pyref.flink import FlinkSavepoint
from pyref.key_groups import compute_key_groups
from pyref.serializers import Bytes
from pyref.testing.flink_bytes import (
    LONG,
    STRING,
    framed,
    keyed_proxy,
    keyed_state_meta,
    list_snapshot,
    metadata,
    operator,
    relative_handle,
    savepoint_keyed_handle,
    snapshot,
    subtask,
)

MAX_PARALLELISM = 128
PARALLELISM = 2


def _i32(values: np.ndarray) -> np.ndarray:
    return values.astype(">i4").view(np.uint8).reshape(-1, 4)


def _records(keys: np.ndarray, values: np.ndarray) -> np.ndarray:
    """(n, record bytes): int key length, key, int value length, value."""
    n = len(keys)
    return np.hstack([_i32(np.full(n, keys.shape[1])), keys, _i32(np.full(n, values.shape[1])), values])


def make_flink_savepoint(path: str, n: int, compress: bool) -> dict[str, pa.Table]:
    """Write the savepoint; return each state's rows (key, value bytes) for pyref."""
    names = [f"key-{i:09d}" for i in range(n)]
    groups = compute_key_groups(pa.array(names), MAX_PARALLELISM, "string")
    groups = np.asarray(groups, np.int64)
    order = np.argsort(groups, kind="stable")
    groups = groups[order]
    chars = np.frombuffer("".join(names).encode("ascii"), np.uint8).reshape(n, 13)[order]
    # Composite key: key group byte, StringValue (length + 1, ASCII chars), void namespace byte.
    keys = np.hstack([groups[:, None].astype(np.uint8), np.full((n, 1), 14, np.uint8), chars, np.zeros((n, 1), np.uint8)])
    numbers = order.astype(">i8").view(np.uint8).reshape(n, 8)
    value_records = _records(keys, numbers)
    list_values = np.hstack([numbers, np.full((n, 1), ord(","), np.uint8), numbers])
    list_records = _records(keys, list_values)
    proxy = keyed_proxy(snapshot(STRING), [keyed_state_meta("v", "VALUE", snapshot(LONG)),
                                           keyed_state_meta("l", "LIST", list_snapshot(snapshot(LONG)))], compress)
    bounds = np.searchsorted(groups, np.arange(MAX_PARALLELISM + 1))
    subtasks = []
    per_subtask = MAX_PARALLELISM // PARALLELISM
    for index in range(PARALLELISM):
        parts, offsets, position = [proxy], [], len(proxy)
        for kg in range(index * per_subtask, (index + 1) * per_subtask):
            lo, hi = bounds[kg], bounds[kg + 1]
            if lo == hi:
                offsets.append(0)
                continue
            section = bytearray()
            for state_id, records in enumerate((value_records, list_records)):
                run = records[lo:hi].copy()
                run[-1, 4] |= 0x80  # "meta data follows" flag on the last pair's first key byte
                section += state_id.to_bytes(2, "big") + run.tobytes()
            section += b"\xff\xff"
            data = framed(bytes(section)) if compress else bytes(section)
            offsets.append(position)
            parts.append(data)
            position += len(data)
        stream = b"".join(parts)
        with open(os.path.join(path, f"keyed-{index}"), "wb") as f:
            f.write(stream)
        handle = savepoint_keyed_handle(index * per_subtask, offsets, relative_handle(f"keyed-{index}", len(stream)))
        subtasks.append(subtask(index, None, handle))
    with open(os.path.join(path, "_metadata"), "wb") as f:
        f.write(metadata([operator(bytes(16), PARALLELISM, MAX_PARALLELISM, subtasks)]))
    offsets = np.arange(n + 1, dtype=np.int32)

    def column(cells: np.ndarray) -> pa.Array:
        width = cells.shape[1]
        return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets * width), pa.py_buffer(cells.tobytes())])

    return {"v": pa.table({"key": column(keys), "value": column(numbers)}),
            "l": pa.table({"key": column(keys), "value": column(list_values)})}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=2_000_000)
    parser.add_argument("--compress", action="store_true", help="snappy-compress the key groups, as Flink can")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="pyref-flink-bench-", dir=args.dir)
    try:
        flink_path, pyref_path = os.path.join(root, "flink"), os.path.join(root, "pyref")
        os.mkdir(flink_path)
        rows = make_flink_savepoint(flink_path, args.entries, args.compress)
        def write_pyref() -> None:
            shutil.rmtree(pyref_path, ignore_errors=True)
            with SavepointWriter(pyref_path, codec="none") as w:
                op = w.add_operator("op", parallelism=PARALLELISM, key_serializer=Bytes())
                for name, table in rows.items():
                    op.keyed_state(name, Bytes()).add(table.column(0), table.column(1))

        size = sum(os.path.getsize(os.path.join(flink_path, f)) for f in os.listdir(flink_path))
        t_walk = t_cols = t_decode = t_pyref = t_write = float("inf")
        for _ in range(args.repeat):
            t_write = min(t_write, timed(write_pyref)[0])
            sp = FlinkSavepoint.open(flink_path)
            op = sp.operators[0]
            t, _ = timed(lambda: op.keyed_state_names)
            t_walk = min(t_walk, t)
            t, tables = timed(lambda: [op.keyed_state(name).to_arrow(raw=True) for name in ("v", "l")])
            assert tables[0].num_rows == args.entries
            t_cols = min(t_cols, t)
            view = op.keyed_state("v")
            t, items = timed(lambda: list(view.items()))
            assert len(items) == args.entries
            t_decode = min(t_decode, t)
            sp.close()
            pyref_op = Savepoint.open(pyref_path).operator("op")
            t, count = timed(lambda: sum(pyref_op.keyed_state(name).to_arrow().num_rows for name in rows))
            assert count == 2 * args.entries
            t_pyref = min(t_pyref, t)
        pairs = 2 * args.entries
        print(f"{args.entries:,} keys x 2 states, Flink savepoint {size / 1e6:.0f} MB, "
              f"{'snappy' if args.compress else 'uncompressed'}")
        print(f"  walk:    {t_walk:.2f}s  ({size / 1e6 / t_walk:.0f} MB/s, {pairs / t_walk / 1e6:.2f}M pairs/s)")
        print(f"  columns: {t_cols:.2f}s  (keys split, Arrow binary columns of both states)")
        print(f"  decode:  {t_decode:.2f}s  (VALUE state keys and values to Python)")
        t_flink = t_walk + t_cols
        print(f"  ratios to Flink walk + columns {t_flink:.2f}s: pyref write of the same rows {t_write:.2f}s "
              f"-> {t_write / t_flink:.2f}x; pyref read {t_pyref:.2f}s -> {t_pyref / t_flink:.2f}x")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
