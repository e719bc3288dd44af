"""The corpus of real Flink savepoints is written once and is self-consistent (no JVM needed)."""

from __future__ import annotations

import json
import pathlib
import struct
import subprocess

import pytest

from compat_tests._build import SUMS_NAME, read_sums
from compat_tests.conformance import verify_corpora
from compat_tests.flink.generate import CASES, CORPUS, METADATA_MAGIC

HINT = ("the Flink corpus is written once: add cases with python -m compat_tests.flink.generate (it never "
        "overwrites); never edit, regenerate or delete a committed case")
CASE_DIRS = sorted(p.parent for p in CORPUS.glob("*/*/*/truth.json"))


def case_id(path: pathlib.Path) -> str:
    return path.relative_to(CORPUS).as_posix()


def test_files_match_sha256sums():
    if not (CORPUS / SUMS_NAME).exists():
        pytest.skip("the Flink corpus is not generated yet")
    problems = verify_corpora(CORPUS.parent, [CORPUS.name])
    assert not problems, f"{HINT}:\n" + "\n".join(problems)


def test_sums_only_grow_since_the_last_commit():
    rel = f"compat_tests/flink/corpus/{SUMS_NAME}"
    try:
        proc = subprocess.run(["git", "-C", str(CORPUS), "show", f"HEAD:{rel}"], capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        pytest.skip("git is not available")
    if proc.returncode != 0:
        pytest.skip(f"{rel} is not committed yet")
    committed = dict(reversed(line.split("  ", 1)) for line in proc.stdout.decode().splitlines() if line.strip())
    current = read_sums(CORPUS)
    changed = sorted(p for p, digest in committed.items() if current.get(p) != digest)
    assert not changed, f"{HINT}; changed or removed since HEAD:\n" + "\n".join(changed[:50])


@pytest.mark.parametrize("case", CASE_DIRS, ids=case_id)
def test_case_is_complete(case):
    version, backend, name = case.relative_to(CORPUS).parts
    metadata = (case / "savepoint" / "_metadata").read_bytes()
    magic, metadata_version = struct.unpack(">II", metadata[:8])
    assert magic == METADATA_MAGIC
    generated = json.loads((case / "generated.json").read_text(encoding="utf-8"))
    assert (generated["flink_version"], generated["backend"], generated["case"]) == (version, backend, name)
    assert generated["metadata_version"] == metadata_version
    assert generated["jars"]["sha256"] and generated["java"] and generated["generator"]
    truth = json.loads((case / "truth.json").read_text(encoding="utf-8"))
    assert truth["schema"] == "pyref-flink-truth/1"
    assert (truth["flink_version"], truth["backend"], truth["case"]) == (version, backend, name)
    assert name in {c.name for c in CASES}


@pytest.mark.parametrize("case", CASE_DIRS, ids=case_id)
def test_truth_places_state_where_flink_assigns_it(case):
    """Every list has one entry per subtask; every key and timer sits in the subtask Flink's
    key-group ranges give its key group (the job recorded both independently)."""
    truth = json.loads((case / "truth.json").read_text(encoding="utf-8"))
    for uid, op in truth["operators"].items():
        p, max_p = op["parallelism"], op["max_parallelism"]
        assert len(op["operator_id"]) == 32, uid
        for name, state in op["operator_state"].items():
            assert len(state["subtasks"]) == p, (uid, name)
        rows = [e for s in op["keyed_state"].values() for e in s["entries"]] + op["timers"]
        for row in rows:
            assert 0 <= row["key_group"] < max_p, (uid, row)
            assert row["subtask"] == row["key_group"] * p // max_p, (uid, row)


def test_readme_lists_every_case():
    readme = (CORPUS / "README.md").read_text(encoding="utf-8")
    for case in CASE_DIRS:
        version, backend, name = case.relative_to(CORPUS).parts
        assert f"| {version} | {backend} | {name} |" in readme, case_id(case)
