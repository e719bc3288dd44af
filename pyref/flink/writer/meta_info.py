"""State meta info as Flink writes it (``StateMetaInfoSnapshotReadersWriters``, the
inverse of :mod:`pyref.flink.meta_info`): the state's name, the ordinal of its
backend state type, string options (the keyed state kind, the operator state's
distribution mode) and named serializer snapshots."""

from __future__ import annotations

import struct

from ..dataoutput import utf
from ..meta_info import BACKEND_STATE_TYPES
from ..to_flink import FlinkSerializer

__all__ = ["keyed_meta_info", "timer_meta_info", "list_meta_info", "broadcast_meta_info", "check_state_name"]


def check_state_name(name: str, where: str) -> bytes:
    """The name as ``writeUTF`` writes it (refused beyond Java's 65535 bytes)."""
    return utf(name, f"state name of {where}")


def _meta_info(name: str, where: str, backend_type: str, options: dict[str, str],
               serializers: list[tuple[str, FlinkSerializer]]) -> bytes:
    out = bytearray(check_state_name(name, where))
    out += struct.pack(">ii", BACKEND_STATE_TYPES.index(backend_type), len(options))
    for key, value in options.items():
        out += utf(key) + utf(value)
    out += struct.pack(">i", len(serializers))
    for key, serializer in serializers:
        out += utf(key) + serializer.proxied
    return bytes(out)


def keyed_meta_info(name: str, where: str, kind: str, value: FlinkSerializer, namespace: FlinkSerializer) -> bytes:
    """A keyed state: ``kind`` is Flink's state type (VALUE, LIST, MAP, REDUCING, AGGREGATING),
    ``value`` the state's serializer (a LIST state's ``ListSerializer``, a MAP state's
    ``MapSerializer``)."""
    return _meta_info(name, where, "KEY_VALUE", {"KEYED_STATE_TYPE": kind},
                      [("VALUE_SERIALIZER", value), ("NAMESPACE_SERIALIZER", namespace)])


def timer_meta_info(name: str, where: str, timer: FlinkSerializer) -> bytes:
    """A timer service's priority queue of one time domain."""
    return _meta_info(name, where, "PRIORITY_QUEUE", {}, [("VALUE_SERIALIZER", timer)])


def list_meta_info(name: str, where: str, mode: str, element: FlinkSerializer) -> bytes:
    """An operator list state (``mode``: SPLIT_DISTRIBUTE or UNION)."""
    return _meta_info(name, where, "OPERATOR", {"OPERATOR_STATE_DISTRIBUTION_MODE": mode},
                      [("VALUE_SERIALIZER", element)])


def broadcast_meta_info(name: str, where: str, key: FlinkSerializer, value: FlinkSerializer) -> bytes:
    return _meta_info(name, where, "BROADCAST", {"OPERATOR_STATE_DISTRIBUTION_MODE": "BROADCAST"},
                      [("VALUE_SERIALIZER", value), ("KEY_SERIALIZER", key)])
