"""Manifest-only commands at high parallelism: cost must follow the manifest, not
old x new parallelism (issue 9, items 13-15).

    python bench/manifest_scaling.py                 # the issue's sizes
    python bench/manifest_scaling.py --quick         # smaller sizes, same ratios

Builds small manifests by hand (no state bytes are read by these commands) and runs
each command in its own process, measuring wall time, peak RSS (VmHWM) and the bytes
it prints. Each line compares a command at high parallelism with the same command on
the same manifest at a small one, measured in the same run:

- inspect --json: 100 operators (no state) at parallelism P vs 128;
- rescale: a UNION state of K partitions, K -> K and 100 -> 32768 vs K -> 2 and 100 -> 2;
- plan -p P on a keyed state of C chunks vs plan -p 128;
- the same with a timer service of C chunks and a broadcast state every subtask
  shares (format 1.2).

Targets: time and RSS ratios close to the ratio of output sizes (O(manifest + output)),
no command above a few seconds or a few hundred MiB at these sizes.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid

from _process import peak_rss_bytes  # bench/ is on sys.path: the scripts run as files


class _Counter(io.TextIOBase):
    """A stdout that counts what is printed and keeps none of it."""

    def __init__(self) -> None:
        self.count = 0

    def write(self, text: str) -> int:
        self.count += len(text.encode())
        return len(text)


def child(argv: list[str]) -> None:
    """Run ``pyref`` with ``argv`` in this process; print time, peak RSS, output bytes."""
    from pyref.cli import main

    out = _Counter()
    start = time.perf_counter()
    with contextlib.redirect_stdout(out):
        code = main(argv)
    print(json.dumps({"seconds": time.perf_counter() - start, "rss": peak_rss_bytes(), "out": out.count,
                      "code": code}))


def run(argv: list[str]) -> dict:
    proc = subprocess.run([sys.executable, __file__, "--child", *argv], capture_output=True, text=True, check=True)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    if result["code"] != 0:
        raise SystemExit(f"pyref {' '.join(argv)} exited {result['code']}: {proc.stderr[-2000:]}")
    return result


def _write(path: str, manifest, data_bytes: int = 0) -> str:
    from pyref.manifest import encode_manifest

    os.makedirs(os.path.join(path, "data"), exist_ok=True)
    if data_bytes:
        with open(os.path.join(path, "data", "d.svd"), "wb") as f:
            f.write(b"\x89SVD\r\n\x1a\n")
            f.truncate(data_bytes)  # sparse: the commands measured here read no state bytes
    with open(os.path.join(path, "_manifest"), "wb") as f:
        f.write(encode_manifest(manifest))
    return path


def _snapshot(serializer_id: str):
    from pyref._proto.savepoint.v1 import serializer_pb2

    return serializer_pb2.SerializerSnapshot(serializer_id=serializer_id, version=1)


def operators_manifest(operators: int, parallelism: int):
    from pyref._proto.savepoint.v1 import manifest_pb2 as pb

    m = pb.Manifest(savepoint_id=str(uuid.uuid4()))
    for i in range(operators):
        m.operators.add(operator_id=f"op-{i}", parallelism=parallelism, max_parallelism=32768)
    return m


def union_manifest(partitions: int, parallelism: int) -> tuple[object, int]:
    """A UNION state of ``partitions`` partitions, each one range over its own 100-byte chunk."""
    from pyref._proto.savepoint.v1 import manifest_pb2 as pb

    m = pb.Manifest(savepoint_id=str(uuid.uuid4()))
    size = 8 + 100 * partitions
    m.data_files.add(path="data/d.svd", size=size)
    op = m.operators.add(operator_id="op", parallelism=parallelism, max_parallelism=32768)
    ls = op.list_states.add(name="u", mode=pb.UNION, element_serializer=_snapshot("int64"))
    for i in range(partitions):
        ls.chunks.add(row_count=10, raw_length=100, crc32c=0).range.CopyFrom(
            pb.FileRange(file=0, offset=8 + 100 * i, length=100))
        ls.partitions.add().ranges.add(chunk=i, first=0, count=10)
    return m, size


def keyed_manifest(chunks: int, parallelism: int) -> tuple[object, int]:
    """A keyed state of ``chunks`` 100-byte chunks spread over 32768 key groups."""
    from pyref._proto.savepoint.v1 import manifest_pb2 as pb

    m = pb.Manifest(savepoint_id=str(uuid.uuid4()))
    size = 8 + 100 * chunks
    m.data_files.add(path="data/d.svd", size=size)
    op = m.operators.add(operator_id="op", parallelism=parallelism, max_parallelism=32768)
    op.key_serializer.CopyFrom(_snapshot("string"))
    ks = op.keyed_states.add(name="k", kind=pb.VALUE, value_serializer=_snapshot("int64"))
    for i in range(chunks):
        chunk = ks.chunks.add(key_group=i * 32768 // chunks, row_count=10, raw_length=100, crc32c=0)
        chunk.range.CopyFrom(pb.FileRange(file=0, offset=8 + 100 * i, length=100))
    return m, size


def timers_and_broadcast_manifest(chunks: int, parallelism: int) -> tuple[object, int]:
    """:func:`keyed_manifest` and, format 1.2, a timer service of ``chunks`` chunks and a
    broadcast state whose ``parallelism`` partitions all refer to one chunk."""
    from pyref._proto.savepoint.v1 import manifest_pb2 as pb
    from pyref.manifest import declare_features

    m, size = keyed_manifest(chunks, parallelism)
    op = m.operators[0]
    service = op.timer_services.add(name="t", domain=pb.EVENT_TIME)
    for i in range(chunks):
        chunk = service.chunks.add(key_group=i * 32768 // chunks, row_count=10, raw_length=100, crc32c=0)
        chunk.range.CopyFrom(pb.FileRange(file=0, offset=size + 100 * i, length=100))
    size += 100 * chunks
    rules = op.broadcast_states.add(name="rules", key_serializer=_snapshot("string"),
                                    value_serializer=_snapshot("string"))
    rules.chunks.add(row_count=10, raw_length=100, crc32c=0).range.CopyFrom(pb.FileRange(file=0, offset=size,
                                                                                         length=100))
    for _ in range(parallelism):
        rules.partitions.add().ranges.add(chunk=0, first=0, count=10)
    m.data_files[0].size = size + 100
    declare_features(m)
    return m, size + 100


def line(what: str, high: dict, low: dict) -> None:
    print(f"  {what}: {high['seconds']:.2f} s, {high['rss'] / 2**20:.0f} MiB RSS, {high['out'] / 1e6:.2f} MB printed"
          f"  | reference {low['seconds']:.2f} s, {low['rss'] / 2**20:.0f} MiB, {low['out'] / 1e6:.3f} MB"
          f"  -> ratios time {high['seconds'] / low['seconds']:.1f}x, RSS {high['rss'] / low['rss']:.2f}x, "
          f"output {high['out'] / max(low['out'], 1):.1f}x")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller sizes (about 8x less work)")
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    high = 4096 if args.quick else 32768
    union = 500 if args.quick else 2000
    chunks = 8192 if args.quick else 33000

    root = tempfile.mkdtemp(prefix="pyref-manifest-bench-", dir=args.dir)
    try:
        print(f"python {sys.version.split()[0]}; pyref from {os.path.dirname(__import__('pyref').__file__)}")
        a = _write(os.path.join(root, "ops-high"), operators_manifest(100, high))
        b = _write(os.path.join(root, "ops-low"), operators_manifest(100, 128))
        print(f"inspect --json, 100 operators, manifest {os.path.getsize(os.path.join(a, '_manifest'))} bytes:")
        line(f"parallelism {high}", run(["inspect", a, "--json"]), run(["inspect", b, "--json"]))

        m, size = union_manifest(union, union)
        src = _write(os.path.join(root, "union"), m, size)
        print(f"rescale (shallow), UNION state of {union} partitions, manifest "
              f"{os.path.getsize(os.path.join(src, '_manifest'))} bytes:")
        line(f"{union} -> {union}", run(["rescale", src, os.path.join(root, "u1"), "-p", str(union)]),
             run(["rescale", src, os.path.join(root, "u2"), "-p", "2"]))
        m, size = union_manifest(100, 100)
        src = _write(os.path.join(root, "union100"), m, size)
        line(f"100 -> {high}", run(["rescale", src, os.path.join(root, "u3"), "-p", str(high)]),
             run(["rescale", src, os.path.join(root, "u4"), "-p", "2"]))

        m, size = keyed_manifest(chunks, 128)
        src = _write(os.path.join(root, "keyed"), m, size)
        print(f"plan --json, keyed state of {chunks} chunks, manifest "
              f"{os.path.getsize(os.path.join(src, '_manifest'))} bytes:")
        line(f"-p {high}", run(["plan", src, "-p", str(high), "--json"]), run(["plan", src, "-p", "128", "--json"]))

        m, size = timers_and_broadcast_manifest(chunks, 128)
        src = _write(os.path.join(root, "timers"), m, size)
        print(f"plan --json, keyed state and timer service of {chunks} chunks each, broadcast state, manifest "
              f"{os.path.getsize(os.path.join(src, '_manifest'))} bytes:")
        line(f"-p {high}", run(["plan", src, "-p", str(high), "--json"]), run(["plan", src, "-p", "128", "--json"]))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
