"""Reject cases of the bounded-work rules over the parts format 1.2 added (spec/format.md
§5.9: C6 for timer, broadcast and coordinator chunks; L6 within a broadcast partition).

    python -m compat_tests.generate_rejects_1_2_bounded_work          # the missing cases
    python -m compat_tests.generate_rejects_1_2_bounded_work --list

The cases go to ``reject/1.2/`` beside those of ``generate_rejects_1_2.py``, made the
same way (its valid savepoint with every 1.2 part, its checks; a case is written once,
its files are added to ``../SHA256SUMS``). The C6 cases break C6 alone: a reader that
lacks the rule reads them without an error, and decompresses one range for two chunk
entries.
"""

from __future__ import annotations

import pathlib
import sys

from compat_tests.generate_rejects import RejectCase, Savepoint, manifest_case, write_readme
from compat_tests.generate_rejects_1_2 import VERSION_DIR, generate_reject, reject_cases
from compat_tests.generate_rejects_bounded_work import run, write_cases


def _pb():
    from pyref._proto.savepoint.v1 import manifest_pb2

    return manifest_pb2


def _copy(chunk):
    copy = _pb().Chunk()
    copy.CopyFrom(chunk)
    return copy


def _timers_over_keyed_bytes(sp: Savepoint) -> None:
    """A second timer service whose chunks are entries over the chunks of keyed state
    ``count``: rows of a string key and an 8-byte value read as a key and a timestamp."""
    pb = _pb()
    service = sp.op("counter").timer_services.add(name="processing-timers", domain=pb.PROCESSING_TIME)
    service.chunks.extend(_copy(c) for c in sp.keyed("count").chunks)


def _broadcast_chunk_entries_over_one_range(sp: Savepoint) -> None:
    """Partition 1 of ``rules`` reads the map through a second chunk entry over its bytes."""
    rules = sp.op("counter").broadcast_states[0]
    rules.chunks.append(_copy(rules.chunks[0]))
    for r in rules.partitions[1].ranges:
        r.chunk = 1


def _coordinator_states_over_one_range(sp: Savepoint) -> None:
    sp.op("source").coordinator_state.CopyFrom(sp.op("counter").coordinator_state)


def _broadcast_row_twice_in_a_partition(sp: Savepoint) -> None:
    rules = sp.op("counter").broadcast_states[0]
    rules.partitions[0].ranges.add(chunk=0, first=1, count=1)


def cases() -> list[RejectCase]:
    return [
        manifest_case("timer-chunks-over-keyed-state-bytes", "corrupt",
                      "a timer service whose chunk entries are over a keyed state's stored bytes (rule C6)",
                      _timers_over_keyed_bytes),
        manifest_case("broadcast-chunk-entries-over-one-range", "corrupt",
                      "two chunk entries of a broadcast state over one stored range, one per partition (rule C6)",
                      _broadcast_chunk_entries_over_one_range),
        manifest_case("coordinator-states-over-one-range", "corrupt",
                      "the coordinator states of two operators over one stored range (rule C6)",
                      _coordinator_states_over_one_range),
        manifest_case("broadcast-state-row-twice-in-a-partition", "corrupt",
                      "a broadcast partition that selects a row twice (rule L6 through B4; B5 when read)",
                      _broadcast_row_twice_in_a_partition),
    ]


def generate(reject_root: pathlib.Path, only: list[str] | None = None) -> list[str]:
    made = write_cases(reject_root, cases(), generate_reject, subdirectory=VERSION_DIR, only=only)
    version_dir = reject_root / VERSION_DIR
    write_readme(version_dir, "Reject corpus, format 1.2",
                 "Cases for the rules and parts format 1.2 added (spec/format.md §9.1), made by "
                 "`compat_tests/generate_rejects_1_2.py` and `compat_tests/generate_rejects_1_2_bounded_work.py` "
                 "(rules C6 and L6 over the 1.2 parts, §5.9) from a valid savepoint using every 1.2 part; written "
                 "once, hashed in `../SHA256SUMS`.",
                 [(c.name, f"`{c.category}`", c.breaks) for c in [*reject_cases(), *cases()]
                  if (version_dir / c.name).exists()])
    return made


def main(argv: list[str] | None = None) -> int:
    return run(__doc__, cases, generate, f"reject/{VERSION_DIR}/", argv)


if __name__ == "__main__":
    sys.exit(main())
