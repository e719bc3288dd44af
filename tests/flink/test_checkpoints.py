"""Real Flink retained checkpoints and native-format savepoints (tests/flink/data/checkpoints,
taken with ``python -m compat_tests.flink.checkpoints``) read without a JVM.

* HashMap backend checkpoints (Flink 2.3.0: windows and their timers; 1.20.3: every keyed kind,
  TTL, a POJO, timers of both domains; state inlined in ``_metadata`` and, compressed, in files)
  are in the heap backend's own layout;
* Flink 1.14 and 1.15 RocksDB full checkpoints are in the savepoint format;
* RocksDB checkpoints of 1.16 and later and native-format savepoints hold RocksDB's SST files:
  full checkpoints of 1.16.3 and 1.20.3 (files inline in ``_metadata``), an incremental 2.3.0
  checkpoint of state overwritten, deleted and appended to over five checkpoints (its files from
  several checkpoints in ``shared/``), full 2.3.0 checkpoints of zstd and LZ4 compressed blocks,
  native savepoints of every keyed kind, TTL and timers of 1.20.3 (crc32c checksums) and 2.3.0 (XXH3),
  and incremental checkpoints of 1.20.3 and 2.3.0 taken right after Flink restored the churn
  checkpoint at parallelism 3 (files holding other subtasks' key groups and the range deletions
  that clip them), and the same restored with ``use-ingest-db-restore-mode`` (2.3.0: the
  subtask of two old subtasks' key groups imports both one's files, their sequence numbers
  overlapping; 1.20.3: the option is inert);
* ForSt (Flink 2.3.0's ``state.backend.type: forst``) writes RocksDB's files with a partitioned
  index: a native savepoint of every keyed kind and an incremental checkpoint of the churn job
  through the classic state API, and an incremental checkpoint of the async state API (its DB
  files in ``shared/<operator's directory>/db/``, its state meta info ``KEY_VALUE_V2``);
* RocksDB keeping its timers on the heap writes them as raw keyed state (incremental checkpoints
  of the windows job on 2.3.0 and of keyed-kinds on 1.20.3), a canonical savepoint of it as
  managed timer queues;
* the changelog state backend's checkpoints (1.20.3 and 2.3.0, over HashMap and RocksDB) hold its
  last materialized snapshot (heap layout, RocksDB SST files; none before the first) and the changes
  made since, in DSTL files (Snappy-compressed too) or in ``_metadata``, applied as Flink's restore does
  (session windows' merged namespaces too);
* checkpoints taken with file merging (1.20.3 and 2.3.0: HashMap of list, union, broadcast and every
  keyed kind; incremental RocksDB) hold every stream as a segment of a merged file in ``taskowned/``
  or ``shared/``;

all read exactly as the truth the job wrote at that checkpoint, verify, import and export as a
canonical savepoint that reads as the same truth.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import pathlib
import re
import resource
from collections.abc import Iterator

import pyarrow as pa
import pytest

from pyref.errors import CorruptSavepointError, StorageError, UnsupportedFormatError
from pyref.flink import FlinkSavepoint, export_savepoint, import_flink
from pyref.flink.changelog import CHANGELOG
from pyref.flink.handles import IncrementalHandle, checkpoint_sibling
from pyref.flink.heap import HEAP, SAVEPOINT_FORMAT, StateDecoder, keyed_layout
from pyref.flink.composite import split_keys
from pyref.flink.datainput import DataInput
from pyref.flink.inspection import describe_flink, verify_flink
from pyref.flink.keyed import KeyedBackendMeta
from pyref.flink.meta_info import StateMetaInfo
from pyref.flink.rocksdb.native import ROCKSDB_NATIVE, live_rows, sst_files
from pyref.flink.rocksdb.sst import SstFile, open_sst
from pyref.flink.savepoint import _prefix_bytes
from pyref.flink.serializers import FlinkType
from pyref.flink.values import codec_for

from compat_tests.flink.checkpoints import committed_snapshot
from compat_tests.flink.imports import UNSPLITTABLE, ttl_configs
from tests.flink.test_corpus import assert_reads_as_truth

DATA = pathlib.Path(__file__).resolve().parent / "data" / "checkpoints"
#: Readable checkpoints and the layout of their keyed state.
READABLE = {"2.3.0-hashmap-windows": HEAP, "1.20.3-hashmap-heap-kinds": HEAP, "1.20.3-hashmap-seeds": HEAP,
            "1.20.3-hashmap-seeds-compressed": HEAP, "1.14.6-rocksdb-full-seeds": SAVEPOINT_FORMAT,
            "1.15.4-rocksdb-full-seeds": SAVEPOINT_FORMAT, "1.16.3-rocksdb-full-seeds": ROCKSDB_NATIVE,
            "1.20.3-rocksdb-full-seeds": ROCKSDB_NATIVE, "2.3.0-rocksdb-incremental-churn": ROCKSDB_NATIVE,
            "2.3.0-rocksdb-full-seeds-zstd": ROCKSDB_NATIVE, "2.3.0-rocksdb-full-seeds-lz4": ROCKSDB_NATIVE,
            "1.20.3-rocksdb-native-savepoint-keyed-kinds": ROCKSDB_NATIVE,
            "2.3.0-rocksdb-native-savepoint-keyed-kinds": ROCKSDB_NATIVE,
            "1.20.3-rocksdb-incremental-churn-rescaled-3": ROCKSDB_NATIVE,
            "2.3.0-rocksdb-incremental-churn-rescaled-3": ROCKSDB_NATIVE,
            "2.3.0-rocksdb-incremental-windows-heap-timers": ROCKSDB_NATIVE,
            "1.20.3-rocksdb-incremental-keyed-kinds-heap-timers": ROCKSDB_NATIVE,
            "2.3.0-rocksdb-canonical-savepoint-windows-heap-timers": SAVEPOINT_FORMAT,
            "1.20.3-rocksdb-incremental-churn-rescaled-3-ingest": ROCKSDB_NATIVE,
            "2.3.0-rocksdb-incremental-churn-rescaled-3-ingest": ROCKSDB_NATIVE,
            "2.3.0-hashmap-changelog-heap-kinds-materialized": CHANGELOG,
            "1.20.3-hashmap-changelog-memory-heap-kinds": CHANGELOG,
            "2.3.0-hashmap-changelog-churn-materialized-compressed": CHANGELOG,
            "2.3.0-hashmap-changelog-windows-materialized": CHANGELOG,
            "2.3.0-rocksdb-changelog-keyed-kinds-materialized": CHANGELOG,
            "1.20.3-rocksdb-changelog-keyed-kinds-materialized": CHANGELOG,
            "1.20.3-rocksdb-changelog-churn-materialized": CHANGELOG,
            "2.3.0-hashmap-changelog-sessions": CHANGELOG,
            # ForSt: RocksDB's layout, SST files of a partitioned index; the async state API's DB files in
            # shared/<operator's directory>/db/ and its KEY_VALUE_V2 meta info.
            "2.3.0-forst-native-savepoint-keyed-kinds": ROCKSDB_NATIVE,
            "2.3.0-forst-incremental-churn": ROCKSDB_NATIVE,
            "2.3.0-forst-incremental-async-state": ROCKSDB_NATIVE,
            # File merging: every stream a segment of a merged file in taskowned/ or (RocksDB's files) shared/.
            **{f"{version}-{case}": layout for version in ("1.20.3", "2.3.0") for case, layout in (
                ("hashmap-file-merging-seeds", HEAP), ("hashmap-file-merging-heap-kinds", HEAP),
                ("hashmap-file-merging-operator-state", HEAP),
                ("rocksdb-incremental-file-merging-churn", ROCKSDB_NATIVE))}}
# Key groups 0..42, 43..85, 86..127 from 0..63 and 64..127: each clipped with range deletions of the key
# groups it holds files of but not in its range.
_COPIED = [set(range(43, 64)), set(range(86, 128)), set(range(64, 86))]
#: Rescaled checkpoints and the key groups each new subtask's range deletions cover.
RESCALED = {"1.20.3-rocksdb-incremental-churn-rescaled-3": _COPIED,
            "2.3.0-rocksdb-incremental-churn-rescaled-3": _COPIED,
            # use-ingest-db-restore-mode: 1.20.3 ignores it; 2.3.0's middle subtask imports both old subtasks.
            "1.20.3-rocksdb-incremental-churn-rescaled-3-ingest": _COPIED,
            "2.3.0-rocksdb-incremental-churn-rescaled-3-ingest": [_COPIED[0], set(range(43)) | set(range(86, 128)),
                                                                   _COPIED[2]]}


def truth(case: str) -> dict:
    return json.loads(gzip.decompress((DATA / case / "truth.json.gz").read_bytes()))


def snapshot(case: str, tmp_path: pathlib.Path) -> pathlib.Path:
    """The case's checkpoint directory, or its savepoint or checkpoint (tarred) unpacked."""
    return committed_snapshot(DATA / case, tmp_path)


