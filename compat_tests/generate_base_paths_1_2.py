"""Golden and reject cases of the format 1.2 feature ``base-paths``: bases that are not
siblings, named by their path from the root of the store (spec/format.md §8.1, rules M9
and M10, and §6.2 for two names of one directory).

    python -m compat_tests.generate_base_paths_1_2          # the missing cases
    python -m compat_tests.generate_base_paths_1_2 --list

Cases go to ``golden/1.2/`` and ``reject/1.2/`` beside the other 1.2 cases, made and
checked as ``generate_goldens_1_2`` and ``generate_rejects_1_2`` make theirs, and written
once (their files are added to the corpora's ``SHA256SUMS``). A base path is relative to
the root of a store, which for local files is ``/``; so each case directory is the root
of its own store: its ``store.json`` says so, and the conformance kit passes that
directory to the reader as ``--store-root`` (compat_tests/README.md), which keeps the
paths inside valid wherever the corpus is checked out.
"""

from __future__ import annotations

import argparse
import pathlib
import shutil
import sys
from collections.abc import Callable

from compat_tests import GOLDEN_DIR, REJECT_DIR
from compat_tests._build import fresh_dir, provenance, remove_lock, rescale_model, write_model
from compat_tests.canonical import canonical_text, dump_savepoint, error_category, expected_from_model, first_difference
from compat_tests.conformance import STORE_FILE
from compat_tests.generate_goldens import Case, write_json
from compat_tests.generate_goldens import write_readme as write_golden_readme
from compat_tests.generate_goldens_1_2 import PARALLELISMS, SCHEMA, windowed_job_ops
from compat_tests.generate_rejects import RejectCase, Savepoint, manifest_case, write_readme
from compat_tests.generate_rejects_1_2 import REJECT_PARALLELISMS, VERSION_DIR
from compat_tests.generate_rejects_1_2 import base_model as every_1_2_part
from compat_tests.generate_rejects_1_2 import reject_cases as rejects_1_2
from compat_tests.generate_rejects_1_2_bounded_work import cases as bounded_work_rejects_1_2
from compat_tests.generate_rejects_bounded_work import write_cases

#: Where the base of every case lives, from the case directory (the store's root): not
#: beside ``savepoint/``, so the savepoint must name it by path.
BASE_PATH = "jobs/2024-05-01/sp"


def in_store(case_dir: pathlib.Path, path: str):
    """The savepoint at ``path`` of the local store whose root is the case directory."""
    from pyref.io import LocalIO

    return LocalIO(case_dir / path, store_root=case_dir)


def _rescale(case_dir: pathlib.Path, source: str, target: str, parallelism: int, **options) -> None:
    from pyref import rescale

    rescale(in_store(case_dir, source), in_store(case_dir, target), parallelism, **options)
    remove_lock(case_dir / target)


# --------------------------------------------------------------------------
# Golden
# --------------------------------------------------------------------------


def _chain(case_dir: pathlib.Path):
    """The windowed job at ``jobs/2024-05-01/sp``, rescaled 3 -> 2 beside it (naming it as a
    sibling), and that rescaled 2 -> 4 into ``savepoint/``: the flattened chain names both
    by path, the sibling base of the middle savepoint becoming a path too (§8.3 step 5)."""
    model = windowed_job_ops()
    write_model(case_dir / BASE_PATH, model, inline_bytes=0, chunk_bytes=2048)
    _rescale(case_dir, BASE_PATH, f"{BASE_PATH}-rescaled", 2)
    _rescale(case_dir, f"{BASE_PATH}-rescaled", "savepoint", 4, base_paths=True)
    return rescale_model(rescale_model(model, 2), 4)


def _second_name_unread(case_dir: pathlib.Path):
    """The windowed job rescaled 3 -> 2, its base moved beside ``savepoint/`` and named as its
    sibling ``sp``, then named again by the path ``sp`` with its data files listed a second
    time under that name; no chunk refers to them, so nothing is read through the second name
    (§6.2: a second name is refused only where a read goes through it)."""
    model = windowed_job_ops()
    write_model(case_dir / BASE_PATH, model, inline_bytes=0, chunk_bytes=2048)
    _rescale(case_dir, BASE_PATH, "savepoint", 2, base_paths=True)
    (case_dir / BASE_PATH).rename(case_dir / "sp")
    shutil.rmtree(case_dir / "jobs")
    sp = Savepoint(case_dir / "savepoint")
    base = _base(sp)
    base.ClearField("path")
    sp.manifest.bases.add(directory="sp", savepoint_id=base.savepoint_id, path="sp")
    sp.manifest.data_files.extend([type(f)(path=f.path, size=f.size, base=2) for f in sp.manifest.data_files])
    sp.save()
    return rescale_model(model, 2)


