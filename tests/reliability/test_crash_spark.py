"""Crash safety of the Spark writer: kill -9 the whole Spark application (driver,
JVM, Python workers) while it replaces a savepoint, at random points and at exact
steps of the driver's commit. Same checks as test_crash.py: the path always reads
as one complete generation, the previous or the new one.

Needs pyspark and Java 17 (marker ``spark``). A Spark build takes 20-40 s here, so
every trial run is in the ``slow`` tier: SPARK_CRASH_TRIALS (default 50), or
SPARK_CRASH_TRIALS_QUICK (default 2) for the quick check.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from test_crash import check_intact  # noqa: E402

pytest.importorskip("pyspark")
pytest.importorskip("pandas")

WRITER = os.path.join(HERE, "spark_crash_writer.py")
ENTRIES = 20_000
pytestmark = pytest.mark.spark


def _spawn(path, generation, kill_at=None):
    argv = [sys.executable, WRITER, str(path), str(generation), str(ENTRIES)]
    if kill_at:
        argv += ["--kill-at", kill_at]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            start_new_session=True)


def _kill_group(proc) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver, its JVM and the JVM's Python workers
    except ProcessLookupError:
        pass
    proc.wait(timeout=120)
    proc.stdout.close()


def _wait_ready(proc) -> None:
    line = proc.stdout.readline().strip()
    assert line == "ready", f"the Spark writer did not start: {line!r}"


def run_spark_kill_trials(path, trials: int, seed: int) -> dict:
    rng = random.Random(seed)
    for generation in (0, 1):  # two full builds: the second measures how long a build takes
        proc = _spawn(path, generation)
        _wait_ready(proc)
        t0 = time.monotonic()
        out = proc.stdout.read()
        build_time = time.monotonic() - t0
        _kill_group(proc)
        assert "committed" in out
    check_intact(path, {1})
    current, outcomes, modes = 1, Counter(), Counter()
    for trial in range(trials):
        new = current + 1
        if trial % 4 == 3:  # every fourth trial: the driver dies at an exact step of its commit
            call, most = rng.choice([("fsync", 12), ("replace", 1), ("flock", 1), ("unlink", 12)])
            proc = _spawn(path, new, kill_at=f"{call}:{rng.randint(1, most)}")
            modes[call] += 1
            _wait_ready(proc)
            proc.wait(timeout=900)  # until the driver exits (killed, or committed)
        else:
            proc = _spawn(path, new)
            modes["timer"] += 1
            _wait_ready(proc)
            time.sleep(rng.uniform(0, build_time))
        _kill_group(proc)
        found = check_intact(path, {current, new})
        outcomes["new" if found == new else "old"] += 1
        current = found if found == new else current
    return {"trials": trials, "outcomes": dict(outcomes), "modes": dict(modes), "build_seconds": round(build_time, 1),
            "leftover_files": len(os.listdir(os.path.join(path, "data")))}


@pytest.mark.slow
def test_kill_9_of_the_spark_writer_keeps_a_complete_savepoint(tmp_path):
    result = run_spark_kill_trials(tmp_path / "sp", trials=int(os.environ.get("SPARK_CRASH_TRIALS_QUICK", 2)), seed=3)
    print("spark kill -9 trials:", result)


@pytest.mark.slow
def test_kill_9_of_the_spark_writer_many_trials(tmp_path):
    trials = int(os.environ.get("SPARK_CRASH_TRIALS", 50))
    result = run_spark_kill_trials(tmp_path / "sp", trials=trials, seed=int(os.environ.get("CRASH_SEED", 11)))
    print("spark kill -9 trials:", result)
