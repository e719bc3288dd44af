"""What the benchmark scripts measure about their own process (each phase runs in one)."""

from __future__ import annotations


def peak_rss_bytes() -> int:
    """The process's peak resident set size (VmHWM), in bytes; 0 where /proc has none."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0
