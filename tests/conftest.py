"""Shared fixtures: small savepoints written with the real writer on real files."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

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


@pytest.fixture(scope="session")
def azurite_server():
    """Azurite's Blob service on 127.0.0.1 for the whole session (a real Azure Blob API:
    conditional writes, block uploads, ranged GETs). scripts/fetch_azurite.sh installs it."""
    from pyref.testing import azure

    if azure.executable() is None:
        message = "Azurite is not installed: bash scripts/fetch_azurite.sh (npm) or PYREF_AZURITE"
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the az:// tests: scripts/test.sh runs scripts/fetch_azurite.sh first ({message})")
        pytest.skip(message)
    with azure.AzuriteServer() as server:
        server.create_container(TEST_BUCKET)
        yield server


@contextlib.contextmanager
def _proxied(server, monkeypatch) -> Iterator[Any]:
    """A fault-injecting, byte-counting proxy in front of ``server``; clients created in
    the test (and processes it starts) reach the server through it."""
    from pyref.testing.s3 import FaultProxy

    with FaultProxy(server.endpoint) as proxy:
        for key, value in server.env(proxy.endpoint).items():
            monkeypatch.setenv(key, value)
        yield proxy


def _fresh_prefix(scheme: str) -> str:
    """A new prefix in the test bucket (container): each test's savepoints go below its own."""
    return f"{scheme}://{TEST_BUCKET}/{uuid.uuid4().hex[:12]}"


@pytest.fixture
def s3_proxy(s3_server, monkeypatch):
    with _proxied(s3_server, monkeypatch) as proxy:
        yield proxy


@pytest.fixture
def s3_prefix(s3_proxy):
    """A fresh ``s3://`` prefix for one test: savepoints go below it."""
    return _fresh_prefix("s3")


@dataclass
class LiveStore:
    """One test's place on a live object-store API: the server, the proxy the test's
    clients reach it through, and a fresh prefix (``s3://`` or ``az://``)."""

    server: Any
    proxy: Any
    prefix: str

    @property
    def bucket(self) -> str:
        return self.prefix.split("/", 3)[2]

    @property
    def key_prefix(self) -> str:
        """The prefix inside the bucket or container."""
        return self.prefix.split("/", 3)[3]


@pytest.fixture(params=["s3", "az"])
def store(request, monkeypatch):
    """The test on each object store pyref tests live: S3 (moto) and Azure Blob (Azurite)."""
    server = request.getfixturevalue({"s3": "s3_server", "az": "azurite_server"}[request.param])
    with _proxied(server, monkeypatch) as proxy:
        yield LiveStore(server, proxy, _fresh_prefix(request.param))
