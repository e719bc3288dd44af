"""The Flink harness without a JVM: jar fetching and caching, configuration keys per version,
job specs from a truth, and the comparison of a restored job's dump with a truth."""

from __future__ import annotations

import copy
import hashlib
import io
import json
import tarfile
import urllib.request
import zipfile

import pytest

from compat_tests.flink import harness, jars
from compat_tests.flink.generate import CORPUS
from compat_tests.flink.truth import restore_differences

SEEDS = CORPUS / "1.20.3" / "hashmap" / "seeds"


def truth_of(case) -> dict:
    return json.loads((case / "truth.json").read_text(encoding="utf-8"))


# --- jars -------------------------------------------------------------------------------------

JAR_MEMBERS = {"flink-dist-9.9.9.jar": b"dist", "log4j-api-2.0.jar": b"log", "flink-table-runtime-9.9.9.jar": b"table",
               "flink-connector-files-9.9.9.jar": b"connector"}


def fake_sdist(path, version="9.9.9", members=JAR_MEMBERS):
    with tarfile.open(path, "w:gz") as t:
        for name, data in {**members, "README.txt": b"x"}.items():
            folder = "deps/lib" if name.endswith(".jar") else "deps"
            info = tarfile.TarInfo(f"apache-flink-libraries-{version}/{folder}/{name}")
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))


def fake_wheel(path):
    with zipfile.ZipFile(path, "w") as z:
        for name, data in JAR_MEMBERS.items():
            z.writestr(f"pyflink/lib/{name}", data)
        z.writestr("pyflink/opt/flink-dist-ignored.jar", b"opt")


@pytest.mark.parametrize("make, filename", [(fake_sdist, "apache-flink-libraries-9.9.9.tar.gz"),
                                            (fake_wheel, "apache_flink_libraries-9.9.9-py2.py3-none-any.whl")])
def test_ensure_lib_keeps_the_lib_jars_of_a_verified_archive(tmp_path, monkeypatch, make, filename):
    archives, cache = tmp_path / "archives", tmp_path / "cache"
    archives.mkdir()
    make(archives / filename)
    digest = hashlib.sha256((archives / filename).read_bytes()).hexdigest()
    monkeypatch.setenv("PYREF_FLINK_CACHE", str(cache))
    monkeypatch.setenv("PYREF_FLINK_ARCHIVES", str(archives))
    monkeypatch.setattr(jars, "find_release", lambda v: jars.Release(v, filename, "https://invalid/" + filename, digest))
    lib = jars.ensure_lib("9.9.9")
    assert sorted(p.name for p in lib.iterdir()) == ["flink-dist-9.9.9.jar", "flink-table-runtime-9.9.9.jar",
                                                     "log4j-api-2.0.jar"]
    assert (lib / "flink-dist-9.9.9.jar").read_bytes() == b"dist"
    assert json.loads((lib.parent / jars.MANIFEST).read_text())["sha256"] == digest
    assert jars.cached_lib("9.9.9") == lib
    monkeypatch.setattr(jars, "find_release", lambda v: pytest.fail("a cached version must not consult the index"))
    assert jars.ensure_lib("9.9.9") == lib


def test_ensure_lib_keeps_the_scala_suffixed_jars_of_1_14(tmp_path, monkeypatch):
    """1.14's lib names flink-dist and its one Table API jar with a Scala suffix; 1.15+'s flink-scala_2.12 (the
    Scala API's serializers) is kept too, a format jar is not."""
    filename = "apache-flink-libraries-9.9.9.tar.gz"
    fake_sdist(tmp_path / filename, members={"flink-dist_2.11-9.9.9.jar": b"dist", "flink-table_2.11-9.9.9.jar": b"table",
                                             "flink-scala_2.12-9.9.9.jar": b"scala", "flink-csv-9.9.9.jar": b"csv"})
    digest = hashlib.sha256((tmp_path / filename).read_bytes()).hexdigest()
    monkeypatch.setenv("PYREF_FLINK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PYREF_FLINK_ARCHIVES", str(tmp_path))
    monkeypatch.setattr(jars, "find_release", lambda v: jars.Release(v, filename, "https://invalid/" + filename, digest))
    lib = jars.ensure_lib("9.9.9")
    assert sorted(p.name for p in lib.iterdir()) == ["flink-dist_2.11-9.9.9.jar", "flink-scala_2.12-9.9.9.jar",
                                                     "flink-table_2.11-9.9.9.jar"]
    assert jars.cached_lib("9.9.9") == lib


