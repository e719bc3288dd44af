"""The driver of the cluster test, run by ``spark-submit --master spark://... --py-files
pyref.zip cluster_job.py PREFIX RESULT.json [--kill-executor] [--rewrites]``.

Against savepoints under PREFIX (an s3:// URL): bootstrap one from a DataFrame, read it
back with the data source and rescale it; read the timers of a format 1.2 savepoint (window
counts and timers) and change its max parallelism; with --rewrites also copy it rescaled by Spark
tasks, change its max parallelism and migrate a state. With --kill-executor, one executor JVM is
SIGKILLed while the bootstrap's write tasks upload their data files. Writes what it
saw to RESULT.json for the test to check.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time

from pyspark.sql import SparkSession

ENTRIES = 20_000


def jvm_of_this_worker() -> int:
    """The executor JVM: the nearest ancestor process named java."""
    pid = os.getppid()
    while pid > 1:
        with open(f"/proc/{pid}/comm") as f:
            if f.read().strip() == "java":
                return pid
        with open(f"/proc/{pid}/stat") as f:
            pid = int(f.read().rsplit(")", 1)[1].split()[1])
    raise RuntimeError("no java ancestor")


def where_pyref_comes_from(_):
    import pyref

    yield pyref.__file__, jvm_of_this_worker()


def executor_jvms(application_id: str) -> list[int]:
    """Process ids of this application's executor JVMs (all on this machine)."""
    pids = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if b"CoarseGrainedExecutorBackend" in cmdline and application_id.encode() in cmdline:
            pids.append(int(entry))
    return sorted(pids)


def kill_an_executor_while_uploading(spark: SparkSession, location: str, killed: list, stop: threading.Event) -> None:
    """SIGKILL one executor JVM as soon as the write tasks' first data file is in the store."""
    from pyref.io import open_io

    io = open_io(location)
    while not stop.is_set():
        if io.list_files("data"):
            pid = executor_jvms(spark.sparkContext.applicationId)[0]
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
            return
        time.sleep(0.02)


def main() -> None:
    prefix, result_path = sys.argv[1], sys.argv[2]
    kill = "--kill-executor" in sys.argv[3:]

    from pyref import Savepoint
    from pyref.serializers import Int32, Int64, String
    from pyref.spark import SavepointBuilder, WriteOptions, change_max_parallelism, migrate_state, register, rescale

    started = time.monotonic()
    spark = SparkSession.builder.appName("pyref cluster test").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    result: dict = {"driver_pid": os.getpid()}
    # Both executors up before any task, so that tasks land on both JVMs.
    while spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() < 3:  # the driver counts too
        time.sleep(0.2)
    result["executors"] = spark.sparkContext.parallelize(range(4), 4).mapPartitions(where_pyref_comes_from).collect()

    rows = spark.range(ENTRIES, numPartitions=4).selectExpr("concat('/page/', id) AS url", "CAST(id AS INT) AS hits")
    boot = f"{prefix}/boot"
    killed: list[int] = []
    stop = threading.Event()
    if kill:
        threading.Thread(target=kill_an_executor_while_uploading, args=(spark, boot, killed, stop), daemon=True).start()
    # Small files: each write task uploads several, so the kill lands while tasks upload.
    options = WriteOptions(chunk_bytes=16 << 10, buffer_bytes=64 << 10, file_bytes=64 << 10)
    with SavepointBuilder(spark, boot, partitions=4, options=options) as b:
        b.add_operator("counter", 3, max_parallelism=64, key_serializer=String())
        b.add_keyed_state("counter", "count", rows, Int32(), key="url", value="hits")
        b.add_operator("source", 2)
        offsets = spark.createDataFrame([(0, 100, 0), (0, 101, 1), (1, 200, 0)], "subtask int, offset long, i int")
        b.add_list_state("source", "offsets", offsets, Int64(), value="offset", order_by="i")
    stop.set()
    result["killed_executor"] = killed
    result["boot"] = Savepoint.open(boot).savepoint_id

    read = spark.read.format("savepoint").option("operator", "counter").option("state", "count").load(boot)
    result["read"] = read.selectExpr("count(*) AS n", "sum(value) AS total").first().asDict()

    rescale(boot, f"{prefix}/boot-p5", 5, spark=spark, progress=False)

    # Format 1.2: window counts under namespaces with their pending timers, written by the
    # driver; executors read the timers and re-hash both into a new max parallelism.
    from pyref.testing import write_seeds

    windowed = f"{prefix}/windowed"
    write_seeds(windowed, windowed=True, inline_bytes=0)
    timers = spark.read.format("savepoint").option("operator", "window-counter") \
        .option("timer_service", "window-timers").load(windowed)
    result["timers"] = [[r.key, r.namespace.start, r.namespace.end, r.timestamp] for r in timers.collect()]
    change_max_parallelism(spark, windowed, f"{prefix}/windowed-mp64", {"window-counter": 64}, partitions=2,
                           progress=False)
    if "--rewrites" in sys.argv[3:]:
        rescale(boot, f"{prefix}/copies/boot-p2", 2, spark=spark, copy=True, progress=False)
        change_max_parallelism(spark, boot, f"{prefix}/boot-mp7", {"counter": 7}, partitions=2, progress=False)
        migrate_state(spark, boot, f"{prefix}/boot-migrated", "counter", "count", Int64(), progress=False)
    result["seconds"] = time.monotonic() - started
    with open(result_path, "w") as f:
        json.dump(result, f)
    spark.stop()


if __name__ == "__main__":
    main()