def golden_cases() -> list[Case]:
    return [Case("base-paths", "a shallow savepoint whose bases are in another directory of its store, named by "
                 f"path (`{BASE_PATH}-rescaled`, and `{BASE_PATH}`, the sibling base of that one, flattened): the "
                 "windowed job rescaled 3 -> 2 -> 4; the case directory is the store's root (`store.json`)",
                 _chain, PARALLELISMS, {"inline_bytes": 0, "chunk_bytes": 2048}, "1.2"),
            Case("base-paths-second-name-unread", "one base named twice, as the sibling `sp` and by the path `sp`, "
                 "its data files listed under both names but read through the first only: no error, since a second "
                 "name is refused only where a read takes chunk bytes through it (§6.2; "
                 "`reject/1.2/base-path-and-sibling-name-one-directory` reads through both)",
                 _second_name_unread, PARALLELISMS, {"inline_bytes": 0, "chunk_bytes": 2048}, "1.2")]


def generate_golden(case: Case, target: pathlib.Path, command: str) -> None:
    tmp = fresh_dir(target)
    try:
        model = case.build(tmp)
        write_json(tmp / STORE_FILE, {"store_root": "."})
        expected = expected_from_model(model, case.parallelisms, case.format_version, SCHEMA)
        actual = dump_savepoint(in_store(tmp, "savepoint"), case.parallelisms, SCHEMA)
        if canonical_text(actual) != canonical_text(expected):
            raise SystemExit(f"{case.name}: pyref does not read what was written: {first_difference(expected, actual)}")
        write_json(tmp / "expected.json", expected)
        write_json(tmp / "generated.json", {"case": case.name, "exercises": case.exercises,
                                            "format_version": case.format_version,
                                            "parallelisms": list(case.parallelisms),
                                            "writer_options": case.writer_options, **provenance(command)})
        tmp.rename(target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


# --------------------------------------------------------------------------
# Rejects
# --------------------------------------------------------------------------


def _base(sp: Savepoint):
    (base,) = sp.manifest.bases
    return base


def _path(path: str) -> Callable[[Savepoint], None]:
    def change(sp: Savepoint) -> None:
        _base(sp).path = path

    return change


def _path_to_a_copy(case_dir: pathlib.Path) -> None:
    """The base's directory copied under another name, and the path naming the copy while
    ``directory`` still names the original: a reader without rule M10 reads the copy."""
    shutil.copytree(case_dir / BASE_PATH, case_dir / f"{BASE_PATH}-copy")
    sp = Savepoint(case_dir / "savepoint")
    _base(sp).path = f"{BASE_PATH}-copy"
    sp.save()


def _replace_base(case_dir: pathlib.Path) -> None:
    base = Savepoint(case_dir / BASE_PATH)
    base.manifest.savepoint_id = "00000000-0000-4000-8000-000000000000"
    base.save()


def _one_directory_by_two_names(case_dir: pathlib.Path) -> None:
    """The base moved beside ``savepoint/`` and named as its sibling, then named again by
    its path (rule M5 holds: a sibling and a path), with a copy of a keyed state whose
    chunks reach the same data files through the second name: their chunks share stored
    bytes, which rule C6 forbids, though no two entries of one file index overlap."""
    (case_dir / BASE_PATH).rename(case_dir / "sp")
    sp = Savepoint(case_dir / "savepoint")
    base = _base(sp)
    base.ClearField("path")
    sp.manifest.bases.add(directory="sp", savepoint_id=base.savepoint_id, path="sp")
    again = len(sp.manifest.data_files)
    sp.manifest.data_files.extend([type(f)(path=f.path, size=f.size, base=2) for f in sp.manifest.data_files])
    copy = sp.op("counter").keyed_states.add()
    copy.CopyFrom(sp.keyed("count"))
    copy.name = "count-again"
    for chunk in copy.chunks:
        chunk.range.file += again
    sp.save()


def reject_cases() -> list[RejectCase]:
    return [
        manifest_case("base-path-dot-dot", "corrupt", "a base path with a `..` segment (rule M10)",
                      _path("jobs/2024-05-01/../2024-05-01/sp")),
        manifest_case("base-path-absolute", "corrupt", "a base path starting with `/` (rule M10)", _path(f"/{BASE_PATH}")),
        manifest_case("base-path-empty-segment", "corrupt", "a base path with an empty segment (rule M10)",
                      _path("jobs//2024-05-01/sp")),
        RejectCase("base-path-not-ending-with-directory", "corrupt",
                   "a base path whose last segment is not the base's `directory`, naming a valid copy of the base "
                   "(rule M10)", _path_to_a_copy),
        manifest_case("base-path-feature-not-listed", "corrupt",
                      "a base named by path without the required feature `base-paths` listed (rule M9)",
                      lambda sp: sp.manifest.required_features.remove("base-paths")),
        manifest_case("base-path-listed-twice", "corrupt", "two bases with one path (rule M5)",
                      lambda sp: sp.manifest.bases.extend([_base(sp)])),
        manifest_case("base-path-names-own-directory", "corrupt",
                      "a base path naming the savepoint's own directory (§8.1)",
                      lambda sp: (_path("savepoint")(sp), setattr(_base(sp), "directory", "savepoint"))),
        RejectCase("base-path-savepoint-missing", "corrupt", "nothing at the base path (§8.2)",
                   lambda case_dir: shutil.rmtree(case_dir / BASE_PATH)),
        RejectCase("base-path-savepoint-replaced", "corrupt",
                   "the base at the path holds another savepoint (different savepoint_id, §8.2)", _replace_base),
        RejectCase("base-path-and-sibling-name-one-directory", "corrupt",
                   "a base named as a sibling and by path: a state reaches its data files through both names, so "
                   "chunks share stored bytes (§6.2, rule C6)", _one_directory_by_two_names),
    ]


def _write_source(case_dir: pathlib.Path) -> None:
    """Every 1.2 part at ``jobs/2024-05-01/sp``, and ``savepoint/`` rescaled from it, naming it by path."""
    write_model(case_dir / BASE_PATH, every_1_2_part(), inline_bytes=0)
    _rescale(case_dir, BASE_PATH, "savepoint", 3, base_paths=True)


def generate_reject(case: RejectCase, target: pathlib.Path, command: str) -> None:
    from pyref.errors import SavepointError

    tmp = fresh_dir(target)
    try:
        _write_source(tmp)
        case.mutate(tmp)
        write_json(tmp / STORE_FILE, {"store_root": "."})
        try:
            dump_savepoint(in_store(tmp, "savepoint"), REJECT_PARALLELISMS, SCHEMA)
        except SavepointError as exc:
            got = error_category(exc, tmp / "savepoint")
            if got != case.category:
                raise SystemExit(f"reject/{case.name}: pyref refuses it as {got!r}, expected {case.category!r}: {exc}")
        else:
            raise SystemExit(f"reject/{case.name}: pyref reads it; every reader must refuse it ({case.breaks})")
        write_json(tmp / "expected_error.json", {"category": case.category, "breaks": case.breaks,
                                                 "parallelisms": list(REJECT_PARALLELISMS)})
        write_json(tmp / "generated.json", {"case": case.name, **provenance(command)})
        tmp.rename(target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


# --------------------------------------------------------------------------
# Generation
# --------------------------------------------------------------------------


def generate(golden_root: pathlib.Path = GOLDEN_DIR, reject_root: pathlib.Path = REJECT_DIR,
             only: list[str] | None = None) -> list[str]:
    made = write_cases(golden_root, golden_cases(), generate_golden, subdirectory=VERSION_DIR, only=only)
    write_golden_readme(golden_root / VERSION_DIR)
    made += write_cases(reject_root, reject_cases(), generate_reject, subdirectory=VERSION_DIR, only=only)
    version_dir = reject_root / VERSION_DIR
    write_readme(version_dir, "Reject corpus, format 1.2",
                 "Cases for the rules and parts format 1.2 added (spec/format.md §9.1), made by "
                 "`compat_tests/generate_rejects_1_2.py`, `compat_tests/generate_rejects_1_2_bounded_work.py` "
                 "(rules C6 and L6 over the 1.2 parts, §5.9) and `compat_tests/generate_base_paths_1_2.py` (bases "
                 "named by path, `base-paths`: each case directory is the root of its store, `store.json`) from "
                 "valid savepoints using every 1.2 part; written once, hashed in `../SHA256SUMS`.",
                 [(c.name, f"`{c.category}`", c.breaks)
                  for c in [*rejects_1_2(), *bounded_work_rejects_1_2(), *reject_cases()]
                  if (version_dir / c.name).exists()])
    return made


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--golden-out", type=pathlib.Path, default=GOLDEN_DIR)
    parser.add_argument("--reject-out", type=pathlib.Path, default=REJECT_DIR)
    parser.add_argument("--case", action="append", help="generate only this case (repeatable)")
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args(argv)
    if args.list:
        print(*(f"golden/{VERSION_DIR}/{c.name}: {c.exercises}" for c in golden_cases()),
              *(f"reject/{VERSION_DIR}/{c.name} [{c.category}]: {c.breaks}" for c in reject_cases()), sep="\n")
        return 0
    print(f"{len(generate(args.golden_out, args.reject_out, args.case))} cases written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