@pytest.mark.parametrize("case", sorted(READABLE))
def test_checkpoint_reads_as_its_truth(case: str, tmp_path: pathlib.Path) -> None:
    assert_reads_as_truth(snapshot(case, tmp_path), truth(case))


@pytest.mark.parametrize("case", sorted(READABLE))
def test_keyed_layout_is_told_from_the_bytes(case: str, tmp_path: pathlib.Path) -> None:
    with FlinkSavepoint.open(snapshot(case, tmp_path)) as sp:
        layouts = {op.keyed_layout(s.index) for op in sp.operators for s in op.state.subtasks
                   if s.managed_keyed_state is not None}
        described = {op["keyed_state_layout"] for op in describe_flink(sp)["operators"] if op["key_type"]}
    assert layouts == described == {READABLE[case]}


@pytest.mark.parametrize("case", sorted(READABLE))
def test_checkpoint_verifies_and_exports_as_a_canonical_savepoint(case: str, tmp_path: pathlib.Path) -> None:
    expected = truth(case)
    source = snapshot(case, tmp_path)
    with FlinkSavepoint.open(source, uids=list(expected["operators"])) as sp:
        report = verify_flink(sp)
        assert report.ok and report.values > 0, report.to_dict()
        # a checkpoint, not a savepoint; or a savepoint of the format its case names
        assert sp.metadata.snapshot_format == next((f.upper() for f in ("native", "canonical")
                                                    if f"{f}-savepoint" in case), None)
    skipped = UNSPLITTABLE.get(expected["job"], [])  # a LIST of Kryo elements: no import splits it
    import_flink(source, tmp_path / "imported", uids=list(expected["operators"]), ttl=ttl_configs(expected),
                 skip_states=skipped)
    for state in skipped:
        uid, name = state.split("/")
        del expected["operators"][uid]["keyed_state"][name]
    export_savepoint(tmp_path / "imported", tmp_path / "flink", flink_version=expected["flink_version"])
    with FlinkSavepoint.open(tmp_path / "flink") as exported:
        assert exported.metadata.snapshot_format == ("CANONICAL" if exported.version >= 4 else None)  # v3: unsaid
        handles = [s.managed_keyed_state for op in exported.operators for s in op.state.subtasks
                   if s.managed_keyed_state is not None]
        assert handles and all(h.savepoint for h in handles)
        expected["checkpoint_id"] = exported.checkpoint_id
    assert_reads_as_truth(tmp_path / "flink", expected)


