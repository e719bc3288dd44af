"""The generators: they write checked cases, never overwrite one, and keep SHA256SUMS."""

from __future__ import annotations

import pytest

from compat_tests import (
    ROOT,
    generate_base_paths_1_2,
    generate_goldens,
    generate_goldens_1_2,
    generate_rejects,
    generate_rejects_1_2,
    generate_rejects_1_2_bounded_work,
    generate_rejects_bounded_work,
    generate_spec_gaps_manifest,
)
from compat_tests._build import read_sums
from compat_tests.conformance import discover, verify_corpora


def test_golden_generator_refuses_to_overwrite(tmp_path):
    made = generate_goldens.generate(tmp_path, ["inline-small-state", "tuple-snapshot-v1"])
    assert made == ["inline-small-state", "tuple-snapshot-v1"]
    sums = read_sums(tmp_path)
    assert any(p.startswith("1.0/tuple-snapshot-v1/savepoint/") for p in sums)
    assert not verify_corpora(tmp_path.parent, [tmp_path.name])
    # A second run keeps what exists, and writing over an existing case is refused.
    assert generate_goldens.generate(tmp_path, ["inline-small-state"]) == []
    case = next(c for c in generate_goldens.cases() if c.name == "inline-small-state")
    with pytest.raises(SystemExit, match="written once"):
        generate_goldens.generate_case(case, tmp_path / "1.0" / "inline-small-state", "test")
    assert read_sums(tmp_path) == sums
    assert "| `tuple-snapshot-v1` |" in (tmp_path / "1.0" / "README.md").read_text()


def test_reject_generator_checks_pyref_refuses(tmp_path):
    made = generate_rejects.generate(tmp_path / "reject", tmp_path / "forward",
                                     ["unknown-codec", "newer-major-version", "unknown-fields"])
    assert sorted(made) == ["newer-major-version", "unknown-codec", "unknown-fields"]
    assert not verify_corpora(tmp_path, ["reject", "forward"])
    assert {c.name for c in discover(tmp_path)} == {"reject/unknown-codec", "reject/newer-major-version",
                                                    "forward/unknown-fields"}


def test_1_2_generators_write_checked_cases_once(tmp_path):
    made = generate_goldens_1_2.generate(tmp_path / "golden", ["timers", "informative-1-2-fields"])
    assert made == ["timers", "informative-1-2-fields"]
    # A case that uses no 1.2 feature is labelled, and filed, with its older version (spec/format.md §9.4).
    assert {c.name for c in discover(tmp_path)} == {"golden/1.2/timers", "golden/1.0/informative-1-2-fields"}
    assert generate_goldens_1_2.generate(tmp_path / "golden", ["timers"]) == []
    made = generate_rejects_1_2.generate(tmp_path / "reject", tmp_path / "forward",
                                         ["timer-timestamp-wrong-width", "unknown-fields-in-1-2-messages"])
    assert sorted(made) == ["timer-timestamp-wrong-width", "unknown-fields-in-1-2-messages"]
    assert not verify_corpora(tmp_path, ["golden", "reject", "forward"])
    assert read_sums(tmp_path / "reject") and all(p.startswith("1.2/") for p in read_sums(tmp_path / "reject"))


def test_a_reject_pyref_reads_is_not_kept(tmp_path):
    case = generate_rejects.manifest_case("not-really-broken", "corrupt", "nothing", lambda sp: None)
    with pytest.raises(SystemExit, match="pyref reads it"):
        generate_rejects.generate_reject(case, tmp_path / "x", "test")
    assert not (tmp_path / "x").exists()


def test_bounded_work_rejects_are_added_beside_the_others(tmp_path):
    generate_rejects.generate(tmp_path / "reject", tmp_path / "forward", ["unknown-codec"])
    only = ["chunk-ranges-overlap"]
    assert generate_rejects_bounded_work.generate(tmp_path / "reject", only) == only
    assert generate_rejects_bounded_work.generate(tmp_path / "reject", only) == []  # written once
    assert not verify_corpora(tmp_path, ["reject"])
    assert {c.name for c in discover(tmp_path)} == {"reject/unknown-codec", "reject/chunk-ranges-overlap"}
    assert "| `chunk-ranges-overlap` |" in (tmp_path / "reject" / "README.md").read_text()