def test_ensure_lib_keeps_the_table_planner_of_1_13(tmp_path, monkeypatch):
    """1.13's lib splits the Table API (flink-table_2.12) from its planner (flink-table-blink_2.12): both are kept."""
    filename = "apache-flink-libraries-9.9.9.tar.gz"
    fake_sdist(tmp_path / filename, members={"flink-dist_2.12-9.9.9.jar": b"dist", "flink-table_2.12-9.9.9.jar": b"table",
                                             "flink-table-blink_2.12-9.9.9.jar": b"planner", "flink-json-9.9.9.jar": b"json"})
    digest = hashlib.sha256((tmp_path / filename).read_bytes()).hexdigest()
    monkeypatch.setenv("PYREF_FLINK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PYREF_FLINK_ARCHIVES", str(tmp_path))
    monkeypatch.setattr(jars, "find_release", lambda v: jars.Release(v, filename, "https://invalid/" + filename, digest))
    assert sorted(p.name for p in jars.ensure_lib("9.9.9").iterdir()) == [
        "flink-dist_2.12-9.9.9.jar", "flink-table-blink_2.12-9.9.9.jar", "flink-table_2.12-9.9.9.jar"]


def test_a_cache_extracted_with_other_kept_jars_is_not_complete(tmp_path, monkeypatch):
    """A cache of an older harness (no table jars) is extracted again, not used without them."""
    monkeypatch.setenv("PYREF_FLINK_CACHE", str(tmp_path))
    lib = jars.lib_dir("9.9.9")
    lib.mkdir(parents=True)
    (lib / "flink-dist-9.9.9.jar").write_bytes(b"dist")
    manifest = {"version": "9.9.9", "jars": ["flink-dist-9.9.9.jar"]}
    (lib.parent / jars.MANIFEST).write_text(json.dumps(manifest))
    assert jars.cached_lib("9.9.9") is None
    (lib.parent / jars.MANIFEST).write_text(json.dumps({**manifest, "kept": list(jars.KEPT_JARS)}))
    assert jars.cached_lib("9.9.9") == lib


def test_ensure_lib_refuses_an_archive_whose_sha256_is_not_the_index(tmp_path, monkeypatch):
    fake_sdist(tmp_path / "apache-flink-libraries-9.9.9.tar.gz")
    monkeypatch.setenv("PYREF_FLINK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PYREF_FLINK_ARCHIVES", str(tmp_path))
    monkeypatch.setattr(jars, "find_release",
                        lambda v: jars.Release(v, "apache-flink-libraries-9.9.9.tar.gz", "https://invalid/", "0" * 64))
    with pytest.raises(jars.FlinkJarsUnavailable, match="sha256"):
        jars.ensure_lib("9.9.9")
    assert jars.cached_lib("9.9.9") is None


