"""Fuzz target ``operations``: sequences of writer, rescale, clean and filesystem
operations on a small tree of savepoints, links and planted files, checked against a
model of what each savepoint must hold.

Layout: 4 bytes per operation, ``opcode, a, b, c`` (at most :data:`MAX_OPS`): the
operation (opcode mod 9, see :func:`_run`), two names and flags (bits 0-1: path, URL or
URL with a fragment; bit 2: copy; bit 3: overwrite; bits 4-5: parallelism - 1). The tree
is ``p/`` (savepoints ``sp-a``, ``sp-b``, ``sp-c``, ``sp:d`` and links ``current``,
``prev``), ``q/`` (a savepoint ``sp-q`` and a link ``x`` into ``p/``) and ``outside/``,
which nothing may ever touch. A name is reached as a path, a ``file://`` URL or a URL
with a fragment (which must be refused).

After every operation, whatever it raised (only SavepointErrors are allowed), the
model must hold:

- a savepoint whose bases are all intact reads completely, through its directory and
  through every link to it, with exactly the content last committed there;
- a savepoint with a deleted or replaced base fails to read with CorruptSavepointError
  (never wrong data), and a successful derivation never produces one;
- no directory without a committed savepoint in the model has a ``_manifest``;
- ``outside/`` stays empty.

These are the misuse paths of issue 9: targets linked to a base, links across
directories, broken chains, planted lock links, ``clean`` deleting a writer's files,
manifests listing reserved names, writers whose caller ignores an I/O error.
"""

from __future__ import annotations

import math
import os
import shutil
import struct
from dataclasses import dataclass, field
from urllib.parse import quote

from pyref import CorruptSavepointError, Savepoint, SavepointError, SavepointWriter, rescale
from pyref.cleanup import remove_unreferenced_files
from pyref.manifest import decode_manifest, encode_manifest
from pyref.serializers import Int64
from pyref.testing import DiskFullOnce

MAX_OPS = 16
DIRS = ("p/sp-a", "p/sp-b", "p/sp-c", "p/sp:d", "q/sp-q")
LINKS = ("p/current", "p/prev", "q/x")
NAMES = DIRS + LINKS
OLDER_THAN = (0.0, 3600.0, math.nan, math.inf, -1.0)
KEYS = list(range(16))


class ModelViolation(AssertionError):
    """The tree no longer matches what the operations that succeeded committed: a finding."""


@dataclass
class Entry:
    """A committed savepoint as the model knows it."""

    uid: str
    content: int
    bases: dict[str, str] = field(default_factory=dict)  # real directory -> savepoint id


