"""pyref: reference implementation of the portable savepoint format.

A savepoint is a durable snapshot of a stream processor's state that restores
at any parallelism. This package reads, writes, plans restores of and rescales
savepoints with nothing but protobuf and pyarrow; :mod:`pyref.spark` does the
same at scale on a Spark cluster.
"""

__version__ = "0.1.0"

from .errors import (
    ConcurrentWriteError,
    CorruptSavepointError,
    IncompatibleSerializerError,
    InvalidArgumentError,
    SavepointError,
    SavepointNotFoundError,
    StorageError,
    UnsupportedFormatError,
)
from .key_groups import (
    KeyGroupRange,
    assign_to_key_group,
    compute_key_groups,
    default_max_parallelism,
    key_group_range,
    operator_index_for_key_group,
)
from .inspection import VerifyReport, describe, verify
from .manifest import FORMAT_MAJOR, FORMAT_MINOR
from .reader import Savepoint
from .redistribution import DistributionMode, ElementSlice, redistribute
from .restore import RestorePlan
from .rewrite import migrate_state, rescale
from .ttl import TtlConfig
from .writer import SavepointWriter

__all__ = [
    "FORMAT_MAJOR",
    "FORMAT_MINOR",
    "ConcurrentWriteError",
    "CorruptSavepointError",
    "DistributionMode",
    "ElementSlice",
    "IncompatibleSerializerError",
    "InvalidArgumentError",
    "KeyGroupRange",
    "RestorePlan",
    "Savepoint",
    "SavepointError",
    "SavepointNotFoundError",
    "SavepointWriter",
    "StorageError",
    "TtlConfig",
    "UnsupportedFormatError",
    "VerifyReport",
    "assign_to_key_group",
    "compute_key_groups",
    "default_max_parallelism",
    "describe",
    "key_group_range",
    "migrate_state",
    "operator_index_for_key_group",
    "redistribute",
    "rescale",
    "verify",
]
