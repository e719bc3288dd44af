"""Conformance kit: run the golden, forward and reject corpora against a reader.

    python -m compat_tests.conformance --reader "python -m compat_tests.dump_pyref"
    python -m compat_tests.conformance --reader "java -jar my-reader.jar {savepoint} {parallelisms}"
    python -m compat_tests.conformance --savepoint DIR --expected expected.json   # check a writer's output

A *reader command* is any program that, given a savepoint directory and a
comma-separated list of parallelisms, prints the savepoint's canonical JSON
dump and exits 0, or refuses the savepoint: exits non-zero and prints
``{"error": {"category": ..., "message": ...}}``. Without placeholders the
kit appends ``SAVEPOINT --parallelism P1,P2,...`` to the command; with them,
``{savepoint}`` and ``{parallelisms}`` are substituted. The protocol and the
dump schema are in compat_tests/README.md.

Every golden and forward case must dump exactly its ``expected.json``; every
reject case must be refused with the category in ``expected_error.json``. The
kit needs nothing but Python 3.10+ (it does not import pyref), and checks the
corpora against their SHA256SUMS before running them.

To check a *writer*: write a savepoint and the canonical dump of what was written,
and run ``--savepoint DIR --expected FILE``: the reader (pyref's by default) must
dump exactly that.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import pathlib
import shlex
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field

from compat_tests import ROOT
from compat_tests._build import hash_corpus, read_sums
from compat_tests.canonical import as_schema_1, canonical_text, first_difference

CORPORA = ("golden", "forward", "reject")
#: pyref's reader command, with this interpreter (run from the directory that holds compat_tests/).
PYREF_READER = shlex.join([sys.executable, "-m", "compat_tests.dump_pyref"])
DEFAULT_TIMEOUT = 300.0
#: Runs of one case at most, when a run ends without an answer from the reader.
DEFAULT_ATTEMPTS = 2
#: A case's file naming its store root (Case.store_root).
STORE_FILE = "store.json"


@dataclass(frozen=True)
class Case:
    corpus: str  # golden | forward | reject
    name: str  # e.g. "golden/1.0/keys-int32", "reject/unknown-codec"
    directory: pathlib.Path

    @property
    def savepoint(self) -> pathlib.Path:
        return self.directory / "savepoint"

    @property
    def expects_error(self) -> bool:
        return self.corpus == "reject"

    def expectation(self) -> dict:
        name = "expected_error.json" if self.expects_error else "expected.json"
        return json.loads((self.directory / name).read_text(encoding="utf-8"))

    @property
    def parallelisms(self) -> list[int]:
        return list(self.expectation()["parallelisms"])

    @property
    def store_root(self) -> pathlib.Path | None:
        """The directory a reader takes as the root of the local store, for a case whose
        savepoints name bases by path (format 1.2 ``base-paths``): ``store.json`` says
        where, relative to the case directory. None for every other case."""
        found = self.directory / STORE_FILE
        if not found.is_file():
            return None
        return self.directory / json.loads(found.read_text(encoding="utf-8"))["store_root"]


@dataclass
class Result:
    case: str
    passed: bool
    detail: str
    seconds: float
    exit_code: int | None = None
    #: The run ended without an answer from the reader: it timed out, could not start, or
    #: was killed by a signal. Such a run says more about the machine than about the reader,
    #: so it is tried again (a reader that crashes every time still fails every time).
    interrupted: bool = False
    #: What ended the earlier, interrupted runs of this case.
    earlier: list[str] = field(default_factory=list)


def discover(root: pathlib.Path = ROOT, corpora=CORPORA, patterns: list[str] | None = None) -> list[Case]:
    """Every case of the chosen corpora under ``root``, sorted by name."""
    cases = []
    for corpus in corpora:
        base = root / corpus
        if not base.is_dir():
            continue
        marker = "expected_error.json" if corpus == "reject" else "expected.json"
        for found in sorted(base.rglob(marker)):
            directory = found.parent
            name = "/".join((corpus, *directory.relative_to(base).parts))
            if patterns and not any(fnmatch.fnmatch(name, p) or fnmatch.fnmatch(directory.name, p) for p in patterns):
                continue
            cases.append(Case(corpus, name, directory))
    return cases


def verify_corpora(root: pathlib.Path = ROOT, corpora=CORPORA) -> list[str]:
    """Problems with the corpora's files against their SHA256SUMS (empty when intact)."""
    problems = []
    for corpus in corpora:
        base = root / corpus
        if not base.is_dir():
            continue
        listed, actual = read_sums(base), hash_corpus(base)
        for rel in sorted(set(listed) | set(actual)):
            if rel not in actual:
                problems.append(f"{corpus}/{rel}: listed in SHA256SUMS but missing")
            elif rel not in listed:
                problems.append(f"{corpus}/{rel}: not listed in SHA256SUMS")
            elif listed[rel] != actual[rel]:
                problems.append(f"{corpus}/{rel}: SHA-256 differs from SHA256SUMS")
    return problems


