"""Full reads in storage order (scan_batches of keyed state, timers, list and broadcast
state): few large requests, the same entries as the state-order reads, every chunk still
CRC-checked."""

from __future__ import annotations

import pathlib
import shutil

import numpy as np
import pyarrow as pa
import pytest

from pyref import ConcurrentWriteError, CorruptSavepointError, Savepoint, SavepointWriter
from pyref.io import MANIFEST_NAME
from pyref.manifest import DATA_FILE_MAGIC, decode_manifest, encode_manifest
from pyref.reader import SCAN_SPAN_BYTES
from pyref.serializers import Bytes, Int64, String


def write_two_states(location, rng_seed: int = 3, **options) -> None:
    """Two keyed states whose chunks share data files (so a state's chunks have gaps)."""
    rng = np.random.default_rng(rng_seed)
    with SavepointWriter(location, codec="none", chunk_bytes=64 << 10, buffer_bytes=256 << 10, inline_bytes=0,
                         **options) as w:
        op = w.add_operator("op", parallelism=2, max_parallelism=32, key_serializer=Int64())
        a, b = op.keyed_state("a", Bytes()), op.keyed_state("b", Int64())
        for start in range(0, 4000, 500):
            keys = np.arange(start, start + 500)
            a.add(keys, [rng.bytes(300) for _ in keys])
            b.add(keys, keys * 2)


def sorted_rows(table: pa.Table) -> list:
    return sorted(zip(*(table[c].to_pylist() for c in table.column_names)), key=repr)


@pytest.mark.parametrize("state", ["a", "b"])
def test_scan_reads_the_same_entries_as_to_arrow(tmp_path, state):
    write_two_states(tmp_path / "sp")
    view = Savepoint.open(tmp_path / "sp").operator("op").keyed_state(state)
    scanned = pa.Table.from_batches(list(view.scan_batches()))
    assert sorted_rows(scanned) == sorted_rows(view.to_arrow())


def test_scan_checks_every_chunk(tmp_path):
    write_two_states(tmp_path / "sp")
    sp = Savepoint.open(tmp_path / "sp")
    chunk = sp.operator("op").keyed_state("a").proto.chunks[5]
    path = tmp_path / "sp" / sp.manifest.data_files[chunk.range.file].path
    data = bytearray(path.read_bytes())
    data[chunk.range.offset + 7] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptSavepointError, match="CRC32C") as failure:
        list(Savepoint.open(tmp_path / "sp").operator("op").keyed_state("a").scan_batches())
    assert failure.value.byte_range == (chunk.range.offset, chunk.range.offset + chunk.range.length)


def test_a_scan_of_a_replaced_savepoint_says_so(tmp_path):
    write_two_states(tmp_path / "sp")
    view = Savepoint.open(tmp_path / "sp").operator("op").keyed_state("a")
    write_two_states(tmp_path / "sp", rng_seed=4, overwrite=True)  # deletes the files the view refers to
    with pytest.raises(ConcurrentWriteError, match="was replaced .* while reading"):
        list(view.scan_batches())


def test_a_scan_on_s3_fetches_each_file_in_few_requests_and_no_extra_byte(s3_prefix, s3_proxy):
    location = f"{s3_prefix}/sp"
    write_two_states(location)
    view = Savepoint.open(location).operator("op").keyed_state("a")
    with s3_proxy.counting() as exchanges:
        rows = sum(b.num_rows for b in view.scan_batches())
    assert rows == 4000
    gets = [e for e in exchanges if e.method == "GET" and "/data/" in e.path]
    stored = sum(c.range.length for c in view.proto.chunks)
    files = {c.range.file for c in view.proto.chunks}
    # The chunks' bytes and each file's 8-byte magic, which every read checks (spec/format.md §6.3):
    # fetched with the first chunk where that starts at offset 8, so no request of its own.
    assert sum(e.body_bytes for e in gets) == stored + len(DATA_FILE_MAGIC) * len(files)
    # Runs of adjacent chunks of "a" between chunks of "b": far fewer requests than chunks.
    assert len(gets) < len(view.proto.chunks) / 3 and stored < SCAN_SPAN_BYTES


