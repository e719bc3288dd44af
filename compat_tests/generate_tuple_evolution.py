"""Golden cases of tuple schema evolution (spec/serializers.md §5.3): a savepoint before,
the migration, and what the migration must give or why it must be refused.

    python -m compat_tests.generate_tuple_evolution          # the missing cases
    python -m compat_tests.generate_tuple_evolution --list

Each case goes to ``golden/1.0/<case>/`` (tuple states use nothing of format 1.1 or 1.2)
and is a golden case like the others: ``savepoint/`` with ``expected.json``, which every
reader must reproduce. Beside them:

- ``migration.json``: the migration of one state: ``operator``, ``state``, the new
  serializer as its snapshot (``serializer``, in the canonical dump's form) and as a
  ``pyref migrate`` label (``label``), each added field's default as the hex of its
  encoding under the field's serializer (``defaults``: ``tuple``, the child indexes from
  the new serializer to the tuple, ``field``, ``encoding``), and the ``outcome`` of
  resolving it against the stored snapshot: ``compatible_after_migration``, or
  ``incompatible`` with ``refused_field``, the field the refusal names;
- ``expected_migrated.json`` (migrations that succeed): the canonical dump of the
  migrated savepoint, computed from the values the case writes, converted here by hand.

A case is checked before it is kept: pyref reads ``savepoint/`` as ``expected.json`` says,
pyref's ``migrate_state`` gives ``expected_migrated.json`` (or refuses, naming the field),
and the label parses to the serializer with its defaults. Cases are written once; their
files are added to ``golden/SHA256SUMS``.
"""

from __future__ import annotations

import argparse
import pathlib
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field

from compat_tests import GOLDEN_DIR
from compat_tests._build import fresh_dir, provenance, rewrite_manifest, write_model
from compat_tests.canonical import (
    KeyedModel,
    ListModel,
    OperatorModel,
    canonical_text,
    dump_savepoint,
    expected_from_model,
    first_difference,
    snapshot_json,
)
from compat_tests.generate_goldens import _downgrade, _s, _v1, write_json, write_readme
from compat_tests.generate_rejects_bounded_work import write_cases

VERSION = "1.0"
PARALLELISMS = (1, 2, 3)
SPLIT = 1
MIGRATED = "compatible_after_migration"
REFUSED = "incompatible"


@dataclass
class EvolutionCase:
    name: str
    exercises: str
    #: The operators of the savepoint before the migration.
    before: Callable[[], list[OperatorModel]]
    operator: str
    state: str
    #: The new serializer (with its defaults), and its ``pyref migrate`` label.
    serializer: Callable[[], object]
    label: str
    #: The operators after the migration, or None when the migration must be refused.
    after: Callable[[], list[OperatorModel]] | None = None
    refused_field: str = ""
    #: Changes the written savepoint (as an older writer would have written it), or None.
    rewrite: Callable[[pathlib.Path], None] | None = None
    writer_options: dict = field(default_factory=lambda: {"inline_bytes": 0, "chunk_bytes": 512})


def _visit():
    s = _s()
    return s.Tuple(s.String(), s.Int32(), names=("url", "n"))


VISITS = [(f"user-{i}", (f"/page/{i % 7}", i * 3 - 20)) for i in range(40)]


def _tracker(visits_serializer, visits, recent_serializer, recent, snapshot=None) -> list[OperatorModel]:
    """A keyed value state ``visits`` and a SPLIT list state ``recent`` of tuples, beside an
    untouched int64 state: the migration changes one state and keeps the others."""
    s = _s()
    return [OperatorModel("tracker", 2, 128, s.String(), lists=[
        ListModel("recent", SPLIT, recent_serializer, recent),
    ], keyed=[
        KeyedModel("visits", "value", visits_serializer, visits, value_snapshot=snapshot),
        KeyedModel("total", "value", s.Int64(), [(k, i) for i, (k, _) in enumerate(VISITS)]),
    ])]


RECENT = [[("/a", 1), ("/b", -2)], [("/c", 2**31 - 1)]]


def _added(value: tuple, *extra) -> tuple:
    return (*value, *extra)


