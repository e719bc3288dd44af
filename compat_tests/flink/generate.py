"""Write the corpus of real Flink savepoints (corpus/README.md says what each case holds).

    python -m compat_tests.flink.generate [--versions 1.20.3,2.3.0] [--backends hashmap,rocksdb] [--cases seeds,...]

For each Flink version (one JVM each) and backend it runs every corpus job on Flink's local
mini cluster, takes a canonical stop-with-savepoint and keeps, per case,
``corpus/<version>/<backend>/<case>/`` with ``savepoint/`` (as Flink wrote it), ``truth.json``
(written by the job at snapshot time) and ``generated.json`` (how it was made). A case that
exists is never written again; new files are added to ``corpus/SHA256SUMS``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import pathlib
import platform
import shutil
import struct
import sys
import tempfile
import time
from dataclasses import dataclass

from compat_tests._build import add_to_sums, corpus_files, fresh_dir
from compat_tests.flink import harness, jars

CORPUS = pathlib.Path(__file__).resolve().parent / "corpus"
#: Magic number at the start of every Flink _metadata file.
METADATA_MAGIC = 0x4960672D


@dataclass(frozen=True)
class Case:
    name: str
    job: str
    max_parallelism: int
    #: None: job manager checkpoint storage (all state inlined in _metadata); else the filesystem
    #: storage's inline threshold ("0": every state handle in its own file; "20kb": Flink's default).
    inline_threshold: str | None
    compression: bool
    exercises: str
    #: The job needs Flink 1.x (the Scala API's serializers: 2.0 removed flink-scala).
    flink_1_only: bool = False


CASES = (
    Case("seeds", "seeds", 128, None, False,
         "the seeds' scenario: SPLIT_DISTRIBUTE offsets (4 at parallelism 2), per-URL counts (String keys); "
         "all state inlined in _metadata"),
    Case("operator-state", "operator-state", 128, "0", False,
         "SPLIT_DISTRIBUTE and UNION list state (Long, String, Tuple2, Kryo elements), broadcast state of an "
         "operator and of a broadcast stream (non-keyed and keyed), FLIP-27 coordinator state of a custom "
         "source and of NumberSequenceSource; parallelism 3; every state handle in its own file"),
    Case("keyed-kinds", "keyed-kinds", 1000, "0", False,
         "value, list, map, reducing, aggregating state; TTL on value, list and map; POJO and Kryo values; "
         "String, Long, Tuple2 and POJO (own hashCode) keys; event- and processing-time timers pending; "
         "parallelism 3, max parallelism 1000; every state handle in its own file"),
    Case("windows", "windows", 128, "20kb", True,
         "tumbling (reduce, process) and sliding (aggregate, allowed lateness) event-time windows and a count "
         "window (GlobalWindow, trigger state) with pending contents and window timers; snapshot compression; "
         "a keyed state large enough to leave _metadata beside small ones inlined; parallelism 1"),
    Case("types", "types", 128, None, False,
         "one value state per serializer: primitives, boxed, String, byte/int/long/double arrays, Tuple3, Row, "
         "List, Map, enum, nested POJO with collection fields, Kryo; map state with null values; String keys "
         "with non-ASCII and astral characters; 64-bit values beyond 2^53, NaN, infinities; parallelism 2; "
         "all state inlined in _metadata"),
    Case("scala", "scala", 128, None, False,
         "the Scala API's serializers (flink-scala): case class, Tuple2, Option (of a case class, of Nothing), "
         "Either, Try (Success, Failure), List of tuples, Map, Enumeration, Unit; value, list and map state; "
         "parallelism 2; all state inlined in _metadata; Flink 1.x only", flink_1_only=True),
)


def metadata_version(savepoint: pathlib.Path) -> int:
    magic, version = struct.unpack(">II", (savepoint / "_metadata").read_bytes()[:8])
    if magic != METADATA_MAGIC:
        raise ValueError(f"{savepoint}/_metadata does not start with Flink's magic number")
    return version


def savepoint_format(version: str) -> str:
    """How the savepoint's format was chosen: 1.13 and 1.14 have no SavepointFormatType (their savepoints are all canonical)."""
    if harness.api_families(version)["savepoints"] == "1.14":
        return f"canonical (Flink {'.'.join(version.split('.')[:2])} writes no other format)"
    return "SavepointFormatType.CANONICAL"


