"""verify passes every valid savepoint: chunks no range refers to and rows no range selects
are no state (spec/format.md §5.3), so damage there is no error for verify either."""

from __future__ import annotations

import pathlib
import shutil

import pytest

from pyref import Savepoint
from pyref._proto.savepoint.v1 import manifest_pb2 as pb
from pyref.checksum import crc32c
from pyref.inspection import verify
from pyref.io import LocalIO
from pyref.manifest import decode_manifest, encode_manifest

CORPUS = pathlib.Path(__file__).resolve().parent.parent / "compat_tests"
VALID_CASES = sorted(p.parent for corpus in ("golden", "forward") for p in (CORPUS / corpus).glob("**/savepoint")
                     if (p / "_manifest").is_file())


@pytest.mark.parametrize("case", VALID_CASES, ids=lambda p: str(p.relative_to(CORPUS)))
def test_every_valid_corpus_savepoint_verifies_clean(case):
    location = case / "savepoint"
    store = case / "store.json"
    sp = Savepoint.open(LocalIO(str(location), store_root=str(case)) if store.is_file() else location)
    report = verify(sp)
    assert report.errors == []


def _chunk(rows: list[bytes], columns: int) -> pb.Chunk:
    """An inline NONE chunk of ``rows`` in each of ``columns`` columns (spec/format.md §7)."""
    header = len(rows).to_bytes(4, "little") + columns.to_bytes(4, "little")
    offsets = [0]
    for cell in rows:
        offsets.append(offsets[-1] + len(cell))
    column = b"".join(o.to_bytes(4, "little") for o in offsets)
    payload = header + column * columns + b"".join(rows) * columns
    return pb.Chunk(row_count=len(rows), inline_data=payload, raw_length=len(payload), crc32c=crc32c(payload))


def test_unreferenced_broadcast_chunks_are_skipped_and_rule_b5_still_checked(tmp_path):
    """A damaged broadcast chunk no range refers to is no error; a partition that repeats a
    key (rule B5, §7.10) over the chunks ranges do refer to still is."""
    shutil.copytree(CORPUS / "golden" / "1.2" / "broadcast-state" / "savepoint", tmp_path / "sp")
    path = tmp_path / "sp" / "_manifest"
    manifest, version = decode_manifest(path.read_bytes(), path=str(path))
    state = next(bs for op in manifest.operators for bs in op.broadcast_states)
    damaged = state.chunks.add()
    damaged.CopyFrom(_chunk([b"k", b"k"], 2))
    damaged.crc32c ^= 1
    path.write_bytes(encode_manifest(manifest, version.minor))
    report = verify(Savepoint.open(tmp_path / "sp"))
    assert report.errors == []
    assert any("1 chunks no range refers to" in w for w in report.warnings)

    damaged.CopyFrom(_chunk([b"k", b"k"], 2))  # now referenced by a partition, with a repeated key
    state.partitions[0].ranges.add(chunk=len(state.chunks) - 1, first=0, count=2)
    path.write_bytes(encode_manifest(manifest, version.minor))
    assert any("partition 0" in e for e in verify(Savepoint.open(tmp_path / "sp")).errors)


@pytest.mark.parametrize("content, ok", [(b"", True), (b"\x89SV", False), (b"\x89SVD\r\n\x1a\n", True)])
def test_a_listed_data_file_no_chunk_uses_is_empty_or_starts_with_the_magic(tmp_path, content, ok):
    """spec/format.md §6.1: an unused data file may be empty (size 0, no magic)."""
    shutil.copytree(CORPUS / "golden" / "1.0" / "keyed-value" / "savepoint", tmp_path / "sp")
    path = tmp_path / "sp" / "_manifest"
    manifest, version = decode_manifest(path.read_bytes(), path=str(path))
    manifest.data_files.add(path="data/unused.svd", size=len(content))
    (tmp_path / "sp" / "data").mkdir(exist_ok=True)
    (tmp_path / "sp" / "data" / "unused.svd").write_bytes(content)
    path.write_bytes(encode_manifest(manifest, version.minor))
    assert verify(Savepoint.open(tmp_path / "sp")).ok is ok
