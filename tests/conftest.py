"""Shared fixtures: small savepoints written with the real writer on real files."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import settings

from pyref.testing import write_seeds

# Property tests assert behaviour, never speed (benchmarks measure that): hypothesis's per-example
# deadline only made them fail on a loaded machine (a first encode_array call took 0.4 s).
settings.register_profile("pyref", deadline=None)
settings.load_profile("pyref")


@pytest.fixture
def seeds(tmp_path):
    path = tmp_path / "seeds"
    write_seeds(path)
    return path


#: The bucket every object-store test writes into, each test under its own prefix.
TEST_BUCKET = "pyref-tests"


@pytest.fixture(scope="session")
def s3_server():
    """moto's S3 server on 127.0.0.1 for the whole session (a real S3 API: conditional
    writes, multipart uploads, ranged GETs)."""
    from pyref.testing.s3 import S3Server

    with S3Server() as server:
        server.create_bucket(TEST_BUCKET)
        yield server


@pytest.fixture
def s3_proxy(s3_server, monkeypatch):
    """A fault-injecting, byte-counting proxy in front of the server; clients created in
    the test (and processes it starts) reach the server through it."""
    from pyref.testing.s3 import FaultProxy

    with FaultProxy(s3_server.endpoint) as proxy:
        for key, value in s3_server.env(proxy.endpoint).items():
            monkeypatch.setenv(key, value)
        yield proxy


@pytest.fixture
def s3_prefix(s3_proxy):
    """A fresh ``s3://`` prefix for one test: savepoints go below it."""
    return f"s3://{TEST_BUCKET}/{uuid.uuid4().hex[:12]}"
