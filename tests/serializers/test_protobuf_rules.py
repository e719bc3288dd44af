"""spec/serializers.md §3.11.1 and §3.11.2 in pyref, directly: every descriptor set the
reject corpus holds fails to build, the accepted forms build, and every wire form is
accepted or refused as the spec says. The same tables make the corpus cases
(compat_tests/generate_reader_rules.py), which the conformance kit runs through the
reader protocol."""

from __future__ import annotations

import pytest
from google.protobuf import descriptor_pb2

from compat_tests.generate_reader_rules import (
    accepted_descriptor_forms,
    accepted_proto2_forms,
    accepted_wire_forms,
    descriptor_set_breaks,
    nested_messages,
    refused_wire_forms,
    wire_files,
)
from pyref.errors import CorruptSavepointError
from pyref.serializers import Protobuf

#: This one needs bytes protobuf's Python API cannot write (a name that is not UTF-8): the
#: corpus case patches the serialized set, and tests/serializers/test_protobuf.py covers it.
_NOT_BUILDABLE_HERE = {"name-not-utf8"}


def _build(files, message_name: str = "x.M") -> Protobuf:
    return Protobuf.from_descriptor_set(descriptor_pb2.FileDescriptorSet(file=list(files)), message_name)


@pytest.mark.parametrize("name, files_of", [(n, f) for n, _, f in descriptor_set_breaks()
                                            if n not in _NOT_BUILDABLE_HERE])
def test_descriptor_set_that_breaks_a_rule_is_corrupt(name, files_of):
    with pytest.raises(CorruptSavepointError, match="protobuf descriptor set"):
        _build(files_of())


def test_descriptor_set_with_every_allowed_form_builds():
    message = _build([accepted_descriptor_forms()]).message_class
    assert message.DESCRIPTOR.fields_by_name["b"].message_type.GetOptions().map_entry


@pytest.mark.parametrize("what, value", accepted_wire_forms())
@pytest.mark.parametrize("package", ["w", "v"])
def test_accepted_wire_forms(package, what, value):
    proto3, proto2 = (_build([f], f"{f.package}.M") for f in wire_files())
    serializer = proto3 if package == "w" else proto2
    serializer.decode(value)  # no error: accepted


@pytest.mark.parametrize("what, value", accepted_proto2_forms())
def test_proto2_accepts_what_proto3_refuses(what, value):
    proto3, proto2 = (_build([f], f"{f.package}.M") for f in wire_files())
    proto2.decode(value)
    if what.startswith("proto2 string"):
        with pytest.raises(CorruptSavepointError):
            proto3.decode(value)


@pytest.mark.parametrize("name, value", [(n, v) for n, _, v in refused_wire_forms()])
def test_refused_wire_forms(name, value):
    proto3 = _build(wire_files()[:1], "w.M")
    with pytest.raises(CorruptSavepointError, match="not a valid w.M message"):
        proto3.decode(value)


def test_nesting_limit_is_exact():
    proto3 = _build(wire_files()[:1], "w.M")
    proto3.decode(nested_messages(100))
    with pytest.raises(CorruptSavepointError):
        proto3.decode(nested_messages(101))
