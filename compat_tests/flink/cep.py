"""The CEP job's savepoints (jobs/CepJob.java) as pyref sees them: the types of its states
(each of its two CEP operators keeps the same ones)."""

from __future__ import annotations

_EVENT = "pojo<boolean,string,int64,int64,int32,int64,int64>"
_NODE_ID = "cep-node-id<cep-event-id>"
#: Every keyed state of one CEP operator: (state, key type, stored type, namespace type), sorted.
STATE_TYPES = sorted([
    # events waiting for the watermark, by timestamp
    ("eventQueuesStateName", "string", f"map<int64,list<{_EVENT}>>", "void-namespace"),
    # the NFA: partial and completed matches
    ("nfaStateName", "string", f"cep-nfa-state<cep-dewey-number,{_NODE_ID},cep-event-id>", "void-namespace"),
    # the shared buffer: the match graph's nodes, the events under their reference counts, events per timestamp
    ("sharedBuffer-entries-with-lockable-edges", "string",
     f"map<{_NODE_ID},cep-lockable<cep-shared-buffer-node<cep-shared-buffer-edge<{_NODE_ID},cep-dewey-number>>>>",
     "void-namespace"),
    ("sharedBuffer-events", "string", f"map<cep-event-id,cep-lockable<{_EVENT}>>", "void-namespace"),
    ("sharedBuffer-events-count", "string", "map<int64,int32>", "void-namespace"),
])
#: The CEP operators of the job (both patterns).
OPERATORS = 2
