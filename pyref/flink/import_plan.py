"""What importing a Flink savepoint will write, decided before a byte of state is read.

:func:`plan_import` reads ``_metadata`` and the head of every state stream
(serializer snapshots, never a key group) and decides, per operator: its pyref
id (the uid Flink stored or the caller gave, else the hex operator id), its key
serializer and whether its key groups are hashed (pyref's key hash is Java's
for the key type, so it checks them) or assigned by the writer (a POJO's own
``hashCode``...), and per state the pyref serializers of every column
(:mod:`pyref.flink.from_flink`), its kind and its TTL configuration.

A retained checkpoint of unaligned checkpoints may hold in-flight data (records between
operators, :mod:`pyref.flink.channel_state`), part of its exactly-once state that pyref's
format has no place for: it is refused by operator and bytes unless ``drop_in_flight_data``,
and then each operator's plan records what is dropped (``in_flight_dropped``).

Everything that cannot be imported is found here and refused at once, with
one typed error listing every case: changelog and file-merging state, raw state,
Flink 2.0's MAP state of the async state API (no user key serializer) or the removed folding state, LIST state
of elements Flink stores without lengths (Kryo...), and state under TTL without a
TTL configuration (Flink does not store it: the caller gives it). A refused state
can be left out with ``skip_states``.

A :class:`Place` names a column of a state whose type the data decided
otherwise (see :class:`~pyref.flink.from_flink.Demotion`); ``demotions`` maps
places to "nullable" (Strings there may be null) or "opaque" (Flink's bytes).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..errors import InvalidArgumentError, UnsupportedFormatError
from ..key_groups import KeyType
from ..redistribution import DistributionMode
from ..ttl import UPDATE_TYPES, VISIBILITIES, TtlConfig
from .changelog import KeysNotRecordedError
from .from_flink import Mapped, key_type, map_type, stores_lengths
from .handles import DistributionMode as FlinkMode
from .keyed import TIMER_DOMAINS, TIMER_PREFIX
from .meta_info import StateMetaInfo, unreadable_async_state
from .savepoint import FlinkOperator, FlinkSavepoint, operator_id_named, operator_id_of_uid
from .serializers import FlinkType

__all__ = ["Place", "KeyedPlan", "TimerPlan", "ListPlan", "BroadcastPlan", "OperatorPlan", "plan_import", "parse_ttl",
           "parse_duration_ms"]

#: Flink's keyed state kinds, as pyref's (spec/format.md §5.4).
KINDS = {"VALUE": "value", "LIST": "list", "MAP": "map", "REDUCING": "reducing", "AGGREGATING": "aggregating"}
#: Timer domains, as pyref's (spec/format.md §5.7).
DOMAINS = {"event-time": "event_time", "processing-time": "processing_time"}
_MODES = {FlinkMode.SPLIT_DISTRIBUTE: DistributionMode.SPLIT_DISTRIBUTE, FlinkMode.UNION: DistributionMode.UNION}


@dataclass(frozen=True)
class Place:
    """A column of a state: ``state`` "" is the operator's key (every keyed state and
    timer service); ``role`` is key, namespace, user_key, value, map_null (a MAP
    state stores a null value), element (list state), broadcast_key, broadcast_value."""

    operator: str
    state: str
    role: str

    def __str__(self) -> str:
        return f"{self.operator}/{self.state or '<key>'}:{self.role}"


@dataclass
class KeyedPlan:
    name: str
    flink_kind: str  # VALUE, LIST, MAP, REDUCING, AGGREGATING
    kind: str  # pyref's
    namespace_type: FlinkType  # Flink's, to split composite keys
    stored_type: FlinkType  # Flink's value serializer (list / map / TTL wrappers included)
    namespace: Mapped | None  # None: the void namespace
    user_key: Mapped | None
    value: Mapped  # the value, a LIST element or a MAP value (TTL unwrapped)
    ttl: TtlConfig | None  # the configuration (None when only reading)
    ttl_cells: bool = False  # Flink stores every value with its last-access timestamp
    map_nulls: bool = False  # a MAP state holding null values: values are nullable


@dataclass
class TimerPlan:
    queue: str  # Flink's name of the timer queue state
    service: str
    domain: str  # pyref's: event_time, processing_time
    flink_domain: str  # event-time, processing-time
    namespace_type: FlinkType
    namespace: Mapped | None


@dataclass
class ListPlan:
    name: str
    mode: DistributionMode
    element: Mapped


@dataclass
class BroadcastPlan:
    name: str
    key: Mapped
    value: Mapped


@dataclass
class OperatorPlan:
    flink: FlinkOperator
    operator_id: str
    uid: str
    key_type: FlinkType | None = None  # Flink's
    key: Mapped | None = None
    hash_type: KeyType | None = None  # pyref's key type when key groups are hashed (and checked)
    lists: list[ListPlan] = field(default_factory=list)
    broadcasts: list[BroadcastPlan] = field(default_factory=list)
    keyed: list[KeyedPlan] = field(default_factory=list)
    timers: list[TimerPlan] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    #: The in-flight data of the operator an import drops (``drop_in_flight_data``), as FlinkOperator.in_flight.
    in_flight_dropped: dict[str, int] | None = None

    @property
    def key_groups(self) -> str:
        return "hashed" if self.hash_type is not None else "writer"

    @property
    def row_keys(self) -> bool:
        """Keys are Flink SQL's ``BinaryRowData``: writer-assigned key groups pyref can
        still compute (:mod:`pyref.flink.row_keys`)."""
        return self.key_type is not None and self.key_type.kind == "row-data"

    @property
    def engine_operator_id(self) -> bytes:
        return bytes.fromhex(self.flink.operator_id)

    @property
    def has_keyed(self) -> bool:
        return bool(self.keyed or self.timers)

    def keys(self) -> Mapped:
        """How the keys import: planned for every operator with keyed state or timers."""
        assert self.key is not None
        return self.key


@dataclass
class _Planner:
    sp: FlinkSavepoint
    ttl: Mapping[str, TtlConfig]
    ttl_default: TtlConfig | None
    skip_states: set[str]
    demotions: Mapping[Place, str]
    only: str | None = None  # reading one state (Flink's name): the others are not planned
    drop_in_flight_data: bool = False
    refused: list[str] = field(default_factory=list)
    needs_ttl: list[str] = field(default_factory=list)
    used_skips: set[str] = field(default_factory=set)
    used_ttls: set[str] = field(default_factory=set)
    states: list[str] = field(default_factory=list)  # "operator/state" of every state, for errors
    ttl_states: list[str] = field(default_factory=list)  # of every state under TTL

    def mapped(self, type_: FlinkType, place: Place) -> Mapped:
        demotion = self.demotions.get(place)
        return map_type(type_, nullable_strings=demotion == "nullable", opaque=demotion == "opaque")

    def skipped(self, op: OperatorPlan, name: str) -> bool:
        if self.only is not None:
            return name != self.only
        self.states.append(f"{op.operator_id}/{name}")
        for key in self.skip_states:
            if _names_state(key, op, name):
                self.used_skips.add(key)
                op.skipped.append(name)
                return True
        return False

    def refuse(self, op: OperatorPlan, name: str, why: str) -> None:
        self.refused.append(f"{op.operator_id}/{name}: {why}")

    def ttl_of(self, op: OperatorPlan, name: str) -> TtlConfig | None:
        if self.only is not None:
            return None  # read as stored: the timestamps, whatever the configuration
        self.ttl_states.append(f"{op.operator_id}/{name}")
        for key, config in self.ttl.items():
            if _names_state(key, op, name):
                self.used_ttls.add(key)
                return config
        if self.ttl_default is None:
            self.needs_ttl.append(f"{op.operator_id}/{name}")
        return self.ttl_default

    def operator(self, flink: FlinkOperator) -> OperatorPlan:
        uid = flink.uid or (flink.name if operator_id_of_uid(flink.name) == flink.operator_id else "")
        op = OperatorPlan(flink, flink.name, uid)
        if self.drop_in_flight_data:
            op.in_flight_dropped = flink.in_flight
        if flink.has_raw_state and self.only is None:
            self.refused.append(f"{op.operator_id}: raw (user-serialized) operator or keyed state, which only the "
                                "job's own code reads, so no import can carry it (raw keyed state holding the "
                                "timers RocksDB keeps on the heap, timer-service.factory: HEAP, is read)")
        for name in flink.list_state_names:
            view = flink.list_state(name)
            if not self.skipped(op, name):
                op.lists.append(ListPlan(name, _MODES[view.mode], self.mapped(view.element_type,
                                                                              Place(op.operator_id, name, "element"))))
        for name in flink.broadcast_state_names:
            broadcast = flink.broadcast_state(name)
            if not self.skipped(op, name):
                op.broadcasts.append(BroadcastPlan(
                    name, self.mapped(broadcast.key_type, Place(op.operator_id, name, "broadcast_key")),
                    self.mapped(broadcast.value_type, Place(op.operator_id, name, "broadcast_value"))))
        try:
            flink_key, infos = flink.keyed_meta()
        except KeysNotRecordedError as exc:  # each state refused by name: skipping them imports the rest
            for name in exc.states:
                if not self.skipped(op, name):
                    self.refuse(op, name, exc.SHORT)
            return op
        for name, info in sorted(infos.items()):
            self.keyed_state(op, info) if info.backend_type != "PRIORITY_QUEUE" else self.timer_queue(op, info)
        if op.has_keyed:
            assert flink_key is not None  # a keyed stream's head holds the key serializer
            op.key_type = flink_key
            op.key = self.mapped(flink_key, Place(op.operator_id, "", "key"))
            op.hash_type = key_type(op.key)
        return op

    def keyed_state(self, op: OperatorPlan, info: StateMetaInfo) -> None:
        name = info.name
        kind = info.options.get("KEYED_STATE_TYPE", "")
        if self.skipped(op, name):
            return None
        if kind not in KINDS:
            return self.refuse(op, name, f"keyed state kind {kind or 'unknown'!r} has no pyref counterpart (folding "
                               "state was removed from Flink)")
        unreadable = unreadable_async_state(info)
        if unreadable is not None:
            return self.refuse(op, name, unreadable)
        stored = info.serializers["VALUE_SERIALIZER"]
        cell, user_key = stored, None
        if kind == "LIST":
            cell = _expect(stored, "list", op, name).children[0]
        elif kind == "MAP":
            user_key, cell = _expect(stored, "map", op, name).children
        wrapped = cell.kind == "ttl"
        if wrapped:
            cell = cell.children[1]
        if kind == "LIST" and not stores_lengths(cell):
            return self.refuse(op, name, f"a LIST state of {cell.describe()}: Flink stores its elements without "
                               "lengths, so they cannot be told apart")
        ttl = self.ttl_of(op, name) if wrapped else None
        namespace_type = info.serializers["NAMESPACE_SERIALIZER"]
        namespace = (None if namespace_type.kind == "void-namespace"
                     else self.mapped(namespace_type, Place(op.operator_id, name, "namespace")))
        value_place = Place(op.operator_id, name, "value")
        op.keyed.append(KeyedPlan(
            name, kind, KINDS[kind], namespace_type, stored, namespace,
            self.mapped(user_key, Place(op.operator_id, name, "user_key")) if user_key is not None else None,
            self.mapped(cell, value_place), ttl, wrapped,
            map_nulls=kind == "MAP" and self.demotions.get(Place(op.operator_id, name, "map_null")) == "nullable"))
        return None

    def timer_queue(self, op: OperatorPlan, info: StateMetaInfo) -> None:
        if self.skipped(op, info.name):
            return None
        rest = info.name[len(TIMER_PREFIX):] if info.name.startswith(TIMER_PREFIX) else None
        prefix = next((p for p in TIMER_DOMAINS if rest is not None and rest.startswith(p)), None)
        timer = info.serializers["VALUE_SERIALIZER"]
        if prefix is None or timer.kind != "timer":
            return self.refuse(op, info.name, f"a priority queue state of {timer.describe()} that is not a timer "
                               "service's")
        assert rest is not None  # a prefix was found in it
        service = rest[len(prefix):]
        namespace_type = timer.children[1]
        namespace = (None if namespace_type.kind == "void-namespace"
                     else self.mapped(namespace_type, Place(op.operator_id, info.name, "namespace")))
        flink_domain = TIMER_DOMAINS[prefix]
        op.timers.append(TimerPlan(info.name, service, DOMAINS[flink_domain], flink_domain, namespace_type, namespace))
        return None


def _expect(type_: FlinkType, kind: str, op: OperatorPlan, name: str) -> FlinkType:
    if type_.kind != kind:
        raise UnsupportedFormatError(f"expected a {kind} serializer, found {type_.describe()}",
                                     state=f"{op.operator_id}/{name}")
    return type_


def _names_state(key: str, op: OperatorPlan, name: str) -> bool:
    """Whether ``key`` ("OPERATOR/STATE") names state ``name`` of ``op``: the operator by its
    pyref id, uid or hex id (in either case), or by the uid whose hash its id is (Flink 1.x
    stores no uids, and a user knows their job's)."""
    if not key.endswith("/" + name):
        return False
    alias = key[:-len(name) - 1]
    return alias in (op.operator_id, op.uid) or operator_id_named(alias) == op.flink.operator_id


def plan_import(sp: FlinkSavepoint, *, ttl: Mapping[str, TtlConfig] | None = None,
                ttl_default: TtlConfig | None = None, skip_states: Iterable[str] = (),
                demotions: Mapping[Place, str] | None = None, operators: Iterable[str] | None = None,
                only: str | None = None, drop_in_flight_data: bool = False) -> list[OperatorPlan]:
    """The plan of every operator (or of ``operators``, by hex id), or a typed error
    listing everything that cannot be imported. ``only``: plan one state (Flink's name:
    a list, broadcast or keyed state, or a timer queue) to read it; no TTL configuration
    is needed then. ``drop_in_flight_data``: import an unaligned checkpoint without the
    records it kept in flight (each plan says what it drops)."""
    if sp.metadata.master_states:
        names = ", ".join(m.name for m in sp.metadata.master_states)
        raise UnsupportedFormatError(f"the savepoint holds checkpoint master hook state ({names}), which pyref's "
                                     "format has no place for", path=sp.location)
    wanted = set(operators) if operators is not None else None
    if only is None and not drop_in_flight_data:
        _refuse_in_flight_data(sp, [op for op in sp.operators if wanted is None or op.operator_id in wanted])
    planner = _Planner(sp, dict(ttl or {}), ttl_default, set(skip_states), dict(demotions or {}), only,
                       drop_in_flight_data)
    plans = [planner.operator(op) for op in sp.operators if wanted is None or op.operator_id in wanted]
    if wanted is None and only is None:  # first: a mistyped --skip-state is why a refusal below would persist
        _refuse_unknown_names(planner)
    if planner.refused and only is not None:  # a read of that one state: there is nothing to leave out
        raise UnsupportedFormatError("cannot read " + "; ".join(planner.refused), path=sp.location, state=only)
    if planner.refused:
        raise UnsupportedFormatError("cannot import: " + "; ".join(planner.refused) + " (a state can be left out: "
                                     "--skip-state OPERATOR/STATE, skip_states=[...])", path=sp.location)
    if planner.needs_ttl:
        raise InvalidArgumentError(
            f"states under TTL need a TTL configuration, which Flink does not store: {', '.join(planner.needs_ttl)}; "
            "give each with --ttl OPERATOR/STATE=DURATION[:update][:visibility] (ttl={'op/state': TtlConfig(...)}) "
            "or all with --ttl-default", path=sp.location)
    return plans


def _refuse_unknown_names(planner: _Planner) -> None:
    """A --skip-state or --ttl naming no state (a typo) is an error listing the states there are."""
    skips = sorted(set(planner.skip_states) - planner.used_skips)
    ttls = sorted(set(planner.ttl) - planner.used_ttls)
    unknown = ([f"--skip-state (skip_states) names no state: {', '.join(skips)} (the states are "
                f"{', '.join(planner.states) or 'none'})"] if skips else []) + (
        [f"--ttl (ttl) names no state under TTL: {', '.join(ttls)} (the states under TTL are "
         f"{', '.join(planner.ttl_states) or 'none'})"] if ttls else [])
    if unknown:
        raise InvalidArgumentError("; ".join(unknown), path=planner.sp.location)


def _refuse_in_flight_data(sp: FlinkSavepoint, operators: list[FlinkOperator]) -> None:
    """An import would lose the records an unaligned checkpoint kept in flight: refused, by operator and bytes."""
    lost = [f"{op.name}{'' if op.name == op.operator_id else f' ({op.operator_id})'}: {data['input_bytes']} bytes "
            f"of input channels, {data['output_bytes']} bytes of result subpartitions"
            for op in operators if (data := op.in_flight) is not None]
    if lost:
        raise UnsupportedFormatError(
            "an unaligned checkpoint's in-flight data, records between operators that are part of its exactly-once "
            f"state and that pyref's format has no place for, would be lost: {'; '.join(lost)}; take a savepoint "
            "of the job (always aligned: flink savepoint or stop --savepointPath) and import that, or import "
            "without them: --drop-in-flight-data (drop_in_flight_data=True)", path=sp.location)


_DURATION = re.compile(r"([0-9]{1,18})(ms|s|m|min|h|d)?")
_UNITS = {None: 1, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_duration_ms(text: str) -> int:
    """``500ms``, ``30s``, ``15m``, ``12h``, ``7d`` or plain milliseconds."""
    match = _DURATION.fullmatch(text.strip())
    if not match:
        raise InvalidArgumentError(f"expected a duration such as 7d, 12h, 30m, 45s, 500ms or milliseconds, got {text!r}")
    return int(match.group(1)) * _UNITS[match.group(2)]


def parse_ttl(text: str) -> TtlConfig:
    """``DURATION[:update][:visibility]``: update ``on_create_and_write`` (default) or
    ``on_read_and_write``, visibility ``never_return_expired`` (default) or
    ``return_expired_if_not_cleaned_up`` (Flink's names, as ``OnReadAndWrite``, work too)."""
    parts = text.split(":")
    if len(parts) > 3:
        raise InvalidArgumentError(f"a TTL is DURATION[:update][:visibility], got {text!r}")
    options: dict[str, str] = {}
    for part in parts[1:]:
        name = _snake(part)
        if name in UPDATE_TYPES:
            options["update_type"] = name
        elif name in VISIBILITIES:
            options["visibility"] = name
        else:
            raise InvalidArgumentError(f"unknown TTL option {part!r}: update is one of {sorted(UPDATE_TYPES)}, "
                                       f"visibility one of {sorted(VISIBILITIES)}")
    return TtlConfig(parse_duration_ms(parts[0]), **options)


def _snake(name: str) -> str:
    """``OnReadAndWrite`` -> ``on_read_and_write``; snake case stays."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower().replace("-", "_")
