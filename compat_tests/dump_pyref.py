"""pyref's reader command for the conformance kit.

    python -m compat_tests.dump_pyref SAVEPOINT --parallelism 1,2,4 [--store-root DIR]

Prints the canonical JSON dump of SAVEPOINT on stdout, of the newest schema
(2), and exits 0; if pyref refuses the savepoint, prints
``{"error": {"category": ..., "message": ...}}`` and exits 1 (protocol:
compat_tests/README.md). ``--store-root`` confines the local savepoint to DIR, the root
its bases named by path resolve from (spec/format.md §8.1).
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from collections.abc import Sequence

from compat_tests.canonical import CANONICAL_VERSION, dump_savepoint, error_category

EXIT_REFUSED = 1
EXIT_INTERNAL = 70


def parse_parallelisms(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected non-negative integers, got {text!r}")
    return values


def _emit(document: dict) -> None:
    sys.stdout.buffer.write(json.dumps(document, ensure_ascii=False, indent=1).encode("utf-8") + b"\n")
    sys.stdout.flush()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m compat_tests.dump_pyref", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("savepoint")
    parser.add_argument("--parallelism", type=parse_parallelisms, default=[1],
                        help="comma-separated parallelisms to plan restores at (default 1)")
    parser.add_argument("--store-root", help="directory to take as the root of the local store (default /)")
    args = parser.parse_args(argv)
    from pyref.errors import SavepointError
    from pyref.io import LocalIO

    try:
        location = args.savepoint if args.store_root is None else LocalIO(args.savepoint, store_root=args.store_root)
        document = dump_savepoint(location, args.parallelism, CANONICAL_VERSION)
    except SavepointError as exc:
        _emit({"error": {"category": error_category(exc, args.savepoint), "message": str(exc),
                         "type": type(exc).__name__}})
        return EXIT_REFUSED
    except Exception as exc:  # a bug in pyref: report it as such, never as a clean refusal
        traceback.print_exc()
        _emit({"error": {"category": "internal-error", "message": f"{type(exc).__name__}: {exc}"}})
        return EXIT_INTERNAL
    _emit(document)
    return 0


if __name__ == "__main__":
    sys.exit(main())