GOLDEN_1_2 = pathlib.Path(__file__).resolve().parent.parent / "compat_tests" / "golden" / "1.2"


@pytest.fixture(params=["windowed-job", "windowed-job-rescaled"])
def windowed_job(request, tmp_path):
    """Every 1.2 part of a windowed job (namespaced counts, TTL state, window timers,
    broadcast rules, coordinator state) in zstd chunks of data files: as written, and
    rescaled 3 -> 2 as a shallow savepoint over its base."""
    shutil.copytree(GOLDEN_1_2 / request.param, tmp_path / "case")
    return Savepoint.open(tmp_path / "case" / "savepoint")


def test_scans_serve_every_1_2_part(windowed_job):
    op = windowed_job.operator("window-counter")
    for name in op.keyed_state_names:  # the namespace and TTL columns too
        view = op.keyed_state(name)
        scanned = pa.Table.from_batches(list(view.scan_batches()))
        assert scanned.schema == view.to_arrow().schema
        assert sorted_rows(scanned) == sorted_rows(view.to_arrow())
    (timers,) = op.timer_services
    assert sorted_rows(pa.Table.from_batches(list(timers.scan_batches()))) == sorted_rows(timers.to_arrow())
    rules = op.broadcast_state("rules")
    maps: dict[int, dict] = {}
    for batch in rules.scan_batches():
        for subtask, key, value in zip(*(batch[c].to_pylist() for c in ("subtask", "key", "value"))):
            maps.setdefault(subtask, {})[key] = value
    assert [maps[i] for i in range(rules.partition_count)] == list(rules.partitions())
    offsets = windowed_job.operator("source").list_state("offsets")
    scanned = pa.Table.from_batches(list(offsets.scan_batches())).sort_by([("subtask", "ascending"),
                                                                           ("index", "ascending")])
    assert [scanned.filter(pa.compute.equal(scanned["subtask"], i))["value"].to_pylist()
            for i in range(offsets.partition_count)] == [list(offsets.partition(i)) for i in
                                                         range(offsets.partition_count)]


def test_a_broadcast_scan_reads_a_shared_map_once(windowed_job):
    rules = windowed_job.operator("window-counter").broadcast_state("rules")
    store = windowed_job.store
    before = store.bytes_read
    rows = sum(b.num_rows for b in rules.scan_batches())
    assert rows == sum(rules.element_counts())
    referenced = {r.chunk for p in rules.proto.partitions for r in p.ranges}
    assert store.bytes_read - before == sum(rules.proto.chunks[c].range.length for c in referenced
                                            if rules.proto.chunks[c].WhichOneof("location") == "range")


def test_a_broadcast_scan_refuses_a_repeated_key_at_its_end(tmp_path):
    """Rule B5 over a scan: the keys of each distinct partition are checked once all are read."""
    with SavepointWriter(tmp_path / "sp") as w:
        rules = w.add_operator("op", parallelism=2).broadcast_state("rules", String(), Int64())
        rules.add(0, ["a", "b"], [1, 2])
        rules.add(1, ["b", "c"], [3, 4])
    manifest, _ = decode_manifest((tmp_path / "sp" / MANIFEST_NAME).read_bytes(), path="m")
    partitions = manifest.operators[0].broadcast_states[0].partitions
    partitions[0].ranges.extend(partitions[1].ranges)  # subtask 0's map now holds "b" twice
    (tmp_path / "sp" / MANIFEST_NAME).write_bytes(encode_manifest(manifest))
    view = Savepoint.open(tmp_path / "sp").operator("op").broadcast_state("rules")
    with pytest.raises(CorruptSavepointError, match="repeats the key"):
        list(view.scan_batches())
