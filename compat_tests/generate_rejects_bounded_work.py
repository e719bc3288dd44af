"""Reject cases of the bounded-work rules (spec/format.md §5.9: rules C6 and L6).

    python -m compat_tests.generate_rejects_bounded_work          # the missing cases
    python -m compat_tests.generate_rejects_bounded_work --list

The cases go to ``reject/`` beside those of ``generate_rejects.py``, made the same way
(its mutation helpers and checks; a case is written once, its files are added to
``SHA256SUMS``). Each breaks one rule while every checksum stays valid, so a reader
that lacks the rule reads the case, and does work its bytes do not justify.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
from collections.abc import Callable

from compat_tests import REJECT_DIR
from compat_tests._build import add_to_sums, command_line, corpus_files
from compat_tests.generate_rejects import (
    RejectCase,
    Savepoint,
    generate_reject,
    manifest_case,
    reject_cases,
    write_readme,
)


def _share_range(chunk, source) -> None:
    """Make ``chunk`` a second entry over ``source``'s stored bytes (and its rows)."""
    key_group = chunk.key_group
    chunk.CopyFrom(source)
    chunk.key_group = key_group  # keeps the chunks ordered by key group (K4)


def _same_range_twice(sp: Savepoint) -> None:
    first, second = sp.keyed("count").chunks[:2]
    _share_range(second, first)


def _same_range_in_two_states(sp: Savepoint) -> None:
    _share_range(sp.keyed("text").chunks[0], sp.keyed("count").chunks[0])


def _union(sp: Savepoint):
    state = sp.list_state()
    state.mode = 2  # UNION: partitions are independent of the parallelism
    return state


def _row_in_two_partitions(sp: Savepoint) -> None:
    state = sp.list_state()
    state.partitions[1].ranges.add().CopyFrom(state.partitions[0].ranges[0])


def _row_twice_in_a_partition(sp: Savepoint) -> None:
    state = sp.list_state()
    state.partitions[0].ranges.add().CopyFrom(state.partitions[0].ranges[0])


def _union_row_in_two_partitions(sp: Savepoint) -> None:
    state = _union(sp)
    first = state.partitions[0].ranges[0]
    state.partitions[1].ranges.add(chunk=first.chunk, first=first.first + first.count - 1, count=1)


def _broadcast_row_twice_in_a_partition(sp: Savepoint) -> None:
    state = sp.list_state()
    state.mode = 3  # BROADCAST: partitions may share rows, a partition may not repeat one
    r = state.partitions[0].ranges[0]
    state.partitions[0].ranges.add(chunk=r.chunk, first=r.first, count=1)


def cases() -> list[RejectCase]:
    return [
        manifest_case("chunk-ranges-overlap", "corrupt",
                      "two chunk entries of a keyed state over the same stored bytes (rule C6)", _same_range_twice),
        manifest_case("chunk-ranges-overlap-across-states", "corrupt",
                      "chunks of two keyed states over the same stored bytes (rule C6)", _same_range_in_two_states),
        manifest_case("chunk-ranges-overlap-in-shallow-savepoint", "corrupt",
                      "a shallow savepoint's two chunk entries over one range of its base's data file (rule C6)",
                      _same_range_twice, derived=True),
        manifest_case("list-row-in-two-partitions", "corrupt",
                      "a SPLIT_DISTRIBUTE row selected by two partitions (rule L6)", _row_in_two_partitions),
        manifest_case("list-row-twice-in-a-partition", "corrupt",
                      "a partition that selects the same rows twice (rule L6)", _row_twice_in_a_partition),
        manifest_case("union-row-in-two-partitions", "corrupt",
                      "a UNION row selected by two partitions: every subtask would restore it twice (rule L6)",
                      _union_row_in_two_partitions),
        manifest_case("broadcast-row-twice-in-a-partition", "corrupt",
                      "a BROADCAST partition that selects a row twice (rule L6)", _broadcast_row_twice_in_a_partition),
    ]


def write_cases(reject_root: pathlib.Path, items: list[RejectCase], make: Callable[..., None], *,
                subdirectory: str = "", only: list[str] | None = None) -> list[str]:
    """Write the cases of ``items`` missing from ``reject_root/subdirectory`` with ``make``
    (``generate_reject`` of a generator: it checks pyref refuses the case as expected), and
    add their files to ``reject_root/SHA256SUMS``; the names of the cases written."""
    command = command_line()
    prefix = f"{subdirectory}/" if subdirectory else ""
    (reject_root / subdirectory).mkdir(parents=True, exist_ok=True)
    made, new_files = [], []
    for case in items:
        if only and case.name not in only:
            continue
        target = reject_root / subdirectory / case.name
        if target.exists():
            print(f"exists, kept: {target}")
            continue
        make(case, target, command)
        made.append(case.name)
        new_files += [f"{prefix}{case.name}/{rel}" for rel in corpus_files(target)]
        print(f"wrote {target}")
    add_to_sums(reject_root, new_files)
    return made


def generate(reject_root: pathlib.Path, only: list[str] | None = None) -> list[str]:
    made = write_cases(reject_root, cases(), generate_reject, only=only)
    write_readme(reject_root, "Reject corpus",
                 "Savepoints every reader must refuse, with the error category of `expected_error.json` "
                 "(protocol: `compat_tests/README.md`). Made by `compat_tests/generate_rejects.py` and "
                 "`compat_tests/generate_rejects_bounded_work.py` from valid savepoints; written once, hashed in "
                 "`SHA256SUMS`.",
                 [(c.name, f"`{c.category}`", c.breaks) for c in [*reject_cases(), *cases()]
                  if (reject_root / c.name).exists()])
    return made


def run(description: str, items: Callable[[], list[RejectCase]], write: Callable[..., list[str]], listed_as: str,
        argv: list[str] | None = None) -> int:
    """The command line of a reject generator: ``write(reject_root, only)`` the missing cases, or ``--list`` them."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reject-out", type=pathlib.Path, default=REJECT_DIR)
    parser.add_argument("--case", action="append", help="generate only this case (repeatable)")
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args(argv)
    if args.list:
        for c in items():
            print(f"{listed_as}{c.name} [{c.category}]: {c.breaks}")
        return 0
    made = write(args.reject_out, args.case)
    print(f"{len(made)} cases written")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run(__doc__, cases, generate, "reject/", argv)


if __name__ == "__main__":
    sys.exit(main())
