"""``pyref`` subcommands that run on Spark: spark-rescale, spark-flatten, change-max-parallelism,
migrate, spark-import-flink, spark-export-flink.

Registering them imports nothing of pyspark, so the core CLI works without it;
a subcommand imports pyspark when it runs.
"""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

from .._proto.savepoint.v1 import serializer_pb2
from ..cli import BASE_PATHS_HELP, add_operator_numbers, count, operator_numbers, print_written
from ..derived import FORCE_HELP
from ..errors import InvalidArgumentError, MissingDependencyError, SavepointError
from ..flink.export_cli import add_export_arguments, export_options, print_exported
from ..flink.import_cli import add_import_arguments, import_options, print_import
from ..flink.import_plan import plan_import
from ..flink.importer import ImportReport, check_import_target
from ..flink.savepoint import FlinkSavepoint
from ..flink.writer.export import prepare_export
from ..io import open_io
from ..reader import Savepoint
from ..rewrite import check_target
from ..serializers import MAX_NESTING_DEPTH, Serializer, Tuple, registered_serializer_ids, serializer_from_snapshot
from ..writer import read_previous

_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
_FIELD_NAME = re.compile(r"([A-Za-z_][A-Za-z0-9_]*):")
_VERSION = re.compile(r"@v(\d+)")


#: A byte size: digits, then a unit of 1024s as Spark's sizes have them (256m, 256MB, 256MiB).
_SIZE = re.compile(r"([0-9]{1,15})\s*(?:([kmgt])(?:i?b)?|b)?", re.IGNORECASE)
_UNITS = {"": 0, "k": 10, "m": 20, "g": 30, "t": 40}

#: Spaces between the tokens of a label; those inside a default's JSON string stay.
_SPACES_OUTSIDE_STRINGS = re.compile(r'("(?:[^"\\]|\\.)*")|\s+')
#: The defaults of a label's tuples: the path to the tuple (child indexes from the root), and
#: its defaults by field name.
Defaults = list[tuple[tuple[int, ...], dict[str, Any]]]


def _size(text: str) -> int | None:
    match = _SIZE.fullmatch(text.strip())
    if not match or int(match.group(1)) == 0:
        return None
    return int(match.group(1)) << _UNITS[(match.group(2) or "").lower()]


def _size_expected(text: str) -> str:
    return f"expected a size > 0 such as 256MB, 1GB or 1048576 (bytes), got {text!r}"


def parse_size(text: str, what: str) -> int:
    """A number of bytes > 0 from ``text``: digits and a unit of 1024s, as Spark writes sizes
    (``268435456``, ``256m``, ``256MB``, ``256MiB``, ``1g``; KB, MB, GB, TB are 1024-based);
    otherwise :class:`InvalidArgumentError` naming ``what`` it was given for."""
    size = _size(text)
    if size is None:
        raise InvalidArgumentError(f"{what}: {_size_expected(text)}")
    return size


def byte_size(text: str) -> int:
    """:func:`parse_size` as an argparse type (argparse names the flag)."""
    size = _size(text)
    if size is None:
        raise argparse.ArgumentTypeError(_size_expected(text))
    return size


def parse_serializer(text: str) -> Serializer:
    """A serializer from its label, as ``pyref inspect`` prints them: ``int64``,
    ``nullable<int32>``, ``list<string>``, ``map<string,int64>``,
    ``tuple<url:string,n:int64>@v2`` (snapshot version 1 when omitted; tuple
    field names before a colon), or a registered user-defined id such as
    ``com.example.Point``. A tuple field added by a migration takes its default
    as a JSON literal after ``=``: ``tuple<url:string,n:int64,ts:int64=0>@v2``
    (spec/serializers.md §5.3)."""
    defaults: Defaults = []
    compact = _SPACES_OUTSIDE_STRINGS.sub(lambda m: m.group(1) or "", text)
    snapshot, rest = _parse_snapshot(compact, text, 1, (), defaults)
    if rest:
        raise InvalidArgumentError(f"unexpected {rest!r} at the end of serializer {text!r}")
    unknown = sorted(_ids(snapshot) - set(registered_serializer_ids()))
    if unknown:  # a typo here, not a savepoint from a newer writer
        raise InvalidArgumentError(f"serializer {text!r}: unknown serializer id {unknown[0]!r}; known ids: "
                                   f"{', '.join(registered_serializer_ids())}")
    try:
        serializer = serializer_from_snapshot(snapshot)
        for path, values in defaults:
            _tuple_at(serializer, path).set_defaults(values)
    except SavepointError as exc:  # e.g. map<string>: a wrong argument, not a corrupt savepoint
        raise InvalidArgumentError(f"serializer {text!r}: {exc.reason}") from None
    return serializer


