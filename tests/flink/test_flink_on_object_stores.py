"""Flink savepoints where Flink jobs keep them, on an object store (moto's S3 server, a real
S3 API): opened, inspected, verified and imported at their URL exactly as from a local
copy, their state files only ever read from inside the savepoint's directory; and pyref
savepoints exported there, as they are to a local directory, committed by _metadata alone."""

from __future__ import annotations

import json
import pathlib

import pytest

from compat_tests.canonical import dump_savepoint
from compat_tests.flink.imports import CORPUS, import_options
from pyref import CorruptSavepointError, InvalidArgumentError, Savepoint, SavepointNotFoundError, StorageError, verify
from pyref.cli import main
from pyref.flink import FlinkSavepoint, export_savepoint
from pyref.flink.handles import RemoteHandleStore, StreamHandle
from pyref.flink.importer import import_flink
from pyref.flink.inspection import describe_flink, verify_flink
from pyref.storage import open_io
from pyref.testing import write_seeds
from pyref.testing.s3 import Fault
from tests.flink.test_checkpoints import snapshot, truth
from tests.flink.test_corpus import assert_reads_as_truth

#: A RocksDB savepoint with its state in separate files (relative handles), and a heap one
#: of an older release with windows and timers, part inline in _metadata, part in a file.
CASES = [CORPUS / "2.3.0/rocksdb/keyed-kinds", CORPUS / "1.17.2/hashmap/windows"]


def upload(directory: pathlib.Path, url: str) -> None:
    io = open_io(url)
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        out = io.create(path.relative_to(directory).as_posix())
        out.write(path.read_bytes())
        out.close()


def _without_location(info: dict) -> dict:
    return {k: v for k, v in info.items() if k != "location"}


@pytest.mark.parametrize("case", CASES, ids=lambda p: "/".join(p.parts[-3:]))
def test_a_flink_savepoint_on_s3_reads_and_imports_as_its_local_copy(case, s3_prefix, tmp_path):
    local = case / "savepoint"
    assert len(list(local.iterdir())) > 1, "the case must have state files besides _metadata"
    url = f"{s3_prefix}/flink/savepoint-1a2b3c"
    upload(local, url)
    uids = list(json.loads((case / "truth.json").read_text())["operators"])

    with FlinkSavepoint.open(url, uids=uids) as remote, FlinkSavepoint.open(local, uids=uids) as here:
        assert _without_location(describe_flink(remote)) == _without_location(describe_flink(here))
        assert verify_flink(remote).to_dict() == verify_flink(here).to_dict()
        for op in here.operators:
            for name in op.keyed_state_names:
                assert list(remote.operator(op.operator_id).keyed_state(name).items()) == \
                    list(op.keyed_state(name).items()), f"{op.name}/{name}"
    # The _metadata file names its directory too.
    with FlinkSavepoint.open(f"{url}/_metadata", uids=uids) as by_file:
        assert by_file.location == url

    import_flink(local, tmp_path / "from-local", **import_options(case))
    import_flink(url, f"{s3_prefix}/imported", **import_options(case))
    assert dump_savepoint(f"{s3_prefix}/imported", [1, 3], 2) == dump_savepoint(tmp_path / "from-local", [1, 3], 2)


