"""``pyref set-source-position``: move a source's positions (a FLIP-27 source's, a legacy
``FlinkKafkaConsumer``'s) in a pyref savepoint (one imported from Flink) and write a new
savepoint, which ``export-flink`` hands to Flink.

::

    pyref set-source-position SRC DST OPERATOR [--kafka-offset TOPIC:PARTITION=OFFSET ...]
        [--sequence-start SPLIT=START ...] [--copy] [--overwrite] [--force] [--base-paths] [--json]
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable

from ..cli import BASE_PATHS_HELP, print_written
from ..derived import FORCE_HELP
from ..errors import InvalidArgumentError
from ..reader import Savepoint
from .sources import KafkaConsumerPartition, KafkaSplit, NumberSequenceSplit, Split, kafka_offsets, \
    rewrite_source_splits, sequence_starts, source_splits

__all__ = ["add_source_position_command"]

_KAFKA = re.compile(r"(?P<topic>[^:=]+):(?P<partition>[0-9]{1,10})=(?P<offset>-?[0-9]{1,19})")
_SEQUENCE = re.compile(r"(?P<split>[^=]+)=(?P<start>-?[0-9]{1,19})")


def add_source_position_command(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("set-source-position", help="write the savepoint with a source's positions moved "
                       "(Kafka offsets of a KafkaSource or a legacy FlinkKafkaConsumer, a number sequence's next number)")
    p.add_argument("path", help="pyref savepoint (e.g. imported from Flink)")
    p.add_argument("target")
    p.add_argument("source_operator", metavar="OPERATOR", help="the source operator, by id (its uid when imported)")
    p.add_argument("--kafka-offset", action="append", default=[], metavar="TOPIC:PARTITION=OFFSET",
                   help="read the partition from this offset on (-2 earliest, -1 latest, -3 committed); repeatable")
    p.add_argument("--sequence-start", action="append", default=[], metavar="SPLIT=START",
                   help="a NumberSequenceSource split emits from START on (its end stays); repeatable")
    p.add_argument("--copy", action="store_true", help="self-contained copy instead of referring to the source")
    p.add_argument("--overwrite", action="store_true", help="replace a savepoint already at the target")
    p.add_argument("--force", action="store_true", help=FORCE_HELP)
    p.add_argument("--base-paths", action="store_true", help=BASE_PATHS_HELP)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_set_positions)


def _parsed(items: list[str], pattern: re.Pattern[str], flag: str) -> list[re.Match[str]]:
    matches = [pattern.fullmatch(item) for item in items]
    bad = [item for item, m in zip(items, matches) if m is None]
    if bad:
        raise InvalidArgumentError(f"{flag} takes {'TOPIC:PARTITION=OFFSET' if 'kafka' in flag else 'SPLIT=START'}, "
                                   f"got {', '.join(map(repr, bad))}")
    return [m for m in matches if m is not None]


def _update(args: argparse.Namespace) -> Callable[[Split], Split]:
    """The update of the positions the arguments give, each checked to name a split the operator holds."""
    offsets = {(m["topic"], int(m["partition"])): int(m["offset"])
               for m in _parsed(args.kafka_offset, _KAFKA, "--kafka-offset")}
    starts = {m["split"]: int(m["start"]) for m in _parsed(args.sequence_start, _SEQUENCE, "--sequence-start")}
    if not offsets and not starts:
        raise InvalidArgumentError("give the positions to set: --kafka-offset or --sequence-start")
    held = source_splits(Savepoint.open(args.path).operator(args.source_operator))
    splits = [] if held is None else held.splits() + [s.split for s in (held.enumerator.splits if held.enumerator
                                                                         else ())]
    partitions = {(s.topic, s.partition) for s in splits if isinstance(s, (KafkaSplit, KafkaConsumerPartition))}
    ids = {s.split_id for s in splits if isinstance(s, NumberSequenceSplit)}
    missing = [f"{t}:{p}" for t, p in offsets if (t, p) not in partitions] + [i for i in starts if i not in ids]
    if missing:
        there = sorted([f"{t}:{p}" for t, p in partitions] + list(ids))
        raise InvalidArgumentError(f"operator {args.source_operator!r} holds no split {', '.join(missing)} (its "
                                   f"splits: {', '.join(there) or 'none of a Kafka or number-sequence source'})")
    kafka, sequence = kafka_offsets(offsets), sequence_starts(starts)
    return lambda split: sequence(kafka(split))


def _set_positions(args: argparse.Namespace) -> int:
    written = rewrite_source_splits(args.path, args.target, args.source_operator, _update(args), copy=args.copy,
                                    overwrite=args.overwrite, base_paths=args.base_paths, force=args.force)
    return print_written(args, written)
