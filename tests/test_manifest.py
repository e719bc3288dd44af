"""The manifest envelope and structural validation: bad input gets a typed error
that says what is wrong and where."""

from __future__ import annotations

import os
import struct

import pytest

from pyref import CorruptSavepointError, Savepoint, UnsupportedFormatError
from pyref._proto.savepoint.v1 import manifest_pb2 as pb
from pyref.io import LocalIO
from pyref.manifest import MAGIC, decode_manifest, encode_envelope, encode_manifest
from pyref.testing import varint


@pytest.fixture
def manifest(tmp_path):
    from pyref.testing import write_seeds

    write_seeds(tmp_path / "sp", inline_bytes=0)
    m, _ = decode_manifest((tmp_path / "sp" / "_manifest").read_bytes(), path="_manifest")
    return m


def _decode(m: pb.Manifest, minor: int = 0):
    return decode_manifest(encode_manifest(m, minor), path="sp/_manifest")


def test_envelope_layout(manifest):
    data = encode_manifest(manifest)
    assert data[:8] == MAGIC == b"\x89SVP\r\n\x1a\n"
    assert struct.unpack_from("<HHI", data, 8) == (1, 0, len(data) - 20)
    _, version = _decode(manifest)
    assert str(version) == "1.0"


def test_envelope_of_any_body_and_version_is_what_decode_checks(manifest):
    body = manifest.SerializeToString(deterministic=True)
    assert encode_envelope(body, 1, 0) == encode_manifest(manifest, 0)
    with pytest.raises(UnsupportedFormatError, match="format version 2.0"):
        decode_manifest(encode_envelope(body, 2, 0), path="x")


@pytest.mark.parametrize("n", [1, 127, 128, 300, 2**32 - 1, 2**64 - 1])
def test_testing_varint_is_protobufs_encoding(n):
    # pyref.testing.varint builds the hostile protobuf bytes of the tests.
    assert pb.Chunk(raw_length=n).SerializeToString() == varint(6 << 3) + varint(n)


def test_bad_magic(manifest):
    data = bytearray(encode_manifest(manifest))
    data[1] ^= 0xFF
    with pytest.raises(CorruptSavepointError, match="magic"):
        decode_manifest(bytes(data), path="x")


def test_newer_major_version_is_refused_with_its_number(manifest):
    data = bytearray(encode_manifest(manifest))
    struct.pack_into("<H", data, 8, 2)
    with pytest.raises(UnsupportedFormatError, match=r"format version 2\.0"):
        decode_manifest(bytes(data), path="x")


def test_newer_minor_version_reads(manifest):
    _, version = _decode(manifest, minor=7)
    assert version.minor == 7


@pytest.mark.parametrize("cut", [0, 5, 12, 19, -1])
def test_truncated_manifest(manifest, cut):
    data = encode_manifest(manifest)
    with pytest.raises(CorruptSavepointError):
        decode_manifest(data[:cut], path="x")


def test_checksum_mismatch_names_the_byte_range(manifest):
    data = bytearray(encode_manifest(manifest))
    data[30] ^= 0x01
    with pytest.raises(CorruptSavepointError, match=r"CRC32C mismatch.*bytes=0\.\.") as info:
        decode_manifest(bytes(data), path="x")
    assert info.value.path == "x"


def test_unknown_required_feature_is_refused(manifest):
    manifest.required_features.append("time-travel")
    with pytest.raises(UnsupportedFormatError, match="time-travel"):
        _decode(manifest)


def test_unknown_optional_feature_and_unknown_fields_are_ignored(manifest):
    manifest.optional_features.append("bloom-filters")
    body = manifest.SerializeToString() + b"\xa8\x06\x2a"  # field 101, varint 42: from a future writer
    future = pb.Manifest.FromString(body)
    decoded, _ = _decode(future)
    assert decoded.operators == manifest.operators


@pytest.mark.parametrize("path", ["../escape.svd", "/etc/passwd", "data/../../x", "data//x", "C:\\x", "data/./x", ""])
def test_paths_escaping_the_savepoint_are_refused(manifest, path):
    manifest.data_files[0].path = path
    with pytest.raises(CorruptSavepointError, match="safe relative path"):
        _decode(manifest)


def test_chunk_past_end_of_file(manifest):
    chunk = manifest.operators[0].list_states[0].chunks[0]
    chunk.range.offset = manifest.data_files[chunk.range.file].size
    with pytest.raises(CorruptSavepointError, match="outside data file"):
        _decode(manifest)


