#!/usr/bin/env bash
# The project's test command: bring .venv up to date (python3.11 -m venv, pip install -e
# ".[spark,test,dev]"), fetch Chromium for the browser test (scripts/fetch_chromium.py) and Azurite
# for the az:// tests (scripts/fetch_azurite.sh) and
# run the whole pytest suite, every tier except `slow` and `flink` (the spark tests included:
# they need Java 17). The `flink` tests (real Flink jobs, minutes, jars from PyPI) are
# scripts/test-flink.sh's, run by CI after this. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap-venv.sh
# Debian's Chromium for the browser test of `pyref report` (cached in ~/.cache/pyref/chromium;
# about 30 s the first time). Without it the test skips, except under CI, where it fails.
python3 scripts/fetch_chromium.py >/dev/null || echo "test.sh: no Chromium; tests/test_report.py's browser test cannot run" >&2
# Azurite (npm) for the az:// tests of tests/test_object_store.py (about 40 s the first time).
# Without it they skip, except under CI, where they fail.
bash scripts/fetch_azurite.sh || echo "test.sh: no Azurite; the az:// tests cannot run" >&2
exec bash scripts/run_pytest.sh .venv/bin/python -m "not slow and not flink" -ra "$@"