def generate_version(version: str, backends: list[str], cases: list[Case], *, download: bool, command: str,
                     corpus: pathlib.Path = CORPUS) -> int:
    """Write the missing cases of one Flink version in one JVM; returns how many failed."""
    lib = jars.ensure_lib(version, download=download)
    manifest = json.loads((lib.parent / jars.MANIFEST).read_text(encoding="utf-8"))
    java = harness.java_version()
    fingerprint = harness.jobs_fingerprint(version)
    pending, tasks = [], []
    with tempfile.TemporaryDirectory(prefix="pyref-flink-gen-") as tmp:
        for backend in backends:
            for case in cases:
                target = corpus / version / backend / case.name
                if case.flink_1_only and not version.startswith("1."):
                    print(f"  {version} {backend} {case.name}: Flink 1.x only, skipped")
                    continue
                if target.exists():
                    print(f"  {version} {backend} {case.name}: exists, kept")
                    continue
                staging = fresh_dir(target)
                checkpoints = pathlib.Path(tmp) / f"checkpoints-{backend}-{case.name}"
                config = harness.flink_config(version, backend=backend, compression=case.compression,
                                              checkpoint_dir=None if case.inline_threshold is None else str(checkpoints),
                                              inline_threshold=case.inline_threshold)
                pending.append((backend, case, target, staging, config, str(checkpoints.resolve().as_uri())))
                tasks.append({"action": "generate", "job": case.job, "max_parallelism": case.max_parallelism,
                              "config": config, "out": str(staging), "timeout_s": 300,
                              "truth": {"flink_version": version, "backend": backend, "case": case.name}})
        if not tasks:
            return 0
        started = time.monotonic()
        results = harness.run_tasks(version, tasks, download=download, log_dir=pathlib.Path(tmp) / "logs")
        failed = 0
        for (backend, case, target, staging, config, checkpoint_uri), result in zip(pending, results):
            if not result["ok"]:
                failed += 1
                print(f"  {version} {backend} {case.name}: FAILED\n{harness.short_error(result['error'])}", file=sys.stderr)
                shutil.rmtree(staging, ignore_errors=True)
                continue
            backends_used = result.get("keyed_state_backends", [])
            expected = harness.BACKEND_CLASSES[backend]
            if not all(expected in b for b in backends_used):  # [] for a job without keyed SpecOperators
                failed += 1
                print(f"  {version} {backend} {case.name}: FAILED: ran with {backends_used}, not the {backend} backend",
                      file=sys.stderr)
                shutil.rmtree(staging, ignore_errors=True)
                continue
            savepoint = staging / "savepoint"
            generated = {
                "generator": command,
                "flink_version": version,
                "backend": backend,
                "case": case.name,
                "job": case.job,
                "exercises": case.exercises,
                "max_parallelism": case.max_parallelism,
                "config": {k: v.replace(checkpoint_uri, "<checkpoint-dir>") for k, v in config.items()},
                "savepoint": f"stop-with-savepoint, {savepoint_format(version)}, no drain",
                "keyed_state_backends": backends_used,
                "metadata_version": metadata_version(savepoint),
                "java": java,
                "jobs_sha256": fingerprint,
                "jars": {k: manifest[k] for k in ("archive", "url", "sha256")},
                "python": f"{platform.python_implementation()} {platform.python_version()}",
                "job_seconds": round(result["seconds"], 2),
                "savepoint_seconds": round(result["savepoint_seconds"], 2),
                "generated_on": datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
            }
            (staging / "generated.json").write_text(json.dumps(generated, indent=2) + "\n", encoding="utf-8")
            target.parent.mkdir(parents=True, exist_ok=True)
            staging.rename(target)
            add_to_sums(corpus, [f"{target.relative_to(corpus).as_posix()}/{rel}" for rel in corpus_files(target)])
            size = sum(p.stat().st_size for p in target.rglob("*") if p.is_file())
            print(f"  {version} {backend} {case.name}: metadata v{generated['metadata_version']}, {size} bytes, "
                  f"{result['seconds']:.1f} s")
        print(f"{version}: {len(tasks) - failed}/{len(tasks)} cases in {time.monotonic() - started:.0f} s")
        return failed


TABLE_START, TABLE_END = "<!-- corpus-table -->", "<!-- /corpus-table -->"


def corpus_table(corpus: pathlib.Path = CORPUS) -> str:
    """The README's table of every case: version, backend, case, _metadata version, files, bytes."""
    rows = ["| Flink | backend | case | _metadata version | savepoint files | savepoint bytes | case bytes |",
            "|---|---|---|---|---|---|---|"]
    for generated in sorted(corpus.glob("*/*/*/generated.json"),
                            key=lambda p: (tuple(int(x) for x in p.parts[-4].split(".")), p.parts[-3], p.parts[-2])):
        case = generated.parent
        info = json.loads(generated.read_text(encoding="utf-8"))
        files = [p for p in (case / "savepoint").rglob("*") if p.is_file()]
        total = sum(p.stat().st_size for p in case.rglob("*") if p.is_file())
        rows.append(f"| {info['flink_version']} | {info['backend']} | {info['case']} | {info['metadata_version']} | "
                    f"{len(files)} | {sum(p.stat().st_size for p in files)} | {total} |")
    return "\n".join(rows)


def update_readme(corpus: pathlib.Path = CORPUS) -> None:
    readme = corpus / "README.md"
    text = readme.read_text(encoding="utf-8") if readme.exists() else ""
    head = text.split(TABLE_START)[0].rstrip("\n")
    readme.write_text(f"{head}\n\n{TABLE_START}\n{corpus_table(corpus)}\n{TABLE_END}\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--versions", default=",".join(jars.FLINK_VERSIONS))
    parser.add_argument("--backends", default=",".join(harness.BACKENDS))
    parser.add_argument("--cases", default=",".join(c.name for c in CASES))
    parser.add_argument("--no-download", action="store_true", help="use only jars already in the cache")
    parser.add_argument("--corpus", type=pathlib.Path, default=CORPUS, help="where to write (default: the committed corpus)")
    args = parser.parse_args(argv)
    by_name = {c.name: c for c in CASES}
    unknown = set(args.cases.split(",")) - set(by_name)
    if unknown:
        parser.error(f"unknown cases {sorted(unknown)}; choose from {sorted(by_name)}")
    cases = [by_name[n] for n in args.cases.split(",")]
    command = "python -m compat_tests.flink.generate " + " ".join(argv if argv is not None else sys.argv[1:])
    failed = 0
    for version in args.versions.split(","):
        failed += generate_version(version, args.backends.split(","), cases, download=not args.no_download,
                                   command=command.strip(), corpus=args.corpus)
    update_readme(args.corpus)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
