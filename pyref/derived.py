"""Which savepoints use a savepoint as their base, so that replacing it is refused.

A shallow savepoint refers to its bases' data files (spec/format.md §8); replacing a
base deletes them (§10.3) and breaks it. A base cannot see who refers to it, so a
writer deriving a shallow savepoint ``T`` first **registers** ``T`` in each of its
bases: a small file ``_derived/<name>`` naming ``T`` relative to the base, as a
sibling directory or by its path in the store (§8.6). A writer about to replace a
savepoint opens the savepoints its registrations name and refuses while one of them
lists the savepoint's current ``savepoint_id`` as a base, unless forced.

A registration is a claim to check, never trusted: it is written before ``T`` commits
(so a crash leaves at most a registration of a savepoint that does not refer to the
base, which the check ignores), it is resolved with the rules of manifest paths (a
sibling name or a safe path inside the store, never a URL of its own), and one that
does not parse or resolve is ignored.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import warnings
from collections.abc import Iterable

from .errors import CorruptSavepointError, InvalidArgumentError, SavepointError, SavepointNotFoundError, StorageError
from .io import MANIFEST_NAME, SavepointIO, check_directory_name, check_relative_path
from .manifest import decode_manifest
from .reader import read_committed

DERIVED_DIR = "_derived"
#: The command-line flag that replaces a savepoint in use as a base.
FORCE_HELP = ("with --overwrite: replace the target even if shallow savepoints use it as their base, which breaks "
              "them (spec/format.md §8.4)")
#: A registration is a line of JSON; anything longer is not one (and is not read whole).
MAX_REGISTRATION_BYTES = 4096


def registration(base: SavepointIO, derived: SavepointIO) -> tuple[str, bytes]:
    """The file name in ``base`` and the contents that register ``derived``: its directory
    name if it is the base's sibling, else its path from the root of the store. The name is
    a hash of the contents, so registering one savepoint twice writes one file."""
    ref = {"directory": derived.name} if derived.parent_key() == base.parent_key() else {"path": derived.store_path()}
    data = (json.dumps(ref, sort_keys=True) + "\n").encode()
    return f"{DERIVED_DIR}/{hashlib.sha256(data).hexdigest()[:32]}", data


def register_derived(derived: SavepointIO, bases: Iterable[SavepointIO]) -> None:
    """Register ``derived`` in each of ``bases`` before it commits (spec/format.md §8.3 step 8).

    A registration already there with the right contents stays; one with other contents
    (a registration cut short by a crash) is written again. A base the writer may not
    write (read-only storage) gets a warning: the derivation proceeds, unprotected."""
    for base in bases:
        rel, data = registration(base, derived)
        try:
            if base.size(rel) == len(data) and base.read_file(rel) == data:
                continue
            with contextlib.suppress(SavepointNotFoundError):
                base.delete(rel)
            out = base.create(rel)
            try:
                out.write(data)
            finally:
                out.close()
        except (StorageError, CorruptSavepointError) as exc:
            warnings.warn(f"cannot register {derived.location} as a savepoint derived from {base.location} "
                          f"({exc}); replacing that base will not be refused", RuntimeWarning, stacklevel=2)


def _registered(base: SavepointIO, rel: str) -> SavepointIO | None:
    """The savepoint directory a registration names, or None if it names none."""
    try:
        if (base.size(rel) or MAX_REGISTRATION_BYTES + 1) > MAX_REGISTRATION_BYTES:
            return None
        ref = json.loads(base.read_file(rel))
        if not isinstance(ref, dict):
            return None
        if isinstance(ref.get("directory"), str):
            found = base.sibling(check_directory_name(ref["directory"]))
        elif isinstance(ref.get("path"), str):
            found = base.at_store_path(check_relative_path(ref["path"], what="registered path"))
        else:
            return None
    except (ValueError, CorruptSavepointError, SavepointNotFoundError, InvalidArgumentError):
        return None  # not JSON, unsafe, outside the store root, or gone meanwhile
    return None if found.location == base.location else found


def dependents(base: SavepointIO, savepoint_id: str) -> list[str]:
    """The locations of registered savepoints whose committed manifest lists a base with
    ``savepoint_id``: they read ``base``'s current data files. Work: one listing and one
    manifest read per registration."""
    found = []
    for rel in base.list_files(DERIVED_DIR):
        derived = _registered(base, rel)
        if derived is None:
            continue
        try:
            manifest = read_committed(derived)[1]
        except SavepointError as exc:
            if isinstance(exc, StorageError):
                raise
            continue  # gone, never committed, or unreadable: it reads nothing of this base
        if any(b.savepoint_id == savepoint_id for b in manifest.bases):
            found.append(derived.location)
    return sorted(found)


def check_not_a_base(io: SavepointIO, previous: bytes | None, *, force: bool,
                     breaking: str = "pass force=True (--force) to break them") -> None:
    """Refuse to replace the savepoint ``previous`` (the manifest bytes at ``io``) while a
    registered savepoint uses it as a base (spec/format.md §8.4), unless ``force``;
    ``breaking`` tells the caller how to replace it anyway. A previous manifest that does
    not decode has no id anyone could have recorded."""
    if previous is None or force:
        return
    try:
        manifest, _ = decode_manifest(previous, path=io.describe(MANIFEST_NAME))
    except SavepointError:
        return
    users = dependents(io, manifest.savepoint_id)
    if users:
        shown = ", ".join(users[:5]) + (f" and {len(users) - 5} more" if len(users) > 5 else "")
        raise InvalidArgumentError(
            f"savepoint {manifest.savepoint_id} here is the base of {shown}: replacing it would delete the data they "
            f"refer to. Flatten them first (pyref flatten SRC TARGET), or {breaking}",
            path=io.location)