def reader_argv(reader: str, savepoint: pathlib.Path, parallelisms: list[int],
                store_root: pathlib.Path | None = None) -> list[str]:
    text = ",".join(map(str, parallelisms))
    args = shlex.split(reader)
    if any("{savepoint}" in a or "{parallelisms}" in a for a in args):
        argv = [a.replace("{savepoint}", str(savepoint)).replace("{parallelisms}", text) for a in args]
    else:
        argv = [*args, str(savepoint), "--parallelism", text]
    if store_root is None:
        return argv
    if any("{store_root}" in a for a in args):
        return [a.replace("{store_root}", str(store_root)) for a in argv]
    return [*argv, "--store-root", str(store_root)]


def _error_of(stdout: str) -> dict | None:
    try:
        document = json.loads(stdout)
    except ValueError:
        return None
    error = document.get("error") if isinstance(document, dict) else None
    return error if isinstance(error, dict) else None


def check_case(reader: str, case: Case, *, timeout: float = DEFAULT_TIMEOUT, strict_categories: bool = True,
               env: dict | None = None, cwd: str | None = None, attempts: int = DEFAULT_ATTEMPTS) -> Result:
    """Run the reader on one case and judge its answer; an interrupted run is tried
    again, up to ``attempts`` runs in all."""
    earlier: list[str] = []
    while True:
        result = _check_once(reader, case, timeout, strict_categories, env, cwd)
        if not result.interrupted or len(earlier) + 1 >= attempts:
            result.earlier = earlier
            return result
        earlier.append(result.detail)


def _check_once(reader: str, case: Case, timeout: float, strict_categories: bool, env: dict | None,
                cwd: str | None) -> Result:
    expectation = case.expectation()
    argv = reader_argv(reader, case.savepoint, list(expectation["parallelisms"]), case.store_root)
    start = time.monotonic()
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=timeout, env=env, cwd=cwd, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return Result(case.name, False, f"reader timed out after {timeout:.0f}s", time.monotonic() - start,
                      interrupted=True)
    except OSError as exc:
        return Result(case.name, False, f"cannot run the reader {argv[0]!r}: {exc}", time.monotonic() - start,
                      interrupted=True)
    seconds = time.monotonic() - start
    stdout = proc.stdout.decode("utf-8", errors="replace")
    stderr_tail = proc.stderr.decode("utf-8", errors="replace").strip()[-400:]

    def result(passed: bool, detail: str) -> Result:
        return Result(case.name, passed, detail, seconds, proc.returncode)

    if proc.returncode < 0:
        try:
            name = signal.Signals(-proc.returncode).name
        except ValueError:
            name = f"signal {-proc.returncode}"
        return Result(case.name, False, f"reader killed by {name} after {seconds:.1f}s"
                      + (f"; stderr: {stderr_tail}" if stderr_tail else ""), seconds, proc.returncode, interrupted=True)
    if case.expects_error:
        wanted = expectation["category"]
        if proc.returncode == 0:
            return result(False, f"read a savepoint it must refuse ({expectation['breaks']}); expected {wanted!r}")
        error = _error_of(stdout)
        if error is None:
            return result(False, f"exit code {proc.returncode} without an error document on stdout; expected "
                                 f"{wanted!r}" + (f"; stderr: {stderr_tail}" if stderr_tail else ""))
        got = error.get("category")
        if got == wanted or (not strict_categories and got not in ("internal-error", None)):
            return result(True, f"refused: {got}")
        return result(False, f"refused as {got!r}, expected {wanted!r}: {error.get('message', '')}"[:600])
    if proc.returncode != 0:
        error = _error_of(stdout)
        why = f"{error.get('category')}: {error.get('message')}" if error else stderr_tail
        return result(False, f"refused a savepoint it must read (exit code {proc.returncode}): {why}"[:600])
    try:
        actual = json.loads(stdout)
    except ValueError as exc:
        return result(False, f"stdout is not one JSON document: {exc}")
    wanted, got = expectation.get("canonical_version"), actual.get("canonical_version") if isinstance(actual, dict) else None
    if wanted == 1 and got == 2:
        actual = as_schema_1(actual)  # a schema 2 reader, an older case: compare what schema 1 has
    elif wanted == 2 and got != 2:
        return result(False, f"the case needs dump schema 2 (format 1.2); the reader printed schema {got!r}")
    if canonical_text(actual) == canonical_text(expectation):
        return result(True, "dump matches expected.json")
    return result(False, f"dump differs from expected.json at {first_difference(expectation, actual)}"[:600])


