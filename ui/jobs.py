"""Background jobs of the app process: one builder whose worker threads run core code, so a slow computation
(a geo mechanism or bound, DepHDP profiles or evaluation, a playground LP, a noise heatmap, a scenario
comparison) never blocks a page. Pages poll it with a fragment and can stop a job."""

from __future__ import annotations

import concurrent.futures
import hashlib
import threading
import time
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import streamlit as st

from mdp_core._validation import Progress
from ui.markdown import md
from ui.store import store

__all__ = [
    "POLL_SECONDS",
    "QUEUED",
    "STARTED",
    "BuildStoppedError",
    "Builder",
    "background_work",
    "builder",
    "failure",
    "follow",
    "poll",
    "poll_all",
    "remember",
    "running",
    "start_button",
    "time_left",
    "wait",
]

#: Poll interval (s) of a page's fragment while a job runs.
POLL_SECONDS = 1.0
#: What a running job says before its first progress report.
STARTED = "started"


class BuildStoppedError(Exception):
    """A job stopped at the page's request (:meth:`Builder.cancel`)."""


class Builder:
    """Runs jobs on worker threads, so a slow build never blocks the page (issue 11 "Responsiveness").

    A page asks for a result (a mechanism, a bound, an evaluation) with :meth:`request`: a stored result
    comes back at once; otherwise the job is queued (once per key, shared by every session) and the page
    polls it. Results land in the process-wide :func:`store`, so coming back to a setting is instant.
    Workers run only core code (no Streamlit calls); progress is kept per key. :meth:`cancel` stops a job
    at its next progress report (a queued one never starts). Long jobs (``slow=True``: the reference LPs,
    bounds, a sweep on a cluster, a held-out evaluation) have threads of their own, so a quick build (a tree
    at another eps, about a second) never queues behind minutes of LP.
    """

    def __init__(self, workers: int = 2, slow_workers: int = 2) -> None:
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="job")
        self._slow_pool = ThreadPoolExecutor(max_workers=slow_workers, thread_name_prefix="long-job")
        self._lock = threading.Lock()
        self._jobs: dict[Hashable, Future[Any]] = {}
        self._progress: dict[Hashable, tuple[float, str]] = {}
        self._cancelled: set[Hashable] = set()
        # At exit the interpreter joins the pool's threads, which first run every queued build (a server
        # stopped with Ctrl+C, a test process after its summary: minutes). Hooks registered here run before
        # that join (later ones first), the same hook concurrent.futures uses; atexit would run after it.
        getattr(threading, "_register_atexit")(self.shutdown)  # noqa: B009 (private: not in typeshed)

    def request(self, key: Hashable, compute: Callable[[Progress], Any], slow: bool = False) -> Future[Any]:
        """The (possibly finished) future of ``key``'s result; queues ``compute(progress)`` when needed (on
        the long jobs' threads when ``slow``)."""
        hit = store().get(key)
        if hit is not None:
            done: Future[Any] = Future()
            done.set_result(hit)
            return done
        with self._lock:
            job = self._jobs.get(key)
            if job is None or job.cancelled() or (job.done() and job.exception() is not None):
                self._progress[key] = (0.0, "queued")
                self._cancelled.discard(key)  # a stop asked just as the last job ended is not for this one
                job = (self._slow_pool if slow else self._pool).submit(self._run, key, compute)
                self._jobs[key] = job
            return job

    def _run(self, key: Hashable, compute: Callable[[Progress], Any]) -> Any:
        def progress(fraction: float, message: str) -> None:
            if key in self._cancelled:
                raise BuildStoppedError("stopped at your request")
            self._progress[key] = (min(max(float(fraction), 0.0), 1.0), message)

        # running now: until its first report the page said "queued: both threads are busy" (adult's
        # profiles: 8 s of it, browser audit)
        self._progress[key] = (0.0, STARTED)
        ok = False
        try:
            result = store().get_or_compute(key, lambda: compute(progress))
            ok = True
            return result
        finally:
            with self._lock:
                self._progress.pop(key, None)
                self._cancelled.discard(key)
                if ok:  # the store has it now; a failed job stays, so the page can show its error
                    self._jobs.pop(key, None)

    def progress(self, key: Hashable) -> tuple[float, str]:
        """Last reported (fraction, message) of a queued or running build."""
        return self._progress.get(key, (0.0, "queued"))

    def job(self, key: Hashable) -> Future[Any] | None:
        """The queued, running or failed job of ``key`` (None when there is none or it has finished)."""
        with self._lock:
            return self._jobs.get(key)

    def cancel(self, key: Hashable) -> None:
        """Stop ``key``'s job: a queued one never starts, a running one raises :class:`BuildStoppedError`
        at its next progress report (a coset bound's or the exact optimum's: within a second; a HiGHS round's:
        when it ends)."""
        with self._lock:
            job = self._jobs.get(key)
            if job is None or job.done():
                return
            if job.cancel():  # still queued
                self._jobs.pop(key)
                self._progress.pop(key, None)
            else:
                self._cancelled.add(key)

    def shutdown(self) -> None:
        """Stop every job (:meth:`cancel`): the queued never start, the running stop at their next report."""
        with self._lock:
            keys = list(self._jobs)
        for key in keys:
            self.cancel(key)

    def stopping(self, key: Hashable) -> bool:
        """Whether ``key``'s running job was asked to stop."""
        return key in self._cancelled


