"""Write ``vectors.json``, the legacy ``FlinkKafkaConsumer`` offset vectors, once (it refuses
to overwrite them).

    python -m compat_tests.flink.sources.kafka_consumer.generate FLINK_DIST_JAR

compiles ``src`` (apache/flink-connector-kafka's ``KafkaTopicPartition``, unchanged, with
pyref's stand-in for ``KafkaTopicPartitionLeader``, and pyref's ``KafkaConsumerSavepoint`` and
``KafkaConsumerVectors``) against a Flink 1.x flink-dist with ``javac --release 11``, runs
``KafkaConsumerVectors`` and records how the vectors were made beside them.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import tempfile

from compat_tests._build import sha256_file

HERE = pathlib.Path(__file__).resolve().parent
VECTORS = HERE / "vectors.json"
#: The apache/flink-connector-kafka commit ``KafkaTopicPartition.java`` was copied from (the
#: last before the legacy consumer was removed).
KAFKA_CONNECTOR_COMMIT = "21d07b7d468ad6d3b0b1a3120745e17ceb1ab1c2"
#: ``java`` needs these for Flink's Kryo (chill) on Java 17.
JAVA_OPENS = ["--add-opens", "java.base/java.util=ALL-UNNAMED", "--add-opens", "java.base/java.lang=ALL-UNNAMED"]


def main(dist_jar: str) -> None:
    if VECTORS.exists():
        raise SystemExit(f"{VECTORS} exists: the vectors are written once, never regenerated")
    sources = sorted(str(p) for p in (HERE / "src").rglob("*.java"))
    with tempfile.TemporaryDirectory() as build:
        subprocess.run(["javac", "--release", "11", "-nowarn", "-encoding", "UTF-8", "-cp", dist_jar, "-d", build,
                        *sources], check=True)
        out = subprocess.run(["java", *JAVA_OPENS, "-cp", f"{build}:{dist_jar}",
                              "org.pyref.flink.sources.KafkaConsumerVectors"], check=True, capture_output=True)
    elements = [json.loads(line) for line in out.stdout.decode("utf-8").splitlines() if line.strip()]
    java = subprocess.run(["java", "-version"], capture_output=True, text=True, check=True).stderr.splitlines()[0]
    vectors = {"elements": elements, "generated": {
        "command": f"python -m compat_tests.flink.sources.kafka_consumer.generate {pathlib.Path(dist_jar).name}",
        "jars": {pathlib.Path(dist_jar).name: sha256_file(pathlib.Path(dist_jar))},
        "kafka_connector": f"apache/flink-connector-kafka@{KAFKA_CONNECTOR_COMMIT}",
        "java": java,
    }}
    VECTORS.write_text(json.dumps(vectors, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1])
