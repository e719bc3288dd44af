"""The values of Flink CEP's keyed state (``flink-cep``'s ``CepOperator``), decoded.

A CEP operator keeps, per key: ``nfaStateName`` (the ``NFAState``: its partial and completed
matches, each a ``ComputationState``), the shared buffer (``sharedBuffer-events``: each event
by its ``EventId`` under a reference count; ``sharedBuffer-entries-with-lockable-edges``
(``sharedBuffer-entries`` in older releases' savepoints, which Flink migrates on restore: the
``cep-shared-buffer-node-v1`` values below): the match graph's nodes by ``NodeId``, each
edge to a predecessor node versioned by a ``DeweyNumber``; ``sharedBuffer-events-count``:
events seen per timestamp), the events waiting for the watermark (``eventQueuesStateName``:
timestamp -> list of events, plain Flink types) and its timers.

The serializers are flink-cep's own; their snapshots are composites
(:mod:`pyref.flink.serializers` parses them into the ``cep-*`` kinds) and their values are
written without any length, field by field (this module reads them; pyref keeps the bytes as
Flink wrote them, so an export writes them back unchanged):

=====================  ==========================================================================
kind                   Flink's bytes
=====================  ==========================================================================
cep-event-id           int id, long timestamp
cep-dewey-number       int digit count, the digits (ints)
cep-node-id            byte 1 (0: null, nothing follows), the event id, the page (``StringValue``)
cep-shared-buffer-     the target node id (null: a match's first event), the dewey number
edge
cep-shared-buffer-     int edge count, per edge an int reference count and the edge
node                   (``SharedBufferNodeSerializer``)
cep-shared-buffer-     the edges as a ``List`` (the legacy ``sharedBuffer-entries``' serializer:
node-v1                no reference count per edge)
cep-lockable           int reference count, the element
cep-nfa-state          partial matches, then completed matches: each an int count of
                       computation states: the state name (``StringValue``), the previous node
                       id, the dewey number, long start timestamp, (when the snapshot's outer
                       version 2 flag says so, Flink 1.16+) long previous timestamp, byte 1
                       and the start event id (byte 0: none)
=====================  ==========================================================================
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

from .datainput import DataInput
from .serializers import FlinkType

__all__ = ["EventId", "NodeId", "SharedBufferEdge", "Lockable", "ComputationState", "NFAState", "CEP_KINDS",
           "cep_reader"]

Read = Callable[[DataInput], Any]


class EventId(NamedTuple):
    """An event of the shared buffer: its number among the events of its timestamp."""

    id: int
    timestamp: int


class NodeId(NamedTuple):
    """A node of the shared buffer: the event and the pattern stage ("page") it matched."""

    event_id: EventId
    page: str


class SharedBufferEdge(NamedTuple):
    """An edge to the previous node of a match (None: the match's first event), valid for
    the matches whose Dewey version is compatible with ``version``."""

    target: NodeId | None
    version: tuple[int, ...]


class Lockable(NamedTuple):
    """An element of the shared buffer under its reference count."""

    ref_count: int
    element: Any


class ComputationState(NamedTuple):
    """A partial (or completed, not yet emitted) match of the NFA."""

    state: str
    previous: NodeId | None
    version: tuple[int, ...]
    start_timestamp: int
    previous_timestamp: int | None  # of the match's last event (None: not stored, before Flink 1.16)
    start_event: EventId | None


class NFAState(NamedTuple):
    """The NFA of one key: its partial matches and its completed, not yet emitted, ones."""

    partial_matches: list[ComputationState]
    completed_matches: list[ComputationState]


def _present(inp: DataInput, what: str) -> bool:
    """flink-cep's own null flag: a byte 1 before a value, 0 for null."""
    start = inp.pos
    flag = inp.read_ubyte(what)
    if flag > 1:
        raise inp.corrupt(f"{what} 0x{flag:02x}, expected 0 or 1", start, 1)
    return flag == 1


def _page(inp: DataInput, what: str) -> str:
    start = inp.pos
    text = inp.read_string_value(what)
    if text is None:
        raise inp.corrupt(f"a null {what}", start, inp.pos - start)
    return text


def _event_id(inp: DataInput) -> EventId:
    return EventId(inp.read_int("event id"), inp.read_long("event timestamp"))


def _dewey_number(inp: DataInput) -> tuple[int, ...]:
    return tuple(inp.read_int("Dewey digit") for _ in range(inp.read_count("Dewey number length", 4)))


def _node_id(event_id: Read) -> Read:
    def read(inp: DataInput) -> NodeId | None:
        if not _present(inp, "node id flag"):
            return None
        return NodeId(event_id(inp), _page(inp, "node page name"))

    return read


def _edge(node_id: Read, version: Read) -> Read:
    return lambda inp: SharedBufferEdge(node_id(inp), version(inp))


def _buffer_node(edge: Read) -> Read:
    def read(inp: DataInput) -> list[Lockable]:
        n = inp.read_count("shared buffer edge count", 9)
        return [Lockable(inp.read_int("edge reference count"), edge(inp)) for _ in range(n)]

    return read


def _lockable(element: Read) -> Read:
    return lambda inp: Lockable(inp.read_int("reference count"), element(inp))


def _nfa_state(type_: FlinkType, version: Read, node_id: Read, event_id: Read) -> Read:
    with_previous = type_.previous_timestamp

    def states(inp: DataInput) -> list[ComputationState]:
        out = []
        for _ in range(inp.read_count("computation state count", 15)):
            name = _page(inp, "NFA state name")
            previous = node_id(inp)
            dewey = version(inp)
            start = inp.read_long("start timestamp")
            last = inp.read_long("previous timestamp") if with_previous else None
            out.append(ComputationState(name, previous, dewey, start, last,
                                        event_id(inp) if _present(inp, "start event flag") else None))
        return out

    return lambda inp: NFAState(states(inp), states(inp))


#: Each CEP kind: how its reader is built from its type and its nested serializers' readers (Flink's order).
_BUILDERS: dict[str, Callable[..., Read]] = {
    "cep-event-id": lambda t: _event_id,
    "cep-dewey-number": lambda t: _dewey_number,
    "cep-node-id": lambda t, event_id: _node_id(event_id),
    "cep-shared-buffer-edge": lambda t, node_id, version: _edge(node_id, version),
    "cep-shared-buffer-node": lambda t, edge: _buffer_node(edge),
    "cep-shared-buffer-node-v1": lambda t, edges: edges,
    "cep-lockable": lambda t, element: _lockable(element),
    "cep-nfa-state": _nfa_state,
}
CEP_KINDS = frozenset(_BUILDERS)


def cep_reader(type_: FlinkType, children: list[Read]) -> Read:
    """The reader of one value of ``type_`` (a CEP kind) whose nested serializers read ``children``."""
    return _BUILDERS[type_.kind](type_, *children)
