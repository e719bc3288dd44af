"""Where a savepoint's files live: one small interface, one module per backend.

=====================  ====================  =========================================
Location               Backend               Commit (spec/format.md §10)
=====================  ====================  =========================================
path, ``file://``      :class:`LocalIO`       lock, fsync, write aside, rename (§10.2)
``s3://`` ``gs://``    :class:`ObjectStoreIO` conditional PUT of ``_manifest`` (§10.5)
``az://`` ``abfs://``
``hdfs://``            :class:`ArrowIO`       write aside, rename (§10.6)
=====================  ====================  =========================================
"""

from __future__ import annotations

import os

from ..errors import InvalidArgumentError
from ..location import OBJECT_STORE_SCHEMES, parse_location
from .arrow_fs import ArrowIO
from .base import (
    DATA_DIR,
    LOCK_NAME,
    LOCK_WAIT_S,
    MANIFEST_NAME,
    UNLOCKED_CLEAN_MARGIN_S,
    UNLOCKED_WRITE_DEADLINE_S,
    FileStat,
    OutputFile,
    SavepointIO,
    UrlSavepointIO,
    check_directory_name,
    check_relative_path,
    is_data_file_path,
    is_directory_name,
    is_safe_relative_path,
    typed_os_error,
    typed_os_errors,
)
from .local import LocalIO
from .object_store import ObjectStoreIO

__all__ = [
    "DATA_DIR", "LOCK_NAME", "LOCK_WAIT_S", "MANIFEST_NAME", "UNLOCKED_CLEAN_MARGIN_S", "UNLOCKED_WRITE_DEADLINE_S",
    "ArrowIO", "FileStat", "LocalIO", "ObjectStoreIO", "OutputFile", "SavepointIO", "UrlSavepointIO",
    "check_directory_name", "check_relative_path", "is_data_file_path", "is_directory_name", "is_safe_relative_path", "open_io",
    "refuse_non_directory_target", "typed_os_error", "typed_os_errors",
]


def open_io(location: str | os.PathLike[str] | SavepointIO) -> SavepointIO:
    """The storage of a location (parsed by :func:`pyref.location.parse_location`): local
    paths and ``file:`` URLs get :class:`LocalIO`, object store URLs :class:`ObjectStoreIO`,
    ``hdfs://`` and ``viewfs://`` :class:`ArrowIO`; a :class:`SavepointIO` is used as it is
    (any storage a caller implements)."""
    if isinstance(location, SavepointIO):
        return location
    parsed = parse_location(location)
    if parsed.is_local:
        return LocalIO(parsed.path)
    if parsed.scheme in OBJECT_STORE_SCHEMES:
        return ObjectStoreIO(parsed.path)
    return ArrowIO(parsed.path)


def refuse_non_directory_target(io: SavepointIO, what: str) -> None:
    """A local ``what`` (a write's target) that exists and is not a directory (a file named by
    mistake) is refused as such: writing into it fails on a path that cannot be resolved,
    which reads as a corrupt savepoint."""
    if isinstance(io, LocalIO) and os.path.lexists(io.root) and not os.path.isdir(io.root):
        raise InvalidArgumentError(f"the {what} exists and is not a directory", path=io.location)
