"""Where sweeps run: the embedded LocalCluster (once per process), a scheduler from Dask's own setting, and
per-worker set-up (HiGHS and BLAS single-threaded). See DESIGN.md "Sweeps at scale"."""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import importlib
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from mdp_core._validation import Progress
from mdp_core.errors import DataError
from mdp_core.sweep.spec import CODE_VERSION, loaded_code_version

__all__ = [
    "POLL_SECONDS",
    "QUIET_WORKERS",
    "STOP_CHECK_SECONDS",
    "check_worker_code",
    "close_default_client",
    "default_client",
    "describe_engine",
    "local_cluster",
    "running_client",
    "start_default_client",
]


_SETUP = threading.Lock()


_SETUP_DONE: list[bool] = []


def _fast_allocation() -> None:
    """Undo Dask's ``MALLOC_TRIM_THRESHOLD_=65536`` in this worker (glibc only). That setting disables
    glibc's adaptive mmap threshold, so every numpy temporary above 128 kB is a fresh mmap that the kernel
    zeroes page by page: the adult sweep ran 2.2x slower (78 vs 35 s, 10 M minor page faults instead of
    0.09 M, measured in one process with and without the variable). Large blocks now come from the heap,
    which is trimmed above 64 MB of free memory."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc (e.g. musl): nothing to undo
        return
    m_trim_threshold, m_mmap_threshold = -1, -3  # mallopt parameters, <malloc.h>
    libc.mallopt(m_mmap_threshold, 32 * 2**20)
    libc.mallopt(m_trim_threshold, 64 * 2**20)


def _setup_worker() -> None:
    """Set up a worker process once: HiGHS's process-wide thread pool and the BLAS / OpenMP pools at one
    thread (HiGHS's default uses half the machine's cores per process, which oversubscribes a node running
    one worker per core; BLAS is pinned by Dask's nanny already (OMP/OPENBLAS/MKL_NUM_THREADS=1), but not
    in a worker started without one), and glibc's allocator back to fast (:func:`_fast_allocation`)."""
    with _SETUP:
        if _SETUP_DONE:
            return
        _fast_allocation()
        try:
            from threadpoolctl import threadpool_limits

            threadpool_limits(1)
        except ImportError:  # optional: the nanny's environment already does it
            pass
        try:
            import highspy

            h = highspy.Highs()
            h.setOptionValue("output_flag", False)
            h.setOptionValue("threads", 1)
            h.addVar(0.0, 1.0)
            h.run()  # the first run fixes the global scheduler's size
        finally:
            _SETUP_DONE.append(True)


