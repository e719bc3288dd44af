"""``pyref import-flink``, and ``pyref inspect`` / ``verify`` on a Flink savepoint.

::

    pyref import-flink SRC DST [--uid HEXID=NAME | --uid UID ...]
        [--ttl OPERATOR/STATE=DURATION[:update][:visibility] ...] [--ttl-default DURATION[...]]
        [--skip-state OPERATOR/STATE ...] [--drop-in-flight-data] [--overwrite] [--json]

A directory holding a Flink ``_metadata`` (and no pyref ``_manifest``) is a Flink
savepoint: ``inspect`` and ``verify`` read it through :mod:`pyref.flink`.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import Any

from ..derived import FORCE_HELP
from ..errors import CorruptSavepointError, InvalidArgumentError
from ..key_groups import key_group_bounds
from ..ttl import TtlConfig
from .import_plan import parse_ttl
from .importer import import_flink
from .inspection import describe_flink, verify_flink
from .savepoint import FlinkSavepoint, is_flink_savepoint
from .sources import source_text

__all__ = ["add_import_command", "add_flink_source_arguments", "flink_open_options", "is_flink_savepoint", "inspect_flink", "verify_flink_command",
           "import_options"]


def add_import_command(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("import-flink", help="import a Flink savepoint (canonical format) as a pyref savepoint")
    add_import_arguments(p)
    p.add_argument("--overwrite", action="store_true", help="replace a savepoint already at the target")
    p.add_argument("--force", action="store_true", help=FORCE_HELP)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_import)


def add_import_arguments(p: argparse.ArgumentParser) -> None:
    """The arguments ``import-flink`` and ``spark-import-flink`` share."""
    p.add_argument("source", help="the Flink savepoint directory (or its _metadata): a path or a URL")
    p.add_argument("target")
    add_flink_source_arguments(p)
    p.add_argument("--ttl", action="append", default=[], metavar="OP/STATE=DURATION[:update][:visibility]",
                   help="the TTL of a state under TTL (Flink does not store it), e.g. counter/last=7d:on_read_and_write")
    p.add_argument("--ttl-default", metavar="DURATION[:update][:visibility]",
                   help="the TTL of every state under TTL not given by --ttl")
    p.add_argument("--skip-state", action="append", default=[], metavar="OP/STATE",
                   help="leave a state out (one the import refuses, say)")
    p.add_argument("--drop-in-flight-data", action="store_true",
                   help="import a checkpoint of unaligned checkpoints without the records it kept in flight between "
                        "operators (refused otherwise: they are part of its exactly-once state)")


def add_flink_source_arguments(p: argparse.ArgumentParser) -> None:
    """How a Flink savepoint or checkpoint is opened: ``--uid`` and ``--allow-external-files``."""
    p.add_argument("--uid", action="append", default=[], metavar="HEXID=NAME",
                   help="(a Flink savepoint) name an operator whose uid Flink did not store: HEXID=NAME, or the "
                        "job's UID (its id is derived from it)")
    p.add_argument("--allow-external-files", action="store_true",
                   help="(a local Flink savepoint or checkpoint) read the state files it names outside its "
                        "directory where they are, e.g. the changelog state backend's DSTL files")


def flink_open_options(args: argparse.Namespace) -> dict[str, Any]:
    """``FlinkSavepoint.open``'s keyword arguments from :func:`add_flink_source_arguments`'."""
    return {"uids": parse_uids(args.uid), "allow_external_files": args.allow_external_files}


def parse_uids(items: list[str]) -> dict[str, str] | None:
    """``FlinkSavepoint.open``'s ``uids`` from ``--uid`` arguments (None: none given)."""
    uids: dict[str, str] = {}
    for item in items:
        key, sep, name = item.partition("=")
        if not key or (sep and not name):
            raise InvalidArgumentError(f"--uid takes HEXID=NAME or UID, got {item!r}")
        uids[key] = name if sep else key
    return uids or None


def import_options(args: argparse.Namespace) -> dict:
    """``import_flink``'s keyword arguments from the shared command-line arguments."""
    ttl: dict[str, TtlConfig] = {}
    for item in args.ttl:
        state, sep, config = item.partition("=")
        if not sep or "/" not in state:
            raise InvalidArgumentError(f"--ttl takes OPERATOR/STATE=DURATION[:update][:visibility], got {item!r}")
        ttl[state] = parse_ttl(config)
    return {**flink_open_options(args), "ttl": ttl, "skip_states": args.skip_state,
            "ttl_default": parse_ttl(args.ttl_default) if args.ttl_default else None,
            "drop_in_flight_data": args.drop_in_flight_data}


def _import(args: argparse.Namespace) -> int:
    report = import_flink(args.source, args.target, overwrite=args.overwrite, force=args.force, **import_options(args))
    print_import(report.to_dict(), args.json)
    return 0


def print_import(result: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(result, indent=2))
        return
    print(f"imported {result['source']} as {result['target']} ({result['savepoint_id']}, format "
          f"{result['format_version']}): {result['rows']} rows, {result['new_data_bytes']} bytes in data files, "
          f"{result['seconds']:.2f} s")
    for op in result["operators"]:
        keys = f", keys {op['key_serializer']} ({op['key_groups']} key groups)" if op["key_serializer"] else ""
        print(f"operator {op['operator_id']} (Flink {op['flink_operator_id']}): parallelism {op['parallelism']}, "
              f"max parallelism {op['max_parallelism']}{keys}")
        for st in op["states"]:
            serializer = f" {st['serializer']}" if st.get("serializer") else ""  # timers have none
            print(f"  {st['type']} {st['name']} [{st['kind']}]{serializer}: {st['rows']} rows")
        for name in op["skipped"]:
            print(f"  skipped {name}")
        if dropped := op["in_flight_data_dropped"]:
            print(f"  dropped in-flight data: {in_flight_text(dropped)}")
    for d in result["demotions"]:
        print(f"replanned {d}")


