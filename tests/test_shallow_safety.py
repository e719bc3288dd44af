"""Shallow savepoints are hard to break (spec/format.md §8.3-§8.6): a base knows who derives
from it and is not replaced unless forced, ``flatten`` makes a self-contained copy,
``inspect`` warns of a missing base and ``verify`` reports it once."""

from __future__ import annotations

import json
import shutil

import pytest

from pyref import CorruptSavepointError, InvalidArgumentError, Savepoint, SavepointWriter, flatten, rescale
from pyref.cli import main
from pyref.derived import DERIVED_DIR, dependents, registration
from pyref.inspection import verify
from pyref.io import LocalIO
from pyref.serializers import Int64
from pyref.testing import write_seeds


@pytest.fixture
def seeds(tmp_path):
    write_seeds(tmp_path / "sp", inline_bytes=0)
    return tmp_path / "sp"


def _counts(path):
    return dict(Savepoint.open(path).operator("url-counter").keyed_state("count").items())


def test_overwriting_a_base_is_refused_and_changes_nothing(seeds, tmp_path):
    rescale(seeds, tmp_path / "sp4", 4)
    before = (seeds / "_manifest").read_bytes()
    data = sorted(p.name for p in (seeds / "data").iterdir())
    with pytest.raises(InvalidArgumentError, match="is the base of .*sp4.*--force"):
        write_seeds(seeds, overwrite=True, inline_bytes=0)
    assert (seeds / "_manifest").read_bytes() == before
    assert sorted(p.name for p in (seeds / "data").iterdir()) == data
    assert _counts(tmp_path / "sp4") == {f"/page/{i}": i for i in range(50)}


def test_force_replaces_the_base_and_readers_detect_the_break(seeds, tmp_path):
    rescale(seeds, tmp_path / "sp4", 4)
    write_seeds(seeds, overwrite=True, force=True, inline_bytes=0)
    with pytest.raises(CorruptSavepointError, match="was replaced"):
        _counts(tmp_path / "sp4")


def test_a_derivation_registered_while_the_writer_works_refuses_its_commit(seeds, tmp_path):
    """The check runs again under the commit lock: a shallow savepoint derived after the
    writer started still stops it, and the writer's files are gone."""
    before = (seeds / "_manifest").read_bytes()
    w = SavepointWriter(str(seeds), overwrite=True, inline_bytes=0)
    w.add_operator("op", 1).list_state("s", Int64()).add(0, [1, 2])
    rescale(seeds, tmp_path / "sp4", 4)
    with pytest.raises(InvalidArgumentError, match="is the base of"):
        w.commit()
    assert (seeds / "_manifest").read_bytes() == before
    assert Savepoint.open(seeds).savepoint_id == Savepoint.open(tmp_path / "sp4").manifest.bases[0].savepoint_id
    assert len(list((seeds / "data").iterdir())) == len(Savepoint.open(seeds).manifest.data_files)


def test_registrations_that_no_longer_hold_do_not_block(seeds, tmp_path):
    """A target replaced by a self-contained copy, a deleted one, and one never committed
    (the registration is written first, a crash may stop the derivation after it) refer
    to nothing here any more."""
    rescale(seeds, tmp_path / "sp4", 4)
    rescale(seeds, tmp_path / "gone", 3)
    rescale(seeds, tmp_path / "sp4", 4, copy=True, overwrite=True)
    shutil.rmtree(tmp_path / "gone")
    base, never = LocalIO(seeds), LocalIO(tmp_path / "never")
    rel, data = registration(base, never)
    (seeds / rel).write_bytes(data)
    assert len(list((seeds / DERIVED_DIR).iterdir())) == 3
    assert dependents(base, Savepoint.open(seeds).savepoint_id) == []
    write_seeds(seeds, overwrite=True, inline_bytes=0)


@pytest.mark.parametrize("contents", [b"", b"not json", b'["x"]', b'{"directory": "../etc"}', b'{"directory": "a/b"}',
                                      b'{"path": "/etc"}', b'{"path": "../../x"}', b'{"path": "a\\\\b"}',
                                      b'{"directory": 7}', b"{" + b" " * 5000 + b"}"])
def test_a_registration_that_does_not_parse_or_escapes_the_store_is_ignored(seeds, tmp_path, contents):
    (seeds / DERIVED_DIR).mkdir()
    (seeds / DERIVED_DIR / "planted").write_bytes(contents)
    assert dependents(LocalIO(seeds), Savepoint.open(seeds).savepoint_id) == []