@contextlib.contextmanager
def _one_blas_thread() -> Iterator[None]:
    """BLAS / OpenMP pools at one thread while a serial sweep runs, as in every Dask worker: a multi-threaded
    BLAS sums in another order, so the task model fitted on adult (and everything after it) differed in
    the last bits between the serial run and the workers, and on this 2-core machine the extra BLAS thread
    cost CPU (adult, 4 configurations: 23.7 -> 14.4 CPU s, 60 -> 22 s wall)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        yield
        return
    with threadpool_limits(1):
        yield


def _on_worker() -> bool:
    if "distributed" not in sys.modules:  # a serial sweep need not pay the import (1.2 s) to learn it is not
        return False
    try:
        from distributed import get_worker

        get_worker()
        return True
    except (ImportError, ValueError):
        return False


def _setup_if_on_worker() -> None:
    """:func:`_setup_worker` when this process is a Dask worker (nothing in a serial sweep)."""
    if _on_worker():
        _setup_worker()


_ENGINE = threading.Lock()


_EMBEDDED: dict[str, Any] = {}


#: Dask settings of the embedded cluster's workers: no statistical profiler (a thread sampling every
#: 10 ms), slower event-loop tick / system / memory monitors. On this shared 2-core machine these
#: background threads cost ~1-1.5 CPU s per 15 s sweep over 2 workers (measured: worker-process CPU minus
#: task CPU), time taken from the tasks; sweeps do not need Dask's profiles.
QUIET_WORKERS: dict[str, Any] = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "500ms",
    "distributed.admin.system-monitor.interval": "2s",
    "distributed.admin.system-monitor.gil.enabled": False,
    "distributed.worker.memory.monitor-interval": "1s",
}


def local_cluster(n_workers: int | None = None, *, processes: bool = True) -> Any:
    """The embedded engine: ``LocalCluster(processes=True, threads_per_worker=1)`` without a dashboard
    (its HTTP server on a free port, so no "port 8787 in use" warning), with :data:`QUIET_WORKERS`. Worker
    processes get OMP/OpenBLAS/MKL threads = 1 from Dask's nanny, HiGHS one thread per worker (first task).
    ``processes=False``: thread workers in this process (tests)."""
    import dask
    from distributed import LocalCluster

    with dask.config.set(QUIET_WORKERS):
        return LocalCluster(
            n_workers=n_workers,
            processes=processes,
            threads_per_worker=1,
            dashboard_address=None,
            # the scheduler's and workers' HTTP servers on this machine only (they served logs on 0.0.0.0)
            scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
            worker_dashboard_address="127.0.0.1:0",
            silence_logs=logging.ERROR,
        )


def default_client(*, n_workers: int | None = None) -> Any:
    """The Dask client used when ``run_sweep(client=None)``.

    Connects to ``DASK_SCHEDULER_ADDRESS`` (Dask's own ``scheduler-address`` setting) when it is set, else
    starts one embedded :func:`local_cluster` per process (reused by later calls; closed at exit or by
    :func:`close_default_client`). Thread-safe: a call while :func:`start_default_client` is starting the
    cluster in the background waits for it instead of starting a second one.
    """
    import dask
    from distributed import Client

    address = dask.config.get("scheduler-address", None)
    with _ENGINE:
        key = address or "embedded"
        client = _EMBEDDED.get(key)
        if client is not None and client.status == "running":
            return client
        if address:
            client = Client(address, set_as_default=False)
        else:
            cluster = local_cluster(n_workers)
            client = Client(cluster, set_as_default=False)
            client.run(_warm_worker)  # imports are start-up, not the first sweep's time
        _EMBEDDED[key] = client
        if len(_EMBEDDED) == 1:
            atexit.register(close_default_client)
        return client


def running_client() -> Any:
    """The client :func:`default_client` holds when it is connected, else None (never connects: a page
    run that reconnected blocked 30 s on every rerun while the scheduler was unreachable, audit)."""
    import dask

    client = _EMBEDDED.get(dask.config.get("scheduler-address", None) or "embedded")
    return client if client is not None and client.status == "running" else None


def _warm_worker() -> None:
    # load the task code and what it imports once per worker, before the first task arrives
    importlib.import_module("mdp_core.sweep.engine")

    _setup_worker()


def start_default_client() -> threading.Thread:
    """Start :func:`default_client` in a background thread (e.g. when the sweep page opens), so that the
    cluster's start-up (seconds under load) is off the first question's critical path. Returns the thread;
    a later :func:`default_client` call waits for it and reuses its client."""
    thread = threading.Thread(target=_start_quietly, name="mdp-sweep-engine-start", daemon=True)
    thread.start()
    return thread


def _start_quietly() -> None:
    try:
        default_client()
    except Exception:  # reported again by the foreground call that needs the client
        if threading.main_thread().is_alive():  # not when the process exits while the cluster starts
            logging.getLogger(__name__).exception("starting the embedded Dask cluster failed")


def close_default_client() -> None:
    """Close the client(s) :func:`default_client` opened (and the embedded cluster)."""
    with _ENGINE:
        for client in _EMBEDDED.values():
            cluster = client.cluster
            client.close()
            if cluster is not None:
                cluster.close()
        _EMBEDDED.clear()


def worker_code(client: Any) -> dict[str, str]:
    """The mdp_core code version each Dask worker of ``client`` loaded: address -> version."""
    return {str(w): str(v) for w, v in client.run(loaded_code_version).items()}


def check_worker_code(client: Any) -> None:
    """Raise DataError when a Dask worker of ``client`` loaded other mdp_core code than this process
    (:data:`~mdp_core.sweep.spec.CODE_VERSION`): each task's numbers would depend on the worker that ran it
    (a cluster started before the code changed; a node with another install)."""
    foreign = {w: v for w, v in worker_code(client).items() if v != CODE_VERSION}
    if foreign:
        shown = ", ".join(f"{w} ({v})" for w, v in sorted(foreign.items()))
        raise DataError(
            f"Dask workers run other mdp_core code than this process ({CODE_VERSION}): {shown}; restart them "
            "with this code"
        )


def _refuse_other_code(worker: str | None, sweep: str | None) -> None:
    """Raise when a task ran on ``worker`` code other than the ``sweep``'s (None: not checked), in the task
    or, for a worker with code from before this check, in the caller: the start's check
    (:func:`check_worker_code`) sees only the workers present then, and a worker that joined later mixed
    its numbers into the results (258 of 720 rows differed from the serial run, audit)."""
    if sweep is not None and worker != sweep:
        raise DataError(
            f"a Dask worker runs other mdp_core code ({worker or 'from before this check'}) than this sweep "
            f"({sweep}): restart the workers with the sweep's code"
        )


def describe_engine(client: Any) -> str:
    """One line saying where the engine runs (``False``: in-process)."""
    if client is False:
        return "in-process (serial, this Python process)"
    workers = client.scheduler_info().get("workers", {})
    threads = sum(w.get("nthreads", 0) for w in workers.values())
    kind = "embedded LocalCluster" if client.cluster is not None else f"cluster at {client.scheduler.address}"
    return f"{kind}: {len(workers)} workers, {threads} threads"


# --------------------------------------------------------------------------- stopping a sweep

#: Seconds between reports while no task of a distributed sweep completes: a stop requested through
#: ``progress`` then takes effect within this, not when the next task lands (audit: 6.8 s later).
POLL_SECONDS = 0.25
#: Seconds between a running task's looks at its sweep's stop event (one scheduler round trip each).
STOP_CHECK_SECONDS = 0.5


def _as_they_finish(futures: Sequence[Any], client: Any, idle: Callable[[], None]) -> Iterator[Any]:
    """``futures`` as they complete; ``idle()`` every :data:`POLL_SECONDS` while none does, so that a stop
    raised by the caller's progress is seen within a poll."""
    from distributed import as_completed

    pending = as_completed(futures, loop=client.loop)
    while not pending.is_empty():
        batch = pending.next_batch(block=False)
        if not batch:
            time.sleep(POLL_SECONDS)
            idle()
        yield from batch


class _SweepStoppedError(Exception):
    """Raised inside a task whose sweep was stopped (its result is discarded by then)."""


def _stop_tasks(client: Any, stop: str) -> None:
    """Set the Dask event named ``stop``: the sweep's running tasks end at their next :func:`_stop_check`."""
    from distributed import Event

    Event(stop, client=client).set()


def _stop_check(stop: str | None) -> Progress:
    """A ``progress`` callable for the work inside one task that raises once the sweep's caller has set the
    Dask event named ``stop`` (None: no check). Dask cannot interrupt a running task: cancelling its future
    only discards the result, so without this a stopped sweep kept its cores busy (adult, 300 repetitions:
    both workers for 7 s after the stop; 0.5 s with it)."""
    if stop is None:
        return None
    from distributed import Event

    event = Event(stop)
    last = time.monotonic()

    def check(fraction: float, message: str) -> None:
        nonlocal last
        if time.monotonic() - last >= STOP_CHECK_SECONDS:
            last = time.monotonic()
            if event.is_set():
                raise _SweepStoppedError(f"sweep stopped ({message})")

    return check
