"""Savepoint locations: one parser for paths and URLs, one resolved identity
(spec/format.md §2.1)."""

from __future__ import annotations

import json
import os

import pytest

from pyref import InvalidArgumentError, Savepoint, SavepointWriter
from pyref.cli import main
from pyref.io import ArrowIO, LocalIO, open_io
from pyref.location import parse_location
from pyref.serializers import Int64
from pyref.testing import SEED_COUNTS, write_seeds


def counts(path) -> dict:
    return dict(Savepoint.open(path).operator("url-counter").keyed_state("count").items())


def test_a_fragment_is_refused_not_dropped_and_the_savepoint_it_would_replace_survives(tmp_path):
    """Issue 9 item 6: file:///d/run#2 opened /d/run, and overwrite=True replaced it."""
    write_seeds(tmp_path / "run", inline_bytes=0)
    before = (tmp_path / "run" / "_manifest").read_bytes()
    for url in (f"file://{tmp_path}/run#2", f"file://{tmp_path}/run?version=2"):
        with pytest.raises(InvalidArgumentError, match="query .* or a fragment"):
            write_seeds(url, overwrite=True)
        with pytest.raises(InvalidArgumentError):
            Savepoint.open(url)
    assert (tmp_path / "run" / "_manifest").read_bytes() == before


def test_percent_escapes_in_file_urls_are_decoded(tmp_path):
    write_seeds(tmp_path / "my run", inline_bytes=0)
    assert counts(f"file://{tmp_path}/my%20run") == SEED_COUNTS
    assert counts(f"file://localhost{tmp_path}/my%20run") == SEED_COUNTS
    assert counts(f"file:{tmp_path}/my%20run") == SEED_COUNTS
    assert open_io(f"file://{tmp_path}/my%20run").location == str(tmp_path / "my run")


@pytest.mark.parametrize("bad", ["file:///a%zz", "file:///a%2", "file:///a%00b", "file://otherhost/a",
                                 "ftp://host/sp", "sp3://bucket/x", "s3://bucket/a/../b", "s3://bucket//b", "s3:/b",
                                 "", "a\x00b"])
def test_malformed_locations_and_unknown_schemes_are_typed_errors(bad):
    with pytest.raises(InvalidArgumentError):
        parse_location(bad)


@pytest.mark.parametrize("bad", [None, 3, b"/tmp/x"])
def test_a_location_that_is_not_a_path_is_a_typed_error(bad):
    """Issue 9 item 21: Savepoint.open(None) raised TypeError."""
    with pytest.raises(InvalidArgumentError, match="path or a URL"):
        Savepoint.open(bad)


def test_a_relative_path_with_a_colon_is_a_local_path(tmp_path, monkeypatch, capsys):
    """Issue 9 item 18: sp-2024-05-01T10:00 was taken for a URL of scheme 'sp-2024-05-01t10' (ArrowInvalid)."""
    monkeypatch.chdir(tmp_path)
    name = "sp-2024-05-01T10:00"
    assert parse_location(name).scheme == ""
    write_seeds(name, inline_bytes=0)
    assert os.path.isfile(tmp_path / name / "_manifest")
    assert counts(name) == SEED_COUNTS
    assert main(["inspect", name, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["location"] == str(tmp_path / name)
    assert main(["rescale", name, "sp-2024-05-01T10:00-p4", "-p", "4", "--copy", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["bases"] == []
    assert counts("sp-2024-05-01T10:00-p4") == SEED_COUNTS


def test_every_spelling_of_one_directory_resolves_to_one_identity(tmp_path, monkeypatch):
    (tmp_path / "sps" / "sp-1").mkdir(parents=True)
    os.symlink(tmp_path / "sps" / "sp-1", tmp_path / "current")
    monkeypatch.chdir(tmp_path / "sps")
    real = str(tmp_path / "sps" / "sp-1")
    spellings = ["sp-1", "./sp-1", "sp-1/", "../sps/sp-1", f"{tmp_path}/current", f"{tmp_path}/current/",
                 f"file://{tmp_path}/current", tmp_path / "current"]
    assert {open_io(s).location for s in spellings} == {real}
    assert LocalIO(f"{tmp_path}/current/.").location == real
    assert ArrowIO(f"file://{tmp_path}/current").location == f"file://{real}"


def test_a_writer_through_a_link_writes_the_linked_directory(tmp_path):
    (tmp_path / "sp-1").mkdir()
    os.symlink("sp-1", tmp_path / "current")
    with SavepointWriter(str(tmp_path / "current")) as w:
        w.add_operator("op", parallelism=1).list_state("s", Int64()).add(0, [1])
    assert os.path.islink(tmp_path / "current") and (tmp_path / "sp-1" / "_manifest").is_file()