def test_a_restore_plan_spreads_rocksdb_files_over_their_key_groups() -> None:
    with FlinkSavepoint.open(DATA / "2.3.0-rocksdb-incremental-churn" / "checkpoint", uids=["churn"]) as sp:
        churn = sp.restore_plan(3).summary().operators[0]
        stored = sum(stream.size for s in sp.operator("churn").state.subtasks
                     for _, stream in sst_files(s.managed_keyed_state))
    assert churn.operator_id == "churn" and sum(s.planned_bytes for s in churn.subtasks) == stored > 0


def _families(sp: FlinkSavepoint, handle: IncrementalHandle) -> dict[str, list[SstFile]]:
    """The handle's SST files by column family."""
    families: dict[str, list[SstFile]] = {}
    for _, stream in sst_files(handle):
        buffer, start, end, name = sp.store.open(stream)
        sst = open_sst(memoryview(buffer)[start:end], name)
        families.setdefault(sst.column_family, []).append(sst)
    return families


@pytest.mark.parametrize("case", sorted(c for c, layout in READABLE.items() if layout == ROCKSDB_NATIVE))
def test_key_groups_resolved_as_columns_read_as_the_streams_merge(case: str, tmp_path: pathlib.Path) -> None:
    """Every column family of every handle, within its key groups and within all (the groups a
    rescaled subtask gave up: range deletions), reads the same a key group at a time as merged
    entry by entry, overwrites, deletions and appends across files included."""
    with FlinkSavepoint.open(snapshot(case, tmp_path)) as sp:
        for op in sp.operators:
            for sub in op.state.subtasks:
                handle = sub.managed_keyed_state
                if not isinstance(handle, IncrementalHandle):
                    continue
                prefix = _prefix_bytes(op.max_parallelism)
                for family, files in _families(sp, handle).items():
                    for groups in (handle.key_groups, range(op.max_parallelism)):
                        by_group = list(live_rows(files, groups, prefix, case))
                        assert by_group == list(live_rows(files, groups, prefix, case, by_group=False)), family