def _tuple_at(serializer: Serializer, path: tuple[int, ...]) -> Tuple:
    for index in path:
        serializer = serializer.nested_serializers[index]
    if not isinstance(serializer, Tuple):
        raise InvalidArgumentError(f"defaults ('=' after a child) are for the fields of a tuple, not of {serializer!r}")
    return serializer


def _parse_default(text: str, whole: str) -> tuple[Any, str]:
    """The JSON literal at the start of ``text`` and what follows it."""
    try:
        value, end = json.JSONDecoder().raw_decode(text)
    except json.JSONDecodeError:
        raise InvalidArgumentError(f"expected a JSON default after '=' at {text!r} in {whole!r}") from None
    return value, text[end:]


def _ids(snapshot: serializer_pb2.SerializerSnapshot) -> set[str]:
    return {snapshot.serializer_id, *(i for child in snapshot.nested for i in _ids(child))}


def _parse_snapshot(text: str, whole: str, depth: int, path: tuple[int, ...],
                    defaults: Defaults) -> tuple[serializer_pb2.SerializerSnapshot, str]:
    if depth > MAX_NESTING_DEPTH:
        raise InvalidArgumentError(f"serializer {whole[:80]!r}... nests deeper than {MAX_NESTING_DEPTH} levels")
    match = _ID.match(text)
    if not match:
        raise InvalidArgumentError(f"expected a serializer id at {text!r} in {whole!r}")
    snapshot = serializer_pb2.SerializerSnapshot(serializer_id=match.group(), version=1)
    rest = text[match.end():]
    if rest.startswith("<"):
        rest = rest[1:]
        field_defaults: dict[str, Any] = {}
        while True:
            name = _FIELD_NAME.match(rest)
            if name:
                snapshot.field_names.append(name.group(1))
                rest = rest[name.end():]
            child, rest = _parse_snapshot(rest, whole, depth + 1, (*path, len(snapshot.nested)), defaults)
            if rest.startswith("="):
                field = name.group(1) if name else f"f{len(snapshot.nested)}"
                field_defaults[field], rest = _parse_default(rest[1:], whole)
            snapshot.nested.append(child)
            if rest[:1] not in (",", ">"):
                raise InvalidArgumentError(f"expected ',' or '>' at {rest!r} in {whole!r}")
            rest, closed = rest[1:], rest[0] == ">"
            if closed:
                break
        if field_defaults:
            defaults.append((path, field_defaults))
    version = _VERSION.match(rest)
    if version:
        snapshot.version = int(version.group(1))
        rest = rest[version.end():]
    if snapshot.serializer_id == "tuple" and snapshot.version >= 2 and not snapshot.field_names:
        snapshot.field_names.extend(f"f{i}" for i in range(len(snapshot.nested)))  # positional, as inspect prints it
    return snapshot, rest


