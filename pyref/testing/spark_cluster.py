"""A real Spark standalone cluster on this machine: a master and workers on 127.0.0.1,
each its own JVM, started with pyspark's own ``bin/spark-class``, so that executors
are separate JVMs with their own Python workers, as on a cluster. And pyref packed
as a zip for ``spark-submit --py-files``, the way a cluster's executors receive it.

Needs pyspark (the ``spark`` extra) and Java 17.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from .server_process import free_port


def spark_home() -> Path:
    from pyspark.find_spark_home import _find_spark_home

    return Path(_find_spark_home())


def package_zip(dest: Path) -> Path:
    """pyref's Python files in a zip archive (what a wheel of it holds), for ``--py-files``."""
    import pyref

    root = Path(pyref.__file__).parent
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(root.rglob("*.py")):
            archive.write(path, Path("pyref") / path.relative_to(root))
    return dest


class StandaloneCluster:
    """A master and ``workers`` workers of ``cores`` cores each; a context manager.
    ``env`` is added to the environment of the daemons (and so of executors)."""

    def __init__(self, work_dir: Path, *, workers: int = 2, cores: int = 1, memory: str = "1g",
                 env: Mapping[str, str] | None = None) -> None:
        self.work_dir = Path(work_dir)
        self.workers, self.cores, self.memory = workers, cores, memory
        self.port = free_port()
        self.master_url = f"spark://127.0.0.1:{self.port}"
        self.env = {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": "127.0.0.1",
                    "PYSPARK_PYTHON": sys.executable, **(env or {})}
        self._daemons: list[tuple[subprocess.Popen, Path]] = []

    def _daemon(self, name: str, argv: Sequence[str]) -> Path:
        log = self.work_dir / f"{name}.log"
        with open(log, "wb") as out:
            # A session of its own: stop() ends the daemon with the executors it launched.
            process = subprocess.Popen([str(spark_home() / "bin" / "spark-class"), *argv], stdout=out,
                                       stderr=subprocess.STDOUT, env=self.env, start_new_session=True)
        self._daemons.append((process, log))
        return log

    def start(self, timeout: float = 240.0) -> StandaloneCluster:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        try:
            master = self._daemon("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                             "--port", str(self.port), "--webui-port", "0"])
            self._wait_for(master, "I have been elected leader", timeout)
            logs = [self._daemon(f"worker-{i}", [
                "org.apache.spark.deploy.worker.Worker", self.master_url, "--host", "127.0.0.1",
                "--cores", str(self.cores), "--memory", self.memory, "--webui-port", "0",
                "--work-dir", str(self.work_dir / f"worker-{i}")]) for i in range(self.workers)]
            for log in logs:
                self._wait_for(log, "Successfully registered with master", timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_for(self, log: Path, line: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while line not in log.read_text(errors="replace"):
            if time.monotonic() > deadline or any(p.poll() is not None for p, _ in self._daemons):
                raise RuntimeError(f"the Spark cluster did not start: no {line!r} in {log}:\n"
                                   + log.read_text(errors="replace")[-3000:])
            time.sleep(0.2)

    def submit(self, script: Path, args: Sequence[str], *, py_files: Path, conf: Mapping[str, str] | None = None,
               timeout: float = 600.0) -> subprocess.CompletedProcess:
        """``spark-submit --master URL --py-files ZIP script args`` (the README's command)."""
        argv = [str(spark_home() / "bin" / "spark-submit"), "--master", self.master_url, "--py-files", str(py_files),
                "--conf", f"spark.pyspark.python={sys.executable}",
                "--conf", f"spark.pyspark.driver.python={sys.executable}"]
        for key, value in (conf or {}).items():
            argv += ["--conf", f"{key}={value}"]
        return subprocess.run([*argv, str(script), *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout, cwd=self.work_dir)

    def stop(self) -> None:
        for process, _ in reversed(self._daemons):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process, _ in self._daemons:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        self._daemons.clear()

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
