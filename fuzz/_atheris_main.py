"""libFuzzer entry point: ``python -m fuzz._atheris_main TARGET [libFuzzer flags] [corpus dirs]``.

pyref is imported under atheris's instrumentation so coverage guides the search.
Use ``python -m fuzz.run`` rather than this module directly.
"""

from __future__ import annotations

import sys
import tracemalloc

import atheris

with atheris.instrument_imports(include=["pyref", "fuzz.targets", "fuzz.operations"]):
    from fuzz.targets import FUNCTIONS, run_one, warm_up


def main() -> None:
    target = sys.argv.pop(1)
    if target not in FUNCTIONS:
        raise SystemExit(f"unknown target {target!r}; choose one of {sorted(FUNCTIONS)}")

    def test_one_input(data: bytes) -> None:
        run_one(target, data)

    warm_up(target)  # before libFuzzer starts timing inputs
    # Trace for the whole run: starting and stopping per input leaks in tracemalloc itself.
    tracemalloc.start()
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
