"""Run real Flink: the corpus jobs (canonical savepoints with their truth) and restore jobs
(start a job from a savepoint, dump what every subtask restored) on Flink's local mini cluster.

The Java side is ``jobs/`` (compiled per Flink version with ``javac --release 11`` against that
version's jars, cached beside them); one JVM runs a list of tasks, one mini cluster per task.

Public API::

    restore_and_dump(flink_version, savepoint_dir, job_spec, parallelism) -> dict
    restore_and_dump_many(flink_version, [RestoreRequest, ...]) -> [dict, ...]
    job_spec_from_truth(truth) -> dict
    flink_available(flink_version) -> str | None      # why Flink cannot run here, or None

A job spec is ``{"operators": [{"uid", "key_type", "operator_state": {name: {"mode", "type",
"key_type"?}}, "keyed_state": {name: {"kind", "type", "user_key_type"?, "namespace", "ttl",
"function"?}}, "timer_services": {name: {"namespace"}}, "parallelism"?, "max_parallelism"?}],
"window_operators"?: [uid, ...]}``: the operators of a truth.json without their contents (see
corpus/README.md). The uids listed in ``window_operators`` (of the corpus's windows job) restore
into Flink's own window operators instead, which list under ``fired_windows`` each window that
fires after the restore (key, window, result).
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field

from compat_tests.flink import jars

JOBS_DIR = pathlib.Path(__file__).resolve().parent / "jobs"
#: Module openings Flink's own launch scripts pass on Java 17 (Kryo reflects into java.util / java.lang).
JVM_OPTIONS = ("--add-opens", "java.base/java.util=ALL-UNNAMED", "--add-opens", "java.base/java.lang=ALL-UNNAMED",
               "-Xmx1g")
RESULT_PREFIX = "PYREF-RESULT "
BACKENDS = ("hashmap", "rocksdb")
#: ForSt (state.backend.type: forst), Flink 2.0+'s disaggregated RocksDB fork: asked for by name, not in the sweep
#: of every release BACKENDS drives.
FORST = "forst"
#: The class name part of the keyed state backend each backend runs with (Truth.keyedBackend: proof it ran).
BACKEND_CLASSES = {"hashmap": "Heap", "rocksdb": "RocksDB", FORST: "ForSt"}
LOG4J = """\
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FileAppender
appender.file.name = FileAppender
appender.file.type = File
appender.file.fileName = {path}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{HH:mm:ss,SSS}} %-5p %-40c{{1}} %m%n
"""


class FlinkError(RuntimeError):
    """A Flink job of the harness failed; the message holds Flink's error and where the log is."""


class FlinkUnavailable(RuntimeError):
    """No Java, no javac, or no jars for the Flink version (tests skip on this)."""


def java_home_bin(tool: str) -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and (pathlib.Path(home) / "bin" / tool).exists():
        return str(pathlib.Path(home) / "bin" / tool)
    return shutil.which(tool)


def java_version() -> str:
    """The ``java -version`` line of the JVM the harness runs (recorded with every corpus case)."""
    java = java_home_bin("java")
    if java is None:
        raise FlinkUnavailable("no java on PATH or JAVA_HOME")
    out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    lines = (out.stderr or out.stdout).strip().splitlines()
    return " / ".join(line.strip() for line in lines[:2])


def flink_available(flink_version: str, *, download: bool = False) -> str | None:
    """None when jobs of ``flink_version`` can run here, else why not (for pytest.skip)."""
    for tool in ("java", "javac"):
        if java_home_bin(tool) is None:
            return f"no {tool} on PATH or JAVA_HOME"
    if not download and jars.cached_lib(flink_version) is None:
        return f"Flink {flink_version} jars are not cached in {jars.cache_root()} (python -m compat_tests.flink.jars)"
    return None


def release(flink_version: str) -> tuple[int, int]:
    """The (major, minor) release of a Flink version, e.g. (1, 20) of "1.20.3"."""
    major, minor = (int(x) for x in flink_version.split(".")[:2])
    return major, minor