def test_key_group_out_of_range(manifest):
    manifest.operators[1].keyed_states[0].chunks[-1].key_group = 128
    with pytest.raises(CorruptSavepointError, match="key group 128"):
        _decode(manifest)


def test_duplicate_state_names(manifest):
    op = manifest.operators[0]
    op.list_states.add().CopyFrom(op.list_states[0])
    with pytest.raises(CorruptSavepointError, match="not unique"):
        _decode(manifest)


def test_huge_row_count_is_refused_before_allocating(manifest):
    manifest.operators[0].list_states[0].chunks[0].row_count = 2**32 - 1
    with pytest.raises(CorruptSavepointError, match="cannot hold"):
        _decode(manifest)


def test_unknown_codec_is_unsupported(manifest):
    manifest.operators[0].list_states[0].chunks[0].codec = 9
    with pytest.raises(UnsupportedFormatError, match="codec 9"):
        _decode(manifest)


def test_partition_count_must_match_parallelism(manifest):
    del manifest.operators[0].list_states[0].partitions[-1]
    with pytest.raises(CorruptSavepointError, match="partitions for parallelism"):
        _decode(manifest)


def test_data_file_of_wrong_size_is_reported_on_read(tmp_path):
    from pyref.testing import write_seeds

    write_seeds(tmp_path / "sp", inline_bytes=0)
    data_file = next((tmp_path / "sp" / "data").iterdir())
    data_file.write_bytes(data_file.read_bytes() + b"junk")
    sp = Savepoint.open(tmp_path / "sp")
    with pytest.raises(CorruptSavepointError, match="manifest says") as info:
        list(sp.restore_plan(2).subtask("kafka-source", 0).list_state("offsets"))
    assert data_file.name in info.value.path


class _ReadsAtMost(LocalIO):
    """LocalIO that fails the test on any read longer than ``limit`` bytes."""

    def __init__(self, root, limit: int) -> None:
        super().__init__(str(root))
        self.limit = limit

    def read_range(self, rel, offset, length):
        assert length <= self.limit, f"read {length} bytes of {rel} before checking its header"
        return super().read_range(rel, offset, length)

    def sibling(self, name):
        return _ReadsAtMost(os.path.join(os.path.dirname(self.root), name), self.limit)


def _sparse_manifest(directory, size: int, body_length: int) -> None:
    """A ``_manifest`` of ``size`` bytes (a hole after a valid-looking 16-byte header)."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "_manifest"), "wb") as f:
        f.write(MAGIC + struct.pack("<HHI", 1, 0, body_length))
        f.truncate(size)


@pytest.mark.parametrize("size,body_length,error,match", [
    (64 << 30, 1000, CorruptSavepointError, "does not match the file size"),
    (3 << 30, (3 << 30) - 20, UnsupportedFormatError, "longer than the 2147483647 bytes"),
])
def test_a_huge_sparse_manifest_is_refused_from_its_header_without_reading_it(tmp_path, size, body_length, error,
                                                                              match):
    _sparse_manifest(tmp_path / "sp", size, body_length)
    with pytest.raises(error, match=match):
        Savepoint.open(_ReadsAtMost(tmp_path / "sp", 16))


def test_a_huge_sparse_base_manifest_is_refused_without_reading_it(tmp_path):
    from pyref import rescale
    from pyref.testing import write_seeds

    write_seeds(tmp_path / "base", inline_bytes=0)
    rescale(tmp_path / "base", tmp_path / "derived", 3)
    os.unlink(tmp_path / "base" / "_manifest")
    _sparse_manifest(tmp_path / "base", 64 << 30, 1000)
    sp = Savepoint.open(_ReadsAtMost(tmp_path / "derived", 1 << 20))  # its own manifest is small
    with pytest.raises(CorruptSavepointError, match="does not match the file size"):
        list(sp.operator("kafka-source").list_state("offsets").partition(0))


def test_overwriting_a_huge_file_named_manifest_refuses_before_reading_it(tmp_path):
    from pyref.writer import read_previous

    _sparse_manifest(tmp_path / "sp", 64 << 30, 1000)
    with pytest.raises(CorruptSavepointError, match="longer than any manifest"):
        read_previous(_ReadsAtMost(tmp_path / "sp", 0), overwrite=True)
