"""Compatibility suite of the portable savepoint format.

* ``compat_tests.canonical``: the canonical JSON dump (schema in README.md).
* ``compat_tests.dump_pyref``: pyref's reader command for the conformance kit.
* ``compat_tests.conformance``: runs the golden, reject and forward corpora
  against any reader command.
* ``compat_tests.generate_goldens`` / ``compat_tests.generate_rejects`` /
  ``compat_tests.generate_rejects_bounded_work``, and for format 1.2
  ``compat_tests.generate_goldens_1_2`` / ``compat_tests.generate_rejects_1_2`` /
  ``compat_tests.generate_rejects_1_2_bounded_work``, and
  ``compat_tests.generate_base_paths_1_2`` (bases named by path), and
  ``compat_tests.generate_spec_gaps_manifest`` (the manifest rules of issue 13): the generators of the
  committed corpora (they never overwrite a case).
"""

import pathlib

#: Root of the committed corpora.
ROOT = pathlib.Path(__file__).resolve().parent
GOLDEN_DIR = ROOT / "golden"
REJECT_DIR = ROOT / "reject"
FORWARD_DIR = ROOT / "forward"