def in_flight_text(data: dict) -> str:
    """An operator's in-flight data (FlinkOperator.in_flight) in words."""
    def count(n: int, noun: str) -> str:
        return f"{n} {noun}{'' if n == 1 else 's'}"

    return (f"{data['input_bytes']} bytes in {count(data['input_channels'], 'input channel')}, {data['output_bytes']} "
            f"bytes in {count(data['output_channels'], 'result subpartition')} ({count(data['files'], 'file')})")


def inspect_flink(path: str, as_json: bool, subtasks: bool = False, open_options: Mapping[str, Any] | None = None) -> int:
    with FlinkSavepoint.open(path, **(open_options or {})) as sp:
        info = describe_flink(sp)
    if subtasks:  # as pyref's inspect --subtasks: the key groups Flink gives each subtask
        for op in info["operators"]:
            firsts, lasts = key_group_bounds(op["max_parallelism"], op["parallelism"])
            op["subtask_key_groups"] = [[int(first), int(last)] for first, last in zip(firsts, lasts)]
    if as_json:
        print(json.dumps(info, indent=2))
        return 0
    # Since _metadata version 4 a savepoint says its format and a checkpoint none; before, neither
    # says what it is (a canonical savepoint and a full RocksDB checkpoint of 1.15 are alike).
    kind = ("savepoint" if info["snapshot_format"] else "checkpoint" if info["metadata_version"] >= 4
            else "savepoint or retained checkpoint")
    said = info["snapshot_format"] or ("a checkpoint" if kind == "checkpoint" else
                                       f"version {info['metadata_version']} does not say which")
    print(f"Flink {kind} {info['location']}")
    print(f"  _metadata version {info['metadata_version']}, checkpoint {info['checkpoint_id']}, {said}")
    planned = info["import"].get("operators", {})
    for op in info["operators"]:
        # A name --uid gave (Flink 1.x stores no uids) is said too: else only an import plan would show it.
        name = (f" uid {op['uid']}" if op["uid"] else
                f" named {op['name']}" if op["name"] != op["operator_id"] else "")
        name += f" ({op['flink_name']})" if op["flink_name"] else ""
        target = planned.get(op["operator_id"])
        imported = f"; imports as {target['operator_id']}" if target else ""
        imported += f", {target['key_groups']} key groups" if target and target["key_groups"] else ""
        print(f"operator {op['operator_id']}{name}: parallelism {op['parallelism']}, max parallelism "
              f"{op['max_parallelism']}" + (f", keys {op['key_type']}" if op["key_type"] else "") + imported)
        if subtasks:
            print("  key groups " + ", ".join(f"{i}:{first}-{last}"
                                              for i, (first, last) in enumerate(op["subtask_key_groups"])))
        for st in op["states"]:
            extra = f" namespace {st['namespace']}" if st.get("namespace") else ""
            extra += " ttl" if st.get("ttl") else ""
            extra += " (async state API)" if st.get("async_state_api") else ""
            extra += f"; not read: {st['refused']}" if st.get("refused") else ""
            counts = st.get("elements_per_subtask") or st.get("entries_per_subtask")
            print(f"  {st['type']} state {st['name']} [{st.get('mode') or st.get('kind')}] {st['flink_type']}{extra}"
                  + (f": per subtask {counts}" if counts is not None else ""))
        for tq in op["timer_queues"]:
            print(f"  timers {tq['name']} {tq['flink_type']}")
        if op["keyed_state_refused"]:
            print(f"  keyed state not read: {op['keyed_state_refused']}")
        if op["keyed_state_bytes"] and op["key_groups_with_data"] is None:
            print(f"  keyed state: {op['keyed_state_bytes']} bytes in the {op['keyed_state_layout']} layout")
        elif op["keyed_state_bytes"]:
            print(f"  keyed state: {op['keyed_state_bytes']} bytes in {op['key_groups_with_data']} key groups")
        if op["coordinator_state_bytes"] is not None:
            print(f"  coordinator state: {op['coordinator_state_bytes']} bytes")
        if op["source"] is not None:
            print("\n".join(source_text(op["source"])))
        if op["in_flight"] is not None:
            print(f"  in-flight data (unaligned checkpoint): {in_flight_text(op['in_flight'])}")
    if "refused" in info["import"]:
        print(f"import-flink would refuse: {info['import']['refused']}")
    return 0


def verify_flink_command(path: str, as_json: bool, open_options: Mapping[str, Any] | None = None) -> int:
    with FlinkSavepoint.open(path, **(open_options or {})) as sp:
        report = verify_flink(sp)
    if as_json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        for w in report.warnings:
            print(f"warning: {w}")
        for e in report.errors:
            print(f"error: {e}")
        print(f"{'OK' if report.ok else 'FAILED'}: {report.chunks} state handles, {report.values} values decoded, "
              f"{report.keys_checked} keys' key groups recomputed")
    return 0 if report.ok else CorruptSavepointError.exit_code
