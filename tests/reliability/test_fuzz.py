"""The fuzzing harness in CI: every regression file and seed once, then a short
campaign per target (``python -m fuzz.run``; atheris when installed, else random
mutations). Long campaigns run outside CI (fuzz/README.md)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from fuzz.run import TARGETS, _inputs, regression_files  # noqa: E402
from fuzz.targets import run_one  # noqa: E402

SECONDS = float(os.environ.get("FUZZ_SECONDS", 6))


def _read(path):
    with open(path, "rb") as f:
        return f.read()


@pytest.mark.parametrize("target,path", regression_files(), ids=lambda v: os.path.basename(str(v)))
def test_regression_file(target, path):
    run_one(target, _read(path))


@pytest.mark.parametrize("target", TARGETS)
def test_seed_corpus(target):
    seeds = _inputs(os.path.join(ROOT, "fuzz", "corpus", target))
    assert seeds, "the seed corpus is committed (python -m fuzz.seeds)"
    for path in seeds:
        run_one(target, _read(path))


@pytest.mark.parametrize("target", TARGETS)
def test_short_campaign(target, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "fuzz.run", "--target", target, "--seconds", str(SECONDS),
                           "--work", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=SECONDS * 10 + 120)
    print(proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else "")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
