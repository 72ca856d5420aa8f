"""How many cores this process may use, and the threads that share work among them (numpy, LAPACK through
capsules and scipy's sparse products let go of the GIL, so threads run them in parallel)."""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from typing import TypeVar, cast

import numpy as np
from threadpoolctl import threadpool_limits

__all__ = [
    "QUIET_PROBE_SECONDS",
    "chunk_min",
    "chunk_sum",
    "elementwise",
    "machine_slowdown",
    "on_this_thread",
    "over_blocks",
    "worker_count",
]

_Result = TypeVar("_Result")
#: Set (:func:`on_this_thread`) where the caller already runs one task per core: block work stays inline.
_INLINE: ContextVar[bool] = ContextVar("mdp_inline_blocks", default=False)
#: Elements per chunk of :func:`elementwise`: a formula's operands and temporaries stay in cache.
_CHUNK = 1 << 16


def worker_count() -> int:
    """Cores this process may use (its CPU affinity), at most 8."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(8, cores))


#: Wall seconds of :func:`machine_slowdown`'s probe (300 Cholesky factorisations and products of a 160 x 160
#: matrix on each core at once) on the quiet 2-core machine the geo bound's timing constants were measured on:
#: 89-101 ms. With five busy processes beside it: 294-341 ms, the 3.5x fewer cycles its two threads get.
QUIET_PROBE_SECONDS = 0.09
#: Slowdowns up to this are taken as a quiet machine (the probe's own spread).
QUIET_SLOWDOWN = 1.25


def machine_slowdown() -> float:
    """How many times fewer cycles this process's threads get now than on a quiet machine (>= 1).

    One probe of LAPACK work like a coset's interior point, on :func:`worker_count` threads at once (BLAS on
    one thread each), timed against :data:`QUIET_PROBE_SECONDS`; 1.0 up to :data:`QUIET_SLOWDOWN`. A timing
    model calibrated on a quiet machine divides the time it plans with by it (a busy or slower machine).
    Takes ~0.1 s on a quiet machine.
    """
    workers = worker_count()
    matrix = np.random.default_rng(0).standard_normal((160, 160))
    matrix = matrix @ matrix.T + 160.0 * np.eye(160)

    def probe(_: int) -> None:
        for _ in range(300):
            np.linalg.cholesky(matrix)
            matrix @ matrix

    start = time.perf_counter()
    with threadpool_limits(limits=1), ThreadPoolExecutor(workers) as pool:
        list(pool.map(probe, range(workers)))
    slowdown = (time.perf_counter() - start) / QUIET_PROBE_SECONDS
    return slowdown if slowdown > QUIET_SLOWDOWN else 1.0


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
    if _INLINE.get():
        workers = 1
    chunks = _chunks(count, worker_count() if workers is None else max(1, workers))
    if len(chunks) == 1:
        return [task(*chunks[0])]
    others = [_pool(len(chunks) - 1).submit(task, *chunk) for chunk in chunks[1:]]
    first = task(*chunks[0])  # the caller's thread takes a chunk too
    return [first] + [future.result() for future in others]


@contextlib.contextmanager
def on_this_thread() -> Iterator[None]:
    """:func:`over_blocks` (and so :func:`elementwise`) on the calling thread only, within this context: for
    tasks that already run one per core, where splitting each over the shared pool only queues them behind
    each other (the 49 cosets of depth 4 of the 15 km city, eps 1.0, 60 s: 1.2184 km each on its thread,
    1.1799 with their block and element-wise work split over the pool)."""
    token = _INLINE.set(True)
    try:
        yield
    finally:
        _INLINE.reset(token)


@functools.lru_cache(maxsize=8)
def _pool(threads: int) -> ThreadPoolExecutor:
    """Threads kept for :func:`over_blocks`: a pool per call cost 1.22 ms against 0.28 ms (~0.8 s of an
    exact optimum at depth 1 of the city, ~860 calls)."""
    return ThreadPoolExecutor(threads, thread_name_prefix="mdp-blocks")


def _over_chunks(size: int, task: Callable[[int, int], _Result]) -> list[_Result]:
    """``task(a, b)`` for the consecutive :data:`_CHUNK`-sized ranges of ``range(size)``, on every core."""

    def chunks(lo: int, hi: int) -> list[_Result]:
        return [task(a, min(a + _CHUNK, size)) for a in range(lo * _CHUNK, min(hi * _CHUNK, size), _CHUNK)]

    return [result for part in over_blocks(-(-size // _CHUNK), chunks) for result in part]


def _sliced(operands: tuple[np.ndarray | float, ...], a: int, b: int) -> list[np.ndarray | float]:
    return [operand[a:b] if isinstance(operand, np.ndarray) else operand for operand in operands]


def elementwise(formula: Callable[..., np.ndarray], *operands: np.ndarray | float) -> np.ndarray:
    """``formula(*operands)`` for 1-D float arrays of one length (and scalars), chunk by chunk, on every core.

    numpy writes every temporary of a whole-vector expression to memory and reads it back; chunks of
    :data:`_CHUNK` keep them in cache. ``(-a - b * c) / d`` over 5.8 M elements (the interior point's rows at
    depth 2 of the 15 km city): 29.6 ms whole, 10.7 ms chunked on 2 cores. ``formula`` must work element by
    element; the first operand is an array, and gives the length.
    """
    out = np.empty(len(cast("np.ndarray", operands[0])))

    def task(a: int, b: int) -> None:
        out[a:b] = formula(*_sliced(operands, a, b))

    _over_chunks(len(out), task)
    return out


def _reduced(
    formula: Callable[..., np.ndarray], operands: tuple[np.ndarray | float, ...], reduce: str
) -> list[float]:
    """``formula(*operands)`` reduced by its method ``reduce`` ("min", "sum") per chunk, on every core."""
    size = len(cast("np.ndarray", operands[0]))
    return _over_chunks(size, lambda a, b: float(getattr(formula(*_sliced(operands, a, b)), reduce)()))


def chunk_min(formula: Callable[..., np.ndarray], *operands: np.ndarray | float) -> float:
    """``formula(*operands).min()`` chunk by chunk, on every core (:func:`elementwise`); inf when empty."""
    return min(_reduced(formula, operands, "min"), default=np.inf)


def chunk_sum(formula: Callable[..., np.ndarray], *operands: np.ndarray | float) -> float:
    """``formula(*operands).sum()`` chunk by chunk, on every core (:func:`elementwise`)."""
    return sum(_reduced(formula, operands, "sum"))
