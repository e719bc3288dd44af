#!/usr/bin/env bash
# The project's test command: bring .venv up to date (python3.11 -m venv, pip install -e
# ".[spark,test,dev]") and run the whole pytest suite, every tier except `slow` and `flink`
# (the spark tests included: they need Java 17). The `flink` tests (real Flink jobs, minutes,
# jars from PyPI) are scripts/test-flink.sh's, run by CI after this. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap-venv.sh
exec bash scripts/run_pytest.sh .venv/bin/python -m "not slow and not flink" -ra "$@"