def test_the_cli_inspects_verifies_and_imports_a_flink_savepoint_at_its_url(s3_prefix, capsys):
    case = CASES[0]
    url = f"{s3_prefix}/flink/sp"
    upload(case / "savepoint", url)
    assert main(["inspect", url, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["format"] == "flink" and info["location"] == url
    assert main(["verify", url, "--json"]) == 0
    capsys.readouterr()
    # The case's Kryo list state cannot be split into elements (tests/flink/test_import_corpus.py),
    # and Flink does not store the TTL of its states under TTL.
    assert main(["import-flink", url, f"{s3_prefix}/imported", "--skip-state", "pojo-keys/blobs",
                 "--ttl-default", "1d", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    imported = Savepoint.open(f"{s3_prefix}/imported")
    assert {op.operator_id for op in imported.manifest.operators} == {op["name"] for op in info["operators"]}, report
    assert verify(imported).ok


def test_state_files_on_s3_are_read_from_the_savepoint_directory_only(s3_prefix):
    url = f"{s3_prefix}/flink/sp"
    upload(CASES[0] / "savepoint", url)
    some_file = next(p.name for p in (CASES[0] / "savepoint").iterdir() if p.name != "_metadata")
    outside = open_io(f"{s3_prefix}/flink").create("secret")
    outside.write(b"not state")
    outside.close()
    store = RemoteHandleStore(open_io(url))
    data, start, end, name = store.open(StreamHandle("relative-file", some_file, 4))
    assert (start, end) == (0, 4) and bytes(data[:4]) == (CASES[0] / "savepoint" / some_file).read_bytes()[:4]
    # Flink wrote absolute URIs, under another scheme or before the savepoint was moved: the file of
    # that name in the directory.
    for moved in (f"s3p://other-bucket/old/place/{some_file}", f"s3a:{url[3:]}/{some_file}"):
        assert store.open(StreamHandle("file", moved, 4))[3] == some_file
    with pytest.raises(CorruptSavepointError, match="leaves the savepoint directory"):
        store.open(StreamHandle("relative-file", "../secret", 4))
    with pytest.raises(CorruptSavepointError, match="not in the savepoint directory"):
        store.open(StreamHandle("file", f"{s3_prefix}/flink/secret", 4))  # a file beside it is not its state
    with pytest.raises(CorruptSavepointError, match="names no file"):
        store.open(StreamHandle("file", f"{s3_prefix}/flink/..", 4))
    with pytest.raises(CorruptSavepointError, match="says 99999999 bytes"):
        store.open(StreamHandle("relative-file", some_file, 99999999))


def test_state_files_read_from_s3_are_kept_within_the_cache_bound(s3_prefix):
    """Each state file is read whole; a savepoint of many large files must not pile up in memory."""
    url = f"{s3_prefix}/flink/sp"
    local = CASES[0] / "savepoint"
    upload(local, url)
    names = sorted(p.name for p in local.iterdir() if p.name != "_metadata")[:3]
    store = RemoteHandleStore(open_io(url))
    store.cache_bytes = 1  # below any file: only the one just opened stays
    for name in [*names, names[0]]:
        data, _, _, _ = store.open(StreamHandle("relative-file", name, 4))
        assert bytes(data) == (local / name).read_bytes()
        assert list(store._files) == [name]
    store.cache_bytes = 1 << 40  # above them all: every one stays
    for name in names:
        store.open(StreamHandle("relative-file", name, 4))
    assert sorted(store._files) == names


def test_a_missing_state_file_or_metadata_on_s3_is_named(s3_prefix):
    with pytest.raises(SavepointNotFoundError, match="_metadata"):
        FlinkSavepoint.open(f"{s3_prefix}/nothing-here")
    url = f"{s3_prefix}/flink/sp"
    upload(CASES[0] / "savepoint", url)
    victim = next(p.name for p in (CASES[0] / "savepoint").iterdir() if p.name != "_metadata")
    open_io(url).delete(victim)
    with FlinkSavepoint.open(url) as sp, pytest.raises(CorruptSavepointError, match=victim):
        for op in sp.operators:
            for name in op.keyed_state_names:
                list(op.keyed_state(name).items())
    with pytest.raises(InvalidArgumentError, match="local savepoints only"):
        FlinkSavepoint.open(url, allow_external_files=True)


def test_a_retained_incremental_checkpoint_on_s3_reads_its_shared_files_from_beside_it(s3_prefix, tmp_path):
    """A RocksDB incremental checkpoint (real Flink 2.3.0 bytes, right after a rescale) uploaded as
    Flink lays it out, ``JOB/chk-N`` beside ``JOB/shared``: its handles name ``file:`` paths of the
    machine that took it; each shared file is read from ``JOB/shared``, and the checkpoint reads,
    verifies and imports as its truth."""
    case = "2.3.0-rocksdb-incremental-churn-rescaled-3"
    local = snapshot(case, tmp_path)
    expected = truth(case)
    job = f"{s3_prefix}/checkpoints/0123abcd"
    url = f"{job}/chk-{expected['checkpoint_id']}"
    upload(local, url)
    upload(local.parent / "shared", f"{job}/shared")
    assert_reads_as_truth(url, expected)
    with FlinkSavepoint.open(url, uids=list(expected["operators"])) as remote:
        assert verify_flink(remote).ok
        handles = [s.managed_keyed_state for s in remote.operator("churn").state.subtasks]
        shared = {stream.location.rsplit("/", 2)[-2] for h in handles for _, stream in h.shared if stream is not None}
        assert shared == {"shared"}
    import_flink(url, f"{s3_prefix}/imported", uids=list(expected["operators"]))
    import_flink(local, tmp_path / "from-local", uids=list(expected["operators"]))
    assert dump_savepoint(f"{s3_prefix}/imported", [1, 3], 2) == dump_savepoint(tmp_path / "from-local", [1, 3], 2)

    store = RemoteHandleStore(open_io(url))
    name = next((local.parent / "shared").iterdir()).name
    # Only the checkpoint's own job directory: its chk-N, its shared and taskowned siblings.
    assert store.open(StreamHandle("file", f"s3a://elsewhere/other-job/shared/{name}", 4))[3] == f"../shared/{name}"
    outside = open_io(f"{s3_prefix}/checkpoints/shared").create(name)  # a shared directory of another level
    outside.write(b"not state")
    outside.close()
    # Dot segments in the URI do not lead up: the base name is read from the job's own shared/.
    data, _, _, read = store.open(StreamHandle("file", f"file:/x/shared/..%2F..%2Fshared%2F{name}", 4))
    assert read == f"../shared/{name}" and bytes(data[:4]) == (local.parent / "shared" / name).read_bytes()[:4]
    for escape in ("file:/x/shared/..", f"file:/x/other/{name}"):
        with pytest.raises(CorruptSavepointError, match="names no file|not in the savepoint directory"):
            store.open(StreamHandle("file", escape, 4))
    open_io(f"{job}/shared").delete(name)
    with pytest.raises(CorruptSavepointError, match=f"state file '{name}' is not in the checkpoint's shared directory"):
        RemoteHandleStore(open_io(url)).open(StreamHandle("file", f"file:/x/shared/{name}", 4))  # none cached



def test_forst_async_state_checkpoint_on_s3_reads_its_db_files_below_shared(s3_prefix, tmp_path):
    """ForSt's async state API keeps its DB files in ``JOB/shared/<operator's directory>/db/`` and
    its checkpoint names them there: uploaded as Flink lays it out, each is read from that path below
    the job's ``shared``, and the checkpoint reads as its truth."""
    case = "2.3.0-forst-incremental-async-state"
    local, expected = snapshot(case, tmp_path), truth(case)
    job = f"{s3_prefix}/checkpoints/4567cdef"
    url = f"{job}/chk-{expected['checkpoint_id']}"
    upload(local, url)
    upload(local.parent / "shared", f"{job}/shared")
    assert_reads_as_truth(url, expected)
    db_file = next(p for p in (local.parent / "shared").rglob("*/db/*") if p.is_file())
    below = db_file.relative_to(local.parent / "shared").as_posix()
    store = RemoteHandleStore(open_io(url))
    assert store.open(StreamHandle("file", f"file:/x/shared/{below}", 4))[3] == f"../shared/{below}"
    with pytest.raises(CorruptSavepointError, match="names no file|not in the savepoint directory"):
        store.open(StreamHandle("file", f"file:/x/shared/{below.split('/')[0]}/..%2F..%2F..%2Fsecret", 4))

def test_file_merging_checkpoint_on_s3_reads_its_segments_below_shared_and_taskowned(s3_prefix, tmp_path):
    """File merging (Flink 1.20+) writes segments into files one directory below the job's ``shared``
    (a subtask's) and ``taskowned`` (a task manager's): uploaded as Flink lays them out, each segment is
    read from that path below the directory of that name beside the checkpoint."""
    case = "2.3.0-rocksdb-incremental-file-merging-churn"
    local, expected = snapshot(case, tmp_path), truth(case)
    job = f"{s3_prefix}/checkpoints/89abcdef"
    url = f"{job}/chk-{expected['checkpoint_id']}"
    upload(local, url)
    for beside in ("shared", "taskowned"):
        upload(local.parent / beside, f"{job}/{beside}")
    assert_reads_as_truth(url, expected)
    merged = next(p for p in (local.parent / "taskowned").rglob("*") if p.is_file())
    below = merged.relative_to(local.parent / "taskowned").as_posix()
    store = RemoteHandleStore(open_io(url))
    data, start, end, read = store.open(StreamHandle("segment", f"file:/x/taskowned/{below}", 3, start=1))
    assert read == f"../taskowned/{below}" and bytes(data[start:end]) == merged.read_bytes()[1:4]
    with pytest.raises(CorruptSavepointError, match="names no file|not in the savepoint directory"):
        store.open(StreamHandle("segment", f"file:/x/taskowned/{below.split('/')[0]}/..%2F..%2Fsecret", 3))


# -- pyref -> Flink, onto an object store ---------------------------------------------------


def _flink_states(location: str) -> dict:
    """Every operator and keyed state of a Flink savepoint, read back by pyref's Flink reader."""
    with FlinkSavepoint.open(location) as sp:
        states = {}
        for op in sp.operators:
            for name in op.list_state_names:
                view = op.list_state(name)
                states[op.operator_id, name] = [view.partition(i) for i in range(len(view.element_counts()))]
            for name in op.keyed_state_names:
                states[op.operator_id, name] = sorted(map(repr, op.keyed_state(name).items()))
        return states


def test_an_export_to_s3_is_the_export_to_a_local_directory(s3_prefix, tmp_path):
    source = tmp_path / "seeds"
    write_seeds(source)
    url = f"{s3_prefix}/flink/savepoint-1"
    remote = export_savepoint(source, url, flink_version="2.3.0", inline_bytes=0)
    local = export_savepoint(source, tmp_path / "flink", flink_version="2.3.0", inline_bytes=0)
    assert remote.state_files == local.state_files > 0 and remote.state_bytes == local.state_bytes
    states = _flink_states(url)
    assert states == _flink_states(str(tmp_path / "flink"))
    assert len(states) >= 2 and all(states.values())  # the offsets and the counts, neither empty
    assert len(open_io(url).list_files("")) == remote.state_files + 1  # and _metadata; nothing else


def test_an_export_over_a_flink_savepoint_on_s3_replaces_it_whole_or_not_at_all(s3_prefix, s3_proxy, tmp_path):
    source = tmp_path / "seeds"
    write_seeds(source)
    url = f"{s3_prefix}/flink/sp"
    export_savepoint(source, url, flink_version="1.20.3", inline_bytes=0)
    before = sorted(open_io(url).list_files(""))
    first = open_io(url).read_file("_metadata")
    with pytest.raises(InvalidArgumentError, match="already exists"):
        export_savepoint(source, url, flink_version="2.3.0", inline_bytes=0)
    # The store refuses the new _metadata: the old savepoint stays as it was, the new files go.
    s3_proxy.inject(Fault("PUT", r"/flink/sp/_metadata$", status=403, code="AccessDenied"))
    with pytest.raises(StorageError, match="_metadata"):
        export_savepoint(source, url, flink_version="2.3.0", inline_bytes=0, overwrite=True)
    assert sorted(open_io(url).list_files("")) == before and open_io(url).read_file("_metadata") == first
    replaced = export_savepoint(source, url, flink_version="2.3.0", inline_bytes=0, overwrite=True)
    after = open_io(url).list_files("")
    assert len(after) == replaced.state_files + 1 and not set(after) & (set(before) - {"_metadata"})
    assert _flink_states(url) == _flink_states(str(_local_export(source, tmp_path)))


def test_clean_on_s3_deletes_an_abandoned_exports_files_only(s3_prefix, tmp_path, capsys):
    """An export that never published leaves state objects on S3; pyref clean deletes those once old
    enough (no lock there: never below 13 hours), and keeps every object _metadata names."""
    import time

    from pyref.flink.writer.cleanup import is_export_directory, remove_abandoned_export_files
    from pyref.flink.writer.directory import ExportDirectory, StateStream

    source = tmp_path / "seeds"
    write_seeds(source)
    url = f"{s3_prefix}/flink/cleaned"
    export_savepoint(source, url, flink_version="2.3.0", inline_bytes=0)
    published = {name: open_io(url).read_file(name) for name in open_io(url).list_files("")}
    abandoned = ExportDirectory(url, overwrite=True)  # an export that dies before it publishes
    leftover = StateStream(abandoned.io, abandoned.file_prefix, 0)
    leftover.write(b"an abandoned export's state")
    leftover.close()
    assert is_export_directory(url)
    assert main(["clean", url, "--older-than", "1", "--json"]) == 2  # below the age rule of stores without a lock
    assert "is below 46800 s" in capsys.readouterr().out
    assert remove_abandoned_export_files(url).deleted == []  # just written: may be an export at work
    # the savepoint named by its _metadata, as Flink prints it, cleans its directory: a dry run lists the leftover
    assert main(["clean", f"{url}/_metadata", "--older-than", "13", "--dry-run", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["deleted"] == [] and [p.rsplit("/", 1)[-1] for p in report["kept_recent"]] == [leftover.name]
    cleaned = remove_abandoned_export_files(url, now=time.time() + 2 * 24 * 3600)
    assert [p.rsplit("/", 1)[-1] for p in cleaned.deleted] == [leftover.name]
    assert {name: open_io(url).read_file(name) for name in open_io(url).list_files("")} == published
    assert _flink_states(url) == _flink_states(str(_local_export(source, tmp_path)))


def test_of_two_exports_racing_for_one_s3_directory_the_later_is_refused(s3_prefix, tmp_path):
    """An export that began before another one published into the same prefix is refused by
    the conditional PUT of its _metadata (a plain PUT silently replaced the other's), and its
    abort deletes its own files only."""
    from pyref.errors import ConcurrentWriteError
    from pyref.flink.writer.directory import ExportDirectory, StateStream

    source = tmp_path / "seeds"
    write_seeds(source)
    url = f"{s3_prefix}/flink/raced"
    late = ExportDirectory(url)  # sees no savepoint there yet
    mine = StateStream(late.io, late.file_prefix, 0)
    mine.write(b"the late export's state")
    ref = mine.close()
    export_savepoint(source, url, flink_version="2.3.0", inline_bytes=0)
    published = {name: open_io(url).read_file(name) for name in open_io(url).list_files("")
                 if not name.startswith(late.file_prefix)}
    with pytest.raises(ConcurrentWriteError, match="_metadata"):
        late.commit(b"never published", {ref.name: ref.size})
    late.abort()
    assert {name: open_io(url).read_file(name) for name in open_io(url).list_files("")} == published
    assert _flink_states(url) == _flink_states(str(_local_export(source, tmp_path)))


def _local_export(source, tmp_path):
    target = tmp_path / "local-export"
    export_savepoint(source, target, flink_version="2.3.0", inline_bytes=0)
    return target