def _add_field_cases() -> list[EvolutionCase]:
    s = _s()
    with_ts = lambda: s.Tuple(s.String(), s.Int32(), s.Int64(), names=("url", "n", "ts"),  # noqa: E731
                              defaults={"ts": -1})
    return [
        EvolutionCase(
            "tuple-evolution-add-field", "tuple evolution (§5.3): a trailing int64 field `ts` with default -1 "
            "added to the tuple values of a keyed value state; `migration.json`, `expected_migrated.json`",
            lambda: _tracker(_visit(), VISITS, _visit(), RECENT), "tracker", "visits", with_ts,
            "tuple<url:string,n:int32,ts:int64=-1>@v2",
            lambda: _tracker(with_ts(), [(k, _added(v, -1)) for k, v in VISITS], _visit(), RECENT)),
        EvolutionCase(
            "tuple-evolution-remove-field", "tuple evolution (§5.3): the field `url` removed from the tuple "
            "elements of a SPLIT list state (fields matched by name); `migration.json`, `expected_migrated.json`",
            lambda: _tracker(_visit(), VISITS, _visit(), RECENT), "tracker", "recent",
            lambda: s.Tuple(s.Int32(), names=("n",)), "tuple<n:int32>@v2",
            lambda: _tracker(_visit(), VISITS, s.Tuple(s.Int32(), names=("n",)),
                             [[(n,) for _, n in p] for p in RECENT])),
        EvolutionCase(
            "tuple-evolution-reorder-widen-and-add", "tuple evolution (§5.3): fields moved, the kept field `n` "
            "widened int32 -> int64 and a nullable string `tag` added with default null, in one migration of a "
            "keyed value state; `migration.json`, `expected_migrated.json`",
            lambda: _tracker(_visit(), VISITS, _visit(), RECENT), "tracker", "visits",
            lambda: s.Tuple(s.Nullable(s.String()), s.Int64(), s.String(), names=("tag", "n", "url"),
                            defaults={"tag": None}),
            "tuple<tag:nullable<string>=null,n:int64,url:string>@v2",
            lambda: _tracker(s.Tuple(s.Nullable(s.String()), s.Int64(), s.String(), names=("tag", "n", "url")),
                             [(k, (None, n, url)) for k, (url, n) in VISITS], _visit(), RECENT)),
        EvolutionCase(
            "tuple-evolution-nested-in-keyed-list", "tuple evolution (§5.3) at depth: a keyed list state of "
            "nullable tuples gains a string field `host` with default \"h\" in every non-null element; "
            "`migration.json`, `expected_migrated.json`",
            lambda: _trails(s.Nullable(_visit()), TRAILS), "trails", "trail",
            lambda: s.Nullable(s.Tuple(s.String(), s.Int32(), s.String(), names=("url", "n", "host"),
                                       defaults={"host": "h"})),
            'nullable<tuple<url:string,n:int32,host:string="h">@v2>',
            lambda: _trails(s.Nullable(s.Tuple(s.String(), s.Int32(), s.String(), names=("url", "n", "host"))),
                            [(k, [None if e is None else _added(e, "h") for e in lst]) for k, lst in TRAILS])),
        EvolutionCase(
            "tuple-evolution-positional-v1", "tuple evolution (§5.3) of a version 1 (positional) tuple snapshot: "
            "a trailing field `f2` added by position, default 7; `migration.json`, `expected_migrated.json`",
            lambda: _tracker(_positional(), VISITS, _visit(), RECENT, snapshot=_v1(_positional().snapshot())),
            "tracker", "visits", lambda: s.Tuple(s.String(), s.Int32(), s.Int32(), defaults={"f2": 7}),
            "tuple<string,int32,int32=7>",
            lambda: _tracker(s.Tuple(s.String(), s.Int32(), s.Int32()), [(k, _added(v, 7)) for k, v in VISITS],
                             _visit(), RECENT), rewrite=_visits_as_v1),
    ]


def _visits_as_v1(savepoint: pathlib.Path) -> None:
    """The ``visits`` snapshot as a writer of tuple snapshots version 1 stored it (§3.8)."""
    rewrite_manifest(savepoint, lambda m: _downgrade(next(s for s in m.operators[0].keyed_states
                                                          if s.name == "visits").value_serializer))


def _positional():
    s = _s()
    return s.Tuple(s.String(), s.Int32())


