#!/usr/bin/env bash
# The main job: bootstrap the seeds' scenario with local Spark, restore it at
# parallelism 1 and 4, print who holds what, read it back and verify it.
# Extra arguments go to examples/main_job.py (e.g. --out DIR, --master URL, --no-spark, --no-flink).
# Last, a real Flink job restores the exported seeds (Java 17; Flink's jars come from PyPI, cached).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap-venv.sh
exec .venv/bin/python examples/main_job.py "$@"
