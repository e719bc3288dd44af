"""Shared by the generators: write a savepoint from a model, rewrite a manifest,
hash a corpus, and record how a case was made."""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import os
import pathlib
import platform
import shutil
import sys
from collections.abc import Callable, Iterable
from importlib import metadata

from compat_tests.canonical import BroadcastModel, ListModel, OperatorModel

SUMS_NAME = "SHA256SUMS"
#: Files in a corpus that are documentation, not data: not hashed, may be regenerated.
UNHASHED = {SUMS_NAME, "README.md"}
#: Dependencies whose versions are recorded with every generated case.
RECORDED_DEPENDENCIES = ("pyref-savepoint", "protobuf", "pyarrow", "numpy", "google-crc32c")


def write_model(path: pathlib.Path, operators: Iterable[OperatorModel], **writer_options) -> None:
    """Write a savepoint holding exactly the model's states with pyref's writer."""
    from pyref import SavepointWriter
    from pyref.redistribution import DistributionMode

    with SavepointWriter(str(path), **writer_options) as w:
        for op in operators:
            ow = w.add_operator(op.operator_id, op.parallelism, max_parallelism=op.max_parallelism,
                                key_serializer=op.key_serializer if op.keyed or op.timers else None, name=op.name,
                                uid=op.uid, engine_operator_id=op.engine_operator_id,
                                key_groups="writer" if op.writer_key_groups else "hashed")
            for ls in op.lists:
                state = ow.list_state(ls.name, ls.serializer, DistributionMode(ls.mode))
                for subtask, elements in enumerate(ls.partitions):
                    if elements:
                        state.add(subtask, elements)
            for ks in op.keyed:
                state = ow.keyed_state(ks.name, ks.value_serializer, kind=ks.kind,
                                       user_key_serializer=ks.user_key_serializer,
                                       namespace_serializer=ks.namespace_serializer, ttl=ks.ttl)
                if ks.rows:
                    state.add([r[0] for r in ks.rows], [r[-1] for r in ks.rows],
                              [r[1] for r in ks.rows] if ks.kind == "map" else None,
                              namespaces=ks.namespaces, ttl_timestamps=ks.ttl_timestamps, key_groups=ks.key_groups)
            for tm in op.timers:
                service = ow.timer_service(tm.name, tm.domain, namespace_serializer=tm.namespace_serializer)
                if tm.timers:
                    service.add([t[0] for t in tm.timers], [t[-1] for t in tm.timers],
                                [t[1] for t in tm.timers] if tm.namespace_serializer is not None else None,
                                key_groups=tm.key_groups)
            for bm in op.broadcast:
                _write_broadcast(ow.broadcast_state(bm.name, bm.key_serializer, bm.value_serializer), bm)
            ow.coordinator_state = op.coordinator_state
    remove_lock(path)


def _write_broadcast(state, bm: BroadcastModel) -> None:
    """Equal partitions as one shared map (how a broadcast state is written), others each on its own."""
    if bm.partitions and all(p == bm.partitions[0] for p in bm.partitions):
        if bm.partitions[0]:
            state.add_all([k for k, _ in bm.partitions[0]], [v for _, v in bm.partitions[0]])
        return
    for subtask, entries in enumerate(bm.partitions):
        if entries:
            state.add(subtask, [k for k, _ in entries], [v for _, v in entries])


def remove_lock(path: pathlib.Path) -> None:
    """The writer's commit lock file is not part of a savepoint."""
    lock = pathlib.Path(path) / ".lock"
    if lock.exists():
        lock.unlink()


def read_manifest(path: pathlib.Path):
    from pyref.manifest import decode_manifest

    return decode_manifest((pathlib.Path(path) / "_manifest").read_bytes(), path=str(path))


def write_manifest(path: pathlib.Path, manifest, *, minor: int | None = None, validate: bool = True) -> bytes:
    """Re-encode ``manifest`` with a valid envelope and CRC and replace the savepoint's ``_manifest``."""
    from pyref.manifest import decode_manifest, encode_manifest

    data = encode_manifest(manifest) if minor is None else encode_manifest(manifest, minor)
    if validate:
        decode_manifest(data, path=str(path))
    (pathlib.Path(path) / "_manifest").write_bytes(data)
    return data


def rewrite_manifest(path: pathlib.Path, change: Callable, **kwargs) -> None:
    manifest, _ = read_manifest(path)
    change(manifest)
    write_manifest(path, manifest, **kwargs)


