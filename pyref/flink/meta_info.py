"""State meta info (``StateMetaInfoSnapshotReadersWriters``, meta-info
versions 6 and 7), shared by keyed and operator state streams: per state its
UTF name, the int ordinal of its backend state type, string options (the
keyed state kind, the operator state distribution mode) and named serializer
snapshots, each behind the snapshot proxy's int version.

Keyed state of the async state API (Flink 2.0+, backend type ``KEY_VALUE_V2``,
``org.apache.flink.runtime.state.v2.RegisteredKeyValueStateBackendMetaInfo``)
names a LIST state's element serializer and a MAP state's value serializer as
``VALUE_SERIALIZER`` (a MAP's user key serializer as ``USER_KEY_SERIALIZER``),
where the classic API's meta info names the ``ListSerializer`` and
``MapSerializer`` of them: read, they become those, so that both read alike.
Flink 2.0 wrote no ``USER_KEY_SERIALIZER`` (2.1 added it): such a MAP state's
user keys cannot be decoded (:func:`unreadable_async_state`).
"""

from __future__ import annotations

from dataclasses import dataclass

from .datainput import DataInput
from .serializers import (
    SNAPSHOT_PROXY_VERSION,
    FlinkType,
    Follow,
    looks_like_versioned_snapshot,
    read_serializer_snapshot,
)
from .to_flink import FlinkSerializer, list_serializer, map_serializer

__all__ = ["StateMetaInfo", "read_meta_info", "read_state_meta_infos", "looks_like_meta_info",
           "unreadable_async_state", "BACKEND_STATE_TYPES", "KEYED_STATE_TYPES"]

#: Backend state types (``StateMetaInfoSnapshot.BackendStateType`` ordinals).
BACKEND_STATE_TYPES = ("KEY_VALUE", "OPERATOR", "BROADCAST", "PRIORITY_QUEUE", "KEY_VALUE_V2")
#: The backend types a keyed backend writes (``KeyedBackendSerializationProxy``, the changelog's METADATA
#: records); an operator backend writes ``OPERATOR`` for its list states and ``BROADCAST`` for its broadcast ones.
KEYED_STATE_TYPES = frozenset({"KEY_VALUE", "PRIORITY_QUEUE", "KEY_VALUE_V2"})
SERIALIZER_KEYS = frozenset({"KEY_SERIALIZER", "NAMESPACE_SERIALIZER", "VALUE_SERIALIZER", "USER_KEY_SERIALIZER"})
OPTION_KEYS = frozenset({"KEYED_STATE_TYPE", "OPERATOR_STATE_DISTRIBUTION_MODE"})
_LONGEST_KEY = max(len(k) for k in SERIALIZER_KEYS | OPTION_KEYS)
_REQUIRED_SERIALIZERS = {
    "KEY_VALUE": {"NAMESPACE_SERIALIZER", "VALUE_SERIALIZER"},
    "KEY_VALUE_V2": {"NAMESPACE_SERIALIZER", "VALUE_SERIALIZER"},
    "OPERATOR": {"VALUE_SERIALIZER"},
    "BROADCAST": {"KEY_SERIALIZER", "VALUE_SERIALIZER"},
    "PRIORITY_QUEUE": {"VALUE_SERIALIZER"},
}
#: What each backend type's meta info may name besides (``snapshot()`` of each ``Registered*MetaInfo``): a
#: serializer or known option of another type would read the state as that type (a keyed state as timers).
_ALLOWED_SERIALIZERS = _REQUIRED_SERIALIZERS | {"KEY_VALUE_V2": {"NAMESPACE_SERIALIZER", "VALUE_SERIALIZER",
                                                                 "USER_KEY_SERIALIZER"}}
_ALLOWED_OPTIONS = {"KEY_VALUE": {"KEYED_STATE_TYPE"}, "KEY_VALUE_V2": {"KEYED_STATE_TYPE"},
                    "OPERATOR": {"OPERATOR_STATE_DISTRIBUTION_MODE"},
                    "BROADCAST": {"OPERATOR_STATE_DISTRIBUTION_MODE"}, "PRIORITY_QUEUE": set()}


@dataclass(frozen=True)
class StateMetaInfo:
    """``StateMetaInfoSnapshot``: a state's name, backend type, options and serializers."""

    name: str
    backend_type: str
    options: dict[str, str]
    serializers: dict[str, FlinkType]


def _one_of(inp: DataInput, names: frozenset[str], what: str) -> bool:
    """Is the ``writeUTF`` string at ``inp`` one of ``names`` (ASCII)? Compared undecoded:
    probes run at every position of a stream, where decoding a hostile 64 KiB string
    each time would make the search quadratic."""
    n = inp.read_ushort(what)
    return n <= _LONGEST_KEY and inp.read_bytes(n, what).decode("latin-1") in names