@pytest.mark.parametrize("case", sorted(RESCALED))
def test_after_a_rescale_range_deletions_alone_hide_the_key_groups_a_subtask_gave_up(case: str,
                                                                                      tmp_path: pathlib.Path) -> None:
    """Flink built each new subtask's RocksDB from old subtasks' files (the one whose key groups
    overlap most, or with use-ingest-db-restore-mode every one whose files it can import) and
    clipped it with ``deleteRange``: the checkpoint right after holds those files (keys of other
    key groups) and files with the range deletions. Read as if the handle held every key group,
    the range deletions alone still hide every key outside the subtask's range."""
    with FlinkSavepoint.open(snapshot(case, tmp_path), uids=["churn"]) as sp:
        handles = [s.managed_keyed_state for s in sp.operator("churn").state.subtasks]
        for handle, expected in zip(handles, RESCALED[case], strict=True):
            families = _families(sp, handle)
            files = [f for fs in families.values() for f in fs]
            outside = {e[0][0] for f in files for e in f.entries()} - set(handle.key_groups)
            deleted = {g for f in files for begin, stop, _ in f.range_deletions for g in range(begin[0], stop[0])}
            assert deleted == expected and outside and outside <= deleted
            for family, fs in families.items():
                assert {g for g, _, _ in live_rows(fs, range(128), 1, case)} <= set(handle.key_groups), family


