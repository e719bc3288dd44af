"""Real Flink restores a legacy ``FlinkKafkaConsumer``'s offsets that pyref moved: the committed
savepoint (``tests/flink/data/kafka-consumer-1.20.3``) is imported, two partitions moved with ``pyref
set-source-position``, exported with ``export-flink`` for the release and restored at parallelism 3 by
the job that wrote it (``KafkaConsumerSavepoint restore``, compiled against that release), whose every
subtask prints the union state it got. 1.20.3 in the ``flink`` tier; 1.15 to 1.19 in the ``slow`` sweep
(the consumer is of Flink 1.x; the job's save mode needs 1.15's SavepointFormatType, so 1.13 and 1.14
are not run).

Marked ``flink``: needs Java 17 and the Flink jars (cached in ``PYREF_FLINK_CACHE``, or ``PYREF_FLINK_DOWNLOAD=1``)."""

from __future__ import annotations

import os
import pathlib
import subprocess

import pytest

from compat_tests.flink import harness, jars
from pyref.cli import main
from pyref.flink import export_savepoint, import_flink

pytestmark = pytest.mark.flink

DOWNLOAD = os.environ.get("PYREF_FLINK_DOWNLOAD") == "1"

HERE = pathlib.Path(__file__).resolve().parent
SAVEPOINT = HERE.parents[3] / "tests" / "flink" / "data" / "kafka-consumer-1.20.3" / "savepoint"
OPERATOR = "61252f73469d3ffba207c548d29a0267"
QUICK_VERSION = "1.20.3"
VERSIONS = [v if v == QUICK_VERSION else pytest.param(v, marks=pytest.mark.slow)
            for v in jars.FLINK_VERSIONS if (1, 15) <= harness.release(v) < (2, 0)]
EARLIEST = -915623761775


def restored(version: str, savepoint: pathlib.Path, parallelism: int,
             tmp: pathlib.Path) -> list[tuple[int, str, int, int]]:
    reason = harness.flink_available(version, download=DOWNLOAD)
    if reason:
        pytest.skip(reason)
    lib = jars.ensure_lib(version, download=DOWNLOAD)
    classes = tmp / "classes"
    subprocess.run([harness.java_home_bin("javac"), "--release", "11", "-nowarn", "-encoding", "UTF-8", "-cp",
                    str(lib / "*"), "-d", str(classes), *map(str, sorted((HERE / "src").rglob("*.java")))],
                   check=True, timeout=300, capture_output=True)
    (tmp / "log4j2.properties").write_text(harness.LOG4J.format(path=tmp / "flink.log"), encoding="utf-8")
    proc = subprocess.run([harness.java_home_bin("java"), *harness.JVM_OPTIONS,
                           f"-Dlog4j.configurationFile={tmp / 'log4j2.properties'}", "-cp",
                           f"{classes}{os.pathsep}{lib / '*'}", "org.pyref.flink.sources.KafkaConsumerSavepoint",
                           "restore", savepoint.as_uri(), str(parallelism)],
                          capture_output=True, timeout=600)
    out = proc.stdout.decode("utf-8")
    lines = [line.split(" ")[1:] for line in out.splitlines() if line.startswith("PYREF-RESTORED ")]
    assert proc.returncode == 0 and lines, proc.stderr.decode("utf-8", "replace")[-4000:]
    return sorted((int(s), topic, int(p), int(o)) for s, topic, p, o in lines)


@pytest.mark.parametrize("version", VERSIONS)
def test_flink_restores_the_moved_offsets_in_every_subtask(version, tmp_path):
    imported, moved, exported = tmp_path / "imported", tmp_path / "moved", tmp_path / "flink"
    import_flink(str(SAVEPOINT), str(imported))
    assert main(["set-source-position", str(imported), str(moved), OPERATOR, "--kafka-offset", "orders:3=5000",
                 "--kafka-offset", "ünï-çødé:0=-2"]) == 0
    export_savepoint(moved, exported, flink_version=version)
    offsets = {("orders", p): 1000 + 10 * p for p in range(5)} | {("ünï-çødé", p): 7 + p for p in range(2)}
    offsets |= {("orders", 3): 4999, ("ünï-çødé", 0): EARLIEST}
    union = sorted((topic, p, o) for (topic, p), o in offsets.items())
    assert restored(version, exported, 3, tmp_path) == [(s, *entry) for s in range(3) for entry in union]
