"""The ``pyref`` command line: inspect, verify, plan, report, rescale, flatten and clean savepoints,
import Flink savepoints (``import-flink``; inspect and verify read Flink savepoints too), move a
Flink source's positions (``set-source-position``) and export to Flink (``export-flink``).

Exit codes: 0 success; 2 invalid arguments; 3 corrupt savepoint (or a failed
verify); 4 no savepoint at the path; 5 unsupported format, feature, codec or
serializer; 6 incompatible serializer; 7 concurrent writer (another commit, a
busy commit lock, files deleted by clean, a savepoint replaced while reading);
8 storage error (I/O error, permission denied, disk full); 9 a missing optional
package (pyspark for the Spark subcommands, obstore for object stores); 130 interrupted
(Ctrl-C: a write stopped before its atomic commit leaves the target as it was); 1 anything else.
``--json`` prints one JSON document on stdout for scripts; every error, argument
errors included, then goes to stdout too, as ``{"error": ..., "type": ...,
"exit_code": ...}``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import sys
import traceback
from collections.abc import Mapping, Sequence
from typing import Any

from . import __version__
from .cleanup import DEFAULT_OLDER_THAN, remove_unreferenced_files
from .derived import FORCE_HELP
from .errors import CorruptSavepointError, InvalidArgumentError, SavepointError
from .flink.import_cli import (add_flink_source_arguments, flink_open_options, inspect_flink, is_flink_savepoint,
                               verify_flink_command)
from .flink.savepoint import FlinkSavepoint, flink_directory
from .flink.sources import describe_source, source_text
from .flink.writer.cleanup import is_export_directory, remove_abandoned_export_files
from .inspection import describe, verify
from .io import typed_os_error, typed_os_errors
from .manifest import FORMAT_MAJOR, FORMAT_MINOR
from .reader import Savepoint
from .report import render_report, summary
from .restore import PlanSummary
from .rewrite import flatten, rescale


class ArgumentParser(argparse.ArgumentParser):
    """Argument errors raise :class:`InvalidArgumentError` (exit 2, a JSON document with
    ``--json``) instead of printing usage and exiting."""

    def error(self, message: str):
        raise InvalidArgumentError(f"{self.prog}: {message}")


INTERRUPTED = 130  # a shell's code for a command ended by SIGINT

_COUNT = re.compile(r"[0-9]{1,9}")
_HOURS = re.compile(r"[0-9]{1,9}(\.[0-9]{1,9})?")
BASE_PATHS_HELP = ("a shallow target that is not the source's sibling names its bases by their paths in the store "
                   "(format 1.2 readers; spec/format.md §8.1)")


def count(text: str) -> int:
    """A whole number in ASCII digits (``int()`` would take "١" for 1 and "1_0" for 10)."""
    if not _COUNT.fullmatch(text):
        raise argparse.ArgumentTypeError(f"expected a whole number in ASCII digits, got {text!r}")
    return int(text)


def hours(text: str) -> float:
    """A finite number of hours >= 0 in ASCII digits (no nan, inf or exponent)."""
    if not _HOURS.fullmatch(text) or not math.isfinite(float(text)):
        raise argparse.ArgumentTypeError(f"expected a number of hours such as 24 or 0.5, got {text!r}")
    return float(text)


def add_operator_numbers(p: argparse.ArgumentParser, flags: Sequence[str], every: str, one: str) -> None:
    """``flags`` (``-p``, ``--parallelism``) for every operator, or ``--operator ID=N`` per
    operator: one or the other, since a number for every operator beside some given one by
    one would leave the operators not named unclear (keep theirs, or take the number?)."""
    group = p.add_mutually_exclusive_group()
    group.add_argument(*flags, type=count, help=every)
    group.add_argument("--operator", action="append", metavar="ID=N", help=one)


def operator_numbers(args: argparse.Namespace, flag: str) -> int | dict[str, int]:
    """One number for every operator (``flag``) or ``--operator ID=N`` per operator."""
    if args.operator:
        result = {}
        for item in args.operator:
            op, _, n = item.rpartition("=")
            if not op or not _COUNT.fullmatch(n):
                raise InvalidArgumentError(f"--operator takes OPERATOR_ID=N with N in ASCII digits, got {item!r}")
            result[op] = int(n)
        return result
    value = getattr(args, flag.lstrip("-").replace("-", "_"))
    if value is None:
        raise InvalidArgumentError(f"give {flag} N or --operator ID=N")
    return value


def _print_describe(info: dict) -> None:
    print(f"savepoint {info['location']}")
    print(f"  id {info['savepoint_id']}  format {info['format_version']}  written by {info['created_by']}")
    if info["required_features"] or info["optional_features"]:
        print(f"  features: required {info['required_features']} optional {info['optional_features']}")
    for b in info["bases"]:
        print(f"  refers to base {b['path'] or b['directory']} ({b['savepoint_id']})")
    for w in info["warnings"]:
        print(f"warning: {w}", file=sys.stderr)
    print(f"  {info['data_files']} data files, {info['data_bytes']} bytes of its own")
    for op in info["operators"]:
        name = f" ({op['name']})" if op["name"] else ""
        name += f" uid {op['uid']}" if op["uid"] else ""
        name += ", writer-assigned key groups" if op["key_groups"] == "writer" else ""
        print(f"operator {op['operator_id']}{name}: parallelism "
              f"{op['parallelism']}, max parallelism {op['max_parallelism']}"
              + (f", keys {op['key_serializer']}" if op["key_serializer"] else ""))
        low, high = op["key_groups_per_subtask"]["min"], op["key_groups_per_subtask"]["max"]
        print(f"  key groups per subtask: {low if low == high else f'{low}-{high}'}"
              + ("" if "subtask_key_groups" in op else " (--subtasks lists them)"))
        if "subtask_key_groups" in op:
            print("  " + ", ".join(f"{i}:{first}-{last}" for i, (first, last) in enumerate(op["subtask_key_groups"])))
        for st in op["states"]:
            if st["type"] == "list":
                print(f"  list state {st['name']} [{st['mode']}] {st['serializer']}: elements per partition "
                      f"{st['elements_per_partition']}, {st['chunks']} chunks, {st['stored_bytes']} bytes")
            elif st["type"] == "broadcast":
                print(f"  broadcast state {st['name']} {st['key_serializer']} -> {st['serializer']}: entries per "
                      f"partition {st['entries_per_partition']}, {st['chunks']} chunks, {st['stored_bytes']} bytes")
            else:
                extra = "".join(f" {what} {st[field]}" for what, field in (
                    ("user key", "user_key_serializer"), ("namespace", "namespace_serializer")) if field in st)
                extra += f" ttl {st['ttl']['ttl_ms']} ms" if "ttl" in st else ""
                print(f"  keyed state {st['name']} [{st['kind']}] {st['serializer']}{extra}: {st['entries']} "
                      f"entries in {st['key_groups_with_entries']} key groups, {st['chunks']} chunks, "
                      f"{st['stored_bytes']} bytes")
        for ts in op["timer_services"]:
            namespace = f" namespace {ts['namespace_serializer']}" if ts["namespace_serializer"] else ""
            print(f"  timer service {ts['name']} [{ts['domain']}]{namespace}: {ts['timers']} timers in "
                  f"{ts['key_groups_with_timers']} key groups, {ts['chunks']} chunks, {ts['stored_bytes']} bytes")
        if op["coordinator_state_bytes"] is not None:
            print(f"  coordinator state: {op['coordinator_state_bytes']} bytes")
        if op.get("source") is not None:
            print("\n".join(source_text(op["source"])))


def plan_summary(path: str, parallelism: int | dict[str, int], flink_options: Mapping[str, Any] | None = None,
                 only: Sequence[str] = ()) -> PlanSummary:
    """The restore plan of a pyref savepoint, or of a Flink savepoint (opened with ``flink_options``,
    ``FlinkSavepoint.open``'s: its operators named by uid, ``uids`` (``--uid``) or hex id, its stored key
    groups kept), in numbers; of the operators ``only`` names alone, if any (a job of a hundred
    operators plans them all)."""
    if is_flink_savepoint(path):
        with FlinkSavepoint.open(path, **(flink_options or {})) as flink:
            summary = flink.restore_plan(parallelism).summary()
            shown = {flink.operator(name).name for name in only}
    else:
        savepoint = Savepoint.open(path)
        summary = savepoint.restore_plan(parallelism).summary()
        shown = {savepoint.operator(name).operator_id for name in only}
    return PlanSummary(summary.location, [op for op in summary.operators if op.operator_id in shown]) if only \
        else summary


def _print_plan(info: dict) -> None:
    for op in info["operators"]:
        print(f"operator {op['operator_id']}: parallelism {op['from_parallelism']} -> {op['to_parallelism']}")
        for s in op["subtasks"]:
            lists = ", ".join([*(f"{k}: {v} elements" for k, v in s["list_states"].items()),
                               *(f"{k}: {v} entries" for k, v in s["broadcast_states"].items())])
            print(f"  subtask {s['subtask']}: key groups {s['first_key_group']}-{s['last_key_group']}"
                  f"{'; ' + lists if lists else ''}; reads {s['planned_bytes']} bytes")


def print_written(args: argparse.Namespace, written: Savepoint) -> int:
    """Report a savepoint a command wrote: where, its id, its own new bytes, its bases."""
    info = written.info
    result = {"target": args.target, "savepoint_id": info.savepoint_id,
              "bases": [b.directory for b in info.bases], "new_data_bytes": info.data_bytes}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"wrote {args.target} ({info.savepoint_id}); {result['new_data_bytes']} bytes of new data"
              + (f"; refers to {', '.join(result['bases'])}" if result["bases"] else ""))
    return 0


def _write_report(args: argparse.Namespace) -> int:
    if args.parallelism is not None and args.parallelism < 1:
        raise InvalidArgumentError(f"--parallelism must be at least 1, got {args.parallelism}")
    sp = Savepoint.open(args.path)
    page = render_report(sp, args.parallelism)
    with typed_os_errors("cannot write the report", args.output), open(args.output, "w", encoding="utf-8") as out:
        out.write(page)
    result = {"report": os.path.abspath(args.output), "bytes": len(page.encode()),
              "operators": summary(sp, args.parallelism)}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"wrote {result['report']} ({result['bytes']} bytes)")
    for op in result["operators"]:
        print(f"  {op['operator_id']}: " + "; ".join(
            f"at parallelism {at['parallelism']} skew {at['skew']:.2f}x, {at['idle_subtasks']} idle subtasks"
            for at in op["loads"]))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="pyref", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version",
                        version=f"pyref {__version__} (savepoint format {FORMAT_MAJOR}.{FORMAT_MINOR})")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("inspect", help="operators, states, modes, serializers, parallelism, sizes, key-group ranges")
    p.add_argument("path")
    p.add_argument("--subtasks", action="store_true", help="list every subtask's key groups (one line per operator)")
    add_flink_source_arguments(p)
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("verify", help="read every data file, chunk, checksum, value and base reference")
    p.add_argument("path")
    add_flink_source_arguments(p)
    p.add_argument("--json", action="store_true")

    for name, help_text in (("plan", "show what each subtask restores at a new parallelism (reads no state; a "
                                     "Flink savepoint too)"),
                            ("rescale", "write the savepoint at a new parallelism without copying state bytes")):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("path")
        if name == "rescale":
            p.add_argument("target")
            p.add_argument("--copy", action="store_true", help="self-contained copy instead of referring to the source")
            p.add_argument("--overwrite", action="store_true", help="replace a savepoint already at the target")
            p.add_argument("--force", action="store_true", help=FORCE_HELP)
            p.add_argument("--base-paths", action="store_true", help=BASE_PATHS_HELP)
        add_operator_numbers(p, ("-p", "--parallelism"), "new parallelism of every operator",
                             "new parallelism of one operator (the others keep theirs)")
        if name == "plan":
            add_flink_source_arguments(p)
            p.add_argument("--only", action="append", default=[], metavar="ID",
                           help="show only this operator, by uid or id (repeatable); every operator is planned")
        p.add_argument("--json", action="store_true")
    p = sub.add_parser("flatten", help="a self-contained copy: every byte it reads from its bases copied into it")
    p.add_argument("path")
    p.add_argument("target")
    p.add_argument("--overwrite", action="store_true", help="replace a savepoint already at the target")
    p.add_argument("--force", action="store_true", help=FORCE_HELP)
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("report", help="an HTML page of pictures: key-group sizes, load per subtask, state sizes")
    p.add_argument("path")
    p.add_argument("-p", "--parallelism", type=count, help="also draw every operator's load at this parallelism")
    p.add_argument("-o", "--output", default="report.html", help="the HTML file to write (default %(default)s)")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("clean", help="delete data files no manifest lists, left by interrupted writers (in a Flink "
                       "savepoint directory: the state files of interrupted exports)")
    p.add_argument("path")
    p.add_argument("--older-than", type=hours, default=DEFAULT_OLDER_THAN / 3600, metavar="HOURS",
                   help="only files last modified this many hours ago or earlier: younger ones may belong to a "
                        "writer still at work (default %(default)g)")
    p.add_argument("--dry-run", action="store_true", help="list what would be deleted, delete nothing")
    p.add_argument("--json", action="store_true")
    from .spark.cli import add_spark_commands  # here: it imports this module's helpers

    add_spark_commands(sub)  # imports pyspark only when one of them runs
    # -- Flink -> pyref: import-flink (inspect and verify read a Flink savepoint too) --
    from .flink.import_cli import add_import_command

    add_import_command(sub)
    # -- pyref -> Flink: export-flink --
    from .flink.export_cli import add_export_command

    add_export_command(sub)
    from .flink.source_cli import add_source_position_command

    add_source_position_command(sub)
    return parser


def run(args: argparse.Namespace) -> int:
    if hasattr(args, "handler"):
        return args.handler(args)
    if args.command in ("inspect", "verify") and is_flink_savepoint(args.path):
        if args.command == "inspect":
            return inspect_flink(args.path, args.json, args.subtasks, flink_open_options(args))
        return verify_flink_command(args.path, args.json, flink_open_options(args))
    if getattr(args, "uid", None) and not is_flink_savepoint(args.path):  # plan reads either
        raise InvalidArgumentError("--uid names the operators of a Flink savepoint; a pyref savepoint stores its "
                                   "operators' names", path=args.path)
    if getattr(args, "allow_external_files", False) and not is_flink_savepoint(args.path):
        raise InvalidArgumentError("--allow-external-files is for a Flink savepoint or checkpoint (a pyref savepoint "
                                   "names its bases with base_paths)", path=args.path)
    if args.command == "inspect":
        savepoint = Savepoint.open(args.path)
        info = describe(savepoint, subtasks=args.subtasks).to_dict()
        for op in info["operators"]:  # a source imported from Flink: its positions (reads its source state only)
            source = describe_source(savepoint.operator(op["operator_id"]), path=savepoint.location)
            if source is not None:
                op["source"] = source
        print(json.dumps(info, indent=2)) if args.json else _print_describe(info)
        return 0
    if args.command == "verify":
        report = verify(Savepoint.open(args.path))
        if args.json:
            print(json.dumps(report.to_dict(), indent=2))
        else:
            for w in report.warnings:
                print(f"warning: {w}")
            for e in report.errors:
                print(f"error: {e}")
            print(f"{'OK' if report.ok else 'FAILED'}: {report.chunks} chunks, {report.values} values checked")
        return 0 if report.ok else CorruptSavepointError.exit_code
    if args.command == "plan":
        info = plan_summary(args.path, operator_numbers(args, "--parallelism"), flink_open_options(args),
                            args.only).to_dict()
        print(json.dumps(info, indent=2)) if args.json else _print_plan(info)
        return 0
    if args.command == "rescale":
        written = rescale(args.path, args.target, operator_numbers(args, "--parallelism"), copy=args.copy,
                          overwrite=args.overwrite, base_paths=args.base_paths, force=args.force)
        return print_written(args, written)
    if args.command == "flatten":
        return print_written(args, flatten(args.path, args.target, overwrite=args.overwrite, force=args.force))
    if args.command == "report":
        return _write_report(args)
    if args.command == "clean":
        path = flink_directory(args.path)  # an export's _metadata names its directory, as for inspect
        clean = remove_abandoned_export_files if is_export_directory(path) else remove_unreferenced_files
        cleaned = clean(path, older_than=args.older_than * 3600, dry_run=args.dry_run)
        if args.json:
            print(json.dumps(cleaned.to_dict(), indent=2))
        else:
            verb = "would delete" if args.dry_run else "deleted"
            for path in cleaned.deleted:
                print(f"{verb} {path}")
            for path in cleaned.kept_recent:
                print(f"kept (too recent) {path}")
            print(f"{verb} {len(cleaned.deleted)} unreferenced files, {cleaned.deleted_bytes} bytes; "
                  f"kept {len(cleaned.kept_recent)} younger than {args.older_than:g} h")
        return 0
    raise AssertionError(f"unhandled command {args.command}")


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    as_json = "--json" in argv
    try:
        return run(build_parser().parse_args(argv))
    except SavepointError as exc:
        return _report(exc, as_json)
    except KeyboardInterrupt:  # Ctrl-C: a writer has aborted on its way out; no traceback to show
        if as_json:
            print(json.dumps({"error": "interrupted", "type": "KeyboardInterrupt", "exit_code": INTERRUPTED}))
        else:
            print("pyref: interrupted", file=sys.stderr)
        return INTERRUPTED
    except BrokenPipeError:  # whoever read stdout went away (| head): nothing more to say
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except OSError as exc:  # the storage failed somewhere not wrapped closer to it
        return _report(typed_os_error(exc, "storage error", exc.filename or "?"), as_json)
    except Exception as exc:
        if not as_json:
            raise  # a bug: the traceback is the report
        traceback.print_exc()
        # The message, not repr: pyspark's exceptions keep theirs out of args (repr "IllegalArgumentException()")
        print(json.dumps({"error": f"internal error: {type(exc).__name__}: {exc}", "type": type(exc).__name__,
                          "exit_code": 1}))
        return 1


def _report(exc: SavepointError, as_json: bool) -> int:
    if as_json:
        print(json.dumps({"error": str(exc), "type": type(exc).__name__, "exit_code": exc.exit_code}))
    else:
        print(f"pyref: {type(exc).__name__}: {exc}", file=sys.stderr)
    return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