@st.cache_resource(show_spinner=False)
def builder() -> Builder:
    """The one process-wide builder of every page (two threads for quick builds, two for long jobs: two
    cores)."""
    return Builder()


def time_left(seconds: float) -> Callable[[], float]:
    """A clock: the seconds left of a budget of ``seconds`` started now (never negative)."""
    deadline = time.perf_counter() + seconds
    return lambda: max(0.0, deadline - time.perf_counter())


def wait(futures: list[Future[Any]], seconds: float, tick: Callable[[], None] | None = None) -> bool:
    """Wait up to ``seconds`` for every future (calling ``tick`` about 5 times a second); True when done."""
    deadline = time.perf_counter() + seconds
    while True:
        if all(f.done() for f in futures):
            return True
        left = deadline - time.perf_counter()
        if left <= 0:
            return False
        concurrent.futures.wait(futures, timeout=min(0.2, left))
        if tick is not None:
            tick()


# -- a page's view of one job: is it running, why did it fail, follow it, poll it ----------------------------

#: What a job waiting for a thread shows: the long-job threads are shared by every page.
QUEUED = (
    "queued: both long-job threads of this app are busy with other long computations (any page or session)"
)


def running(key: Hashable) -> bool:
    """Whether ``key``'s job is queued or running."""
    job = builder().job(key)
    return job is not None and not job.done()


def failure(key: Hashable) -> BaseException | None:
    """Why ``key``'s last job ended without a result (:class:`BuildStoppedError` when stopped), else None."""
    job = builder().job(key)
    return job.exception() if job is not None and job.done() else None


def follow(key: Hashable, job: Future[Any], label: str, seconds: float) -> None:
    """Show ``job``'s progress for up to ``seconds`` (a short job lands within them), then re-run the page,
    which shows the result or polls the job (:func:`poll`)."""
    bar = st.progress(0.0, text=f"{label}: starting")

    def tick() -> None:
        fraction, message = builder().progress(key)
        bar.progress(fraction, text=f"{label}: {md(message)}")

    wait([job], seconds, tick)
    st.rerun()


