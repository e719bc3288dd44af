"""The checks a reader makes once before it reads any state of a savepoint
(spec/format.md §5.10): every stored serializer snapshot of built-in serializers, the
key hash of every keyed operator, then every listed base. They need only the manifest
(and the bases' manifests), so their outcome never depends on which state is read
first, nor on whether a state has chunks.
"""

from __future__ import annotations

from collections.abc import Iterator

from ._proto.savepoint.v1 import manifest_pb2 as pb
from ._proto.savepoint.v1 import serializer_pb2
from .errors import SavepointError, UnsupportedFormatError
from .keys import key_type_of
from .manifest import state_label
from .serializers import serializer_from_snapshot
from .serializers.base import is_builtin_id


def stored_snapshots(m: pb.Manifest) -> Iterator[tuple[str, serializer_pb2.SerializerSnapshot]]:
    """Every serializer snapshot of the manifest with the part it belongs to, in manifest order."""
    for op in m.operators:
        if op.HasField("key_serializer"):
            yield f"{op.operator_id} (key serializer)", op.key_serializer
        for ls in op.list_states:
            yield state_label(op, ls.name), ls.element_serializer
        for ks in op.keyed_states:
            label = state_label(op, ks.name)
            yield from ((label, getattr(ks, f)) for f in ("value_serializer", "user_key_serializer",
                                                          "namespace_serializer") if ks.HasField(f))
        for ts in op.timer_services:
            if ts.HasField("namespace_serializer"):
                yield state_label(op, f"{ts.name} (timers)"), ts.namespace_serializer
        for bs in op.broadcast_states:
            yield from ((state_label(op, bs.name), s) for s in (bs.key_serializer, bs.value_serializer))


def _only_builtin(snapshot: serializer_pb2.SerializerSnapshot) -> bool:
    """True if no serializer of the tree is user-defined: those are the reading program's,
    checked when it reads their state with the serializer it registered or passes
    (spec/serializers.md §6). Iterative: the depth limit is checked after this."""
    pending = [snapshot]
    while pending:
        s = pending.pop()
        if not is_builtin_id(s.serializer_id):
            return False
        pending.extend(s.nested)
    return True


def _at(exc: SavepointError, label: str) -> SavepointError:
    """``exc`` naming the part of the manifest it is about."""
    return type(exc)(exc.reason, path=exc.path, state=exc.state or label, byte_range=exc.byte_range)


def check_serializers(m: pb.Manifest) -> None:
    """Steps 1 and 2 of spec/format.md §5.10: every snapshot of built-in serializers restores
    (spec/serializers.md §2), and every operator with keyed state or timers, unless its
    key groups come from its writer, has a key serializer that can be hashed (§5.2). If
    several fail, *unsupported* is reported before *corrupt*, whatever their order."""
    failures: list[SavepointError] = []
    for label, snapshot in stored_snapshots(m):
        if _only_builtin(snapshot):
            try:
                serializer_from_snapshot(snapshot)
            except SavepointError as exc:
                failures.append(_at(exc, label))
    for op in m.operators:
        if (op.keyed_states or op.timer_services) and op.key_groups != pb.KEY_GROUPS_FROM_WRITER:
            try:
                key_type_of(op.key_serializer)
            except UnsupportedFormatError as exc:
                failures.append(_at(exc, f"{op.operator_id} (key serializer)"))
    if failures:
        raise next((f for f in failures if isinstance(f, UnsupportedFormatError)), failures[0])