TRAILS = [(i, [None if j % 3 == 2 else (f"/t/{i}/{j}", j) for j in range(i % 4)]) for i in range(12)]


def _trails(element, rows) -> list[OperatorModel]:
    s = _s()
    return [OperatorModel("trails", 3, 64, s.Int64(), keyed=[KeyedModel("trail", "list", element, rows)])]


def _refused_cases() -> list[EvolutionCase]:
    s = _s()
    before = lambda: _tracker(_visit(), VISITS, _visit(), RECENT)  # noqa: E731
    return [
        EvolutionCase(
            "tuple-evolution-refused-no-default", "tuple evolution (§5.3) refused: a field `ts` added without "
            "a default; `migration.json` (outcome incompatible, naming `ts`)", before, "tracker", "visits",
            lambda: s.Tuple(s.String(), s.Int32(), s.Int64(), names=("url", "n", "ts")),
            "tuple<url:string,n:int32,ts:int64>@v2", refused_field="ts"),
        EvolutionCase(
            "tuple-evolution-refused-type-change", "tuple evolution (§5.3) refused: the kept field `n` changed "
            "from int32 to string while `ts` is added; `migration.json` (outcome incompatible, naming `n`)",
            before, "tracker", "visits",
            lambda: s.Tuple(s.String(), s.String(), s.Int64(), names=("url", "n", "ts"), defaults={"ts": 0}),
            "tuple<url:string,n:string,ts:int64=0>@v2", refused_field="n"),
        EvolutionCase(
            "tuple-evolution-refused-rename-while-adding", "tuple evolution (§5.3) refused: `url` renamed `link` "
            "in the migration that adds `ts`, so `link` is a new field without a default; `migration.json` "
            "(outcome incompatible, naming `link`)", before, "tracker", "visits",
            lambda: s.Tuple(s.String(), s.Int32(), s.Int64(), names=("link", "n", "ts"), defaults={"ts": 0}),
            "tuple<link:string,n:int32,ts:int64=0>@v2", refused_field="link"),
    ]


def cases() -> list[EvolutionCase]:
    return [*_add_field_cases(), *_refused_cases()]


# --------------------------------------------------------------------------
# The migration description and its check
# --------------------------------------------------------------------------


def defaults_json(serializer, path: tuple[int, ...] = ()) -> list[dict]:
    """The defaults of every tuple in the serializer tree, each as the hex of its encoding."""
    out = []
    for name, value in sorted(getattr(serializer, "defaults", {}).items()):
        encoded = serializer.fields[serializer.names.index(name)].encode(value)
        out.append({"tuple": list(path), "field": name, "encoding": encoded.hex()})
    for index, child in enumerate(serializer.nested_serializers):
        out += defaults_json(child, (*path, index))
    return out


def migration_json(case: EvolutionCase) -> dict:
    serializer = case.serializer()
    doc = {"operator": case.operator, "state": case.state, "serializer": snapshot_json(serializer.snapshot()),
           "label": case.label, "defaults": defaults_json(serializer),
           "outcome": REFUSED if case.after is None else MIGRATED}
    if case.after is None:
        doc["refused_field"] = case.refused_field
    return doc


def snapshot_from_json(doc: dict):
    """The SerializerSnapshot of a serializer in the canonical dump's form (ids, versions,
    children and field names: what tuple evolution cases use)."""
    from pyref._proto.savepoint.v1 import serializer_pb2

    unknown = set(doc) - {"id", "version", "nested", "field_names"}
    if unknown:
        raise ValueError(f"serializer members this reader of migration.json does not take: {sorted(unknown)}")
    return serializer_pb2.SerializerSnapshot(serializer_id=doc["id"], version=doc["version"],
                                             nested=[snapshot_from_json(c) for c in doc.get("nested", [])],
                                             field_names=doc.get("field_names", []))


def serializer_from_migration(doc: dict):
    """The new serializer of a ``migration.json``, with its defaults decoded from their encodings."""
    from pyref.serializers import serializer_from_snapshot

    serializer = serializer_from_snapshot(snapshot_from_json(doc["serializer"]))
    for default in doc["defaults"]:
        node = serializer
        for index in default["tuple"]:
            node = node.nested_serializers[index]
        field_serializer = node.fields[node.names.index(default["field"])]
        node.set_defaults({default["field"]: field_serializer.decode(bytes.fromhex(default["encoding"]))})
    return serializer


