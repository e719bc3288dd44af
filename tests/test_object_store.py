"""Savepoints on real object-store APIs: S3 (moto's server) and Azure Blob (Azurite) on
127.0.0.1, each reached through a proxy that counts bytes and injects failures
(spec/format.md §10.5). Every scenario runs on both (the ``store`` fixture)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from datetime import timedelta

import numpy as np
import pytest

from pyref import (
    ConcurrentWriteError,
    InvalidArgumentError,
    Savepoint,
    SavepointNotFoundError,
    SavepointWriter,
    StorageError,
    rescale,
)
from pyref.cleanup import remove_unreferenced_files
from pyref.cli import main
from pyref.inspection import verify
from pyref.io import ArrowIO, ObjectStoreIO, open_io
from pyref.manifest import DATA_FILE_MAGIC
from pyref.serializers import Bytes, Int64, TimeWindow, Window
from pyref.storage.object_store import PART_BYTES
from pyref.testing import SEED_COUNTS, SEED_OFFSETS, SEED_TIMERS, SEED_WINDOW_COUNTS, write_seeds
from pyref.testing.s3 import Fault
from pyref.ttl import TtlConfig
from pyref.writer import ChunkSink

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "reliability"))
import object_store_writer  # noqa: E402

DAY = 24 * 3600.0
WRITER_SCRIPT = object_store_writer.__file__


def seeds_content(location) -> tuple[list, dict]:
    sp = Savepoint.open(location)
    offsets = sp.operator("kafka-source").list_state("offsets")
    counts = dict(sp.operator("url-counter").keyed_state("count").items())
    return [list(offsets.partition(i)) for i in range(offsets.partition_count)], counts


SEEDS = ([list(o) for o in SEED_OFFSETS], SEED_COUNTS)


#: Each store's other spellings of a bucket (Hadoop's schemes, Azure's account-qualified
#: container), which obstore reads too.
ALIASES = {"s3": ["s3a://{bucket}"],
           "az": ["abfss://{bucket}", "abfss://{bucket}@devstoreaccount1.dfs.core.windows.net"]}


def test_open_io_serves_object_store_urls_with_obstore(store):
    small_writer(f"{store.prefix}/sp", 1).commit()
    scheme = store.prefix.split(":")[0]
    for alias in [f"{scheme}://{{bucket}}", *ALIASES[scheme]]:
        url = f"{alias.format(bucket=store.bucket)}/{store.key_prefix}/sp"
        assert isinstance(open_io(url), ObjectStoreIO) and values(url) == {1}, url
    with pytest.raises(InvalidArgumentError, match="key prefix inside a bucket"):
        ObjectStoreIO(f"{scheme}://bucket-only")


def test_write_read_restore_and_rescale(store):
    write_seeds(f"{store.prefix}/sp", inline_bytes=0)
    assert seeds_content(f"{store.prefix}/sp") == SEEDS
    assert verify(Savepoint.open(f"{store.prefix}/sp")).ok
    plan = Savepoint.open(f"{store.prefix}/sp").restore_plan(4)
    assert [list(s.list_state("offsets")) for s in plan.subtasks("kafka-source")] == [[100], [101], [200], [201]]
    assert sum(len(list(s.keyed_state("count"))) for s in plan.subtasks("url-counter")) == len(SEED_COUNTS)
    # Shallow (a sibling prefix naming the source as its base) and self-contained rescales.
    rescale(f"{store.prefix}/sp", f"{store.prefix}/sp4", 4)
    rescale(f"{store.prefix}/sp", f"{store.prefix}/elsewhere/sp4", 4, copy=True)
    for target in ("sp4", "elsewhere/sp4"):
        assert seeds_content(f"{store.prefix}/{target}")[1] == SEED_COUNTS
    assert Savepoint.open(f"{store.prefix}/sp4").manifest.bases[0].directory == "sp"
    # Chunks are fetched by ranged GETs, never whole data files.
    data_gets = [e for e in store.proxy.log if e.method == "GET" and "/data/" in e.path]
    assert data_gets and all(e.range for e in data_gets)


def windowed_content(location) -> tuple[dict, list]:
    op = Savepoint.open(location).operator("window-counter")
    return ({(url, window): value for url, window, value in op.keyed_state("count").items()},
            sorted(op.timer_service("window-timers").timers()))


def test_a_1_2_savepoint_on_an_object_store(store):
    """Format 1.2 on an object store: window counts under namespaces and their pending timers are
    written, read, verified, restored at another parallelism (timers move with their
    keys' key groups) and rescaled shallow into another prefix, all by ranged GETs."""
    location = f"{store.prefix}/2024-05-01/sp"
    write_seeds(location, windowed=True, inline_bytes=0)
    assert windowed_content(location) == (SEED_WINDOW_COUNTS, sorted(SEED_TIMERS))
    sp = Savepoint.open(location)
    assert sp.version.minor == 2 and verify(sp).ok
    plan = sp.restore_plan(3)
    restored = [(s.key_group_range, list(s.timers("window-timers"))) for s in plan.subtasks("window-counter")]
    counts = sp.operator("window-counter").keyed_state("count")
    assert sorted(t for _, timers in restored for t in timers) == sorted(SEED_TIMERS)
    assert all(groups.first <= counts.key_group_of(url) <= groups.last for groups, timers in restored
               for url, _, _ in timers)
    target = f"{store.prefix}/2024-05-02/sp3"
    features = rescale(location, target, 3, base_paths=True).info.required_features
    assert "base-paths" in features and "timers" in features
    assert windowed_content(target) == (SEED_WINDOW_COUNTS, sorted(SEED_TIMERS))
    data_gets = [e for e in store.proxy.log if e.method == "GET" and "/data/" in e.path]
    assert data_gets and all(e.range for e in data_gets)


def magic_bytes(gets) -> int:
    """The data-file magic of each data file read, which every read checks once per file
    (spec/format.md §6.3)."""
    return len(DATA_FILE_MAGIC) * len({e.path for e in gets})


def test_a_1_2_scan_on_an_object_store_fetches_each_chunk_once_in_few_requests(store):
    location = f"{store.prefix}/sp"
    write_seeds(location, windowed=True, inline_bytes=0)
    op = Savepoint.open(location).operator("window-counter")
    counts, timers = op.keyed_state("count"), op.timer_service("window-timers")
    with store.proxy.counting() as exchanges:
        rows = sum(b.num_rows for b in counts.scan_batches()) + sum(b.num_rows for b in timers.scan_batches())
    assert rows == len(SEED_WINDOW_COUNTS) + len(SEED_TIMERS)
    gets = [e for e in exchanges if e.method == "GET" and "/data/" in e.path]
    chunks = [*counts.proto.chunks, *timers.proto.chunks]
    assert sum(e.body_bytes for e in gets) == sum(c.range.length for c in chunks) + magic_bytes(gets)
    # Per data file: two spans, and the magic unless the first span starts right after it.
    assert len(gets) <= 3 * len(Savepoint.open(location).manifest.data_files) < len(chunks)


def test_cli_on_an_object_store(store, capsys):
    write_seeds(f"{store.prefix}/sp", inline_bytes=0)
    assert main(["inspect", f"{store.prefix}/sp", "--json"]) == 0
    assert {op["operator_id"] for op in json.loads(capsys.readouterr().out)["operators"]} == \
        {"kafka-source", "url-counter"}
    assert main(["rescale", f"{store.prefix}/sp", f"{store.prefix}/sp3", "-p", "3", "--json"]) == 0
    capsys.readouterr()
    assert main(["verify", f"{store.prefix}/sp3", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"]


def small_writer(location: str, value: int, **options) -> SavepointWriter:
    w = SavepointWriter(location, inline_bytes=0, **options)
    op = w.add_operator("op", parallelism=2, key_serializer=Int64())
    op.keyed_state("v", Int64()).add(np.arange(100), np.full(100, value))
    return w


def values(location: str) -> set[int]:
    return {v for _, v in Savepoint.open(location).operator("op").keyed_state("v").items()}


@pytest.mark.parametrize("existing", [False, True], ids=["create", "replace"])
def test_racing_writers_one_commits_the_other_is_refused(store, existing):
    location = f"{store.prefix}/sp"
    if existing:
        small_writer(location, 0).commit()
    first, second = small_writer(location, 1, overwrite=existing), small_writer(location, 2, overwrite=existing)
    for w in (first, second):
        w.build_manifest()  # both have uploaded their data files
    first.commit()
    with pytest.raises(ConcurrentWriteError, match="another writer committed"):
        second.commit()
    assert second.status == "aborted" and values(location) == {1}
    io = open_io(location)
    assert set(io.list_files("data")) == {f.path for f in Savepoint.open(location).manifest.data_files}


def test_many_concurrent_writers_exactly_one_commits(store):
    location = f"{store.prefix}/sp"
    writers = [small_writer(location, i) for i in range(6)]
    for w in writers:
        w.build_manifest()
    start, outcomes = threading.Barrier(len(writers)), {}

    def commit(i: int) -> None:
        start.wait()
        try:
            writers[i].commit()
            outcomes[i] = "committed"
        except ConcurrentWriteError:
            outcomes[i] = "refused"

    threads = [threading.Thread(target=commit, args=(i,)) for i in range(len(writers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    (winner,) = [i for i, o in outcomes.items() if o == "committed"]
    assert values(location) == {winner}
    assert len(open_io(location).list_files("data")) == len(Savepoint.open(location).manifest.data_files)


def test_a_lost_commit_response_is_recognised_as_this_writers_commit(store):
    """The manifest PUT lands but its response is lost; obstore retries and the store
    refuses the retry by its condition. The writer must see its own manifest there and
    report success, not abort and delete the files the published manifest lists."""
    location = f"{store.prefix}/sp"
    small_writer(location, 0).commit()
    store.proxy.inject(Fault("PUT", r"/sp/_manifest$", status=503, after_forwarding=True))
    w = small_writer(location, 1, overwrite=True)
    w.commit()
    assert w.status == "committed" and values(location) == {1}
    puts = [e for e in store.proxy.log if e.method == "PUT" and e.path.endswith("/sp/_manifest")]
    assert [e.status for e in puts[-2:]] == [503, 412]


def test_server_errors_and_throttling_are_retried(store):
    store.proxy.inject(Fault("PUT", r"/data/", status=500, code="InternalError", times=2),
                    Fault("PUT", r"/_manifest$", status=503, code="SlowDown"),
                    Fault("GET", r"/_manifest$", status=503, code="SlowDown", times=2),
                    Fault("HEAD", r"/data/", status=500, code="InternalError"),
                    Fault("GET", r"/data/", status=503, code="SlowDown", times=3))
    write_seeds(f"{store.prefix}/sp", inline_bytes=0)
    assert seeds_content(f"{store.prefix}/sp") == SEEDS
    assert all(f.hits == f.times for f in store.proxy.faults)


def test_a_store_that_keeps_failing_is_a_storage_error_naming_the_file(store):
    write_seeds(f"{store.prefix}/sp", inline_bytes=0)
    io = ObjectStoreIO(f"{store.prefix}/sp", retry_config={
        "max_retries": 2, "retry_timeout": timedelta(seconds=5),
        "backoff": {"init_backoff": timedelta(milliseconds=10), "max_backoff": timedelta(milliseconds=50)}})
    sp = Savepoint.open(io)
    store.proxy.inject(Fault("GET", r"/data/", status=503, times=1000))
    with pytest.raises(StorageError, match=r"cannot read bytes \d+\.\.\d+.*503") as failure:
        list(sp.operator("url-counter").keyed_state("count").items())
    assert "/sp/data/" in failure.value.path


def leftovers(location: str, n: int = 2) -> list[str]:
    """Data files of a writer that died before its commit (uploaded, never referenced)."""
    sink = ChunkSink(open_io(location), inline_bytes=0, workers=1)
    for i in range(n):
        sink.put(b"x" * 200, 1)
        sink._roll()
    return [f.path for f in sink.close()]


def test_clean_deletes_only_old_leftovers_and_refuses_thresholds_without_a_safety_margin(store):
    location = f"{store.prefix}/sp"
    write_seeds(location, inline_bytes=0)
    lost = leftovers(location)
    with pytest.raises(InvalidArgumentError, match="without a commit lock"):
        remove_unreferenced_files(location, older_than=3600)
    assert len(remove_unreferenced_files(location).kept_recent) == len(lost)  # too young by default
    report = remove_unreferenced_files(location, now=time.time() + 2 * DAY)
    assert sorted(r.rsplit("/sp/", 1)[1] for r in report.deleted) == sorted(lost)
    assert seeds_content(location) == SEEDS
    assert verify(Savepoint.open(location)).ok


class CommitWhileListing(ObjectStoreIO):
    """A writer commits while the cleanup lists data/ (no lock can keep it out)."""

    def list_files(self, rel_dir: str) -> list[str]:
        listed = super().list_files(rel_dir)
        small_writer(self.location, 7, overwrite=True).commit()
        return listed


def test_a_commit_during_clean_stops_it_before_any_deletion(store):
    location = f"{store.prefix}/sp"
    small_writer(location, 0).commit()
    lost = leftovers(location)
    with pytest.raises(ConcurrentWriteError, match="nothing was deleted"):
        remove_unreferenced_files(CommitWhileListing(location), now=time.time() + 2 * DAY)
    assert values(location) == {7}
    assert set(lost) <= set(open_io(location).list_files("data"))


def test_a_writer_past_its_deadline_does_not_publish(store, monkeypatch):
    location = f"{store.prefix}/sp"
    small_writer(location, 0).commit()
    w = small_writer(location, 1, overwrite=True)
    monkeypatch.setattr("pyref.writer.UNLOCKED_WRITE_DEADLINE_S", -1.0)  # its files are all "too old"
    with pytest.raises(ConcurrentWriteError, match="a cleanup may delete it"):
        w.commit()
    assert values(location) == {0} and w.status == "aborted"


def test_names_with_escapes_resolve_bases(store):
    source, target = f"{store.prefix}/run%201", f"{store.prefix}/run%202"
    write_seeds(source, inline_bytes=0)
    rescale(source, target, 3)
    sp = Savepoint.open(target)
    assert sp.manifest.bases[0].directory == "run 1"
    assert seeds_content(target)[1] == SEED_COUNTS


def test_a_base_on_an_object_store_is_not_replaced_while_a_shallow_savepoint_uses_it(store):
    """The registration (spec/format.md §8.6) works through the object store: a sibling and a
    savepoint elsewhere in the bucket (named by path) both protect their base."""
    source = f"{store.prefix}/sp"
    write_seeds(source, inline_bytes=0)
    rescale(source, f"{store.prefix}/sp3", 3)
    rescale(source, f"{store.prefix}/other/sp2", 2, base_paths=True)
    before = Savepoint.open(source).savepoint_id
    with pytest.raises(InvalidArgumentError, match=r"is the base of .*/other/sp2, .*/sp3"):
        write_seeds(source, inline_bytes=0, overwrite=True)
    assert Savepoint.open(source).savepoint_id == before
    assert seeds_content(f"{store.prefix}/other/sp2")[1] == SEED_COUNTS
    assert main(["flatten", f"{store.prefix}/other/sp2", f"{store.prefix}/flat"]) == 0
    rescale(source, f"{store.prefix}/sp3", 3, copy=True, overwrite=True)
    rescale(source, f"{store.prefix}/other/sp2", 2, copy=True, overwrite=True)
    write_seeds(source, inline_bytes=0, overwrite=True)  # no savepoint uses it any more
    assert seeds_content(f"{store.prefix}/flat") == SEEDS


def incomplete_uploads(store) -> list[str]:
    """Keys of the uploads begun under the test's prefix and neither completed nor aborted."""
    return store.server.incomplete_uploads(store.bucket, store.key_prefix)


def test_a_writer_killed_mid_upload_leaves_the_savepoint_intact(store):
    location = f"{store.prefix}/sp"
    keys = range(0, object_store_writer.ENTRIES, 64)
    object_store_writer.write_generation(location, 0, keys)
    before = Savepoint.open(location).savepoint_id
    # The store refuses to complete the upload (503, retried by the writer): the kill lands
    # while the first data file's parts are in and the file is not.
    never_complete = Fault(*store.server.COMPLETE_UPLOAD, status=503, code="SlowDown", times=10**6)
    store.proxy.inject(never_complete)
    writer = subprocess.Popen([sys.executable, WRITER_SCRIPT, location, "1"], stdout=subprocess.PIPE, text=True)
    assert writer.stdout.readline().strip() == "ready"
    deadline = time.monotonic() + 120
    while not never_complete.hits:
        assert writer.poll() is None and time.monotonic() < deadline, "the writer ended before its upload"
        time.sleep(0.02)
    assert sum(bool(re.search(store.server.PART_UPLOAD, e.path)) for e in store.proxy.log) >= 3
    writer.kill()
    writer.wait()
    writer.stdout.close()
    sp = Savepoint.open(location)
    assert sp.savepoint_id == before
    blobs = dict(sp.operator("op").keyed_state("blob").items())
    assert blobs == {k: object_store_writer.value(0, k) for k in keys}
    # The interrupted upload is invisible: not listed, so neither readers nor clean see it.
    assert any(k.startswith(f"{location.split('/', 3)[3]}/data/") for k in incomplete_uploads(store))
    listed = set(open_io(location).list_files("data"))
    assert {f.path for f in sp.manifest.data_files} <= listed
    never_complete.times = 0
    # The next writer commits; an old enough cleanup deletes what the killed one completed.
    small_writer(location, 2, overwrite=True).commit()
    remove_unreferenced_files(location, now=time.time() + 2 * DAY)
    assert set(open_io(location).list_files("data")) == {f.path for f in Savepoint.open(location).manifest.data_files}
    assert values(location) == {2}


def test_an_abandoned_multipart_upload_is_never_seen(store):
    location = f"{store.prefix}/sp"
    write_seeds(location, inline_bytes=0)
    io = open_io(location)
    out = io.create("data/abandoned.svd")
    out.write(b"\0" * (3 * PART_BYTES))  # parts upload in the background; no close, no completion
    deadline = time.monotonic() + 60
    while not incomplete_uploads(store):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert "data/abandoned.svd" not in io.list_files("data") and io.stat("data/abandoned.svd") is None
    assert remove_unreferenced_files(location, now=time.time() + 2 * DAY).deleted == []
    assert seeds_content(location) == SEEDS


def test_read_amplification_of_a_restoring_subtask(store):
    """A subtask fetches its chunks by ranged GETs of exactly their bytes: bytes fetched /
    its planned share <= 1.05, the manifest included."""
    location = f"{store.prefix}/sp"
    rng = np.random.default_rng(7)
    with SavepointWriter(location, codec="none", chunk_bytes=256 << 10, inline_bytes=0) as w:
        op = w.add_operator("op", parallelism=2, max_parallelism=64, key_serializer=Int64())
        op.keyed_state("blob", Bytes()).add(np.arange(2048), [rng.bytes(8 << 10) for _ in range(2048)])
        op.list_state("offsets", Int64()).add(0, np.arange(100_000))
    with store.proxy.counting() as exchanges:
        subtask = Savepoint.open(location).restore_plan(4).subtask("op", 1)
        table = subtask.keyed_arrow("blob")
        offsets = subtask.list_arrow("offsets")
    assert table.num_rows and len(offsets) == 25_000
    share = subtask.planned_bytes()
    fetched = sum(e.body_bytes for e in exchanges if e.method == "GET")
    data = [e for e in exchanges if e.method == "GET" and "/data/" in e.path]
    assert all(e.range for e in data)
    assert sum(e.body_bytes for e in data) == share + magic_bytes(data)  # exactly the planned chunks
    assert fetched / share <= 1.05, (fetched, share)


def test_read_amplification_of_a_restoring_subtask_with_the_1_2_parts(store):
    """The same bound over format 1.2's parts: namespaced TTL state, timers and a broadcast
    map every subtask holds (its chunk fetched once per subtask, not once per range)."""
    location = f"{store.prefix}/sp"
    rng = np.random.default_rng(8)
    keys = np.arange(2048)
    with SavepointWriter(location, codec="none", chunk_bytes=256 << 10, inline_bytes=0) as w:
        op = w.add_operator("op", parallelism=2, max_parallelism=64, key_serializer=Int64())
        op.keyed_state("blob", Bytes(), namespace_serializer=TimeWindow(), ttl=TtlConfig(60_000)).add(
            keys, [rng.bytes(8 << 10) for _ in keys], namespaces=[Window(0, 60_000)] * len(keys),
            ttl_timestamps=np.full(len(keys), 1_000))
        op.timer_service("window-timers", "event_time", TimeWindow()).add(
            keys, np.full(len(keys), 59_999), [Window(0, 60_000)] * len(keys))
        op.broadcast_state("rules", Int64(), Bytes()).add_all(np.arange(64), [rng.bytes(4 << 10) for _ in range(64)])
    with store.proxy.counting() as exchanges:
        subtask = Savepoint.open(location).restore_plan(4).subtask("op", 2)
        assert subtask.keyed_arrow("blob").num_rows and subtask.timers_arrow("window-timers").num_rows
        assert len(subtask.broadcast_state("rules")) == 64
    share = subtask.planned_bytes()
    data = [e for e in exchanges if e.method == "GET" and "/data/" in e.path]
    assert all(e.range for e in data) and sum(e.body_bytes for e in data) == share + magic_bytes(data)
    fetched = sum(e.body_bytes for e in exchanges if e.method == "GET")
    assert fetched / share <= 1.05, (fetched, share)


def test_a_missing_bucket_is_named_as_such(store, capsys):
    """A savepoint in a bucket (container) that does not exist: *not found* when reading
    (spec/format.md §2), saying it is the bucket that is missing; a StorageError saying so
    when writing (not "object not found")."""
    location = store.prefix.replace(f"/{store.bucket}/", "/no-such-bucket/") + "/sp"
    with pytest.raises(SavepointNotFoundError, match=r"no _manifest\); the bucket \(container\) does not exist \[file") \
            as failure:
        Savepoint.open(location)
    assert failure.value.path == location
    with pytest.raises(StorageError, match=r"the bucket \(container\) does not exist"):
        write_seeds(location, inline_bytes=0)
    assert main(["inspect", location]) == SavepointNotFoundError.exit_code
    assert "bucket (container) does not exist" in capsys.readouterr().err
    with pytest.raises(SavepointNotFoundError, match=r"no _manifest\) \[file"):  # a bucket that exists: no such hint
        Savepoint.open(f"{store.prefix}/nothing-here")


@pytest.mark.parametrize("store", ["az"], indirect=True)  # moto's S3 server accepts any credentials
def test_azure_credentials_that_are_wrong_or_missing_are_storage_errors(store, monkeypatch):
    location = f"{store.prefix}/sp"
    write_seeds(location, inline_bytes=0)
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_KEY", "d3Jvbmcga2V5")  # base64 of "wrong key"
    with pytest.raises(StorageError, match="403") as failure:
        Savepoint.open(location)
    assert failure.value.path == f"{location}/_manifest"
    for name in ("AZURE_STORAGE_ACCOUNT_KEY", "AZURE_STORAGE_ACCOUNT_NAME", "AZURE_STORAGE_USE_EMULATOR"):
        monkeypatch.delenv(name)
    with pytest.raises(StorageError, match="cannot configure the store.*Account must be specified"):
        Savepoint.open(location)


def test_pyarrow_filesystems_are_not_used_for_object_stores():
    """pyarrow's S3 and GCS clients cannot write conditionally: they must not commit there."""
    with pytest.raises(InvalidArgumentError, match="ObjectStoreIO"):
        ArrowIO("s3://bucket/sp")


def test_a_store_without_credentials_is_named_as_such():
    """Without credentials obstore asks the instance metadata service and reports only that request."""
    from pyref.storage.object_store import _message

    exc = RuntimeError("Generic S3 error: Error performing PUT http://169.254.169.254/latest/api/token in 1.1ms - "
                       "Server returned non-2xx status code: 403 Forbidden\nDebug dump ...")
    assert "no credentials in the environment" in _message(exc) and "Debug dump" not in _message(exc)
    assert _message(RuntimeError("Generic S3 error: 404 Not Found")) == "Generic S3 error: 404 Not Found"


def test_a_plain_http_endpoint_not_allowed_is_named_as_such(s3_prefix, monkeypatch):
    """obstore refuses http:// unless AWS_ALLOW_HTTP is set, and says only "builder error"."""
    monkeypatch.delenv("AWS_ALLOW_HTTP")
    with pytest.raises(StorageError, match=r"builder error \(.*AWS_ALLOW_HTTP=true for an http:// S3 endpoint\)"):
        Savepoint.open(s3_prefix + "/sp")
