"""Real Flink retained checkpoints (not savepoints) of the corpus jobs, with their truth.

    python -m compat_tests.flink.checkpoints OUT [--versions 2.3.0,1.20.3] [--cases hashmap-windows,...]

A case runs a corpus job with periodic checkpoints retained on cancellation; once the job's
state is frozen the driver waits for a checkpoint every subtask took after that, cancels the
job (jobs/Checkpoints.java) and keeps ``OUT/<version>-<case>/`` with ``checkpoint/`` (Flink's
``chk-N`` directory: ``_metadata`` and the state files it names), for an incremental RocksDB
checkpoint ``shared/`` (the files of ``../shared`` it names, from this and earlier checkpoints)
and ``truth.json`` (what every subtask held at that checkpoint). A case with a savepoint format
stops the job with a savepoint of that format instead and keeps it as ``savepoint/``. A case
``restored_from`` another is its second phase: Flink restores the other case's retained checkpoint
into it (at the case's own parallelism: a rescale) and it is kept as any other, from its own
checkpoint directory.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import shutil
import tarfile
import tempfile
from dataclasses import dataclass

from compat_tests.flink import harness

#: Checkpoint every so often: a job's frozen state is checkpointed soon after its input ends.
INTERVAL = "200ms"


@dataclass(frozen=True)
class CheckpointCase:
    name: str
    job: str
    backend: str
    incremental: bool
    #: The filesystem storage's inline threshold ("0": every state handle in its own file).
    inline_threshold: str
    max_parallelism: int = 128
    compression: bool = False
    #: "native": a native-format stop-with-savepoint of the job, not a retained checkpoint.
    savepoint_format: str | None = None
    #: RocksDB's block compression (state.backend.rocksdb.compression.per.level), e.g. "ZSTD_COMPRESSION".
    rocksdb_compression: str | None = None
    #: The case whose retained checkpoint this one's job is restored from (taken first, in a JVM of its own).
    restored_from: str | None = None
    #: Unaligned checkpoints of a backpressured job, retained while it is under way: the checkpoint keeps
    #: the buffers in flight between its operators (input channel and result subpartition state).
    unaligned: bool = False
    #: RocksDB keeping its timers on the heap (state.backend.rocksdb.timer-service.factory: HEAP): a checkpoint or
    #: native savepoint then writes them as the subtask's raw keyed state.
    heap_timers: bool = False
    #: RocksDB restored by clipping each old subtask's DB to the new key groups and importing its column
    #: families (state.backend.rocksdb.use-ingest-db-restore-mode, Flink 1.19+) rather than copying keys over.
    ingest_db_restore: bool = False
    #: The changelog state backend over this one (state.changelog.enabled), its changes kept by this storage
    #: ("filesystem": DSTL files in ``changelog/`` beside the checkpoint directory; "memory": in ``_metadata``).
    changelog_storage: str | None = None
    #: How often the changelog backend materializes (snapshots its inner backend, truncating the changelog):
    #: an hour keeps every change in the log; a fraction of a second materializes while the job still changes state.
    materialize_interval: str = "1h"
    #: The DSTL files Snappy-compressed (state.changelog.dstl.dfs.compression.enabled).
    changelog_compression: bool = False
    #: Checkpoint file merging (FLIP-306, Flink 1.20+: execution.checkpointing.file-merging.enabled): state handles
    #: are segments of files shared by subtasks and checkpoints, in ``shared/`` and ``taskowned/`` beside chk-N.
    file_merging: bool = False


CASES = (
    CheckpointCase("hashmap-windows", "windows", "hashmap", False, "0"),
    CheckpointCase("hashmap-windows-compressed", "windows", "hashmap", False, "0", compression=True),
    CheckpointCase("hashmap-seeds", "seeds", "hashmap", False, "20kb"),
    CheckpointCase("hashmap-seeds-compressed", "seeds", "hashmap", False, "0", compression=True),
    CheckpointCase("hashmap-keyed-kinds", "keyed-kinds", "hashmap", False, "0", max_parallelism=1000),
    CheckpointCase("hashmap-heap-kinds", "heap-kinds", "hashmap", False, "0", max_parallelism=1000),
    CheckpointCase("rocksdb-full-keyed-kinds", "keyed-kinds", "rocksdb", False, "0", max_parallelism=1000),
    CheckpointCase("rocksdb-full-seeds", "seeds", "rocksdb", False, "20kb"),
    CheckpointCase("rocksdb-incremental-seeds", "seeds", "rocksdb", True, "0"),
    CheckpointCase("rocksdb-incremental-churn", "churn", "rocksdb", True, "0"),
    CheckpointCase("rocksdb-full-seeds-zstd", "seeds", "rocksdb", False, "20kb", rocksdb_compression="ZSTD_COMPRESSION"),
    CheckpointCase("rocksdb-full-seeds-lz4", "seeds", "rocksdb", False, "20kb", rocksdb_compression="LZ4_COMPRESSION"),
    CheckpointCase("rocksdb-native-savepoint-keyed-kinds", "keyed-kinds", "rocksdb", False, "0", max_parallelism=1000,
                   savepoint_format="native"),
    CheckpointCase("rocksdb-incremental-churn-rescaled-3", "churn-rescaled-3", "rocksdb", True, "0",
                   restored_from="rocksdb-incremental-churn"),
    CheckpointCase("rocksdb-incremental-churn-rescaled-1", "churn-rescaled-1", "rocksdb", True, "0",
                   restored_from="rocksdb-incremental-churn"),
    CheckpointCase("rocksdb-incremental-churn-rescaled-3-ingest", "churn-rescaled-3", "rocksdb", True, "0",
                   restored_from="rocksdb-incremental-churn", ingest_db_restore=True),
    CheckpointCase("hashmap-unaligned-backpressure", "backpressure", "hashmap", False, "0", unaligned=True),
    CheckpointCase("rocksdb-incremental-windows-heap-timers", "windows", "rocksdb", True, "0", heap_timers=True),
    CheckpointCase("rocksdb-incremental-keyed-kinds-heap-timers", "keyed-kinds", "rocksdb", True, "0",
                   max_parallelism=1000, heap_timers=True),
    CheckpointCase("rocksdb-canonical-savepoint-windows-heap-timers", "windows", "rocksdb", False, "0",
                   savepoint_format="canonical", heap_timers=True),
    CheckpointCase("hashmap-changelog-heap-kinds-materialized", "heap-kinds", "hashmap", False, "0",
                   max_parallelism=1000, changelog_storage="filesystem", materialize_interval="100ms"),
    CheckpointCase("hashmap-changelog-memory-heap-kinds", "heap-kinds", "hashmap", False, "0", max_parallelism=1000,
                   changelog_storage="memory"),
    CheckpointCase("rocksdb-changelog-keyed-kinds", "keyed-kinds", "rocksdb", True, "0", max_parallelism=1000,
                   changelog_storage="filesystem"),
    CheckpointCase("rocksdb-changelog-keyed-kinds-materialized", "keyed-kinds", "rocksdb", True, "0",
                   max_parallelism=1000, changelog_storage="filesystem", materialize_interval="100ms"),
    CheckpointCase("hashmap-changelog-churn-materialized", "churn", "hashmap", False, "0",
                   changelog_storage="filesystem", materialize_interval="300ms"),
    CheckpointCase("hashmap-changelog-churn-materialized-compressed", "churn", "hashmap", False, "0",
                   changelog_storage="filesystem", materialize_interval="300ms", changelog_compression=True),
    CheckpointCase("hashmap-changelog-windows-materialized", "windows", "hashmap", False, "0",
                   changelog_storage="filesystem", materialize_interval="100ms"),
    CheckpointCase("rocksdb-changelog-churn-materialized", "churn", "rocksdb", True, "0",
                   changelog_storage="filesystem", materialize_interval="300ms"),
    # Session windows merging their namespaces (MERGE_NS of LIST, REDUCING and AGGREGATING state), nothing
    # materialized: every merge is among the changes.
    CheckpointCase("hashmap-changelog-sessions", "sessions", "hashmap", False, "0", changelog_storage="filesystem"),
    CheckpointCase("rocksdb-changelog-sessions", "sessions", "rocksdb", True, "0", changelog_storage="filesystem"),
    # ForSt (Flink 2.0+) through the classic state API: its synchronous keyed backend, a local DB. (ForSt takes no
    # canonical savepoint: "does not support CANONICAL savepoints", 2.0.2 to 2.3.0.)
    CheckpointCase("forst-native-savepoint-keyed-kinds", "keyed-kinds", "forst", False, "0", max_parallelism=1000,
                   savepoint_format="native"),
    CheckpointCase("forst-full-keyed-kinds", "keyed-kinds", "forst", False, "0", max_parallelism=1000),
    CheckpointCase("forst-full-seeds", "seeds", "forst", False, "20kb"),
    CheckpointCase("forst-incremental-churn", "churn", "forst", True, "0"),
    CheckpointCase("forst-incremental-windows-heap-timers", "windows", "forst", True, "0", heap_timers=True),
    # The async state API (KeyedStream.enableAsyncState(), state v2 descriptors): ForSt's asynchronous keyed backend.
    CheckpointCase("forst-incremental-async-state", "async-state", "forst", True, "0"),
    CheckpointCase("forst-native-savepoint-async-state", "async-state", "forst", False, "0", savepoint_format="native"),
    # File merging (Flink 1.20+): every handle a segment of a merged file (operator handles type 17, streams type 15).
    CheckpointCase("hashmap-file-merging-seeds", "seeds", "hashmap", False, "0", file_merging=True),
    CheckpointCase("hashmap-file-merging-heap-kinds", "heap-kinds", "hashmap", False, "0", max_parallelism=1000,
                   file_merging=True),
    CheckpointCase("hashmap-file-merging-operator-state", "operator-state", "hashmap", False, "0", file_merging=True),
    CheckpointCase("rocksdb-incremental-file-merging-churn", "churn", "rocksdb", True, "0", file_merging=True),
)
#: Unaligned checkpoints from the start (no alignment timeout), of small network buffers (4 KiB segments, few per
#: channel) so that the in-flight data a checkpoint keeps stays small.
UNALIGNED_CONFIG = {"execution.checkpointing.unaligned.enabled": "true", "execution.checkpointing.unaligned": "true",
                    "execution.checkpointing.aligned-checkpoint-timeout": "0", "taskmanager.memory.segment-size": "4kb",
                    "taskmanager.network.memory.buffers-per-channel": "1",
                    "taskmanager.network.memory.floating-buffers-per-gate": "1",
                    "taskmanager.network.memory.max-buffers-per-channel": "2"}


#: The option of checkpoint file merging, of the same name in 1.20 and 2.x (1.20's CheckpointingOptions).
FILE_MERGING = "execution.checkpointing.file-merging.enabled"


def checkpoint_config(version: str, case: CheckpointCase, directory: pathlib.Path) -> dict[str, str]:
    keys = harness.config_keys(version)
    config = harness.flink_config(version, backend=case.backend, checkpoint_dir=str(directory),
                                  inline_threshold=case.inline_threshold, compression=case.compression)
    config.update({"execution.checkpointing.interval": INTERVAL,
                   "execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION",
                   keys.incremental: str(case.incremental).lower()})
    options = f"state.backend.{case.backend}"  # ForSt names RocksDB's options state.backend.forst.*
    if case.rocksdb_compression:
        config[f"{options}.compression.per.level"] = case.rocksdb_compression
    if case.unaligned:
        config.update(UNALIGNED_CONFIG)
    if case.heap_timers:
        config[f"{options}.timer-service.factory"] = "HEAP"
    if case.ingest_db_restore:
        config[f"{options}.use-ingest-db-restore-mode"] = "true"
    if case.file_merging:
        config[FILE_MERGING] = "true"
    if case.changelog_storage:
        config.update({f"{keys.changelog}.enabled": "true", f"{keys.changelog}.storage": case.changelog_storage,
                       f"{keys.dstl}.base-path": changelog_dir(directory).resolve().as_uri(),
                       f"{keys.changelog}.periodic-materialize.interval": case.materialize_interval,
                       f"{keys.dstl}.compression.enabled": str(case.changelog_compression).lower()})
    return config


def changelog_dir(checkpoint_dir: pathlib.Path) -> pathlib.Path:
    """Where a changelog case's DSTL files go: beside its checkpoint directory (whose job directories the
    driver scans for chk-N)."""
    return checkpoint_dir.parent / "changelog"


def take_checkpoints(version: str, cases: list[CheckpointCase], out: str | pathlib.Path, *,
                     download: bool = False) -> dict[str, pathlib.Path]:
    """Every case of ``version``, those restored from another after it (its JVM first, then
    theirs); case name -> ``OUT/<version>-<case>`` (``checkpoint/``, ``truth.json``)."""
    by_name = {c.name: c for c in CASES}
    bases = [by_name[n] for n in dict.fromkeys(c.restored_from for c in cases if c.restored_from)]
    first = [c for c in cases if not c.restored_from] + [b for b in bases if b not in cases]
    second = [c for c in cases if c.restored_from]
    written = {}
    with tempfile.TemporaryDirectory(prefix="pyref-flink-ckpt-") as tmp:
        retained = _run_cases(version, first, pathlib.Path(tmp), {}, download)
        if second:
            retained.update(_run_cases(version, second, pathlib.Path(tmp), retained, download))
        for case in cases:
            chk, truth = retained[case.name]
            target = pathlib.Path(out) / f"{version}-{case.name}"
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir(parents=True)
            if case.savepoint_format:
                shutil.copytree(chk, target / "savepoint")
            else:
                _keep_checkpoint(case, chk, target)
            (target / "truth.json").write_text(json.dumps(truth, indent=1) + "\n", encoding="utf-8")
            written[case.name] = target
    return written


def _run_cases(version: str, cases: list[CheckpointCase], tmp: pathlib.Path,
               retained: dict[str, tuple[pathlib.Path, dict]], download: bool) -> dict[str, tuple[pathlib.Path, dict]]:
    """The cases in one JVM; case name -> (its retained chk-N directory or native savepoint, its truth)."""
    keys = harness.config_keys(version)
    tasks = []
    for case in cases:
        directory = tmp / case.name / "checkpoints"
        config = checkpoint_config(version, case, directory)
        if case.restored_from:
            config.update({keys.restore_path: retained[case.restored_from][0].resolve().as_uri(),
                           keys.ignore_unclaimed: "true"})  # the first phase's source is not in this job
        task = {"action": "generate", "job": case.job, "max_parallelism": case.max_parallelism, "config": config,
                "out": str(tmp / case.name), "timeout_s": 120,
                "truth": {"flink_version": version, "backend": case.backend, "case": case.name,
                          "incremental": case.incremental}}
        if case.unaligned:
            task["in_flight"] = True
        if case.savepoint_format:
            task["savepoint_format"] = case.savepoint_format
        else:
            task["checkpoint_dir"] = str(directory)
        tasks.append(task)
    results = harness.run_tasks(version, tasks, download=download, log_dir=tmp / f"logs-{len(retained)}")
    kept = {}
    for case, task, result in zip(cases, tasks, results):
        if not result["ok"]:
            raise harness.FlinkError(f"Flink {version} checkpoint case {case.name} failed:\n"
                                     f"{harness.short_error(result['error'])}")
        truth = json.loads((pathlib.Path(task["out"]) / "truth.json").read_text(encoding="utf-8"))
        if case.savepoint_format:
            kept[case.name] = (pathlib.Path(task["out"]) / "savepoint", truth)
            continue
        name = f"chk-{truth['checkpoint_id']}"
        chk = list(pathlib.Path(task["checkpoint_dir"]).glob(f"*/{name}"))
        if len(chk) != 1 or not (chk[0] / "_metadata").is_file():
            raise harness.FlinkError(f"{case.name}: no retained {name} in {task['checkpoint_dir']}")
        kept[case.name] = (chk[0], truth)
    return kept


def _keep_checkpoint(case: CheckpointCase, chk: pathlib.Path, target: pathlib.Path) -> None:
    """``target/checkpoint`` (the retained chk-N) and, incremental, ``target/shared`` (the files of it it names,
    ForSt's DB files in their directories below it); with file merging ``target/taskowned`` too (the merged
    files of both it names)."""
    shutil.copytree(chk, target / "checkpoint")
    # File merging writes every handle's bytes into merged files of both directories beside chk-N.
    siblings = ("shared", "taskowned") if case.file_merging else ("shared",) if case.incremental else ()
    metadata = (chk / "_metadata").read_bytes()
    for beside in siblings:
        for f in (chk.parent / beside).rglob("*"):  # files of subsumed checkpoints not deleted yet are left out
            below = f.relative_to(chk.parent / beside)
            if f.is_file() and below.as_posix().encode() in metadata:
                (target / beside / below).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(f, target / beside / below)
    if case.changelog_storage:
        # The DSTL files and a materialization's files of an earlier checkpoint (chk-M, taskowned) it names:
        # copied beside _metadata, where a moved checkpoint's file handles resolve by name.
        for f in [*changelog_dir(chk.parent.parent).rglob("*"), *chk.parent.rglob("*")]:
            kept = target / "checkpoint" / f.name
            if f.is_file() and f.name.encode() in metadata and not kept.exists() and f.parent.name != "shared":
                shutil.copy2(f, kept)


def committed_snapshot(case_dir: pathlib.Path, into: pathlib.Path) -> pathlib.Path:
    """A committed case's checkpoint directory, or its savepoint or checkpoint with ``shared/``
    (kept as ``savepoint.tar.gz`` / ``checkpoint.tar.gz``: many small files) unpacked into ``into``."""
    for name in ("savepoint", "checkpoint"):
        tarred = case_dir / f"{name}.tar.gz"
        if tarred.exists():
            with tarfile.open(tarred) as tar:
                tar.extractall(into / "unpacked", filter="data")
            return into / "unpacked" / name
    return case_dir / "checkpoint"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=pathlib.Path)
    parser.add_argument("--versions", default="2.3.0,1.20.3,1.14.6")
    parser.add_argument("--cases", default=",".join(c.name for c in CASES))
    args = parser.parse_args(argv)
    by_name = {c.name: c for c in CASES}
    for version in args.versions.split(","):
        for name, path in take_checkpoints(version, [by_name[n] for n in args.cases.split(",")], args.out).items():
            size = sum(p.stat().st_size for p in (path / "checkpoint").rglob("*") if p.is_file())
            print(f"{version} {name}: {path} ({size} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
