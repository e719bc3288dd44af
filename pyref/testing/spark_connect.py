"""A Spark Connect server on 127.0.0.1, in a process of its own, for tests and benchmarks.

pyspark ships the server (its ``spark-connect`` jar): a classic session started with the
Connect plugin listens on a free port until this helper closes the process's stdin. A
process of its own, because pyspark refuses to start a Connect server in a process
that already has a SparkContext (a test suite's classic session, say).

Needs pyspark with the ``connect`` extra (the ``spark`` extra) and Java 17.
"""

from __future__ import annotations

import os
import subprocess
import sys

from .server_process import end_process, free_port


class ConnectServer:
    """``with ConnectServer() as server: spark_session(remote=server.url)``."""

    def __init__(self, cores: int = 2, **conf: str) -> None:
        self.port = free_port()
        self.url = f"sc://127.0.0.1:{self.port}"
        self.conf = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false", **conf}
        self.cores = cores
        self._process: subprocess.Popen[str] | None = None

    def __enter__(self) -> ConnectServer:
        self._process = subprocess.Popen(
            [sys.executable, "-m", __name__, str(self.port), str(self.cores),
             *(f"{k}={v}" for k, v in self.conf.items())],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env={**os.environ, "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable)})
        assert self._process.stdout is not None  # stdout=PIPE
        line = self._process.stdout.readline().strip()
        if line != "ready":
            self.__exit__()
            raise RuntimeError(f"the Spark Connect server did not start (said {line!r})")
        return self

    def __exit__(self, *exc) -> None:
        if self._process is not None:
            assert self._process.stdin is not None and self._process.stdout is not None  # both PIPE
            self._process.stdin.close()
            self._process.stdout.close()
            end_process(self._process, 60)
            self._process = None


def _serve(port: int, cores: int, conf: dict[str, str]) -> None:
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master(f"local[{cores}]").appName("pyref Spark Connect server")
               .config("spark.plugins", "org.apache.spark.sql.connect.SparkConnectPlugin")
               .config("spark.connect.grpc.binding.address", "127.0.0.1")
               .config("spark.connect.grpc.binding.port", str(port)))
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    print("ready", flush=True)
    sys.stdin.read()  # until the owner closes it, or exits
    spark.stop()


if __name__ == "__main__":
    _serve(int(sys.argv[1]), int(sys.argv[2]), dict(item.split("=", 1) for item in sys.argv[3:]))