def _imported_halves(case: str, tmp_path: pathlib.Path) -> dict[int, list[tuple[int, int]]]:
    """Of the churn's middle subtask after the restore 2 -> 3 (key groups 43..85), the (lowest,
    highest) sequence of each file older than its range deletions, by the old subtask whose key
    groups it holds (0: 0..63, 1: 64..127); and -1: every later entry's and range deletion's."""
    with FlinkSavepoint.open(snapshot(case, tmp_path), uids=["churn"]) as sp:
        handle = sp.operator("churn").state.subtasks[1].managed_keyed_state
        assert isinstance(handle, IncrementalHandle) and handle.key_groups == range(43, 86)
        files = [f for fs in _families(sp, handle).values() for f in fs]
    clip = min(seq for f in files for _, _, seq in f.range_deletions)
    halves: dict[int, list[tuple[int, int]]] = {-1: [(clip, clip)]}
    for f in files:
        entries = list(f.entries())
        sequences = [seq for _, seq, _, _ in entries]
        if max(sequences) > clip:
            halves[-1].append((min(sequences), max(sequences)))
            continue
        olds = {key[0] // 64 for key, _, _, _ in entries}
        assert len(olds) == 1 and not f.range_deletions, f.name  # a file of one old subtask's DB
        halves.setdefault(olds.pop(), []).append((min(sequences), max(sequences)))
    return halves


def test_use_ingest_db_restore_mode_imports_files_that_keep_their_sequence_numbers(tmp_path: pathlib.Path) -> None:
    """Flink 2.3.0 with ``use-ingest-db-restore-mode`` builds the middle subtask by importing both
    old subtasks' column families (RocksDB's CreateColumnFamilyWithImport): their files keep the
    sequence numbers of the database that wrote them, so the two sets overlap, but their key
    groups are disjoint (Flink imports a handle only if its files hold its key groups alone), and
    RocksDB moves its sequence past them: the clip and every later write are newer. Merged by
    sequence as any files, they read as the truth (test_checkpoint_reads_as_its_truth)."""
    halves = _imported_halves("2.3.0-rocksdb-incremental-churn-rescaled-3-ingest", tmp_path)
    imported = [seq for old in (0, 1) for span in halves[old] for seq in span]
    assert halves[0] and halves[1] and max(imported) < min(low for low, _ in halves[-1])
    top = {old: max(high for _, high in halves[old]) for old in (0, 1)}
    low = {old: min(lo for lo, _ in halves[old] if lo) for old in (0, 1)}
    assert low[1] <= top[0] and low[0] <= top[1]  # the two databases' numbers overlap


def test_flink_1_20_ignores_use_ingest_db_restore_mode(tmp_path: pathlib.Path) -> None:
    """1.20.3 has the option but its restore never imports (the field is fixed false): the middle
    subtask starts from old subtask 1's files alone and copies old subtask 0's keys as new writes."""
    halves = _imported_halves("1.20.3-rocksdb-incremental-churn-rescaled-3-ingest", tmp_path)
    assert halves[1] and 0 not in halves


def test_an_incremental_checkpoint_without_its_shared_files_names_the_missing_one() -> None:
    """The 2.3.0 seeds checkpoint was kept without ``../shared``: its keyed state names the file
    it lacks, its operator state still reads."""
    case = "2.3.0-rocksdb-incremental-seeds"
    expected = truth(case)
    with FlinkSavepoint.open(DATA / case / "checkpoint", uids=list(expected["operators"])) as sp:
        counter = sp.operator("url-counter")
        assert counter.keyed_layout(0) == ROCKSDB_NATIVE
        beside = re.escape(str((DATA / case / "shared").resolve()))
        with pytest.raises(CorruptSavepointError, match=r"state file '.*/shared/[0-9a-f-]+' \(a checkpoint's shared "
                           rf"state, beside its chk-N directory\) does not exist; looked for in {beside}: copy the "
                           r"job's shared/ directory beside the chk-N directory"):
            counter.keyed_state("count")
        offsets = sp.operator("kafka-source").list_state("offsets")
        assert [offsets.partition(i) for i in range(2)] == expected["operators"]["kafka-source"]["operator_state"][
            "offsets"]["subtasks"]


# -- what the bytes cannot say, and state the heap layout cannot delimit ----------------------

_STRING = FlinkType("string", "", 0, b"")
_VOID = FlinkType("void-namespace", "", 0, b"", length=1)


def _value_state(name: str, value: FlinkType) -> StateMetaInfo:
    return StateMetaInfo(name, "KEY_VALUE", {"KEYED_STATE_TYPE": "VALUE"},
                         {"VALUE_SERIALIZER": value, "NAMESPACE_SERIALIZER": _VOID})


def test_bytes_fitting_both_layouts_are_refused_not_guessed() -> None:
    meta = KeyedBackendMeta(False, _STRING, [_value_state("a", _STRING), _value_state("b", _STRING)], 0)
    # Key group 0 alone: int 0 then state id 1 (heap), or state id 0, key length 1, key 0x00 (savepoint format).
    stream = bytes(4) + b"\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00"
    with pytest.raises(UnsupportedFormatError, match="fit both the heap backend's layout and the savepoint format"):
        keyed_layout(stream, 0, len(stream), range(0, 1), (4,), meta, 1, "stream")
    assert keyed_layout(stream, 0, len(stream), range(0, 2), (4, 0), meta, 1, "stream") == SAVEPOINT_FORMAT
    with pytest.raises(CorruptSavepointError, match="neither"):
        keyed_layout(stream, 0, len(stream), range(5, 6), (4,), meta, 1, "stream")


def test_heap_values_without_a_stored_length_are_refused_by_name() -> None:
    kryo = FlinkType("kryo", "", 0, b"", type_name="org.example.Blob")
    decoder = StateDecoder(_value_state("blob", kryo), codec_for(_STRING), 1)
    entry = b"\x00\x00\x00\x01" + b"\x00" + b"\x02k" + b"\x01\x02\x03"  # count 1: void namespace, key "k", Kryo bytes
    with pytest.raises(UnsupportedFormatError, match="'blob' .* kryo:org.example.Blob values.*without their length"):
        decoder.read(DataInput(entry), 0, [], [])


def test_heap_keys_of_two_variable_sized_parts_carry_their_lengths() -> None:
    """Key and namespace both variable-sized: each is followed by its length, as RocksDB composes them."""
    info = StateMetaInfo("s", "KEY_VALUE", {"KEYED_STATE_TYPE": "VALUE"},
                         {"VALUE_SERIALIZER": _STRING, "NAMESPACE_SERIALIZER": _STRING})
    decoder = StateDecoder(info, codec_for(_STRING), 2)
    # count 1: namespace "ns", key "key", value "v" (StringValue: varint length + 1, then chars)
    entry = b"\x00\x00\x00\x01" + b"\x03ns" + b"\x04key" + b"\x02v"
    keys: list[bytes] = []
    values: list[bytes] = []
    decoder.read(DataInput(entry), 300, keys, values)
    assert keys == [b"\x01\x2c" + b"\x04key" + b"\x04" + b"\x03ns" + b"\x03"] and values == [b"\x02v"]
    parts = split_keys(pa.array(keys, pa.binary()), 2, _STRING, _STRING, False, "s")
    assert parts["key"].to_pylist() == [b"\x04key"] and parts["namespace"].to_pylist() == [b"\x03ns"]


def test_heap_empty_lists_and_maps_make_no_rows() -> None:
    """RocksDB stores no empty LIST or MAP; a heap entry holding one becomes no row."""
    int64 = FlinkType("int64", "", 0, b"", length=8)
    for kind, value in (("LIST", FlinkType("list", "", 0, b"", (int64,))),
                        ("MAP", FlinkType("map", "", 0, b"", (int64, int64)))):
        info = StateMetaInfo("s", "KEY_VALUE", {"KEYED_STATE_TYPE": kind},
                             {"VALUE_SERIALIZER": value, "NAMESPACE_SERIALIZER": _VOID})
        keys: list[bytes] = []
        StateDecoder(info, codec_for(_STRING), 1).read(DataInput(b"\x00\x00\x00\x01\x00\x02k" + bytes(4)), 0, keys, [])
        assert keys == [], kind


@contextlib.contextmanager
def _descriptors_left(spare: int) -> Iterator[None]:
    """The process may open only ``spare`` more file descriptors while inside."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + spare, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts open descriptors in /proc")
def test_a_native_savepoint_of_more_files_than_descriptors_reads_and_a_shortage_is_a_storage_error(
        tmp_path: pathlib.Path) -> None:
    """Every state file used to stay memory-mapped, each mapping holding a descriptor, until the
    savepoint was closed: Flink's 136 files failed with a bare OSError under a limit of 100
    (thousands of SST files under the common 1024). Small files are read, and the files kept are
    bounded; when mappings of large files do run out of descriptors, that is a StorageError."""
    case = "2.3.0-rocksdb-native-savepoint-keyed-kinds"
    path = snapshot(case, tmp_path)
    assert len(list(path.iterdir())) > 100
    with _descriptors_left(40):
        assert_reads_as_truth(path, truth(case))
    for state_file in path.iterdir():  # every file mapped: sparse, larger than the mapping threshold
        if state_file.name != "_metadata":
            os.truncate(state_file, max(state_file.stat().st_size, 2 << 20))
    with _descriptors_left(40), FlinkSavepoint.open(path) as sp, pytest.raises(StorageError, match="open files"):
        for op in sp.operators:
            list(op.keyed_subtasks())


def test_forst_sst_files_hold_a_partitioned_index_walked_to_every_data_block(tmp_path: pathlib.Path) -> None:
    """ForSt's default (state.backend.forst.memory.partitioned-index-filters) is a two-level index:
    the top-level index names index partitions, which name the data blocks; every block is found."""
    with FlinkSavepoint.open(snapshot("2.3.0-forst-incremental-churn", tmp_path), uids=["churn"]) as sp:
        for sub in sp.operator("churn").state.subtasks:
            handle = sub.managed_keyed_state
            assert isinstance(handle, IncrementalHandle)
            files = [f for fs in _families(sp, handle).values() for f in fs]
            assert files and {(f.format_version, f.checksum, f.index) for f in files} == {(5, "XXH3", "partitioned")}
            assert sum(1 for f in files for _ in f.entries()) > 0


def test_forst_async_state_reads_its_db_files_below_shared_and_no_other(tmp_path: pathlib.Path) -> None:
    """The async state API's checkpoint names ForSt's DB files where the job wrote them, in
    ``shared/<operator's directory>/db/``: resolved there beside the moved checkpoint; gone, the
    missing file is named with where it was looked for. Inspection says which states are the
    async API's (KEY_VALUE_V2 meta info)."""
    source = snapshot("2.3.0-forst-incremental-async-state", tmp_path)
    db_files = sorted(p for p in (source.parent / "shared").rglob("*/db/*") if p.is_file())
    assert db_files
    with FlinkSavepoint.open(source, uids=["async-counter"]) as sp:
        described = next(op for op in describe_flink(sp)["operators"] if op["uid"] == "async-counter")
        assert {s["name"]: s["async_state_api"] for s in described["states"]} == \
            {"count": True, "nums": True, "by-parity": True, "sum": True}
    db_files[0].unlink()
    with pytest.raises(CorruptSavepointError, match=re.escape(db_files[0].name) + ".*looked for in"):
        assert_reads_as_truth(source, truth("2.3.0-forst-incremental-async-state"))


def test_flink_2_0_async_map_state_names_no_user_key_type_and_is_refused_alone(tmp_path: pathlib.Path) -> None:
    """Flink 2.0's async state API wrote a MAP state's meta info without its user key serializer
    (2.1 added it): that state is refused by name, reading or importing; its VALUE and LIST states
    read, and import and export without it, as the job's truth."""
    case = "2.0.2-forst-incremental-async-state"
    expected, source = truth(case), snapshot(case, tmp_path)
    with FlinkSavepoint.open(source, uids=["async-counter"]) as sp:
        counter = sp.operator("async-counter")
        with pytest.raises(UnsupportedFormatError, match="written by Flink 2.0, whose state meta info names no user "
                                                         "key serializer") as err:
            counter.keyed_state("by-parity")
        assert err.value.state == "by-parity"
        assert len(list(counter.keyed_state("count").items())) == 20 and len(list(counter.keyed_state("sum").items())) == 20
    with pytest.raises(UnsupportedFormatError, match="async-counter/by-parity"):
        import_flink(source, tmp_path / "refused", uids=["async-counter"])
    import_flink(source, tmp_path / "imported", uids=["async-counter"], skip_states=["async-counter/by-parity"])
    del expected["operators"]["async-counter"]["keyed_state"]["by-parity"]
    expected["operators"] = {"async-counter": expected["operators"]["async-counter"]}
    export_savepoint(tmp_path / "imported", tmp_path / "flink", flink_version=expected["flink_version"])
    with FlinkSavepoint.open(tmp_path / "flink") as exported:
        expected["checkpoint_id"] = exported.checkpoint_id
    assert_reads_as_truth(tmp_path / "flink", expected)


@pytest.mark.parametrize(("path", "sibling"), [
    ("/ckpt/job/shared/0a1b", ("shared", "0a1b")),  # RocksDB's
    ("/ckpt/job/taskowned/0a1b", ("taskowned", "0a1b")),
    ("/ckpt/job/shared/op_X__1_2__attempt_0/db/0a1b", ("shared", "op_X__1_2__attempt_0/db/0a1b")),  # ForSt's
    ("/ckpts/shared/job/chk-5/0a1b", None),  # a checkpoint's own file under a directory named shared
    ("/ckpt/job/shared/op_X/other/0a1b", None),
    ("/ckpt/job/shared/../db/0a1b", None),  # not a safe relative path below it
    ("0a1b", None),
])
def test_a_checkpoints_shared_files_are_rocksdbs_and_forsts_paths_and_no_other(path: str,
                                                                                sibling: tuple[str, str] | None) -> None:
    assert checkpoint_sibling(path) == sibling