def spark_conf(args: argparse.Namespace) -> dict[str, str]:
    """The Spark configuration of ``--spark-conf FILE`` (``spark-defaults.conf`` lines: a key,
    whitespace or ``=``, a value; ``#`` comments) then ``--conf KEY=VALUE``, later ones winning.
    pyref prints its own progress, so Spark's console progress bar is off unless configured."""
    conf = {"spark.ui.showConsoleProgress": "false"}
    if args.spark_conf:
        try:
            with open(args.spark_conf, encoding="utf-8") as f:
                lines = f.read().splitlines()
        except OSError as exc:
            raise InvalidArgumentError(f"cannot read --spark-conf: {exc.strerror}", path=args.spark_conf) from None
        for number, line in enumerate(lines, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            match = _CONF_LINE.fullmatch(line)
            if not match:
                raise InvalidArgumentError(f"line {number}: expected 'key value' or 'key=value', got {line!r}",
                                           path=args.spark_conf)
            conf[match.group(1)] = match.group(2)
    for item in args.conf or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InvalidArgumentError(f"--conf takes KEY=VALUE, got {item!r}")
        conf[key.strip()] = value
    return conf


_CONF_LINE = re.compile(r"(\S+?)(?:\s*=\s*|\s+)(.*)")


def _run_on_spark(args: argparse.Namespace, job, report=print_written) -> int:
    conf = spark_conf(args)
    try:
        from pyspark.sql import SparkSession

        from .session import spark_session
    except ImportError as exc:
        raise MissingDependencyError(f"pyref {args.command} needs pyspark >= 4.0 with pandas "
                                     f"(pip install 'pyref-savepoint[spark]'): {exc}") from None
    from .task_errors import typed_errors

    owned = SparkSession.getActiveSession() is None  # a session we did not start stays up
    spark = spark_session(args.master, app_name=f"pyref {args.command}", remote=args.remote, **conf)
    try:
        with typed_errors():  # a task's pyref error gets its own exit code and JSON
            result = job(spark)
    finally:
        if owned:
            spark.stop()

    return report(args, result)


def _check_source(args: argparse.Namespace, operator: str | None = None, state: str | None = None) -> None:
    """What the core can tell in a second, before Spark starts: the source opens, the target
    may be written, the operator and state exist."""
    source = Savepoint.open(args.path)
    check_target(source, open_io(args.target), args.copy, args.base_paths)
    read_previous(open_io(args.target), args.overwrite, force=args.force)
    if operator is not None:
        op = source.operator(operator)
        if state is not None and state not in [*op.list_state_names, *op.keyed_state_names]:
            raise InvalidArgumentError("no such list or keyed state", state=f"{operator}/{state}",
                                       path=source.location)


# The handlers check their arguments before anything imports pyspark (via .jobs or .flink): a
# wrong argument is an InvalidArgumentError with or without pyspark installed.

def _jobs():
    from . import jobs

    return jobs


def _spark_rescale(args: argparse.Namespace) -> int:
    parallelism = operator_numbers(args, "--parallelism")
    if args.target_file_size is not None and not args.copy:
        raise InvalidArgumentError("--target-file-size sizes the files of a --copy; a shallow rescale writes none")
    _check_source(args)
    return _run_on_spark(args, lambda spark: _jobs().rescale(
        args.path, args.target, parallelism, spark=spark, copy=args.copy, overwrite=args.overwrite,
        progress=not args.json, base_paths=args.base_paths, force=args.force, target_file_bytes=args.target_file_size))


def _spark_flatten(args: argparse.Namespace) -> int:
    Savepoint.open(args.path)
    read_previous(open_io(args.target), args.overwrite, force=args.force)
    return _run_on_spark(args, lambda spark: _jobs().flatten(
        spark, args.path, args.target, overwrite=args.overwrite, progress=not args.json, force=args.force,
        target_file_bytes=args.target_file_size))


def _change_max_parallelism(args: argparse.Namespace) -> int:
    wanted = operator_numbers(args, "--max-parallelism")
    _check_source(args)
    return _run_on_spark(args, lambda spark: _jobs().change_max_parallelism(
        spark, args.path, args.target, wanted, copy=args.copy, overwrite=args.overwrite, partitions=args.partitions,
        progress=not args.json, base_paths=args.base_paths, force=args.force, target_file_bytes=args.target_file_size))


def _migrate(args: argparse.Namespace) -> int:
    serializer = parse_serializer(args.serializer)
    _check_source(args, args.operator, args.state)
    return _run_on_spark(args, lambda spark: _jobs().migrate_state(
        spark, args.path, args.target, args.operator, args.state, serializer, copy=args.copy,
        overwrite=args.overwrite, progress=not args.json, base_paths=args.base_paths, force=args.force,
        target_file_bytes=args.target_file_size))


def _spark_import_flink(args: argparse.Namespace) -> int:
    options = import_options(args)
    check_import_target(args.target)
    read_previous(open_io(args.target), args.overwrite, force=args.force)
    with FlinkSavepoint.open(args.source, uids=options["uids"],
                             allow_external_files=options["allow_external_files"]) as sp:  # refusals before Spark
        plan_import(sp, ttl=options["ttl"], ttl_default=options["ttl_default"], skip_states=options["skip_states"],
                    drop_in_flight_data=options["drop_in_flight_data"])

    def job(spark):
        from .flink import import_flink

        return import_flink(spark, args.source, args.target, overwrite=args.overwrite, progress=not args.json,
                            force=args.force, target_file_bytes=args.target_file_size, **options)

    def report(args: argparse.Namespace, imported: ImportReport) -> int:
        print_import(imported.to_dict(), args.json)
        return 0

    return _run_on_spark(args, job, report)


def _spark_export_flink(args: argparse.Namespace) -> int:
    options = export_options(args)
    prepare_export(args.path, args.target, **options)  # its refusals before Spark starts

    def job(spark):
        from .flink_export import export_flink

        return export_flink(spark, args.path, args.target, progress=not args.json, **options)

    return _run_on_spark(args, job, print_exported)


def spark_options(p: argparse.ArgumentParser) -> None:
    """Where a subcommand's Spark job runs, and its Spark configuration."""
    where = p.add_mutually_exclusive_group()
    where.add_argument("--master", default="local[*]", help="Spark master URL (default: local[*])")
    where.add_argument("--remote", metavar="URL",
                       help="a Spark Connect server instead: sc://host:port (or local[N] to start one here)")
    p.add_argument("--conf", action="append", metavar="KEY=VALUE", help="a Spark configuration property (repeatable)")
    p.add_argument("--spark-conf", metavar="FILE",
                   help="Spark configuration properties, one 'key value' a line as in spark-defaults.conf")


def target_file_size_option(p: argparse.ArgumentParser, help: str) -> None:
    p.add_argument("--target-file-size", type=byte_size, metavar="SIZE",
                   help=f"{help} (256MB, 1GB, bytes; KB, MB, GB are 1024-based)")


def add_spark_commands(subparsers) -> None:
    """Register the Spark subcommands on the ``pyref`` parser's subparsers.

    Each sets ``handler``, which the CLI calls with the parsed arguments.
    """

    def common(p: argparse.ArgumentParser, shallow: bool = True) -> None:
        p.add_argument("path", help="source savepoint")
        p.add_argument("target", help="new savepoint (a sibling of the source unless --copy)" if shallow
                       else "new self-contained savepoint")
        spark_options(p)
        p.add_argument("--overwrite", action="store_true", help="replace a savepoint already at the target")
        p.add_argument("--force", action="store_true", help=FORCE_HELP)
        p.add_argument("--json", action="store_true")
        if shallow:
            p.add_argument("--copy", action="store_true", help="self-contained copy instead of referring to the source")
            p.add_argument("--base-paths", action="store_true", help=BASE_PATHS_HELP)
        target_file_size_option(p, "about this many bytes per data file written, one task each (default: by "
                                   "Spark's sizes)")

    p = subparsers.add_parser("spark-rescale", help="new parallelism (no state bytes copied; --copy copies on Spark)")
    common(p)
    add_operator_numbers(p, ("-p", "--parallelism"), "new parallelism of every operator",
                         "new parallelism of one operator (the others keep theirs)")
    p.set_defaults(handler=_spark_rescale)

    p = subparsers.add_parser("spark-flatten", help="a self-contained copy of a shallow savepoint, copied on Spark")
    common(p, shallow=False)
    p.set_defaults(handler=_spark_flatten)

    p = subparsers.add_parser("change-max-parallelism",
                              help="new max parallelism: re-hash every key to its new key group, on Spark")
    common(p)
    add_operator_numbers(p, ("-m", "--max-parallelism"), "new max parallelism of every operator",
                         "new max parallelism of one operator (the others keep theirs)")
    p.add_argument("--partitions", type=count, help="write tasks per keyed state (default: by size)")
    p.set_defaults(handler=_change_max_parallelism)

    # -- Flink -> pyref: spark-import-flink --
    p = subparsers.add_parser("spark-import-flink",
                              help="import a Flink savepoint as a pyref savepoint on Spark, one task per state handle")
    add_import_arguments(p)
    spark_options(p)
    target_file_size_option(p, "largest data file a task writes (the tasks are the state handles)")
    p.add_argument("--overwrite", action="store_true", help="replace a savepoint already at the target")
    p.add_argument("--force", action="store_true", help=FORCE_HELP)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_spark_import_flink)

    p = subparsers.add_parser("migrate", help="one state's values under a new serializer (schema evolution), on Spark")
    common(p)
    p.add_argument("--operator", required=True, help="operator id")
    p.add_argument("--state", required=True, help="state name")
    p.add_argument("--serializer", required=True,
                   help="new serializer, as inspect prints them: int64, list<string>, map<string,int64>, ...; "
                        "a tuple field it adds takes a JSON default after '=': tuple<url:string,ts:int64=0>@v2")
    p.set_defaults(handler=_migrate)

    p = subparsers.add_parser("spark-export-flink",
                              help="write the savepoint as a canonical Flink savepoint, one Spark task per state handle")
    add_export_arguments(p)
    spark_options(p)
    p.set_defaults(handler=_spark_export_flink)