class Tree:
    def __init__(self, root: str) -> None:
        self.root = root
        self.links: dict[str, str] = {}  # link name -> directory name it points to
        self.model: dict[str, Entry] = {}  # real directory name -> what it holds
        self.generation = 0
        for d in ("p", "q", "outside"):
            os.makedirs(os.path.join(root, d))

    def full(self, name: str) -> str:
        return os.path.join(self.root, name)

    def real(self, name: str) -> str:
        """The directory ``name`` designates, from the link table (not from the filesystem)."""
        return self.links.get(name, name)

    def location(self, name: str, form: int) -> str:
        """``name`` as a path (form 0 or 3), a file URL (1) or a file URL with a fragment (2)."""
        path = self.full(name)
        if form == 1:
            return "file://" + quote(path)
        if form == 2:
            return "file://" + quote(path) + "#2"  # must be refused: a fragment is not part of a path
        return path

    # -- operations ---------------------------------------------------------------

    def write(self, name: str, form: int, careless_fault: int = 0, clean_before_commit: bool = False) -> None:
        self.generation += 1
        g = self.generation
        location = self.location(name, form)
        io = DiskFullOnce(location, careless_fault) if careless_fault and form != 2 else location
        # Tiny chunks and buffer: data files are written during add(), not only at the commit.
        w = SavepointWriter(io, overwrite=True, inline_bytes=0, codec="none", chunk_bytes=48, buffer_bytes=48)
        try:
            op = w.add_operator("op", parallelism=2, max_parallelism=8, key_serializer=Int64())
            keyed, elements = op.keyed_state("k", Int64()), op.list_state("g", Int64())
            adds = [(keyed.add, KEYS[i:i + 4], [g * 100 + k for k in KEYS[i:i + 4]]) for i in range(0, len(KEYS), 4)]
            adds += [(elements.add, 0, [g, g]), (elements.add, 1, [g])]
            for add, *args in adds:
                try:
                    add(*args)
                except SavepointError:
                    pass  # a careless caller goes on after an error
            if clean_before_commit:
                remove_unreferenced_files(self.full(name), older_than=0)
            manifest = w.commit()
        except BaseException:
            w.abort()
            raise
        self._committed(name, form, Entry(manifest.savepoint_id, g))

    def rescale(self, source: str, target: str, form: int, copy: bool, overwrite: bool, parallelism: int) -> None:
        src = self.model.get(self.real(source))
        written = rescale(self.location(source, 0), self.location(target, form), parallelism, copy=copy,
                          overwrite=overwrite)
        if src is None:
            raise ModelViolation(f"rescale of {source}, which holds no savepoint, succeeded")
        bases = {} if copy else {self.real(source): src.uid, **src.bases}
        self._committed(target, form, Entry(written.savepoint_id, src.content, bases))

    def _committed(self, name: str, form: int, entry: Entry) -> None:
        if form == 2:
            raise ModelViolation(f"an operation on a URL with a fragment succeeded: {self.location(name, form)}")
        real = self.real(name)
        if not self._intact(entry) or real in entry.bases:
            raise ModelViolation(f"a derivation into {name} succeeded but refers to a missing or replaced base")
        self.model[real] = entry

    def clean(self, name: str, older_than: float) -> None:
        remove_unreferenced_files(self.full(name), older_than=older_than)
        if not (math.isfinite(older_than) and older_than >= 0):
            raise ModelViolation(f"clean accepted older_than={older_than}")

    def relink(self, link: str, to: str) -> None:
        path = self.full(link)
        if os.path.isdir(path) and not os.path.islink(path):  # written to before it was a link
            shutil.rmtree(path)
            self.model.pop(link, None)
        elif os.path.lexists(path):
            os.unlink(path)
        os.symlink(os.path.relpath(self.full(to), os.path.dirname(path)), path)
        self.links[link] = to

    def delete(self, name: str) -> None:
        real = self.real(name)
        shutil.rmtree(self.full(real), ignore_errors=True)
        self.model.pop(real, None)

    def plant_lock(self, name: str, kind: int) -> None:
        directory = self.full(self.real(name))
        if not os.path.isdir(directory):
            return
        lock = os.path.join(directory, ".lock")
        if os.path.isdir(lock) and not os.path.islink(lock):
            os.rmdir(lock)
        elif os.path.lexists(lock):
            os.unlink(lock)
        if kind % 4 == 0:
            os.symlink(self.full("outside/victim"), lock)
        elif kind % 4 == 1:
            os.mkfifo(lock)
        elif kind % 4 == 2:
            os.mkdir(lock)  # and 3 leaves it removed: writers create it again

    def list_reserved_names(self, name: str) -> None:
        """Make the manifest list reserved names as data files (a valid savepoint still)."""
        manifest = os.path.join(self.full(self.real(name)), "_manifest")
        if not os.path.isfile(manifest) or os.path.islink(manifest):
            return
        with open(manifest, "rb") as f:
            try:
                m, _ = decode_manifest(f.read(), path=manifest)
            except SavepointError:
                return
        for reserved in ("_manifest", ".lock", "data"):
            if all(f.path != reserved for f in m.data_files):
                m.data_files.add(path=reserved, size=1)
        with open(manifest, "wb") as f:
            f.write(encode_manifest(m))

    # -- the model ---------------------------------------------------------------

    def _intact(self, entry: Entry) -> bool:
        """Whether every base ``entry`` refers to still holds the savepoint it referred to."""
        return all(b in self.model and self.model[b].uid == uid for b, uid in entry.bases.items())

    def check(self) -> None:
        if os.listdir(self.full("outside")):
            raise ModelViolation(f"files appeared outside the savepoints: {os.listdir(self.full('outside'))}")
        for directory in DIRS:
            has_manifest = os.path.isfile(os.path.join(self.full(directory), "_manifest"))
            if has_manifest != (directory in self.model):
                raise ModelViolation(f"{directory}: _manifest {'present' if has_manifest else 'missing'}, "
                                     f"model {'has' if directory in self.model else 'has no'} savepoint there")
        for real, entry in self.model.items():
            intact = self._intact(entry)
            names = [real, *(link for link, to in self.links.items() if to == real)]
            for name in names:
                try:
                    uid, content = _read(self.full(name))
                except SavepointError as exc:
                    if intact or not isinstance(exc, CorruptSavepointError):
                        raise ModelViolation(f"{name} does not read: {exc!r}") from exc
                    continue
                if not intact:
                    raise ModelViolation(f"{name} read although a base is gone or replaced")
                if (uid, content) != (entry.uid, entry.content):
                    raise ModelViolation(f"{name} holds {uid}/{content}, the model {entry.uid}/{entry.content}")