def poll(
    key: Hashable,
    stop_label: str,
    stop_key: str,
    *,
    text: Callable[[str], str] = lambda message: message,
    stopping: str = "Stopping…",
) -> None:
    """A running job's progress bar (its message through ``text``; ``stopping`` once asked to stop) and stop
    button, redrawn every :data:`POLL_SECONDS` by a fragment (the rest of the page is not re-run); when the
    job ends (landed, failed or stopped) the page re-runs."""

    @st.fragment(run_every=POLL_SECONDS)
    def poll_job() -> None:
        if not running(key):
            st.rerun()
        fraction, message = builder().progress(key)
        asked = builder().stopping(key)
        st.progress(
            fraction, text=stopping if asked else text(QUEUED if message == "queued" else md(message))
        )
        if not asked and st.button(stop_label, key=stop_key):
            builder().cancel(key)
            st.rerun()  # the stopping text (a running job) or the start button (a queued one) at once

    poll_job()


def poll_all(futures: list[Future[Any]], text: str) -> None:
    """A progress bar over ``futures`` (the share landed; ``text`` beside it), redrawn every
    :data:`POLL_SECONDS` by a fragment; the page re-runs as soon as one more has landed."""
    ready = sum(f.done() for f in futures)

    @st.fragment(run_every=POLL_SECONDS)
    def poll_futures() -> None:
        done = sum(f.done() for f in futures)
        st.progress(done / len(futures), text=text)
        if done > ready:  # one landed: the page shows it
            st.rerun()

    poll_futures()


def start_button(
    key: Hashable,
    start: Callable[[], Future[Any]],
    *,
    label: str,
    button_key: str,
    name: str,
    stop_label: str,
    stop_key: str,
    wait: float,
    primary: bool = False,
) -> None:
    """The start button of a job whose result is not stored yet. While the job runs: its progress
    (:func:`poll`, "<name>: <message>") and its stop button; after a stop or a failure: why, and the
    button again. A click queues ``start()`` and shows its progress for up to ``wait`` seconds
    (:func:`follow`), and lists it in the sidebar (:func:`remember`)."""
    if running(key):
        poll(key, stop_label, stop_key, text=lambda message: f"{name}: {message}")
        return
    if isinstance(error := failure(key), BuildStoppedError):
        st.info(f"{name} was stopped; start it again to finish it.")
    elif error is not None:
        st.error(f"{name} failed: {md(error)}")
    if st.button(label, key=button_key, type="primary" if primary else "secondary"):
        remember(key, name)
        follow(key, start(), name, wait)


#: Session-state key of the jobs this session started: job key -> what it computes.
_STARTED = "_jobs_started"


def remember(key: Hashable, name: str) -> None:
    """List ``key``'s job (``name``: what it computes) among this session's background work
    (:func:`background_work`)."""
    st.session_state.setdefault(_STARTED, {})[key] = name


def background_work() -> None:
    """The sidebar's list of the jobs this session started that still run, each with its progress and a
    stop button. A job goes on when its page moves to other settings or the user leaves the page (its
    result is kept for when they come back), so without this list an abandoned job held a long-job thread
    that no button stopped any more, and a third queued behind two of them (audit). A stop here stops the
    job for every session, as the page's own stop button does (jobs are shared by their settings)."""
    if st.session_state.get(_STARTED):
        _background_list()


@st.fragment(run_every=POLL_SECONDS)
def _background_list() -> None:
    """:func:`background_work`'s list, redrawn every :data:`POLL_SECONDS` (progress, and ended jobs gone)."""
    started: dict[Hashable, str] = st.session_state.get(_STARTED, {})
    for key in [k for k in started if not running(k)]:
        del started[key]
    if not started:
        return
    st.subheader("Running in the background")
    for key, name in started.items():
        fraction, message = builder().progress(key)
        asked = builder().stopping(key)
        status = (
            "stopping…" if asked else (QUEUED if message == "queued" else f"{fraction:.0%}, {md(message)}")
        )
        st.caption(f"**{name}**: {status}")
        button = f"background_stop_{hashlib.sha1(repr(key).encode()).hexdigest()[:12]}"  # one per job, stable
        if not asked and st.button("Stop", key=button, help=f"Stop {name.lower()}"):
            builder().cancel(key)
            st.rerun()
