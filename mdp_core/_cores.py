"""How many cores this process may use (the threaded numpy loops of the core size their pools by it)."""

from __future__ import annotations

import os

__all__ = ["worker_count"]


def worker_count() -> int:
    """Cores this process may use (its CPU affinity), at most 8."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(8, cores))