def _read(path: str) -> tuple[str, int]:
    """The savepoint id and the generation a tiny savepoint holds, every value checked."""
    sp = Savepoint.open(path)
    op = sp.operator("op")
    view = op.list_state("g")
    elements = sorted(x for p in range(view.partition_count) for x in view.partition(p))
    g = elements[0] if elements else -1
    if elements != [g, g, g] or dict(op.keyed_state("k").items()) != {k: g * 100 + k for k in KEYS}:
        raise ModelViolation(f"{path}: content is not one whole generation: {elements}")
    return sp.savepoint_id, g


def operations_input(ops: list[tuple[int, int, int, int]]) -> bytes:
    return b"".join(struct.pack("<4B", *op) for op in ops)


def _run(tree: Tree, opcode: int, a: int, b: int, c: int) -> None:
    name, other, form = NAMES[a % len(NAMES)], NAMES[b % len(NAMES)], c & 3
    kind = opcode % 9
    if kind == 0:
        tree.write(name, form)
    elif kind == 1:
        tree.rescale(name, other, form, copy=bool(c & 4), overwrite=bool(c & 8), parallelism=1 + (c >> 4) % 4)
    elif kind == 2:
        tree.clean(name, OLDER_THAN[c % len(OLDER_THAN)])
    elif kind == 3:
        tree.relink(LINKS[a % len(LINKS)], DIRS[b % len(DIRS)])
    elif kind == 4:
        tree.delete(DIRS[a % len(DIRS)])
    elif kind == 5:
        tree.plant_lock(name, c)
    elif kind == 6:
        tree.write(name, 0, careless_fault=1 + c * 16)
    elif kind == 7:
        tree.write(name, 0, clean_before_commit=True)
    else:
        tree.list_reserved_names(name)


def target_operations(data: bytes, scratch: str) -> None:
    root = os.path.join(scratch, "ops")
    shutil.rmtree(root, ignore_errors=True)
    tree = Tree(root)
    for i in range(0, min(len(data), 4 * MAX_OPS) - 3, 4):
        try:
            _run(tree, *data[i:i + 4])
        except SavepointError:
            pass  # a refusal: the model says whether it left everything as it was
        tree.check()


#: Reproductions of issue 9, one input each (item number: operations).
ISSUE_9 = {
    "item1-target-linked-to-a-base": [(0, 0, 0, 0), (1, 0, 1, 0), (3, 0, 0, 0), (1, 1, 5, 8 | 16)],
    "item2-careless-caller-after-enospc": [(0, 0, 0, 0), (6, 0, 0, 3)],
    "item3-manifest-lists-reserved-names": [(0, 0, 0, 0), (8, 0, 0, 0), (0, 0, 0, 0)],
    "item4-clean-deletes-a-writers-files": [(0, 0, 0, 0), (7, 0, 0, 0), (2, 0, 0, 2)],
    "item6-fragment-in-a-file-url": [(0, 0, 0, 0), (0, 0, 0, 2), (0, 1, 0, 2)],
    "item7-lock-linked-outside": [(0, 0, 0, 0), (5, 0, 0, 0), (0, 0, 0, 0), (2, 0, 0, 0)],
    "item8-source-through-a-cross-directory-link": [(0, 0, 0, 0), (3, 2, 0, 0), (1, 7, 4, 0)],
    "item9-shallow-source-with-a-broken-chain": [(0, 0, 0, 0), (1, 0, 1, 0), (4, 0, 0, 0), (1, 1, 2, 0)],
}
#: Further seeds: ordinary use, and the derivations the model must accept.
SEEDS = {
    **ISSUE_9,
    "colon-source-shallow-then-copy": [(0, 3, 0, 0), (1, 3, 0, 0), (1, 3, 1, 4)],
    "chain-through-links": [(0, 0, 0, 0), (3, 0, 0, 0), (1, 5, 1, 32), (1, 1, 2, 64), (3, 1, 2, 0), (0, 6, 0, 1),
                            (2, 5, 0, 0), (1, 6, 3, 8 | 16)],
    "copy-across-directories-and-overwrite-a-base": [(0, 1, 0, 0), (1, 1, 4, 4), (1, 1, 0, 0), (0, 1, 0, 1),
                                                     (2, 0, 0, 1)],
}