def run_migration(case_dir: pathlib.Path, target: pathlib.Path) -> dict | None:
    """Migrate ``case_dir/savepoint`` as its ``migration.json`` says into ``target`` with
    pyref, and return the canonical dump of the result (None when pyref refuses; the
    refusal is raised when the case does not expect one)."""
    import json

    from pyref import migrate_state
    from pyref.errors import IncompatibleSerializerError

    doc = json.loads((case_dir / "migration.json").read_text(encoding="utf-8"))
    serializer = serializer_from_migration(doc)
    try:
        migrate_state(case_dir / "savepoint", target, doc["operator"], doc["state"], serializer, copy=True)
    except IncompatibleSerializerError as exc:
        if doc["outcome"] == REFUSED and repr(doc["refused_field"]) in exc.reason:
            return None
        raise
    if doc["outcome"] == REFUSED:
        raise AssertionError(f"{case_dir.name}: pyref migrated a state every implementation must refuse")
    parallelisms = json.loads((case_dir / "expected.json").read_text(encoding="utf-8"))["parallelisms"]
    return dump_savepoint(target, parallelisms)


# --------------------------------------------------------------------------
# Generation
# --------------------------------------------------------------------------


def _check_label(case: EvolutionCase) -> None:
    from pyref.spark.cli import parse_serializer

    parsed, wanted = parse_serializer(case.label), case.serializer()
    if parsed != wanted or defaults_json(parsed) != defaults_json(wanted):
        raise SystemExit(f"{case.name}: label {case.label!r} gives {parsed!r}, not {wanted!r}")


def generate_case(case: EvolutionCase, target: pathlib.Path, command: str) -> None:
    """Build one case in a temporary directory, check it, and move it into place."""
    if target.exists():
        raise SystemExit(f"{target} exists: goldens are written once and never overwritten")
    _check_label(case)
    tmp = fresh_dir(target)
    try:
        before = case.before()
        write_model(tmp / "savepoint", before, **case.writer_options)
        if case.rewrite is not None:
            case.rewrite(tmp / "savepoint")
        expected = expected_from_model(before, PARALLELISMS, VERSION)
        actual = dump_savepoint(tmp / "savepoint", PARALLELISMS)
        if canonical_text(actual) != canonical_text(expected):
            raise SystemExit(f"{case.name}: pyref does not read what was written: {first_difference(expected, actual)}")
        write_json(tmp / "expected.json", expected)
        write_json(tmp / "migration.json", migration_json(case))
        with tempfile.TemporaryDirectory() as scratch:
            migrated = run_migration(tmp, pathlib.Path(scratch) / "migrated")
        if case.after is not None:
            wanted = expected_from_model(case.after(), PARALLELISMS, VERSION)
            if canonical_text(migrated) != canonical_text(wanted):
                raise SystemExit(f"{case.name}: pyref's migration differs: {first_difference(wanted, migrated)}")
            write_json(tmp / "expected_migrated.json", wanted)
        write_json(tmp / "generated.json", {"case": case.name, "exercises": case.exercises,
                                            "format_version": VERSION, "parallelisms": list(PARALLELISMS),
                                            "writer_options": case.writer_options, **provenance(command)})
        tmp.rename(target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def generate(out: pathlib.Path = GOLDEN_DIR, only: list[str] | None = None) -> list[str]:
    """Write every missing case (or only the named ones) to ``out/1.0``; the names written."""
    unknown = set(only or ()) - {c.name for c in cases()}
    if unknown:
        raise SystemExit(f"unknown cases: {sorted(unknown)}")
    made = write_cases(out, cases(), generate_case, subdirectory=VERSION, only=only)
    if made:
        write_readme(out / VERSION)
    return made


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=pathlib.Path, default=GOLDEN_DIR)
    parser.add_argument("--case", action="append", help="generate only this case (repeatable)")
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args(argv)
    if args.list:
        print(*(f"golden/{VERSION}/{c.name}: {c.exercises}" for c in cases()), sep="\n")
        return 0
    print(f"{len(generate(args.out, args.case))} cases written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
