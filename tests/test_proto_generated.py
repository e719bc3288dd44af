"""pyref/_proto is generated from proto/ by tools/gen_proto.py; it must never drift."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_generated_code_matches_proto_sources():
    pytest.importorskip("grpc_tools", reason="the pinned generator comes with the 'dev' extra")
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_proto.py"), "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_proto_package_carries_the_format_major_version():
    from pyref import FORMAT_MAJOR
    from pyref._proto.savepoint.v1 import manifest_pb2

    assert manifest_pb2.DESCRIPTOR.package == f"savepoint.v{FORMAT_MAJOR}"