@dataclass(frozen=True)
class WrittenCase(Case):
    """A savepoint an implementation wrote, checked against the dump it says it wrote."""

    expected: pathlib.Path = pathlib.Path("expected.json")
    path: pathlib.Path = pathlib.Path(".")

    @property
    def savepoint(self) -> pathlib.Path:
        return self.path

    def expectation(self) -> dict:
        return json.loads(self.expected.read_text(encoding="utf-8"))


def run(reader: str, cases: list[Case], *, jobs: int | None = None, timeout: float = DEFAULT_TIMEOUT,
        strict_categories: bool = True, env: dict | None = None, cwd: str | None = None,
        attempts: int = DEFAULT_ATTEMPTS) -> list[Result]:
    jobs = jobs or os.cpu_count() or 1
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(lambda c: check_case(reader, c, timeout=timeout, strict_categories=strict_categories,
                                                  env=env, cwd=cwd, attempts=attempts), cases))


def describe(result: Result) -> str:
    """The result's detail, with what interrupted its earlier runs."""
    if not result.earlier:
        return result.detail
    return f"{result.detail} (earlier runs interrupted: {'; '.join(result.earlier)})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m compat_tests.conformance", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reader", default=PYREF_READER,
                        help="the reader command (see above; default: pyref's, %(default)s)")
    parser.add_argument("--savepoint", type=pathlib.Path,
                        help="check one savepoint instead of the corpora (e.g. one your writer made) ...")
    parser.add_argument("--expected", type=pathlib.Path,
                        help="... against this canonical dump (its \"parallelisms\" are used)")
    parser.add_argument("--corpus", default=",".join(CORPORA),
                        help=f"comma-separated corpora to run (default {','.join(CORPORA)})")
    parser.add_argument("--case", action="append", metavar="GLOB",
                        help="only cases whose name (e.g. golden/1.0/keys-*) or directory matches; repeatable")
    parser.add_argument("--root", type=pathlib.Path, default=ROOT, help="directory holding the corpora")
    parser.add_argument("--jobs", "-j", type=int, default=None, help="cases run at once (default: CPU count)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per case")
    parser.add_argument("--attempts", type=int, default=DEFAULT_ATTEMPTS,
                        help="runs of a case at most, when a run times out, cannot start or is killed by a signal "
                             "(default %(default)s)")
    parser.add_argument("--any-category", action="store_true",
                        help="accept any clean refusal of a reject case, whatever its category")
    parser.add_argument("--no-verify", action="store_true", help="skip the SHA256SUMS check of the corpora")
    parser.add_argument("--report", type=pathlib.Path, help="write the results as JSON here")
    parser.add_argument("--quiet", "-q", action="store_true", help="print failures and the summary only")
    args = parser.parse_args(argv)
    corpora = [c for c in args.corpus.split(",") if c]
    unknown = sorted(set(corpora) - set(CORPORA))
    if unknown:
        parser.error(f"unknown corpora {unknown}; choose from {list(CORPORA)}")
    if args.savepoint or args.expected:
        if not (args.savepoint and args.expected):
            parser.error("--savepoint and --expected go together")
        case = WrittenCase("written", str(args.savepoint), args.savepoint, expected=args.expected,
                           path=args.savepoint)
        r = check_case(args.reader, case, timeout=args.timeout, attempts=args.attempts)
        print(f"{'PASS' if r.passed else 'FAIL'} {args.savepoint}: {describe(r)}")
        return 0 if r.passed else 1
    if not args.no_verify:
        problems = verify_corpora(args.root, corpora)
        if problems:
            print("the corpora do not match their SHA256SUMS:", *problems[:20], sep="\n  ", file=sys.stderr)
            return 2
    cases = discover(args.root, corpora, args.case)
    if not cases:
        print("no cases selected", file=sys.stderr)
        return 2
    results = run(args.reader, cases, jobs=args.jobs, timeout=args.timeout, strict_categories=not args.any_category,
                  attempts=args.attempts)
    for r in results:
        if not r.passed or r.earlier or not args.quiet:
            print(f"{'PASS' if r.passed else 'FAIL'} {r.case}: {describe(r)}")
    passed = sum(r.passed for r in results)
    if args.report:
        args.report.write_text(json.dumps([asdict(r) for r in results], indent=1) + "\n", encoding="utf-8")
    print(f"conformance: {passed} passed, {len(results) - passed} failed")
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