def test_a_registration_does_not_leave_the_store_root(tmp_path):
    """Within a store root (spec/format.md §8.5) a registered path resolves inside it or not at all."""
    outside = tmp_path / "outside"
    write_seeds(tmp_path / "root" / "sp", inline_bytes=0)
    rescale(tmp_path / "root" / "sp", outside / "sp4", 4, copy=True)  # a savepoint that exists, outside the root
    base = LocalIO(tmp_path / "root" / "sp", store_root=tmp_path / "root")
    (tmp_path / "root" / "sp" / DERIVED_DIR).mkdir()
    (tmp_path / "root" / "sp" / DERIVED_DIR / "x").write_text(json.dumps({"path": "../outside/sp4"}))
    (tmp_path / "root" / "link").symlink_to(outside)
    (tmp_path / "root" / "sp" / DERIVED_DIR / "y").write_text(json.dumps({"path": "link/sp4"}))
    assert dependents(base, Savepoint.open(base).savepoint_id) == []


def test_a_registration_cut_short_is_written_again(seeds, tmp_path):
    rescale(seeds, tmp_path / "sp4", 4)
    (marker,) = (seeds / DERIVED_DIR).iterdir()
    marker.write_bytes(marker.read_bytes()[:5])  # a crash during its write
    rescale(seeds, tmp_path / "sp4", 4, overwrite=True)
    with pytest.raises(InvalidArgumentError, match="is the base of"):
        write_seeds(seeds, overwrite=True, inline_bytes=0)


def test_every_base_of_a_chain_knows_the_savepoints_that_read_it(seeds, tmp_path):
    rescale(seeds, tmp_path / "sp4", 4)
    rescale(tmp_path / "sp4", tmp_path / "sp3", 3)
    assert dependents(LocalIO(seeds), Savepoint.open(seeds).savepoint_id) == [str(tmp_path / "sp3"),
                                                                              str(tmp_path / "sp4")]
    with pytest.raises(InvalidArgumentError, match="sp3"):
        rescale(seeds, tmp_path / "sp4", 2, overwrite=True, copy=True)


def test_base_paths_register_by_path(seeds, tmp_path):
    target = tmp_path / "elsewhere" / "sp4"
    rescale(seeds, target, 4, base_paths=True)
    (marker,) = (seeds / DERIVED_DIR).iterdir()
    assert json.loads(marker.read_text()) == {"path": str(target).lstrip("/")}
    with pytest.raises(InvalidArgumentError, match="is the base of"):
        write_seeds(seeds, overwrite=True, inline_bytes=0)


def test_flatten_makes_a_copy_that_outlives_its_bases(seeds, tmp_path, capsys):
    rescale(seeds, tmp_path / "sp4", 4)
    rescale(tmp_path / "sp4", tmp_path / "sp3", 3)
    assert main(["flatten", str(tmp_path / "sp3"), str(tmp_path / "far" / "flat"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["bases"] == [] and out["new_data_bytes"] > 0
    flat = Savepoint.open(tmp_path / "far" / "flat")
    assert not flat.manifest.bases and "external-bases" not in flat.manifest.required_features
    assert [o.parallelism for o in flat.operators] == [3, 3]
    # The base may now be replaced: the flattened copy does not refer to it...
    rescale(seeds, tmp_path / "sp3", 3, overwrite=True, copy=True)
    rescale(seeds, tmp_path / "sp4", 4, overwrite=True, copy=True)
    shutil.rmtree(seeds)
    assert _counts(tmp_path / "far" / "flat") == {f"/page/{i}": i for i in range(50)}
    assert verify(flat).ok


def test_flatten_refuses_to_replace_a_base_unless_forced(seeds, tmp_path):
    rescale(seeds, tmp_path / "sp4", 4)
    with pytest.raises(InvalidArgumentError, match="is the base of"):
        flatten(tmp_path / "sp4", seeds, overwrite=True)
    assert main(["flatten", str(tmp_path / "sp4"), str(seeds), "--overwrite", "--force"]) == 0
    assert _counts(seeds) == {f"/page/{i}": i for i in range(50)}


def test_inspect_warns_of_a_missing_base(seeds, tmp_path, capsys):
    rescale(seeds, tmp_path / "sp4", 4)
    shutil.rmtree(seeds)
    assert main(["inspect", str(tmp_path / "sp4"), "--json"]) == 0
    (warning,) = json.loads(capsys.readouterr().out)["warnings"]
    assert "base savepoint 'sp' is missing" in warning
    assert main(["inspect", str(tmp_path / "sp4")]) == 0
    assert "warning: base savepoint 'sp' is missing" in capsys.readouterr().err


def test_verify_reports_a_broken_base_once(seeds, tmp_path, capsys):
    rescale(seeds, tmp_path / "sp4", 4)
    rescale(tmp_path / "sp4", tmp_path / "sp3", 3)
    shutil.rmtree(seeds)
    assert main(["verify", str(tmp_path / "sp3"), "--json"]) == 3
    report = json.loads(capsys.readouterr().out)
    files = sum(f.base == 2 for f in Savepoint.open(tmp_path / "sp3").manifest.data_files)  # sp3's bases: sp4, sp
    assert report["errors"] == [f"base savepoint 'sp' is missing; this savepoint refers to its data files [file={seeds}]"]
    assert f"{files} data files of base 'sp' and the chunks in them not read: the base is broken" in report["warnings"]