def api_families(flink_version: str) -> dict[str, str]:
    """Which compat/<concern>/<family> shims compile against the version, by concern: stop-with-savepoint (1.13 and
    1.14 have no SavepointFormatType; 1.15+), the end-of-input hook (1.13 has no finish(); 1.14+) and the windowing /
    TTL / runtime-context calls (1.18 and older lack the Duration-based API of 1.19+), CEP (1.14 and older ship no
    flink-cep jar in lib/: a stub refuses the CEP job), the Scala API's serializers (2.0 removed flink-scala: a stub
    refuses the Scala types and job) and the async state API (2.0 added it; before, a stub refuses the async-state job)."""
    of = release(flink_version)
    return {"savepoints": "1.14" if of <= (1, 14) else "1.15",
            "lifecycle": "1.13" if of <= (1, 13) else "1.14",
            "durations": "1.18" if of <= (1, 18) else "1.19",
            "cep": "1.14" if of <= (1, 14) else "1.15",
            "scala": "1.13" if of < (2, 0) else "2.0",
            "async": "1.13" if of < (2, 0) else "2.0"}


def _sources(flink_version: str) -> list[pathlib.Path]:
    return sorted((JOBS_DIR / "src").rglob("*.java")) + [
        src for concern, family in api_families(flink_version).items()
        for src in sorted((JOBS_DIR / "compat" / concern / family).rglob("*.java"))]


def jobs_fingerprint(flink_version: str) -> str:
    """SHA-256 of the job sources compiled for ``flink_version`` and of javac's version (recorded with each case)."""
    javac = java_home_bin("javac")
    if javac is None:
        raise FlinkUnavailable("no javac on PATH or JAVA_HOME")
    version = subprocess.run([javac, "-version"], capture_output=True, text=True, timeout=60)
    h = hashlib.sha256((version.stdout + version.stderr).encode())
    for src in _sources(flink_version):
        h.update(str(src.relative_to(JOBS_DIR)).encode() + b"\0" + src.read_bytes())
    return h.hexdigest()


