"""Exhaustive damage: every single-bit flip and every truncation of every file of a
small savepoint is detected with a typed error (spec/security.md, "Checksums"), and so
is every chunk entry made to share another chunk's stored bytes (rule C6).

Detection means: opening and reading every value raises a SavepointError, or
``verify`` reports an error. Reads detect damage to every byte of every file they
read, the data-file magic (bytes 0..7 of each data file) included: readers check it
before using a file (spec/format.md §6.3), so ``verify`` is never needed here.
"""

from __future__ import annotations

import os

import pytest

from pyref import Savepoint, SavepointError
from pyref.inspection import verify
from pyref._proto.savepoint.v1 import manifest_pb2 as pb
from pyref.errors import CorruptSavepointError
from pyref.manifest import decode_manifest, encode_manifest
from reliability_helpers import data_files, read_all, write_small


def _detected(path) -> str | None:
    """How damage was detected: 'read' (typed error while reading), 'verify', or None."""
    try:
        read_all(path)
    except SavepointError:
        return "read"
    try:
        report = verify(Savepoint.open(path))
    except SavepointError:
        return "verify"
    return "verify" if report.errors else None


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    path = tmp_path_factory.mktemp("corruption") / "sp"
    write_small(path)
    files = [os.path.join(path, "_manifest"), *data_files(path)]
    assert len(files) == 2, "the scenario must have exactly one data file"
    return path, files, read_all(path)


def test_the_small_savepoint_has_raw_and_zstd_chunks_in_its_data_file(small):
    path, _, _ = small
    m = Savepoint.open(path).manifest
    chunks = [c for op in m.operators for s in [*op.list_states, *op.keyed_states] for c in s.chunks]
    assert {c.WhichOneof("location") for c in chunks} == {"range"}
    assert {c.codec for c in chunks} == {0, 1}


def test_every_bit_flip_of_every_byte_is_detected(small):
    path, files, original = small
    positions = 0
    by = {"read": 0, "verify": 0}
    missed = []
    for name in files:
        with open(name, "rb") as f:
            content = f.read()
        fd = os.open(name, os.O_RDWR)
        try:
            for offset, byte in enumerate(content):
                for bit in range(8):
                    os.pwrite(fd, bytes([byte ^ (1 << bit)]), offset)
                    how = _detected(path)
                    positions += 1
                    if how is None:
                        missed.append((os.path.basename(name), offset, bit))
                    else:
                        by[how] += 1
                    os.pwrite(fd, bytes([byte]), offset)
        finally:
            os.close(fd)
    assert read_all(path) == original
    assert not missed, f"{len(missed)} of {positions} bit flips went undetected: {missed[:20]}"
    # Every flip, the data-file magic's included, is caught by the read itself (spec/format.md §6.3).
    assert by["verify"] == 0 and by["read"] == positions
    print(f"bit flips: {positions} positions, all detected ({by})")


def test_every_truncation_of_every_file_is_detected(small):
    path, files, original = small
    positions = 0
    for name in files:
        with open(name, "rb") as f:
            content = f.read()
        try:
            for length in range(len(content)):
                os.truncate(name, length)
                assert _detected(path) == "read", f"{os.path.basename(name)} truncated to {length} bytes"
                positions += 1
        finally:
            with open(name, "wb") as f:
                f.write(content)
    assert read_all(path) == original
    print(f"truncations: {positions} positions, all detected")


def test_a_missing_data_file_or_manifest_is_detected(small):
    path, files, _ = small
    for name in files:
        with open(name, "rb") as f:
            content = f.read()
        os.unlink(name)
        try:
            with pytest.raises(SavepointError):
                read_all(path)
        finally:
            with open(name, "wb") as f:
                f.write(content)


def test_every_chunk_entry_made_to_share_another_chunks_range_is_refused(small):
    """Exhaustive, like the bit-flip campaign: for every ordered pair of chunks of a small
    savepoint with every state kind, the second made an entry over the first's stored
    bytes (checksum and all, so that only rule C6 can tell) is refused at open. A pair
    whose copy breaks another rule even over bytes of its own (a list chunk copied into
    a map state has too few columns) is skipped."""
    path, _, _ = small
    original = Savepoint.open(path).manifest

    def with_copy(i: int, j: int, own_bytes: bool) -> bytes:
        m = pb.Manifest()
        m.CopyFrom(original)
        chunks = [c for op in m.operators for s in [*op.list_states, *op.keyed_states] for c in s.chunks]
        _share_range_of(chunks[j], chunks[i])
        if own_bytes:  # the same chunk over bytes appended to the file: the control
            f = m.data_files[chunks[j].range.file]
            chunks[j].range.offset, f.size = f.size, f.size + chunks[j].range.length
        return encode_manifest(m)

    count = sum(len(s.chunks) for op in original.operators for s in [*op.list_states, *op.keyed_states])
    tested = 0
    for i in range(count):
        for j in (j for j in range(count) if j != i):
            try:
                decode_manifest(with_copy(i, j, own_bytes=True), path="x")
            except CorruptSavepointError:
                continue
            with pytest.raises(CorruptSavepointError, match="rule C6"):
                decode_manifest(with_copy(i, j, own_bytes=False), path="x")
            tested += 1
    assert tested >= 20


def _share_range_of(chunk: pb.Chunk, source: pb.Chunk) -> None:
    key_group = chunk.key_group
    chunk.CopyFrom(source)
    chunk.key_group = key_group  # chunks stay ordered by key group (K4)


def test_cells_that_do_not_decode_are_reported_with_their_state_and_file(tmp_path):
    """A value of the wrong width (bytes a valid writer never stores under the state's
    serializer) is corrupt, and the error names the state and the chunk's file, not only
    "record N", from verify and from every read."""
    from pyref import SavepointWriter
    from pyref.redistribution import DistributionMode
    from pyref.serializers import Bytes, Int64

    path = tmp_path / "sp"
    with SavepointWriter(path, inline_bytes=0) as w:
        w.add_operator("src", parallelism=1).list_state("offsets", Bytes(), DistributionMode.SPLIT_DISTRIBUTE).add(
            0, [b"\0" * 8, b"abc"])
        w.add_operator("cnt", parallelism=1, key_serializer=Bytes()).keyed_state("count", Bytes()).add(
            [b"k1", b"k2"], [b"\0" * 8, b"xyz"])
    m, _ = decode_manifest((path / "_manifest").read_bytes(), path="x")
    m.operators[0].list_states[0].element_serializer.CopyFrom(Int64().snapshot())
    m.operators[1].keyed_states[0].value_serializer.CopyFrom(Int64().snapshot())
    (path / "_manifest").write_bytes(encode_manifest(m))

    errors = verify(Savepoint.open(path)).errors
    assert len(errors) == 2
    for error, state in zip(sorted(errors), ["cnt/count", "src/offsets"]):
        assert f"state={state}" in error and "file=" in error and ".svd" in error and "bytes=" in error
    sp = Savepoint.open(path)
    reads = [lambda: sp.operator("cnt").keyed_state("count").to_arrow(),
             lambda: list(sp.operator("src").list_state("offsets").partition(0)),
             lambda: sp.operator("src").list_state("offsets").to_arrow()]
    for read, state in zip(reads, ["cnt/count", "src/offsets", "src/offsets"]):
        with pytest.raises(CorruptSavepointError, match=f"state={state}"):
            read()
