#!/usr/bin/env bash
# Create (or bring up to date) .venv with pyref and its extras. Idempotent:
# re-installs only when pyproject.toml changed. Used by main-job.sh and test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3.11}
command -v "$python" >/dev/null 2>&1 || python=python3
if [ ! -x .venv/bin/python ]; then
    "$python" -m venv .venv
fi
stamp=".venv/.installed-$(sha256sum pyproject.toml | cut -c1-16)"
if [ ! -f "$stamp" ]; then
    .venv/bin/python -m pip install --quiet --upgrade pip
    .venv/bin/python -m pip install --quiet -e ".[spark,test,dev]"
    rm -f .venv/.installed-*
    touch "$stamp"
fi
