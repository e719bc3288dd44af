"""Bases that are not siblings (format 1.2, required feature "base-paths"): named by a
path from the root of the store, never leaving it (spec/format.md §8.1, rules M9 and M10)."""

from __future__ import annotations

import struct

import pytest

from pyref._proto.savepoint.v1 import manifest_pb2 as pb
from pyref import CorruptSavepointError, InvalidArgumentError, Savepoint, UnsupportedFormatError, rescale
from pyref.cli import main
from pyref.inspection import verify
from pyref.io import MANIFEST_NAME, LocalIO, open_io
from pyref.manifest import FEATURE_BASE_PATHS, decode_manifest, encode_manifest
from pyref.testing import SEED_COUNTS, write_seeds


def offsets(location, parallelism: int) -> list[list[int]]:
    plan = Savepoint.open(location).restore_plan(parallelism)
    return [list(s.list_state("offsets")) for s in plan.subtasks("kafka-source")]


def counts(location) -> dict:
    return dict(Savepoint.open(location).operator("url-counter").keyed_state("count").items())


def test_a_target_in_another_directory_names_its_base_by_path(tmp_path):
    source, target = tmp_path / "2024-05-01" / "sp", tmp_path / "2024-05-02" / "sp4"
    write_seeds(source, inline_bytes=0)
    with pytest.raises(InvalidArgumentError, match="sibling.*--base-paths"):
        rescale(source, target, 4)
    manifest = rescale(source, target, 4, base_paths=True).manifest
    assert [(b.directory, b.path) for b in manifest.bases] == [("sp", str(source).lstrip("/"))]
    assert FEATURE_BASE_PATHS in manifest.required_features
    data = (target / MANIFEST_NAME).read_bytes()
    assert struct.unpack_from("<HH", data, 8) == (1, 2)  # labelled with the version that defines the feature
    assert offsets(target, 4) == [[100], [101], [200], [201]] and counts(target) == SEED_COUNTS
    assert verify(Savepoint.open(target)).ok
    assert not (target / "data").exists()  # still shallow: no state bytes copied


def test_a_sibling_target_still_names_its_base_by_directory_alone(tmp_path):
    write_seeds(tmp_path / "sp", inline_bytes=0)
    manifest = rescale(tmp_path / "sp", tmp_path / "sp4", 4, base_paths=True).manifest
    assert [(b.directory, b.path) for b in manifest.bases] == [("sp", "")]
    assert FEATURE_BASE_PATHS not in manifest.required_features


def test_a_chain_across_directories_flattens_sibling_bases_into_paths(tmp_path):
    write_seeds(tmp_path / "a" / "sp", inline_bytes=0)
    rescale(tmp_path / "a" / "sp", tmp_path / "a" / "sp3", 3)  # its base "sp" is a sibling in a/
    manifest = rescale(tmp_path / "a" / "sp3", tmp_path / "b" / "sp1", 1, base_paths=True).manifest
    assert [(b.directory, b.path) for b in manifest.bases] == [
        ("sp3", str(tmp_path / "a" / "sp3").lstrip("/")), ("sp", str(tmp_path / "a" / "sp").lstrip("/"))]
    assert offsets(tmp_path / "b" / "sp1", 1) == [[100, 101, 200, 201]]
    # A sibling of the new one, derived from it, keeps the paths and names it by directory.
    manifest = rescale(tmp_path / "b" / "sp1", tmp_path / "b" / "sp2", 2).manifest
    assert [b.path for b in manifest.bases] == ["", str(tmp_path / "a" / "sp3").lstrip("/"),
                                                str(tmp_path / "a" / "sp").lstrip("/")]
    assert counts(tmp_path / "b" / "sp2") == SEED_COUNTS


def test_cli_rescale_with_base_paths(tmp_path, capsys):
    write_seeds(tmp_path / "x" / "sp", inline_bytes=0)
    assert main(["rescale", str(tmp_path / "x" / "sp"), str(tmp_path / "y" / "sp4"), "-p", "4", "--json"]) == 2
    assert main(["rescale", str(tmp_path / "x" / "sp"), str(tmp_path / "y" / "sp4"), "-p", "4", "--base-paths"]) == 0
    capsys.readouterr()
    assert counts(tmp_path / "y" / "sp4") == SEED_COUNTS


def rewritten(location, edit) -> None:
    """Re-encode the manifest at ``location`` after ``edit(manifest)``."""
    io = open_io(location)
    manifest, _ = decode_manifest(io.read_file(MANIFEST_NAME), path="m")
    edit(manifest)
    (location / MANIFEST_NAME).write_bytes(encode_manifest(manifest))


