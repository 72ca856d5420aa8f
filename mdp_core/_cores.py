"""How many cores this process may use, and the threads that share work among them (numpy, LAPACK through
capsules and scipy's sparse products let go of the GIL, so threads run them in parallel)."""

from __future__ import annotations

import functools
import itertools
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import numpy as np

__all__ = ["over_blocks", "worker_count"]

_Result = TypeVar("_Result")


def worker_count() -> int:
    """Cores this process may use (its CPU affinity), at most 8."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(8, cores))


def _chunks(count: int, workers: int) -> list[tuple[int, int]]:
    bounds = np.linspace(0, count, max(1, min(workers, count)) + 1).astype(int)
    return list(itertools.pairwise(bounds.tolist()))


def over_blocks(count: int, task: Callable[[int, int], _Result], workers: int | None = None) -> list[_Result]:
    """``task(lo, hi)`` on consecutive chunks of ``range(count)``, one chunk per thread, in order.

    For work on a stack of blocks that releases the GIL (LAPACK through the capsules, numpy's matmul,
    fill and sum): a single core does not saturate the memory bandwidth, so even the memory-bound
    products with the 154 MB stack of inverses at depth 1 of the 15 km city take half the time on two
    threads (14 against 7 ms a product).
    """
    chunks = _chunks(count, worker_count() if workers is None else max(1, workers))
    if len(chunks) == 1:
        return [task(*chunks[0])]
    others = [_pool(len(chunks) - 1).submit(task, *chunk) for chunk in chunks[1:]]
    first = task(*chunks[0])  # the caller's thread takes a chunk too
    return [first] + [future.result() for future in others]


@functools.lru_cache(maxsize=8)
def _pool(threads: int) -> ThreadPoolExecutor:
    """Threads kept for :func:`over_blocks`: a pool per call cost 1.22 ms against 0.28 ms (~0.8 s of an
    exact optimum at depth 1 of the city, ~860 calls)."""
    return ThreadPoolExecutor(threads, thread_name_prefix="mdp-blocks")