def looks_like_meta_info(inp: DataInput) -> bool:
    inp.skip(inp.read_ushort("state name"), "state name")
    if not 0 <= inp.read_int("backend state type") < len(BACKEND_STATE_TYPES):
        return False
    options = inp.read_int("option count")
    if not 0 <= options <= len(OPTION_KEYS):
        return False
    for _ in range(options):
        if not _one_of(inp, OPTION_KEYS, "option key"):
            return False
        inp.skip(inp.read_ushort("option value"), "option value")
    count = inp.read_int("serializer count")
    if not 0 <= count <= len(SERIALIZER_KEYS):
        return False
    return count == 0 or _looks_like_serializer_entry(inp)


def _looks_like_serializer_entry(inp: DataInput) -> bool:
    return (_one_of(inp, SERIALIZER_KEYS, "serializer key")
            and inp.read_int("snapshot proxy version") == SNAPSHOT_PROXY_VERSION
            and looks_like_versioned_snapshot(inp))


def read_meta_info(inp: DataInput, follow: Follow, types: frozenset[str], where: str) -> StateMetaInfo:
    """One state's meta info, whose backend type must be one of ``types``: another would be read as what it
    is not (an ``OPERATOR`` one among keyed states has no namespace serializer). ``where``: among what, for errors."""
    start = inp.pos
    name = inp.read_utf("state name")
    inp.state = name
    type_index = inp.read_int("backend state type")
    if not 0 <= type_index < len(BACKEND_STATE_TYPES):
        raise inp.corrupt(f"unknown backend state type {type_index}", inp.pos - 4, 4)
    backend_type = BACKEND_STATE_TYPES[type_index]
    if backend_type not in types:
        raise inp.corrupt(f"state {name!r} of backend type {backend_type} among {where} (only "
                          f"{', '.join(sorted(types))})", inp.pos - 4, 4)
    options = {}
    for _ in range(inp.read_count("state option count", 4)):
        at = inp.pos
        key = inp.read_utf("state option key")
        if key in OPTION_KEYS and key not in _ALLOWED_OPTIONS[backend_type]:  # others: Flink's future ones
            raise inp.corrupt(f"{backend_type} state {name!r} has option {key!r}", at, inp.pos - at)
        options[key] = inp.read_utf("state option value")
    count = inp.read_count("state serializer count", 8)
    serializers: dict[str, FlinkType] = {}
    for i in range(count):
        at = inp.pos
        key = inp.read_utf("serializer key")
        if key not in _ALLOWED_SERIALIZERS[backend_type] or key in serializers:
            raise inp.corrupt(f"{backend_type} state {name!r}: unexpected serializer entry {key!r}", at, inp.pos - at)
        last = i == count - 1
        serializers[key] = read_serializer_snapshot(inp, follow if last else _looks_like_serializer_entry)
    missing = _REQUIRED_SERIALIZERS[backend_type] - set(serializers)
    if missing:
        raise inp.corrupt(f"{backend_type} state {name!r} has no {', '.join(sorted(missing))}", start,
                          inp.pos - start)
    inp.state = None
    if backend_type == "KEY_VALUE_V2":
        serializers = _classic_serializers(options.get("KEYED_STATE_TYPE", ""), serializers)
    return StateMetaInfo(name, backend_type, options, serializers)


def unreadable_async_state(info: StateMetaInfo) -> str | None:
    """Why an async-API keyed state cannot be read, or None: Flink 2.0's MAP state meta info names no user key
    serializer (see the module's doc)."""
    # By the entry missing, not by the value's kind: a value that is itself a Map has a MapSerializer too.
    if (info.backend_type == "KEY_VALUE_V2" and info.options.get("KEYED_STATE_TYPE") == "MAP"
            and "USER_KEY_SERIALIZER" not in info.serializers):
        return ("MAP state of the async state API written by Flink 2.0, whose state meta info names no user key "
                "serializer (Flink 2.1 added it), so its user keys cannot be decoded; restore the job on Flink 2.1 "
                "or later and take a native savepoint or checkpoint there")
    return None


def _classic_serializers(kind: str, serializers: dict[str, FlinkType]) -> dict[str, FlinkType]:
    """An async-API state's serializers as the classic API's meta info names them (see the module's doc)."""
    value = FlinkSerializer(serializers["VALUE_SERIALIZER"].snapshot, serializers["VALUE_SERIALIZER"])
    if kind == "LIST":
        wrapped = list_serializer(value, "a LIST state's elements").type
    elif kind == "MAP" and "USER_KEY_SERIALIZER" in serializers:
        user_key = serializers["USER_KEY_SERIALIZER"]
        wrapped = map_serializer(FlinkSerializer(user_key.snapshot, user_key), value, "a MAP state's entries").type
    else:
        return serializers
    # USER_KEY_SERIALIZER stays: whether Flink wrote it says whether a MAP state's user keys can be read.
    return serializers | {"VALUE_SERIALIZER": wrapped}


def read_state_meta_infos(inp: DataInput, end_follow: Follow, types: frozenset[str], where: str
                          ) -> list[StateMetaInfo]:
    """A short count of state meta infos, each of a backend type of ``types``; ``end_follow`` says what
    follows the last."""
    count = inp.read_short("state count")
    if count < 0:
        raise inp.corrupt(f"negative state count {count}", inp.pos - 2, 2)
    return [read_meta_info(inp, end_follow if i == count - 1 else looks_like_meta_info, types, where)
            for i in range(count)]
