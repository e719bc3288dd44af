"""Write ``vectors.json``, the FLIP-27 source vectors, once (it refuses to overwrite them).

    python -m compat_tests.flink.sources.generate FLINK_DIST_JAR CONNECTOR_FILES_JAR

compiles ``kafka/src`` (apache/flink-connector-kafka's split and enumerator-state classes,
unchanged, with pyref's stand-in for kafka-clients' ``TopicPartition``) and ``src``
(``SourceVectors``) against the jars with ``javac --release 11``, runs ``SourceVectors``,
and records how the vectors were made beside them. The vectors are committed and never
regenerated: ``test_source_vectors.py`` checks their hash.
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
#: The apache/flink-connector-kafka commit ``kafka/src`` was copied from.
KAFKA_CONNECTOR_COMMIT = "eb8ff700b2390d5bc3a8c67fcdb3f3ad93824e24"


def main(dist_jar: str, files_jar: str) -> None:
    if VECTORS.exists():
        raise SystemExit(f"{VECTORS} exists: the vectors are written once, never regenerated")
    sources = sorted(str(p) for root in (HERE / "kafka" / "src", HERE / "src") for p in root.rglob("*.java"))
    classpath = f"{dist_jar}:{files_jar}"
    with tempfile.TemporaryDirectory() as build:
        subprocess.run(["javac", "--release", "11", "-nowarn", "-encoding", "UTF-8", "-cp", classpath, "-d", build,
                        *sources], check=True)
        out = pathlib.Path(build) / "vectors.json"
        subprocess.run(["java", "-cp", f"{build}:{classpath}", "org.pyref.flink.sources.SourceVectors", str(out)],
                       check=True)
        vectors = json.loads(out.read_text(encoding="utf-8"))
    java = subprocess.run(["java", "-version"], capture_output=True, text=True, check=True).stderr.splitlines()[0]
    vectors["generated"] = {
        "command": "python -m compat_tests.flink.sources.generate " + " ".join(
            pathlib.Path(j).name for j in (dist_jar, files_jar)),
        "jars": {pathlib.Path(j).name: sha256_file(pathlib.Path(j)) for j in (dist_jar, files_jar)},
        "kafka_connector": f"apache/flink-connector-kafka@{KAFKA_CONNECTOR_COMMIT}",
        "java": java,
    }
    VECTORS.write_text(json.dumps(vectors, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(*sys.argv[1:3])
