"""Shared fixtures: small savepoints written with the real writer on real files."""

from __future__ import annotations

import pytest

from pyref.testing import write_seeds


@pytest.fixture
def seeds(tmp_path):
    path = tmp_path / "seeds"
    write_seeds(path)
    return path