def test_1_2_bounded_work_rejects_are_added_beside_the_1_2_cases(tmp_path):
    generate_rejects_1_2.generate(tmp_path / "reject", tmp_path / "forward", ["timer-domain-unspecified"])
    only = ["coordinator-states-over-one-range"]
    assert generate_rejects_1_2_bounded_work.generate(tmp_path / "reject", only) == only
    assert generate_rejects_1_2_bounded_work.generate(tmp_path / "reject", only) == []  # written once
    assert not verify_corpora(tmp_path, ["reject"])
    assert {c.name for c in discover(tmp_path)} == {"reject/1.2/timer-domain-unspecified",
                                                    "reject/1.2/coordinator-states-over-one-range"}
    assert all(p.startswith("1.2/") for p in read_sums(tmp_path / "reject"))
    readme = (tmp_path / "reject" / "1.2" / "README.md").read_text()
    assert "| `timer-domain-unspecified` |" in readme and "| `coordinator-states-over-one-range` |" in readme


def test_base_path_cases_carry_their_store_root(tmp_path):
    """Each case directory is the root of its own store: the kit passes it as --store-root."""
    only = ["base-path-savepoint-replaced"]
    assert generate_base_paths_1_2.generate(tmp_path / "golden", tmp_path / "reject", only) == only
    assert generate_base_paths_1_2.generate(tmp_path / "golden", tmp_path / "reject", only) == []  # written once
    assert not verify_corpora(tmp_path, ["reject"])
    (case,) = discover(tmp_path)
    assert case.name == "reject/1.2/base-path-savepoint-replaced" and case.store_root == case.directory
    assert (case.directory / generate_base_paths_1_2.BASE_PATH / "_manifest").exists()
    assert "| `base-path-savepoint-replaced` |" in (tmp_path / "reject" / "1.2" / "README.md").read_text()


def test_manifest_rule_cases_are_filed_by_label_and_written_once(tmp_path):
    """Goldens go to the set of their label (1.0 here, with a schema 2 dump), rejects to
    reject/manifest-rules/; a location that is no directory is a case too."""
    only = ["manifest-rules-parallelisms-outside-range", "location-is-a-file"]
    made = generate_spec_gaps_manifest.generate(tmp_path / "golden", tmp_path / "reject", only)
    assert sorted(made) == sorted(only)
    assert generate_spec_gaps_manifest.generate(tmp_path / "golden", tmp_path / "reject", only) == []
    assert not verify_corpora(tmp_path, ["golden", "reject"])
    assert {c.name for c in discover(tmp_path)} == {"golden/1.0/manifest-rules-parallelisms-outside-range",
                                                    "reject/manifest-rules/location-is-a-file"}
    assert (tmp_path / "reject" / "manifest-rules" / "location-is-a-file" / "savepoint").is_file()
    assert "| `location-is-a-file` |" in (tmp_path / "reject" / "manifest-rules" / "README.md").read_text()


@pytest.mark.slow
def test_generators_make_every_committed_case(tmp_path):
    """Regenerating everything elsewhere gives the committed case list, and every case
    still passes the generators' own checks against the current pyref."""
    generate_goldens.generate(tmp_path / "golden")
    generate_goldens_1_2.generate(tmp_path / "golden")
    generate_rejects.generate(tmp_path / "reject", tmp_path / "forward")
    generate_rejects_1_2.generate(tmp_path / "reject", tmp_path / "forward")
    generate_rejects_bounded_work.generate(tmp_path / "reject")
    generate_rejects_1_2_bounded_work.generate(tmp_path / "reject")
    generate_base_paths_1_2.generate(tmp_path / "golden", tmp_path / "reject")
    generate_spec_gaps_manifest.generate(tmp_path / "golden", tmp_path / "reject")
    fresh = {c.name for c in discover(tmp_path)}
    committed = {c.name for c in discover(ROOT)}
    if committed:
        assert committed <= fresh, f"committed cases the generators no longer make: {sorted(committed - fresh)}"
