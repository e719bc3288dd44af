"""Run a fuzz campaign or replay inputs.

    python -m fuzz.run --target savepoint --seconds 600          # atheris (coverage-guided)
    python -m fuzz.run --target chunk --seconds 20 --engine mutate  # no atheris: random mutations of the seeds
    python -m fuzz.run --replay fuzz/regressions                   # every regression file, once

Seeds come from ``fuzz/corpus/<target>/`` (read only); atheris adds the inputs it
finds to ``fuzz/.work/<target>/`` (not committed) and writes a crashing input to
``fuzz/crashes/``. A crash is any exception other than a SavepointError subclass,
a time over the per-input limit, or a traced-allocation peak over the bound
(see fuzz/targets.py). Turn a crash into a regression by fixing the core and
copying the file to ``fuzz/regressions/<target>/``.

The last line printed is a summary ``fuzz: target=... runs=N seconds=S``, also
appended to ``fuzz/.work/campaigns.log``.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TARGETS = ("manifest", "chunk", "serializer", "savepoint", "operations", "flink")


def _inputs(directory: str) -> list[str]:
    if not os.path.isdir(directory):
        return []
    return sorted(os.path.join(directory, n) for n in os.listdir(directory) if not n.startswith("."))


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def regression_files(root: str = os.path.join(HERE, "regressions")) -> list[tuple[str, str]]:
    """(target, path) of every regression file: ``regressions/<target>/<file>``."""
    return [(t, p) for t in TARGETS for p in _inputs(os.path.join(root, t))]


def _log(line: str) -> None:
    print(line, flush=True)
    os.makedirs(os.path.join(HERE, ".work"), exist_ok=True)
    with open(os.path.join(HERE, ".work", "campaigns.log"), "a") as f:
        f.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {line}\n")


def replay(paths: list[str]) -> int:
    from .targets import run_one

    files: list[tuple[str, str]] = []
    for p in paths:
        if os.path.isdir(p) and os.path.basename(p.rstrip("/")) in TARGETS:
            files += [(os.path.basename(p.rstrip("/")), f) for f in _inputs(p)]
        elif os.path.isdir(p):
            files += regression_files(p)
        else:  # regressions/<target>/<file> or crashes/<target>-crash-...
            parent = os.path.basename(os.path.dirname(os.path.abspath(p)))
            files.append((parent if parent in TARGETS else os.path.basename(p).split("-")[0], p))
    failures = 0
    for target, path in files:
        with open(path, "rb") as f:
            data = f.read()
        try:
            run_one(target, data)
        except Exception as exc:  # noqa: BLE001 - reporting every finding
            failures += 1
            print(f"FAIL {target} {path}: {type(exc).__name__}: {exc}", flush=True)
    print(f"replayed {len(files)} inputs, {failures} failed")
    return 1 if failures else 0


def _mutate(rng: random.Random, data: bytes, pool: list[bytes]) -> bytes:
    b = bytearray(data)
    for _ in range(rng.choice((1, 1, 2, 4, 8))):
        op = rng.randrange(7)
        if op == 0 and b:
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
        elif op == 1 and b:
            b[rng.randrange(len(b))] = rng.choice((0, 1, 0x7F, 0x80, 0xFF, rng.randrange(256)))
        elif op == 2 and b:
            del b[rng.randrange(len(b)):][: rng.randrange(1, 16)]
        elif op == 3:
            i = rng.randrange(len(b) + 1)
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 8)))
        elif op == 4 and len(b) >= 4:
            i = rng.randrange(len(b) - 3)
            b[i:i + 4] = rng.choice((b"\xff\xff\xff\xff", b"\x00\x00\x00\x80", b"\xff\xff\xff\x7f", b"\x00\x00\x00\x00"))
        elif op == 5 and pool:
            other = rng.choice(pool)
            i, j = rng.randrange(len(b) + 1), rng.randrange(len(other) + 1)
            b[i:] = other[j:]
        elif op == 6 and b:
            b = b[: rng.randrange(len(b))]
    return bytes(b)


def mutate_campaign(target: str, seconds: float, seed: int | None) -> tuple[int, list[str]]:
    """Random mutations of the seeds and regression files; returns (runs, failures)."""
    import tracemalloc

    from .targets import run_one

    started = not tracemalloc.is_tracing()
    tracemalloc.start()  # once: starting and stopping per input leaks in tracemalloc itself
    try:
        return _mutate_loop(target, seconds, seed, run_one)
    finally:
        if started:
            tracemalloc.stop()


def _mutate_loop(target: str, seconds: float, seed: int | None, run_one) -> tuple[int, list[str]]:
    rng = random.Random(seed)
    pool = [_read(p) for p in _inputs(os.path.join(HERE, "corpus", target))]
    pool += [_read(p) for t, p in regression_files() if t == target]
    pool = pool or [b""]
    deadline = time.monotonic() + seconds
    runs, failures = 0, []
    while time.monotonic() < deadline:
        data = _mutate(rng, rng.choice(pool), pool)
        runs += 1
        try:
            run_one(target, data)
        except Exception as exc:  # noqa: BLE001
            os.makedirs(os.path.join(HERE, "crashes"), exist_ok=True)
            path = os.path.join(HERE, "crashes", f"{target}-mutate-{runs}")
            with open(path, "wb") as f:
                f.write(data)
            failures.append(f"{path}: {type(exc).__name__}: {exc}")
            if len(failures) >= 10:
                break
    return runs, failures


def atheris_campaign(target: str, seconds: float, extra: list[str], work_root: str | None = None) -> int:
    """Run libFuzzer through atheris in a child process (it exits the process when done)."""
    work = os.path.join(work_root or os.path.join(HERE, ".work"), target)
    crashes = os.path.join(HERE, "crashes")
    os.makedirs(work, exist_ok=True)
    os.makedirs(crashes, exist_ok=True)
    argv = [sys.executable, "-m", "fuzz._atheris_main", target,
            f"-max_total_time={int(seconds)}", "-timeout=60", "-rss_limit_mb=3072", "-max_len=65536",
            f"-artifact_prefix={crashes}/{target}-", "-print_final_stats=1", *extra,
            work, os.path.join(HERE, "corpus", target)]
    t0 = time.monotonic()
    proc = subprocess.run(argv, cwd=ROOT, stderr=subprocess.PIPE, text=True, errors="replace")
    runs = 0
    for line in proc.stderr.splitlines():
        if line.startswith("stat::number_of_executed_units:"):
            runs = int(line.split(":")[-1])
    tail = "\n".join(proc.stderr.splitlines()[-40:])
    if proc.returncode != 0:
        print(tail, file=sys.stderr)
    _log(f"fuzz: target={target} engine=atheris runs={runs} seconds={time.monotonic() - t0:.0f} "
         f"status={'ok' if proc.returncode == 0 else 'CRASH'}")
    return proc.returncode


def _have_atheris() -> bool:
    try:
        import atheris  # noqa: F401
    except ImportError:
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="pyref fuzzing: campaigns and replays")
    parser.add_argument("--target", choices=[*TARGETS, "all"], default="all")
    parser.add_argument("--seconds", type=float, default=60, help="per target")
    parser.add_argument("--engine", choices=("auto", "atheris", "mutate"), default="auto")
    parser.add_argument("--seed", type=int, default=None, help="mutate engine RNG seed")
    parser.add_argument("--replay", nargs="+", metavar="PATH", help="run these files or directories once")
    parser.add_argument("--work", default=None, help="where atheris keeps new inputs (default fuzz/.work)")
    parser.add_argument("libfuzzer", nargs="*", help="extra libFuzzer flags (atheris engine), after --")
    args = parser.parse_args(argv)
    if args.replay:
        return replay(args.replay)
    engine = args.engine
    if engine == "auto":
        engine = "atheris" if _have_atheris() else "mutate"
    targets = TARGETS if args.target == "all" else (args.target,)
    status = 0
    for target in targets:
        if engine == "atheris":
            status |= atheris_campaign(target, args.seconds, args.libfuzzer, args.work) != 0
        else:
            t0 = time.monotonic()
            runs, failures = mutate_campaign(target, args.seconds, args.seed)
            for f in failures:
                print("FAIL", f, file=sys.stderr)
            _log(f"fuzz: target={target} engine=mutate runs={runs} seconds={time.monotonic() - t0:.0f} "
                 f"status={'ok' if not failures else 'CRASH'}")
            status |= bool(failures)
    return status


if __name__ == "__main__":
    sys.exit(main())
