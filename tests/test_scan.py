"""Full reads in storage order (KeyedStateView.scan_batches): few large requests, the
same entries as to_arrow, every chunk still CRC-checked."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from pyref import ConcurrentWriteError, CorruptSavepointError, Savepoint, SavepointWriter
from pyref.reader import SCAN_SPAN_BYTES
from pyref.serializers import Bytes, Int64


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
    return sorted(zip(*(table[c].to_pylist() for c in table.column_names)))


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
    assert sum(e.body_bytes for e in gets) == stored
    # Runs of adjacent chunks of "a" between chunks of "b": far fewer requests than chunks.
    assert len(gets) < len(view.proto.chunks) / 3 and stored < SCAN_SPAN_BYTES