def test_a_download_the_network_cuts_is_tried_again_then_named(tmp_path, monkeypatch):
    """A blip costs a retry, not the run; a network that stays down is FlinkJarsUnavailable, nothing cached."""
    filename = "apache_flink_libraries-9.9.9-py2.py3-none-any.whl"
    fake_wheel(tmp_path / filename)
    digest = hashlib.sha256((tmp_path / filename).read_bytes()).hexdigest()
    monkeypatch.setenv("PYREF_FLINK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(jars, "RETRY_DELAYS", (0.0, 0.0))
    monkeypatch.setattr(jars, "find_release",
                        lambda v: jars.Release(v, filename, (tmp_path / filename).as_uri(), digest))
    real, calls, failures = urllib.request.urlopen, [], [1]

    def flaky(url, timeout):
        calls.append(url)
        if len(calls) <= failures[0]:
            raise ConnectionResetError("connection reset by peer")
        return real(url, timeout=timeout)

    monkeypatch.setattr(jars.urllib.request, "urlopen", flaky)
    assert (jars.ensure_lib("9.9.9") / "flink-dist-9.9.9.jar").read_bytes() == b"dist"
    assert len(calls) == 2
    calls.clear()
    failures[0] = 99
    with pytest.raises(jars.FlinkJarsUnavailable, match="failed 3 times, last: connection reset"):
        jars.ensure_lib("9.9.8")
    assert len(calls) == 3 and jars.cached_lib("9.9.8") is None


def test_ensure_lib_without_download_names_the_missing_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PYREF_FLINK_CACHE", str(tmp_path))
    with pytest.raises(jars.FlinkJarsUnavailable, match="not in"):
        jars.ensure_lib("9.9.9", download=False)
    assert harness.flink_available("9.9.9") is not None


def test_find_release_prefers_the_wheel_and_needs_a_sha256(tmp_path):
    files = [{"filename": "apache_flink_libraries-2.2.1.tar.gz", "url": "https://x/sdist", "hashes": {"sha256": "a" * 64}},
             {"filename": "apache_flink_libraries-2.2.1-py2.py3-none-any.whl", "url": "https://x/whl",
              "hashes": {"sha256": "b" * 64}},
             {"filename": "apache-flink-libraries-1.18.1.tar.gz", "url": "https://x/old", "hashes": {"sha256": "c" * 64}},
             {"filename": "apache_flink_libraries-2.0.2.tar.gz", "url": "https://x/nohash", "hashes": {}}]
    index = tmp_path / "index.json"
    index.write_text(json.dumps({"files": files}))
    assert jars.find_release("2.2.1", index.as_uri()).url == "https://x/whl"
    assert jars.find_release("1.18.1", index.as_uri()).sha256 == "c" * 64
    with pytest.raises(jars.FlinkJarsUnavailable, match="no sha256"):
        jars.find_release("2.0.2", index.as_uri())
    with pytest.raises(jars.FlinkJarsUnavailable, match="not on"):
        jars.find_release("3.0.0", index.as_uri())


# --- configuration ----------------------------------------------------------------------------

def test_config_keys_follow_the_renames_of_flink_1_20():
    old, new = harness.flink_config("1.19.3", checkpoint_dir="/tmp/c", inline_threshold="0"), \
        harness.flink_config("2.3.0", checkpoint_dir="/tmp/c", inline_threshold="0")
    assert old["state.checkpoint-storage"] == "filesystem" and old["state.storage.fs.memory-threshold"] == "0"
    assert new["execution.checkpointing.storage"] == "filesystem"
    assert new["execution.checkpointing.data-inline-threshold"] == "0"
    assert new["execution.checkpointing.dir"] == "file:///tmp/c"
    assert harness.flink_config("2.3.0")["execution.checkpointing.storage"] == "jobmanager"
    assert harness.config_keys("1.18.1").restore_path == "execution.savepoint.path"
    assert harness.flink_config("1.14.6", backend="rocksdb")["state.backend"] == "rocksdb"  # before 1.17's .type
    assert harness.flink_config("1.13.6", checkpoint_dir="/tmp/c")["state.checkpoint-storage"] == "filesystem"  # since 1.13
    assert harness.config_keys("2.0.2").restore_path == "execution.state-recovery.path"
    with pytest.raises(ValueError, match="backend"):
        harness.flink_config("2.3.0", backend="memory")
    assert harness.flink_config("2.0.2", backend="forst")["state.backend.type"] == "forst"
    with pytest.raises(ValueError, match="no ForSt"):
        harness.flink_config("1.20.3", backend="forst")


def test_api_families_split_at_1_14_1_15_1_19_and_2_0():
    families = {v: tuple(harness.api_families(v).values())
                for v in ("1.13.6", "1.14.6", "1.15.4", "1.18.1", "1.19.3", "1.20.3", "2.0.2", "2.3.0")}
    assert families == {"1.13.6": ("1.14", "1.13", "1.18", "1.14", "1.13", "1.13"),
                        "1.14.6": ("1.14", "1.14", "1.18", "1.14", "1.13", "1.13"),
                        "1.15.4": ("1.15", "1.14", "1.18", "1.15", "1.13", "1.13"),
                        "1.18.1": ("1.15", "1.14", "1.18", "1.15", "1.13", "1.13"),
                        "1.19.3": ("1.15", "1.14", "1.19", "1.15", "1.13", "1.13"),
                        "1.20.3": ("1.15", "1.14", "1.19", "1.15", "1.13", "1.13"),
                        "2.0.2": ("1.15", "1.14", "1.19", "1.15", "2.0", "2.0"),
                        "2.3.0": ("1.15", "1.14", "1.19", "1.15", "2.0", "2.0")}
    for version in families:  # every family is a directory of shims
        assert all(list((harness.JOBS_DIR / "compat" / concern / family).rglob("*.java"))
                   for concern, family in harness.api_families(version).items())


# --- job specs and restore comparison ---------------------------------------------------------

def test_job_spec_from_truth_describes_states_without_contents():
    spec = harness.job_spec_from_truth(truth_of(SEEDS))
    by_uid = {o["uid"]: o for o in spec["operators"]}
    assert by_uid["kafka-source"]["operator_state"] == {"offsets": {"mode": "SPLIT_DISTRIBUTE", "type": "Long"}}
    assert by_uid["url-counter"]["key_type"] == "String"
    assert by_uid["url-counter"]["keyed_state"]["count"] == {"kind": "value", "type": "Long", "namespace": "void",
                                                              "ttl": None}
    assert by_uid["url-counter"]["parallelism"] == 2
    assert "parallelism" not in harness.job_spec_from_truth(truth_of(SEEDS), own_parallelism=False)["operators"][0]
    assert [o["uid"] for o in harness.job_spec_from_truth(truth_of(SEEDS), ["url-counter"])["operators"]] == ["url-counter"]


def faithful_dump(truth: dict) -> dict:
    """What Flink hands back at the savepoint's own parallelism: UNION whole on every subtask,
    every event-time timer fired."""
    dump = copy.deepcopy(truth)
    for op in dump["operators"].values():
        for state in op["operator_state"].values():
            if state["mode"] == "UNION":
                everything = [x for sub in reversed(state["subtasks"]) for x in sub]
                state["subtasks"] = [list(everything) for _ in state["subtasks"]]
        op["fired_timers"] = [t for t in op["timers"] if t["domain"] == "event_time"]
    return dump


@pytest.mark.parametrize("case", sorted(p.parent for p in CORPUS.glob("*/*/*/truth.json"))[:12],
                         ids=lambda p: p.relative_to(CORPUS).as_posix())
def test_a_faithful_restore_has_no_differences(case):
    truth = truth_of(case)
    assert restore_differences(truth, faithful_dump(truth)) == []


def test_restore_differences_name_what_flink_lost_or_misplaced():
    truth = truth_of(SEEDS)
    dump = faithful_dump(truth)
    dump["operators"]["kafka-source"]["operator_state"]["offsets"]["subtasks"][1] = [200]
    entries = dump["operators"]["url-counter"]["keyed_state"]["count"]["entries"]
    entries[0] = {**entries[0], "subtask": 1 - entries[0]["subtask"]}
    entries[1] = {**entries[1], "value": entries[1]["value"] + 1}
    del dump["operators"]["kafka-broker"]
    problems = "\n".join(restore_differences(truth, dump))
    assert "kafka-source/offsets: [[100, 101], [200]] restored" in problems
    assert "url-counter/count: 1 restored outside their key group's subtask" in problems
    assert "url-counter/count: 1 written but not restored, 1 restored but not written" in problems
    assert "kafka-broker: not in the restored job" in problems


def test_restore_differences_check_union_broadcast_and_fired_timers():
    case = CORPUS / "1.20.3" / "hashmap" / "operator-state"
    if not case.exists():
        pytest.skip("operator-state case not generated")
    truth = truth_of(case)
    dump = faithful_dump(truth)
    dump["operators"]["list-states"]["operator_state"]["union-offsets"]["subtasks"][2].pop()
    dump["operators"]["broadcast-rules"]["operator_state"]["rules"]["subtasks"][1] = []
    problems = "\n".join(restore_differences(truth, dump))
    assert "list-states/union-offsets: UNION subtasks [2] do not hold every element once" in problems
    assert "broadcast-rules/rules: BROADCAST subtasks [1] differ" in problems
    kinds = CORPUS / "1.20.3" / "hashmap" / "keyed-kinds"
    if kinds.exists():
        truth = truth_of(kinds)
        dump = faithful_dump(truth)
        dump["operators"]["keyed-kinds"]["fired_timers"].pop()
        assert any("fired event-time timers: 1 written but not restored" in p for p in restore_differences(truth, dump))
