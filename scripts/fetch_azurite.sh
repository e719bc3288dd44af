#!/usr/bin/env bash
# Azurite, Microsoft's Azure Storage emulator, for the az:// tests (pyref/testing/azure.py):
# `npm ci` of the version tools/azurite/package-lock.json pins into tools/azurite/node_modules
# (gitignored; about 40 s and 190 MB the first time, nothing once installed). Needs Node.js and npm,
# and network to the npm registry; a network error is retried. Exit code 75 when it could not be
# installed (the az:// tests then skip, except under CI, where they fail).
set -uo pipefail
cd "$(dirname "$0")/../tools/azurite"
stamp="node_modules/.installed-$(sha256sum package-lock.json | cut -c1-16)"
[ -f "$stamp" ] && [ -x node_modules/.bin/azurite-blob ] && exit 0
command -v npm >/dev/null 2>&1 || { echo "fetch_azurite: npm is not installed" >&2; exit 75; }
for delay in 0 5 20 60; do
    sleep "$delay"
    if npm ci --no-audit --no-fund --loglevel=error >/dev/null; then
        touch "$stamp"
        exit 0
    fi
    echo "fetch_azurite: npm ci failed; retrying in a moment" >&2
done
echo "fetch_azurite: Azurite could not be installed from the npm registry" >&2
exit 75