def compiled_jobs(flink_version: str, *, download: bool = False) -> pathlib.Path:
    """The jobs compiled against ``flink_version`` (cached beside its jars, by :func:`jobs_fingerprint`)."""
    lib = jars.ensure_lib(flink_version, download=download)
    javac = java_home_bin("javac")
    sources = _sources(flink_version)
    target = lib.parent / f"jobs-{jobs_fingerprint(flink_version)[:16]}"
    if target.exists():
        return target
    with tempfile.TemporaryDirectory(dir=lib.parent, prefix=".jobs-") as tmp:
        proc = subprocess.run([javac, "--release", "11", "-Xlint:-options", "-nowarn", "-encoding", "UTF-8",
                               "-cp", str(lib / "*"), "-d", tmp, *map(str, sources)],
                              capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            raise FlinkError(f"javac against Flink {flink_version} failed:\n{proc.stdout}{proc.stderr}")
        try:
            pathlib.Path(tmp).rename(target)
        except OSError:
            if not target.exists():  # else another process compiled the same sources first
                raise
    return target


@dataclass(frozen=True)
class ConfigKeys:
    """Flink's configuration keys for one version (1.17 named the backend option state.backend.type, 1.20
    renamed the checkpointing and changelog ones; 2.0 dropped the old names)."""
    backend: str = "state.backend.type"
    storage: str = "execution.checkpointing.storage"
    checkpoint_dir: str = "execution.checkpointing.dir"
    inline_threshold: str = "execution.checkpointing.data-inline-threshold"
    compression: str = "execution.checkpointing.snapshot-compression"
    restore_path: str = "execution.state-recovery.path"
    ignore_unclaimed: str = "execution.state-recovery.ignore-unclaimed-state"
    incremental: str = "execution.checkpointing.incremental"
    #: The changelog state backend's options (enabled, storage, periodic-materialize.interval) begin with this.
    changelog: str = "state.changelog"
    #: Its filesystem storage's (base-path, compression.enabled).
    dstl: str = "state.changelog.dstl.dfs"


def config_keys(flink_version: str) -> ConfigKeys:
    of = release(flink_version)
    if of < (1, 20):
        return ConfigKeys(backend="state.backend.type" if of >= (1, 17) else "state.backend",
                          storage="state.checkpoint-storage", checkpoint_dir="state.checkpoints.dir",
                          inline_threshold="state.storage.fs.memory-threshold",
                          restore_path="execution.savepoint.path",
                          ignore_unclaimed="execution.savepoint.ignore-unclaimed-state",
                          incremental="state.backend.incremental", changelog="state.backend.changelog",
                          dstl="dstl.dfs")
    return ConfigKeys()


def flink_config(flink_version: str, *, backend: str = "hashmap", checkpoint_dir: str | None = None,
                 inline_threshold: str | None = None, compression: bool = False) -> dict[str, str]:
    """Flink configuration of a job: state backend, checkpoint storage (job manager: state inlined
    in ``_metadata``; filesystem when ``checkpoint_dir`` is given) and snapshot compression."""
    if backend not in BACKEND_CLASSES:
        raise ValueError(f"backend must be one of {tuple(BACKEND_CLASSES)}, not {backend!r}")
    if backend == FORST and int(flink_version.split(".")[0]) < 2:
        raise ValueError(f"Flink {flink_version} has no ForSt state backend (2.0 added it)")
    keys = config_keys(flink_version)
    config = {keys.backend: backend, keys.compression: str(compression).lower()}
    if checkpoint_dir is None:
        config[keys.storage] = "jobmanager"
    else:
        config[keys.storage] = "filesystem"
        config[keys.checkpoint_dir] = pathlib.Path(checkpoint_dir).resolve().as_uri()
        if inline_threshold is not None:
            config[keys.inline_threshold] = inline_threshold
    return config


def run_tasks(flink_version: str, tasks: list[dict], *, timeout: float = 1800, download: bool = False,
              log_dir: str | os.PathLike[str] | None = None) -> list[dict]:
    """Run ``tasks`` (see Main.java) in one JVM; returns one result per task (``ok``, ``error``, timings).

    Flink's log goes to ``log_dir``/flink.log (a temporary directory, removed afterwards, if not given)."""
    classes = compiled_jobs(flink_version, download=download)
    lib = jars.ensure_lib(flink_version, download=False)
    java = java_home_bin("java")
    if java is None:
        raise FlinkUnavailable("no java on PATH or JAVA_HOME")
    with tempfile.TemporaryDirectory(prefix="pyref-flink-") as tmp:
        logs = pathlib.Path(log_dir) if log_dir is not None else pathlib.Path(tmp)
        logs.mkdir(parents=True, exist_ok=True)
        log_file = logs / "flink.log"
        (pathlib.Path(tmp) / "log4j2.properties").write_text(LOG4J.format(path=log_file), encoding="utf-8")
        request = pathlib.Path(tmp) / "request.json"
        request.write_text(json.dumps({"tasks": tasks}), encoding="utf-8")
        cmd = [java, *JVM_OPTIONS, f"-Dlog4j.configurationFile={pathlib.Path(tmp) / 'log4j2.properties'}",
               f"-Djava.io.tmpdir={tmp}", "-cp", f"{classes}{os.pathsep}{lib / '*'}", "org.pyref.flink.Main", str(request)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            raise FlinkError(f"Flink {flink_version} tasks did not finish within {timeout} s") from e
        results = [json.loads(line[len(RESULT_PREFIX):]) for line in proc.stdout.splitlines()
                   if line.startswith(RESULT_PREFIX)]
        if len(results) != len(tasks):
            tail = log_file.read_text(encoding="utf-8", errors="replace")[-4000:] if log_file.exists() else ""
            raise FlinkError(f"the Flink {flink_version} JVM exited with {proc.returncode} after {len(results)} of "
                             f"{len(tasks)} tasks:\n{proc.stderr[-4000:]}\n{tail}")
        return results


@dataclass(frozen=True)
class RestoreRequest:
    savepoint_dir: str | os.PathLike[str]
    job_spec: dict
    parallelism: int
    backend: str = "hashmap"
    extra_config: dict = field(default_factory=dict)


def restore_and_dump_many(flink_version: str, requests: list[RestoreRequest], *, timeout: float = 1800,
                          download: bool = False) -> list[dict]:
    """Restore each savepoint into a job of its spec at its parallelism, all in one JVM; each
    result is a truth.json-shaped dict of what Flink handed every subtask (see restore_and_dump)."""
    keys = config_keys(flink_version)
    with tempfile.TemporaryDirectory(prefix="pyref-flink-restore-") as tmp:
        tasks = []
        for i, r in enumerate(requests):
            savepoint = pathlib.Path(r.savepoint_dir).resolve()
            if not (savepoint / "_metadata").is_file():
                raise FileNotFoundError(f"{savepoint} holds no Flink _metadata")
            config = flink_config(flink_version, backend=r.backend)
            config.update({keys.restore_path: savepoint.as_uri(), keys.ignore_unclaimed: "true", **r.extra_config})
            tasks.append({"action": "restore", "spec": r.job_spec, "parallelism": r.parallelism, "config": config,
                          "out": str(pathlib.Path(tmp) / f"dump-{i}.json"), "timeout_s": int(timeout)})
        results = run_tasks(flink_version, tasks, timeout=timeout, download=download, log_dir=pathlib.Path(tmp) / "logs")
        dumps = []
        for request, task, result in zip(requests, tasks, results):
            if not result["ok"]:
                raise FlinkError(f"Flink {flink_version} could not restore {request.savepoint_dir} at parallelism "
                                 f"{request.parallelism}:\n{short_error(result['error'])}")
            dumps.append(json.loads(pathlib.Path(task["out"]).read_text(encoding="utf-8")))
        return dumps


def restore_and_dump(flink_version: str, savepoint_dir: str | os.PathLike[str], job_spec: dict, parallelism: int, *,
                     backend: str = "hashmap", timeout: float = 900, download: bool = False) -> dict:
    """Start a real Flink job from ``savepoint_dir`` at ``parallelism`` and return what it read.

    The job has one operator per operator of ``job_spec`` (same uid, states, serializers, key
    type). Each subtask writes, right after restore, its operator list/union/broadcast state,
    every keyed state by key and namespace and its pending timers; then the job's input ends,
    which fires every event-time timer (recorded as ``fired_timers``), and the job finishes.
    The result has truth.json's schema ("operators" by uid, plus "restored_parallelism")."""
    return restore_and_dump_many(flink_version, [RestoreRequest(savepoint_dir, job_spec, parallelism, backend)],
                                 timeout=timeout, download=download)[0]


def job_spec_from_truth(truth: dict, uids: list[str] | None = None, *, own_parallelism: bool = True) -> dict:
    """The job spec that restores the operators of a truth.json (all, or those of ``uids``):
    its operators with their state descriptions, without contents; each at the parallelism it
    had (``own_parallelism``) or, if not, at the parallelism the restore is asked for."""
    operators = []
    for uid, op in sorted(truth["operators"].items()):
        if uids is not None and uid not in uids:
            continue
        operators.append({
            "uid": uid,
            "key_type": op.get("key_type"),
            "max_parallelism": op["max_parallelism"],
            **({"parallelism": op["parallelism"]} if own_parallelism else {}),
            "operator_state": {name: {k: v for k, v in s.items() if k in ("mode", "type", "key_type")}
                               for name, s in op["operator_state"].items()},
            "keyed_state": {name: {k: v for k, v in s.items() if k in ("kind", "type", "user_key_type", "namespace",
                                                                         "ttl", "function")}
                            for name, s in op["keyed_state"].items()},
            "timer_services": op.get("timer_services", {}),
        })
    return {"operators": operators}


def short_error(error: str, limit: int = 3000) -> str:
    """Flink's deepest 'Caused by' lines first: the rest of a Java trace is framework noise."""
    causes = [line for line in error.splitlines() if line.startswith("Caused by") or not line.startswith("\t")]
    text = "\n".join(causes[-12:])
    return text[-limit:]


@dataclass(frozen=True)
class PhasedRun:
    """One run of a two-phase job (jobs/PhasedJob.java: the SQL job, jobs/SqlJob.java, or the CEP
    job, jobs/CepJob.java): phase 1 from scratch, stopped with a canonical savepoint into
    ``out``/savepoint; phase 2 restored from ``restore_from`` (phase 1's changelog as ``before``),
    cancelled once the changelogs add up to the job's output over all of the input."""
    out: str | os.PathLike[str]
    phase: int = 1
    backend: str = "hashmap"
    parallelism: int = 2
    restore_from: str | os.PathLike[str] | None = None
    before: dict | None = None


SqlRun = CepRun = PhasedRun
#: The max parallelism of the two-phase jobs' operators.
PHASED_MAX_PARALLELISM = 128


def run_phased_many(flink_version: str, action: str, runs: list[PhasedRun], *, timeout: float = 600,
                    download: bool = False) -> list[dict]:
    """Each run of the job of ``action`` ("sql" or "cep") in one JVM; each result is its
    ``<action>.json``: ``changelog`` (this run's, query or pattern -> {row: signed count}) and
    ``expected`` (the job's output over the input up to the run's phase)."""
    keys = config_keys(flink_version)
    tasks = []
    for run in runs:
        config = flink_config(flink_version, backend=run.backend)
        if run.restore_from is not None:
            config.update({keys.restore_path: pathlib.Path(run.restore_from).resolve().as_uri(),
                           keys.ignore_unclaimed: "false"})
        tasks.append({"action": action, "phase": run.phase, "parallelism": run.parallelism,
                      "max_parallelism": PHASED_MAX_PARALLELISM, "config": config, "out": str(pathlib.Path(run.out).resolve()),
                      "timeout_s": 60 if run.phase == 2 else int(timeout),
                      **({"before": run.before} if run.before is not None else {})})
    results = run_tasks(flink_version, tasks, timeout=timeout, download=download)
    for run, result in zip(runs, results):
        if not result["ok"]:
            raise FlinkError(f"Flink {flink_version} {action} job (phase {run.phase}, {run.backend}) failed:\n"
                             f"{short_error(result['error'])}")
    return [json.loads((pathlib.Path(run.out) / f"{action}.json").read_text(encoding="utf-8")) for run in runs]


def phased_round_trips(flink_version: str, action: str, root: pathlib.Path, backends: tuple[str, ...], *,
                       rescaled: int, import_options: dict | None = None, download: bool = False) -> dict[str, dict]:
    """The two-phase job of ``action`` through pyref, per backend: phase 1 stopped with a savepoint,
    which pyref imports (``import_options``) and exports back for phase 2 to restore. The first
    backend's import is also rescaled by pyref to ``rescaled`` subtasks (operators whose max
    parallelism is lower, as the planner pins some to one, stay as they are), exported and restored
    at ``rescaled``. Returns backend -> {"savepoint", "first", "export", "restored"[, "restored-3"]}."""
    from pyref import Savepoint, rescale
    from pyref.flink import export_savepoint, import_flink

    firsts = run_phased_many(flink_version, action, [PhasedRun(root / b, backend=b) for b in backends],
                             download=download)
    runs, restores = {}, []
    for backend, first in zip(backends, firsts):
        savepoint, imported, export = root / backend / "savepoint", root / f"{backend}-pyref", root / f"{backend}-export"
        import_flink(savepoint, imported, **(import_options or {}))
        export_savepoint(imported, export, flink_version=flink_version)
        runs[backend] = {"savepoint": savepoint, "first": first, "export": export}
        restores.append(PhasedRun(root / f"{backend}-restored", phase=2, backend=backend, restore_from=export,
                                  before=first["changelog"]))
    first_backend = backends[0]
    imported = root / f"{first_backend}-pyref"
    parallelism = {op.operator_id: rescaled for op in Savepoint.open(imported).operators if op.max_parallelism >= rescaled}
    rescale(imported, root / f"{first_backend}-pyref-{rescaled}", parallelism)
    export_savepoint(root / f"{first_backend}-pyref-{rescaled}", root / f"{first_backend}-export-{rescaled}",
                     flink_version=flink_version)
    restores.append(PhasedRun(root / f"{first_backend}-restored-{rescaled}", phase=2, backend=first_backend,
                              parallelism=rescaled, restore_from=root / f"{first_backend}-export-{rescaled}",
                              before=firsts[0]["changelog"]))
    results = run_phased_many(flink_version, action, restores, download=download)
    for backend, restored in zip(backends, results):
        runs[backend]["restored"] = restored
    runs[first_backend][f"restored-{rescaled}"] = results[-1]
    return runs


def run_sql_many(flink_version: str, runs: list[PhasedRun], *, timeout: float = 600, download: bool = False) -> list[dict]:
    """The SQL job's runs (see :func:`run_phased_many`)."""
    return run_phased_many(flink_version, "sql", runs, timeout=timeout, download=download)


def run_cep_many(flink_version: str, runs: list[PhasedRun], *, timeout: float = 600, download: bool = False) -> list[dict]:
    """The CEP job's runs (see :func:`run_phased_many`): each changelog holds each pattern's matches."""
    return run_phased_many(flink_version, "cep", runs, timeout=timeout, download=download)
