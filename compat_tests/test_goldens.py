"""Every golden, forward and reject case through the conformance kit, with pyref
as the reader: the same path, command and protocol as any other implementation."""

from __future__ import annotations

import shlex
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from compat_tests import ROOT
from compat_tests.conformance import check_case, discover

READER = shlex.join([sys.executable, "-m", "compat_tests.dump_pyref"])
CASES = {c.name: c for c in discover()}


@pytest.fixture(scope="module")
def results(request):
    """Run the selected cases in parallel once; each test then reads its own result."""
    selected = [item.callspec.params["name"] for item in request.session.items
                if item.module is request.module and hasattr(item, "callspec")]
    pool = ThreadPoolExecutor(max_workers=2)
    futures = {name: pool.submit(check_case, READER, CASES[name], cwd=str(ROOT.parent)) for name in selected}
    yield futures
    pool.shutdown(wait=True, cancel_futures=True)


@pytest.mark.parametrize("name", sorted(CASES))
def test_case(results, name):
    result = results[name].result()
    assert result.passed, f"{name}: {result.detail}"


def test_corpora_are_present():
    corpora = {c.corpus for c in CASES.values()}
    if not CASES:
        pytest.skip("the corpora have not been generated yet (python -m compat_tests.generate_goldens; "
                    "python -m compat_tests.generate_rejects)")
    assert corpora == {"golden", "forward", "reject"}
