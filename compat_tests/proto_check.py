"""Breaking-change check of proto/ against every released schema snapshot, with buf.

    python -m compat_tests.proto_check                  # buf lint proto + buf breaking against each baseline
    python -m compat_tests.proto_check --snapshot 1.1   # record proto/ as released format 1.1's schemas

buf comes from PyPI (``buf-bin``, in the ``dev`` extra) and runs offline.
Exit codes: 0 clean, 1 a lint or breaking-change finding, 2 buf missing.
"""

from __future__ import annotations

import argparse
import pathlib
import shutil
import subprocess
import sys

from compat_tests import ROOT

REPO = ROOT.parent
PROTO = REPO / "proto"
BASELINES = ROOT / "proto-baseline"


def find_buf() -> str | None:
    beside = pathlib.Path(sys.executable).parent / "buf"
    return str(beside) if beside.exists() else shutil.which("buf")


def baselines() -> list[pathlib.Path]:
    return sorted((p for p in BASELINES.iterdir() if p.is_dir() and any(p.rglob("*.proto"))),
                  key=lambda p: tuple(int(x) for x in p.name.split(".")))


def _rel(path: pathlib.Path) -> str:
    try:
        return str(path.relative_to(REPO))
    except ValueError:
        return str(path)


def run_buf(args: list[str], buf: str) -> int:
    print("$ buf " + " ".join(args), flush=True)
    return subprocess.run([buf, *args], cwd=REPO, stdin=subprocess.DEVNULL, timeout=600).returncode


def check(proto: pathlib.Path = PROTO, *, lint: bool = True) -> int:
    buf = find_buf()
    if buf is None:
        print("buf not found: pip install buf-bin (the dev extra)", file=sys.stderr)
        return 2
    failed = False
    if lint:
        failed |= run_buf(["lint", _rel(proto)], buf) != 0
    for baseline in baselines():
        failed |= run_buf(["breaking", _rel(proto), "--against", _rel(baseline)], buf) != 0
    print("proto check: " + ("FAILED" if failed else f"clean against {[b.name for b in baselines()]}"))
    return 1 if failed else 0


def snapshot(version: str) -> pathlib.Path:
    target = BASELINES / version
    if target.exists():
        raise SystemExit(f"{target} exists: a released schema snapshot is never changed")
    for src in sorted(PROTO.rglob("*.proto")):
        dst = target / src.relative_to(PROTO)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--snapshot", metavar="VERSION", help="record proto/ as the schemas of a released version")
    parser.add_argument("--no-lint", action="store_true")
    args = parser.parse_args(argv)
    if args.snapshot:
        print(f"wrote {snapshot(args.snapshot)}")
        return 0
    return check(lint=not args.no_lint)


if __name__ == "__main__":
    sys.exit(main())
