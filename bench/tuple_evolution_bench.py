"""Tuple evolution benchmark: migrating a column of tuple values (spec/serializers.md §5.3)
on whole buffers against the value-by-value path, and against reading the column, in one run.

    python bench/tuple_evolution_bench.py [--values 1000000] [--repeat 3]

The column holds tuple(url: string, n: int32, score: nullable(float64)) values; the
migration adds `ts: int64` first with a default, drops `score` and widens `n` to int64. Prints
(higher is better):
- column / value: time of the value-by-value migration (decode each value, convert,
  encode; what every composite migrated by before) / time of the column path
  (`Tuple.migrate_column`), and that both wrote the same bytes;
- column / decode: time of decoding the column to Arrow (`Tuple.decode_array`, what a
  reader spends on these values anyway) / time of the column migration.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pyarrow as pa

from pyref.serializers import Float64, Int32, Int64, Nullable, String, Tuple

OLD = Tuple(String(), Int32(), Nullable(Float64()), names=("url", "n", "score"))
NEW = Tuple(Int64(), String(), Int64(), names=("ts", "url", "n"), defaults={"ts": 0})


def make_column(n: int, seed: int = 0) -> pa.Array:
    """``n`` encodings of OLD, built on whole buffers (no per-value Python)."""
    from pyref.serializers.tuple_columns import join_fields

    rng = np.random.default_rng(seed)
    urls = pa.array([f"/page/{i}" for i in rng.integers(0, 10_000, n)])
    counts = rng.integers(-(2**31), 2**31, n).astype(np.int32)
    nulls = rng.random(n) < 0.2
    score_column = Nullable(Float64()).encode_array(pa.array(rng.random(n), mask=nulls))
    return join_fields(OLD.fields, [String().encode_array(urls), Int32().encode_array(pa.array(counts)),
                                    score_column])


def best_of(repeat: int, fn):
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def by_value(column: pa.Array) -> pa.Array:
    convert = NEW.value_converter(OLD)
    return pa.array([NEW.encode(convert(OLD.decode(b))) for b in column.to_pylist()], pa.binary())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--values", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3, help="best of N for each timing")
    args = parser.parse_args()
    column = make_column(args.values)
    print(f"{args.values} values, {column.nbytes / 2**20:.1f} MiB of tuple encodings")
    assert NEW.value_converter(OLD) is not None, "not a migration of fields"
    t_column, migrated = best_of(args.repeat, lambda: NEW.migrate_column(OLD, column))
    t_value, expected = best_of(1, lambda: by_value(column))
    t_decode, _ = best_of(args.repeat, lambda: OLD.decode_array(column))
    same = migrated.equals(expected)
    print(f"column path   {t_column:8.3f} s  ({args.values / t_column / 1e6:.2f} M values/s)")
    print(f"value path    {t_value:8.3f} s  -> column / value: {t_value / t_column:.1f}x  (same bytes: {same})")
    print(f"decode_array  {t_decode:8.3f} s  -> column / decode: {t_decode / t_column:.1f}x")
    if not same:
        raise SystemExit("the two paths wrote different bytes")


if __name__ == "__main__":
    main()