def envelope(body: bytes, major: int, minor: int) -> bytes:
    """A manifest envelope around arbitrary body bytes, with a valid CRC32C."""
    from pyref.manifest import encode_envelope

    return encode_envelope(body, major, minor)


def rescale_model(operators: list[OperatorModel], parallelism: int) -> list[OperatorModel]:
    """The model of ``pyref.rescale(..., parallelism)``: list partitions re-cut, keyed state unchanged."""
    from pyref.redistribution import DistributionMode, redistribute

    out = []
    for op in operators:
        slices = redistribute({ls.name: (DistributionMode(ls.mode), [len(p) for p in ls.partitions])
                               for ls in op.lists}, op.parallelism, parallelism)
        lists = []
        for ls in op.lists:
            if DistributionMode(ls.mode) is DistributionMode.UNION:
                partitions = [list(p) for p in ls.partitions]
            else:
                partitions = [[v for s in slices[ls.name][i] for v in ls.partitions[s.partition][s.first:s.first + s.count]]
                              for i in range(parallelism)]
            lists.append(ListModel(ls.name, ls.mode, ls.serializer, partitions, ls.snapshot))
        broadcast = [BroadcastModel(b.name, b.key_serializer, b.value_serializer,
                                    [list(b.partitions[i % op.parallelism]) for i in range(parallelism)])
                     for b in op.broadcast]
        # Keyed state and timers stay as they are; every other part of the operator too.
        keyed = [dataclasses.replace(k, rows=list(k.rows)) for k in op.keyed]
        out.append(dataclasses.replace(op, parallelism=parallelism, lists=lists, keyed=keyed, broadcast=broadcast))
    return out


def sha256_file(path: pathlib.Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def corpus_files(root: pathlib.Path) -> list[str]:
    """Every hashed file under ``root``, as "/"-separated paths relative to it, sorted."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for name in filenames:
            if name in UNHASHED:
                continue
            rel = os.path.relpath(os.path.join(dirpath, name), root)
            out.append(rel.replace(os.sep, "/"))
    return sorted(out)


def hash_corpus(root: pathlib.Path) -> dict[str, str]:
    return {rel: sha256_file(root / rel) for rel in corpus_files(root)}


def read_sums(root: pathlib.Path) -> dict[str, str]:
    sums = {}
    path = root / SUMS_NAME
    if not path.exists():
        return sums
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            digest, rel = line.split("  ", 1)
            sums[rel] = digest
    return sums


def add_to_sums(root: pathlib.Path, new_files: Iterable[str]) -> None:
    """Add the hashes of newly generated files; an entry already listed is never changed."""
    sums = read_sums(root)
    for rel in new_files:
        if rel in sums:
            raise SystemExit(f"{root / rel} is already listed in {SUMS_NAME}: corpora are written once")
        sums[rel] = sha256_file(root / rel)
    text = "".join(f"{sums[rel]}  {rel}\n" for rel in sorted(sums))
    (root / SUMS_NAME).write_text(text, encoding="utf-8")


def provenance(command: str) -> dict:
    versions = {}
    for dist in RECORDED_DEPENDENCIES:
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    import pyref

    return {
        "command": command,
        "pyref_version": pyref.__version__,
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "dependencies": versions,
        "generated_on": datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
    }


def command_line() -> str:
    return "python -m " + " ".join([sys.modules["__main__"].__spec__.name if getattr(
        sys.modules["__main__"], "__spec__", None) else "compat_tests", *sys.argv[1:]])


def fresh_dir(target: pathlib.Path) -> pathlib.Path:
    """A temporary directory beside ``target`` to build a case in; renamed into place when complete."""
    tmp = target.parent / f".{target.name}.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    return tmp


def generator_main(argv: list[str] | None, doc: str | None, golden_dir: pathlib.Path, reject_dir: pathlib.Path,
                   listing: Callable[[], Iterable[str]],
                   generate: Callable[[pathlib.Path, pathlib.Path, list[str] | None], list]) -> int:
    """The command line of a generator that writes golden and reject cases: ``--list`` prints
    ``listing()``; otherwise ``generate(golden_out, reject_out, cases)`` writes the missing ones."""
    import argparse

    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--golden-out", type=pathlib.Path, default=golden_dir)
    parser.add_argument("--reject-out", type=pathlib.Path, default=reject_dir)
    parser.add_argument("--case", action="append", help="generate only this case (repeatable)")
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args(argv)
    if args.list:
        for line in listing():
            print(line)
        return 0
    made = generate(args.golden_out, args.reject_out, args.case)
    print(f"{len(made)} cases written")
    return 0
