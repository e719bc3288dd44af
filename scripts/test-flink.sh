#!/usr/bin/env bash
# The real-Flink tier: the tests marked `flink` (real Flink jobs on the local mini cluster restoring
# the corpus and what pyref exports; Java 17). scripts/test.sh leaves them out, so the default tier
# never downloads and stays quick. This script fetches the jars of the tier's Flink releases from
# PyPI first (cached in $PYREF_FLINK_CACHE, default ~/.cache/pyref-flink; a network error is retried),
# so the tests themselves never download; then runs every `flink` test but the `slow` sweep of the
# other releases. Extra arguments go to pytest.
#
# Exit codes: pytest's, or 75 when the jars cannot be fetched (the tests did not run).
set -uo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || bash scripts/bootstrap-venv.sh || exit 1
# The releases the quick tier restores with: compat_tests/flink/test_flink_export.py's QUICK_VERSIONS
# (test_flink_restore.py and the main job's test use the newest of them).
versions=(1.20.3 2.3.0)
if ! .venv/bin/python -m compat_tests.flink.jars "${versions[@]}"; then
    echo "test-flink: the jars of Flink ${versions[*]} could not be fetched from PyPI; no flink test ran" >&2
    exit 75
fi
exec bash scripts/run_pytest.sh .venv/bin/python -m "flink and not slow" -q -ra -p no:cacheprovider "$@"
