"""The versioning policy, proven: a reader that knows only format 1.0 restores 1.1 goldens.

The "1.0 reader" here parses manifests with the released 1.0 schemas
(proto-baseline/1.0, compiled at test time), so every 1.1 field is an unknown
field to it, and knows no optional feature. By the 1.0 reading rules (accept a
newer minor version, ignore unknown fields and unknown optional features,
spec/format.md §9) it must restore exactly what expected.json says.
"""

from __future__ import annotations

import json
import pathlib
import shutil
import struct
import tempfile

import pytest

from compat_tests import GOLDEN_DIR
from compat_tests.canonical import canonical_text, dump_savepoint

BASELINE = pathlib.Path(__file__).resolve().parent / "proto-baseline" / "1.0"
CASES = sorted(p for p in (GOLDEN_DIR / "1.1").iterdir() if (p / "expected.json").exists())


@pytest.fixture(scope="module")
def manifest_1_0():
    """The Manifest message class of the released 1.0 schemas."""
    grpc_tools = pytest.importorskip("grpc_tools", reason="compiling the baseline schemas needs the 'dev' extra")
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    from grpc_tools import protoc

    include = pathlib.Path(grpc_tools.__file__).parent / "_proto"
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "fds.pb"
        assert protoc.main(["protoc", f"-I{BASELINE}", f"-I{include}", f"--descriptor_set_out={out}",
                            "--include_imports", "savepoint/v1/manifest.proto"]) == 0
        fds = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    pool = descriptor_pool.DescriptorPool()
    for f in fds.file:
        pool.Add(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("savepoint.v1.Manifest"))


def test_there_is_a_1_1_golden_set():
    assert len(CASES) >= 3


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_a_1_0_reader_restores_1_1_goldens(case, manifest_1_0, tmp_path, monkeypatch):
    from pyref._proto.savepoint.v1 import manifest_pb2
    from pyref.manifest import encode_manifest

    work = tmp_path / case.name
    shutil.copytree(case, work)
    data = (work / "savepoint" / "_manifest").read_bytes()
    assert struct.unpack_from("<HH", data, 8) == (1, 1)
    # What a 1.0 reader keeps of the body: everything but the fields 1.0 does not know.
    as_1_0 = manifest_1_0.FromString(data[16:-4])
    as_1_0.DiscardUnknownFields()  # kept by protobuf, but meaningless to a 1.0 reader
    kept = as_1_0.SerializeToString()
    assert len(kept) < len(data) - 20, "1.1 goldens carry fields a 1.0 reader does not know"
    (work / "savepoint" / "_manifest").write_bytes(encode_manifest(manifest_pb2.Manifest.FromString(kept), minor=1))
    monkeypatch.setattr("pyref.manifest.KNOWN_OPTIONAL_FEATURES", frozenset())
    expected = json.loads((case / "expected.json").read_text(encoding="utf-8"))
    parallelisms = json.loads((case / "generated.json").read_text(encoding="utf-8"))["parallelisms"]
    actual = dump_savepoint(work / "savepoint", parallelisms, expected["canonical_version"])  # schema 2: `values`
    assert canonical_text(actual) == canonical_text(expected)