@pytest.mark.parametrize(("edit", "error", "match"), [
    (lambda m: setattr(m.bases[0], "path", "../2024-05-01/sp"), CorruptSavepointError, "not a safe relative path"),
    (lambda m: setattr(m.bases[0], "path", "tmp/other"), CorruptSavepointError, "does not end with its directory"),
    (lambda m: m.required_features.remove(FEATURE_BASE_PATHS), CorruptSavepointError,
     r"\['base-paths'\] without listing"),
    (lambda m: m.required_features.append("base-paths-v2"), UnsupportedFormatError, "base-paths-v2"),
    (lambda m: m.bases.add().CopyFrom(m.bases[0]), CorruptSavepointError, "listed twice"),
], ids=["dot-dot", "wrong-directory", "no-feature", "unknown-feature", "twice"])
def test_readers_refuse_base_paths_that_break_rules_m9_m10(tmp_path, edit, error, match):
    write_seeds(tmp_path / "d1" / "sp", inline_bytes=0)
    rescale(tmp_path / "d1" / "sp", tmp_path / "d2" / "sp4", 4, base_paths=True)
    rewritten(tmp_path / "d2" / "sp4", edit)
    with pytest.raises(error, match=match):
        Savepoint.open(tmp_path / "d2" / "sp4")


def test_a_base_path_resolves_in_the_savepoints_own_store(s3_prefix):
    """On S3 the path is a key prefix of the same bucket, reached with the same client."""
    source, target = f"{s3_prefix}/2024-05-01/sp", f"{s3_prefix}/2024-05-02/sp4"
    write_seeds(source, inline_bytes=0)
    manifest = rescale(source, target, 4, base_paths=True).manifest
    assert manifest.bases[0].path == source.split("/", 3)[3]
    assert offsets(target, 4) == [[100], [101], [200], [201]] and counts(target) == SEED_COUNTS


def test_a_shallow_target_in_another_store_is_refused(s3_prefix, tmp_path):
    write_seeds(f"{s3_prefix}/sp", inline_bytes=0)
    with pytest.raises(InvalidArgumentError, match="same store"):
        rescale(f"{s3_prefix}/sp", tmp_path / "sp4", 4, base_paths=True)
    assert not (tmp_path / "sp4").exists()


@pytest.mark.parametrize("store", ["local", "s3"])
def test_two_bases_naming_one_directory_cannot_share_stored_bytes(store, tmp_path, request):
    """A sibling base and the same directory named by path are two bases (rule M5), but
    their data files are one file each: a state whose chunks reach a file through the
    second name would share stored bytes with the first despite rule C6. On object
    stores, where no file identity tells links apart, the name in the store does."""
    root = str(tmp_path) if store == "local" else request.getfixturevalue("s3_prefix")
    write_seeds(f"{root}/sp", inline_bytes=0)
    rescale(f"{root}/sp", f"{root}/sp4", 4)
    io = open_io(f"{root}/sp4")
    previous = io.read_file(MANIFEST_NAME)
    manifest, _ = decode_manifest(previous, path="m")
    manifest.bases.add(directory="sp", savepoint_id=manifest.bases[0].savepoint_id,
                       path=open_io(f"{root}/sp").store_path())
    manifest.required_features.append(FEATURE_BASE_PATHS)
    again = len(manifest.data_files)
    manifest.data_files.extend([pb.DataFile(path=f.path, size=f.size, base=2) for f in manifest.data_files])
    counter = next(op for op in manifest.operators if op.operator_id == "url-counter")
    copy = counter.keyed_states.add()
    copy.CopyFrom(counter.keyed_states[0])
    copy.name = "count-again"
    for chunk in copy.chunks:
        chunk.range.file += again
    io.commit_manifest(encode_manifest(manifest), previous)
    counter = Savepoint.open(f"{root}/sp4").operator("url-counter")  # C6 by file index sees two files
    assert dict(counter.keyed_state("count").items()) == SEED_COUNTS
    with pytest.raises(CorruptSavepointError, match="are the same file"):
        dict(counter.keyed_state("count-again").items())


def test_a_store_root_confines_local_base_paths_and_moves_with_them(tmp_path):
    """On local files a reader may take a directory as the root of the store (spec/format.md
    §8.1, §8.5): base paths resolve from there, never out of it, and the directory of
    savepoints that name each other by path moves as a whole."""
    root = tmp_path / "store"
    write_seeds(root / "2024-05-01" / "sp", inline_bytes=0)
    manifest = rescale(LocalIO(root / "2024-05-01" / "sp", store_root=root),
                       LocalIO(root / "2024-05-02" / "sp4", store_root=root), 4, base_paths=True).manifest
    assert [(b.directory, b.path) for b in manifest.bases] == [("sp", "2024-05-01/sp")]
    moved = tmp_path / "moved"
    root.rename(moved)
    assert counts(LocalIO(moved / "2024-05-02" / "sp4", store_root=moved)) == SEED_COUNTS
    with pytest.raises(CorruptSavepointError, match="'2024-05-01/sp' is missing"):
        counts(moved / "2024-05-02" / "sp4")  # from /, the path names nothing
    (moved / "2024-05-01" / "sp").rename(tmp_path / "outside")
    (moved / "2024-05-01" / "sp").symlink_to(tmp_path / "outside")
    with pytest.raises(CorruptSavepointError, match="leads outside the store root"):
        counts(LocalIO(moved / "2024-05-02" / "sp4", store_root=moved))
    with pytest.raises(InvalidArgumentError, match="not inside its store root"):
        LocalIO(tmp_path / "outside", store_root=moved)
