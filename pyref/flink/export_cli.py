"""``pyref export-flink``: a pyref savepoint as a canonical Flink savepoint (no JVM).

::

    pyref export-flink SRC DST --flink-version V [-p N | --operator ID=N ...] [--only ID ...]
        [--inline-bytes N] [--overwrite] [--json]

``spark-export-flink`` (:mod:`pyref.spark.cli`) takes the same arguments.
"""

from __future__ import annotations

import argparse
import json

from ..cli import add_operator_numbers, count, operator_numbers
from .writer import ExportResult, export_savepoint
from .writer.directory import DEFAULT_INLINE_BYTES

__all__ = ["add_export_command", "add_export_arguments", "export_options", "print_exported"]


def add_export_command(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export-flink", help="write the savepoint as a canonical Flink savepoint (no JVM)")
    add_export_arguments(p)
    p.set_defaults(handler=_export)


def add_export_arguments(p: argparse.ArgumentParser) -> None:
    """The arguments of ``export-flink`` and ``spark-export-flink``."""
    p.add_argument("path", help="pyref savepoint to export")
    p.add_argument("target", help="directory of the Flink savepoint to write")
    p.add_argument("--flink-version", required=True, metavar="V",
                   help="Flink release that restores it: 1.13 to 1.15 (_metadata version 3), 1.16 to 1.20 (4), 2.0 (5), "
                        "2.1 to 2.3 (6)")
    add_operator_numbers(p, ("-p", "--parallelism"), "Flink parallelism of every operator (default: its own)",
                         "Flink parallelism of one operator (its id or uid; the others keep theirs)")
    p.add_argument("--only", action="append", metavar="ID", help="export only this operator, by id or uid (repeatable)")
    p.add_argument("--inline-bytes", type=count, default=DEFAULT_INLINE_BYTES, metavar="N",
                   help="state streams up to N bytes go inline into _metadata (Flink's default: %(default)s)")
    p.add_argument("--overwrite", action="store_true", help="replace a Flink savepoint already at the target")
    p.add_argument("--json", action="store_true")


def export_options(args: argparse.Namespace) -> dict:
    """The keyword arguments of the export functions from the parsed arguments."""
    parallelism = operator_numbers(args, "--parallelism") if args.operator or args.parallelism is not None else None
    return {"flink_version": args.flink_version, "parallelism": parallelism, "operators": args.only,
            "inline_bytes": args.inline_bytes, "overwrite": args.overwrite}


def print_exported(args: argparse.Namespace, result: ExportResult) -> int:
    """Report a Flink savepoint an export wrote."""
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
        return 0
    print(f"wrote Flink {result.flink_version} savepoint {result.path} (_metadata version {result.metadata_version}): "
          f"{len(result.operators)} operators, {result.state_files} state files, {result.inline_handles} inline "
          f"state handles, {result.state_bytes} bytes of state")
    for op in result.operators:
        print(f"  operator {op['operator_id']} (uid {op['uid'] or '-'}) -> Flink operator {op['flink_operator_id']}: "
              f"parallelism {op['parallelism']}, max parallelism {op['max_parallelism']}")
    return 0


def _export(args: argparse.Namespace) -> int:
    return print_exported(args, export_savepoint(args.path, args.target, **export_options(args)))
