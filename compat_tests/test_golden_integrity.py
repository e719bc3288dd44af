"""Goldens, rejects and forward cases are written once: every file is listed in
its corpus's SHA256SUMS, and no listed file changes or disappears."""

from __future__ import annotations

import json
import subprocess

import pytest

from compat_tests import ROOT
from compat_tests._build import SUMS_NAME, read_sums
from compat_tests.conformance import CORPORA, discover, verify_corpora

HINT = ("corpora are written once: add cases with the generators (they never overwrite), or a new golden set for "
        "a new format version; never edit, regenerate or delete a committed case")


@pytest.mark.parametrize("corpus", CORPORA)
def test_files_match_sha256sums(corpus):
    if not (ROOT / corpus / SUMS_NAME).exists():
        pytest.skip(f"{corpus} corpus not generated yet")
    problems = verify_corpora(ROOT, [corpus])
    assert not problems, f"{HINT}:\n" + "\n".join(problems)


@pytest.mark.parametrize("corpus", CORPORA)
def test_sums_only_grow_since_the_last_commit(corpus):
    """Against git HEAD: a committed entry is never changed or removed."""
    rel = f"compat_tests/{corpus}/{SUMS_NAME}"
    try:
        proc = subprocess.run(["git", "-C", str(ROOT.parent), "show", f"HEAD:{rel}"], capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        pytest.skip("git is not available")
    if proc.returncode != 0:
        pytest.skip(f"{rel} is not committed yet")
    committed = dict(reversed(line.split("  ", 1)) for line in proc.stdout.decode().splitlines() if line.strip())
    current = read_sums(ROOT / corpus)
    changed = sorted(p for p, digest in committed.items() if current.get(p) != digest)
    assert not changed, f"{HINT}; changed or removed since HEAD:\n" + "\n".join(changed[:50])


def test_every_case_is_complete():
    for case in discover():
        expectation = case.expectation()
        assert expectation["parallelisms"], case.name
        assert (case.directory / "generated.json").exists(), case.name
        if case.expects_error:
            assert expectation["category"] in ("unsupported-version", "unsupported-feature", "corrupt",
                                               "not-found"), case.name
            # Only "no savepoint here" cases may lack a savepoint directory (spec/format.md §2).
            assert case.savepoint.is_dir() or expectation["category"] == "not-found", case.name
        else:
            assert (case.savepoint / "_manifest").exists(), case.name
            assert expectation["canonical_version"] in (1, 2), case.name
            # Dump schema 2 came with format 1.2: an expectation of an older schema cannot describe 1.2 parts.
            if expectation["format_version"] == "1.2":
                assert expectation["canonical_version"] == 2, case.name


def test_golden_readmes_list_every_case():
    for version_dir in sorted(p for p in (ROOT / "golden").glob("*") if p.is_dir()):
        readme = (version_dir / "README.md").read_text(encoding="utf-8")
        for case_dir in version_dir.iterdir():
            if case_dir.is_dir():
                assert f"| `{case_dir.name}` |" in readme, f"{version_dir.name}/README.md lacks {case_dir.name}"
                info = json.loads((case_dir / "generated.json").read_text(encoding="utf-8"))
                assert info["format_version"] == version_dir.name
