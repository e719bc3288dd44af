"""How the tests import the corpus's cases (``pyref.flink.import_flink``): the TTL
configuration each job gave its states under TTL (Flink does not store it; the truth
records it) and the states an import must leave out."""

from __future__ import annotations

import json
import pathlib

from pyref import TtlConfig

CORPUS = pathlib.Path(__file__).resolve().parent / "corpus"
CASES = sorted(p.parent for p in CORPUS.glob("*/*/*/truth.json"))
#: The corpus's one LIST state of Kryo elements: Flink stores no element lengths, so the
#: import refuses it unless it is left out.
UNSPLITTABLE = {"keyed-kinds": ["pojo-keys/blobs"]}
_TTL_NAMES = {"OnCreateAndWrite": "on_create_and_write", "OnReadAndWrite": "on_read_and_write",
              "NeverReturnExpired": "never_return_expired",
              "ReturnExpiredIfNotCleanedUp": "return_expired_if_not_cleaned_up"}


def truth(case: pathlib.Path) -> dict:
    return json.loads((case / "truth.json").read_text(encoding="utf-8"))


def ttl_configs(case_truth: dict) -> dict[str, TtlConfig]:
    """The TTL configuration of every state under TTL, by "uid/state", as the job set it."""
    return {f"{uid}/{name}": TtlConfig(s["ttl"]["ttl_ms"], _TTL_NAMES[s["ttl"]["update_type"]],
                                       _TTL_NAMES[s["ttl"]["visibility"]])
            for uid, op in case_truth["operators"].items() for name, s in op["keyed_state"].items() if s["ttl"]}


def import_options(case: pathlib.Path) -> dict:
    """``import_flink``'s options for a case: every uid, the TTLs, the states left out."""
    case_truth = truth(case)
    return {"uids": list(case_truth["operators"]), "ttl": ttl_configs(case_truth),
            "skip_states": UNSPLITTABLE.get(case.name, [])}
