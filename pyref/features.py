"""Features of format 1.2 (spec/format.md §9.3): which a manifest uses, read from its
content, so that writers list exactly those and readers refuse a manifest that uses
one without listing it (rule M9).

Every 1.2 addition that changes how bytes are read is a *required* feature: a reader
of an older version refuses the savepoint by name (rule M1) instead of misreading it.
"""

from __future__ import annotations

from collections.abc import Iterator

from ._proto.savepoint.v1 import manifest_pb2 as pb
from ._proto.savepoint.v1 import serializer_pb2

TIMERS = "timers"
BROADCAST_STATE = "broadcast-state"
COORDINATOR_STATE = "coordinator-state"
KEYED_NAMESPACES = "keyed-namespaces"
STATE_TTL = "state-ttl"
REDUCING_AGGREGATING_STATE = "reducing-aggregating-state"
WRITER_ASSIGNED_KEY_GROUPS = "writer-assigned-key-groups"
SERIALIZERS_1_2 = "serializers-1-2"
BASE_PATHS = "base-paths"

#: The required features format 1.2 added, in the order a writer lists them.
REQUIRED_1_2 = (TIMERS, BROADCAST_STATE, COORDINATOR_STATE, KEYED_NAMESPACES, STATE_TTL,
                REDUCING_AGGREGATING_STATE, WRITER_ASSIGNED_KEY_GROUPS, SERIALIZERS_1_2, BASE_PATHS)

#: Built-in serializer ids format 1.2 added (spec/serializers.md §3.13-§3.20).
SERIALIZER_IDS_1_2 = frozenset({"int8", "int16", "float32", "char", "enum", "time-window", "global-window", "opaque"})


def snapshots_of(op: pb.Operator) -> Iterator[serializer_pb2.SerializerSnapshot]:
    """Every serializer snapshot stored with the operator (the roots of the trees)."""
    if op.HasField("key_serializer"):
        yield op.key_serializer
    for ls in op.list_states:
        yield ls.element_serializer
    for ks in op.keyed_states:
        yield ks.value_serializer
        for name in ("user_key_serializer", "namespace_serializer"):
            if ks.HasField(name):
                yield getattr(ks, name)
    for ts in op.timer_services:
        if ts.HasField("namespace_serializer"):
            yield ts.namespace_serializer
    for bs in op.broadcast_states:
        yield bs.key_serializer
        yield bs.value_serializer


def _uses_1_2_serializer(snapshot: serializer_pb2.SerializerSnapshot) -> bool:
    stack = [snapshot]
    while stack:
        snap = stack.pop()
        if snap.serializer_id in SERIALIZER_IDS_1_2:
            return True
        stack.extend(snap.nested)
    return False


def required_1_2(manifest: pb.Manifest) -> list[str]:
    """The format 1.2 required features the manifest's content uses, in :data:`REQUIRED_1_2` order."""
    used = {BASE_PATHS} if any(b.path for b in manifest.bases) else set()
    for op in manifest.operators:
        if op.timer_services:
            used.add(TIMERS)
        if op.broadcast_states:
            used.add(BROADCAST_STATE)
        if op.HasField("coordinator_state"):
            used.add(COORDINATOR_STATE)
        if op.key_groups == pb.KEY_GROUPS_FROM_WRITER:
            used.add(WRITER_ASSIGNED_KEY_GROUPS)
        for ks in op.keyed_states:
            if ks.HasField("namespace_serializer"):
                used.add(KEYED_NAMESPACES)
            if ks.HasField("ttl"):
                used.add(STATE_TTL)
            if ks.kind in (pb.REDUCING, pb.AGGREGATING):
                used.add(REDUCING_AGGREGATING_STATE)
        if SERIALIZERS_1_2 not in used and any(_uses_1_2_serializer(s) for s in snapshots_of(op)):
            used.add(SERIALIZERS_1_2)
    return [f for f in REQUIRED_1_2 if f in used]
