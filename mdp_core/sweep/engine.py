"""Run a :class:`~mdp_core.sweep.spec.SweepSpec` on dask.distributed (or in-process) into a tidy table.

One Dask task per configuration (task x tau_group x tau_dpn x eps): it configures DepHDP on the fitting
split with :func:`mdp_core.run_dephdp` (the baselines are composed from the same cached group profiles with
:func:`mdp_core.compose_mechanism`, as :func:`mdp_core.evaluate_dephdp` does), privatises the held-out test
split ``repetitions`` times per method and scores each release with :func:`mdp_core.dephdp.task_utility`.
Every privatisation draws from ``numpy.random.default_rng([seed, task index, repetition, method index])``:
results do not depend on the number of workers or the order in which tasks finish.

The encoded table (fitting and test split) is scattered to the cluster once per sweep. Tasks that share the
expensive, cached group profiles (same task and tau_group) are steered to the same worker by loose worker
restrictions (idle workers still steal them), so each worker builds few profiles.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import resource
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from mdp_core._validation import Progress, report
from mdp_core.data import Encoded, discretize, infer_schema, load_dataset
from mdp_core.dephdp import (
    METHODS_EVALUATED,
    DepHDPProfiles,
    compose_mechanism,
    dephdp_profiles,
    prediction_labels,
    release_attributes,
    run_dephdp,
    split_encoded,
    task_utility,
)
from mdp_core.errors import DataError
from mdp_core.sweep.spec import Configuration, SweepSpec

__all__ = [
    "SweepData",
    "clear_sweep_caches",
    "close_default_client",
    "default_client",
    "describe_engine",
    "local_cluster",
    "prepare_data",
    "run_sweep",
    "start_default_client",
]

_DOCUMENTED_TARGETS = {"heart": "target", "adult": "income", "wine": "quality"}

#: Columns that identify a row (everything else is a measurement).
KEY_COLUMNS = ("task_index", "dataset", "task", "tau_group", "tau_dpn", "eps", "method", "repetition")


@dataclass(frozen=True, eq=False)
class SweepData:
    """What every task needs: the fitting and held-out splits, the test records' 0/1 labels, and (computed
    once here, not per task) the released attributes and the test records' codes on them."""

    fit: Encoded
    test: Encoded
    labels: np.ndarray | None
    attributes: tuple[str, ...] = ()
    x_test: np.ndarray | None = None


def _target(spec: SweepSpec, columns: Sequence[str]) -> str | None:
    if spec.target is not None:
        if spec.target not in columns:
            raise DataError(f"target {spec.target!r} is not a column of {spec.dataset!r}")
        return spec.target
    try:  # the data layer's documented targets, when it has them
        from mdp_core.data.io import SAMPLE_TARGETS  # type: ignore[attr-defined]
    except ImportError:
        SAMPLE_TARGETS = _DOCUMENTED_TARGETS
    target = SAMPLE_TARGETS.get(spec.dataset)
    return target if target in columns else None


def prepare_data(spec: SweepSpec, encoded: Encoded | None = None) -> SweepData:
    """Load and discretise the spec's dataset (unless ``encoded`` is given) and split it (seeded by the spec).

    Parameters
    ----------
    spec : SweepSpec
    encoded : Encoded, optional
        An already discretised table (e.g. the app's current one); ``spec.dataset`` is then only a label.
    """
    if encoded is not None and not isinstance(encoded, Encoded):
        raise TypeError(f"encoded must be an Encoded table, got {type(encoded).__name__}")
    if encoded is None:
        # an embedded sample is loaded and discretised once per process (adult: ~1 CPU s, 3 s under load);
        # a file path is read again (it may have changed on disk)
        key: Hashable = ("sample", spec.dataset, spec.seed, spec.bins, spec.target, spec.fit_fraction)
        if os.path.exists(spec.dataset):
            key = None
    else:
        key = ("encoded", encoded.fingerprint, spec.seed, spec.fit_fraction)
    data = _PREPARED.get(key) if key is not None else None
    if data is None:
        data = _prepare(spec, encoded)
        if key is not None:
            with _STAGE1_LOCK:
                _PREPARED[key] = data
                while len(_PREPARED) > 4:
                    _PREPARED.popitem(last=False)
    if "prediction" in spec.tasks and data.fit.schema.target is None:
        raise DataError(f"the prediction task needs a target column; {spec.dataset!r} has none: set 'target'")
    return data


#: Prepared sweep data of recent sweeps in this process (the last 4), see :func:`prepare_data`.
_PREPARED: OrderedDict[Hashable, SweepData] = OrderedDict()


def _prepare(spec: SweepSpec, encoded: Encoded | None) -> SweepData:
    if encoded is None:
        df = load_dataset(spec.dataset, seed=spec.seed)
        target = _target(spec, [str(c) for c in df.columns])
        encoded = discretize(df, infer_schema(df, target=target), bins=spec.bins)
    fit, test = split_encoded(encoded, spec.fit_fraction, np.random.default_rng(spec.seed))
    labels = prediction_labels(fit, test.codes) if encoded.schema.target is not None else None
    attrs = tuple(release_attributes(fit))
    x_test = test.codes[list(attrs)].to_numpy().astype(np.int64)
    return SweepData(fit, test, labels, attrs, x_test)


# --------------------------------------------------------------------------- one task (runs on a worker)

_SETUP = threading.Lock()
_SETUP_DONE: list[bool] = []


def _single_threaded_highs() -> None:
    """Pin HiGHS's process-wide thread pool and the BLAS / OpenMP pools to one thread (once per worker
    process): HiGHS's default uses half the machine's cores per process, which oversubscribes a node
    running one worker per core; BLAS is pinned by Dask's nanny already (OMP/OPENBLAS/MKL_NUM_THREADS=1),
    but not in a worker started without one."""
    with _SETUP:
        if _SETUP_DONE:
            return
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


def _on_worker() -> bool:
    try:
        from distributed import get_worker

        get_worker()
        return True
    except (ImportError, ValueError):
        return False


def build_profiles(data: SweepData, spec: SweepSpec, c: Configuration) -> DepHDPProfiles:
    """Stage 1 of DepHDP (groups, profiles, surrogate) for ``c``'s task and tau_group, through this
    process's bounded cache (a worker that built a group profile for an earlier sweep reuses it)."""
    if _on_worker():
        _single_threaded_highs()
    return dephdp_profiles(data.fit, spec.config(c), cache=_BoundedCache())


#: Stage-1 results of recent sweeps in the calling process, by (table fingerprint, profile settings): a
#: second sweep on the same table and settings ("which eps" asked again, another budget grid) starts from
#: them instead of rebuilding every group profile. The last few only (a heart profile set is ~0.4 MB).
_STAGE1: OrderedDict[Hashable, DepHDPProfiles] = OrderedDict()
_STAGE1_MAX = 8
_STAGE1_LOCK = threading.Lock()


def clear_sweep_caches() -> None:
    """Forget this process's prepared data, stored stage-1 results and allocation cache (tests, benchmarks:
    the next sweep starts cold in this process; workers keep their own caches until they restart)."""
    with _STAGE1_LOCK:
        _STAGE1.clear()
        _PREPARED.clear()
    _PROCESS_CACHE.clear()


def _stage1_key(data: SweepData, spec: SweepSpec, c: Configuration) -> Hashable:
    return (data.fit.fingerprint, spec.config(c).profile_settings())


def _remember_stage1(key: Hashable, value: DepHDPProfiles) -> None:
    with _STAGE1_LOCK:
        _STAGE1[key] = value
        _STAGE1.move_to_end(key)
        while len(_STAGE1) > _STAGE1_MAX:
            _STAGE1.popitem(last=False)


def _profile_key(c: Configuration) -> tuple[str, float]:
    """Configurations with the same key share stage 1 (every other profile setting is fixed by the spec)."""
    return (c.task, c.tau_group)


#: Per-process cache of the allocation stage's eps-independent parts (the baselines' allocations, keyed by
#: table fingerprint, profile settings and budget; see :func:`mdp_core.run_dephdp`): configurations that
#: differ only in tau_dpn (or tau_dim, the score) reuse them on the same worker. Bounded: emptied when full.
_PROCESS_CACHE: dict[Any, Any] = {}
_PROCESS_CACHE_MAX = 256


class _BoundedCache:
    """The :class:`mdp_core.dephdp.Cache` protocol over :data:`_PROCESS_CACHE` (emptied when full)."""

    def get(self, key: Any) -> Any:
        return _PROCESS_CACHE.get(key)

    def __setitem__(self, key: Any, value: Any) -> None:
        if len(_PROCESS_CACHE) >= _PROCESS_CACHE_MAX:
            _PROCESS_CACHE.clear()
        _PROCESS_CACHE[key] = value


class _Releaser:
    """Privatises one code matrix many times with a :class:`mdp_core.ComposedMechanism`, drawing exactly
    what ``mech.privatize`` draws (:func:`mdp_core.sample`'s inverse-CDF algorithm: one ``rng.random(N)``
    per group, in group order, ``searchsorted(cdf[x], u, side="right")`` per input value), with the work
    that does not change between releases done once: the flat group codes and the records of each input
    value (per code matrix: :func:`mdp_core.sample` sorts the records on every call), the row CDFs (per
    mechanism)."""

    def __init__(
        self, x: np.ndarray, attributes: Sequence[str], groups: Sequence[Sequence[str]], sizes: Any
    ) -> None:
        index = {a: j for j, a in enumerate(attributes)}
        self.x = x
        self.cols = [[index[a] for a in g] for g in groups]
        self.sizes = [tuple(int(v) for v in s) for s in sizes]
        self.parts: list[list[tuple[int, np.ndarray]]] = []
        for cols, sz in zip(self.cols, self.sizes, strict=True):
            flat = np.ravel_multi_index(tuple(x[:, cols].T), sz)
            order = np.argsort(flat, kind="stable")
            values, starts = np.unique(flat[order], return_index=True)
            bounds = [*starts[1:], flat.size]
            self.parts.append(
                [(int(v), order[lo:hi]) for v, lo, hi in zip(values, starts, bounds, strict=True)]
            )
        self._cdfs: dict[int, list[np.ndarray]] = {}

    def _cdf(self, mech: Any) -> list[np.ndarray]:
        key = id(mech)  # the caller keeps every mechanism alive while releasing
        if key not in self._cdfs:
            cdfs = []
            for P in mech.channels:
                cdf = np.cumsum(np.asarray(P, dtype=np.float64), axis=1)
                cdf /= cdf[:, -1:]
                cdfs.append(cdf)
            self._cdfs[key] = cdfs
        return self._cdfs[key]

    def release(self, mech: Any, rng: np.random.Generator) -> np.ndarray:
        out = self.x.copy()
        n = self.x.shape[0]
        for cols, sizes, parts, cdf in zip(self.cols, self.sizes, self.parts, self._cdf(mech), strict=True):
            u = rng.random(n)
            y = np.empty(n, dtype=np.int64)
            for value, idx in parts:
                y[idx] = np.searchsorted(cdf[value], u[idx], side="right")
            np.minimum(y, cdf.shape[1] - 1, out=y)
            out[:, cols] = np.stack(np.unravel_index(y, sizes), axis=1)
        return out


def _privatize_codes(mech: Any, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``mech.privatize`` (:class:`mdp_core.ComposedMechanism`) on the released attributes' code matrix
    ``x`` (columns in ``mech.attributes`` order): the same draws, without a DataFrame per release (pandas'
    column indexing was ~25 % of a heart configuration's time). One release; see :class:`_Releaser`."""
    return _Releaser(x, mech.attributes, mech.groups, mech.sizes).release(mech, rng)


def run_configuration(
    data: SweepData, spec: SweepSpec, c: Configuration, profiles: Any = None
) -> tuple[list[dict], dict]:
    """All rows of one configuration (every method x repetition) and the task's own meta data.

    Deterministic: depends only on ``data``, ``spec`` and ``c`` (not on the process or earlier tasks; the
    per-process cache only holds values that are functions of their keys).
    ``profiles``: :func:`build_profiles` for this configuration (optional).
    """
    if _on_worker():
        _single_threaded_highs()
    t_start, cpu_start = time.perf_counter(), time.process_time()
    config = spec.config(c)
    cache = _BoundedCache()
    if profiles is None:
        res = run_dephdp(data.fit, config, cache=cache)
    else:
        res = run_dephdp(data.fit, config, cache=cache, profiles=profiles)
    attrs = data.attributes or tuple(release_attributes(data.fit))
    mechs = {"DepHDP": res.mechanism}
    K = len(res.profiles)
    for name, base in res.baselines.items():
        if name not in spec.methods:
            continue
        idx = np.searchsorted(res.eps_grid, base.eps)
        mechs[name] = compose_mechanism(res.profiles, [name.split("+")[1]] * K, idx, attrs, config.p)
    configure = time.perf_counter() - t_start
    x_test = data.x_test
    if x_test is None or tuple(res.mechanism.attributes) != attrs:
        attrs = tuple(res.mechanism.attributes)
        x_test = data.test.codes[list(attrs)].to_numpy().astype(np.int64)
    rows: list[dict] = []
    mech0 = res.mechanism
    releaser = _Releaser(x_test, attrs, mech0.groups, mech0.sizes)
    for m in spec.methods:
        mi = METHODS_EVALUATED.index(m)
        if mechs[m].groups != mech0.groups or tuple(mechs[m].attributes) != attrs:
            raise DataError(f"internal error: {m} is composed over other groups than DepHDP")
        for r in range(spec.repetitions):
            t0 = time.perf_counter()
            rng = np.random.default_rng([spec.seed, c.index, r, mi])
            y = releaser.release(mechs[m], rng)
            u = task_utility(res.task, x_test, y, encoded=data.test, labels=data.labels, p=config.p)
            rows.append(
                {
                    "task_index": c.index,
                    "dataset": spec.dataset,
                    "task": c.task,
                    "tau_group": c.tau_group,
                    "tau_dpn": c.tau_dpn,
                    "eps": c.eps,
                    "method": m,
                    "repetition": r,
                    "metric": u.metric,
                    "higher_is_better": u.higher_is_better,
                    "utility": u.value,
                    "reference": u.reference,
                    "loss": u.loss,
                    "surrogate": float(res.value if m == "DepHDP" else res.baselines[m].value),
                    **{k: v for k, v in u.metrics.items() if k != u.metric},
                    "configure_seconds": configure,
                    "seconds": time.perf_counter() - t0,
                }
            )
    meta = {
        "task_index": c.index,
        "pid": os.getpid(),
        "seconds": time.perf_counter() - t_start,
        "cpu_seconds": time.process_time() - cpu_start,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
    }
    return rows, meta


# --------------------------------------------------------------------------- engine

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


def local_cluster(n_workers: int | None = None) -> Any:
    """The embedded engine: ``LocalCluster(processes=True, threads_per_worker=1)`` without a dashboard
    (its HTTP server on a free port, so no "port 8787 in use" warning), with :data:`QUIET_WORKERS`. Worker
    processes get OMP/OpenBLAS/MKL threads = 1 from Dask's nanny, HiGHS one thread per worker (first task)."""
    import dask
    from distributed import LocalCluster

    with dask.config.set(QUIET_WORKERS):
        return LocalCluster(
            n_workers=n_workers,
            processes=True,
            threads_per_worker=1,
            dashboard_address=None,
            scheduler_kwargs={"dashboard_address": ":0"},
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


def _warm_worker() -> None:
    import mdp_core.sweep  # noqa: F401  (the task code and what it imports)

    _single_threaded_highs()


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


def describe_engine(client: Any) -> str:
    """One line saying where the engine runs (``False``: in-process)."""
    if client is False:
        return "in-process (serial, this Python process)"
    workers = client.scheduler_info().get("workers", {})
    threads = sum(w.get("nthreads", 0) for w in workers.values())
    kind = "embedded LocalCluster" if client.cluster is not None else f"cluster at {client.scheduler.address}"
    return f"{kind}: {len(workers)} workers, {threads} threads"


def _frame(rows: list[dict], spec: SweepSpec, engine: str, metas: list[dict], seconds: float) -> pd.DataFrame:
    order = {m: i for i, m in enumerate(METHODS_EVALUATED)}
    # rows in task order before the frame is built: its columns follow the first rows' keys, and tasks of
    # different kinds (prediction, entropy) carry different metrics, so completion order must not matter
    rows = sorted(rows, key=lambda r: (r["task_index"], order.get(r["method"], len(order)), r["repetition"]))
    df = pd.DataFrame(rows)
    df = df.sort_values(
        ["task_index", "method", "repetition"], key=lambda s: s.map(order) if s.name == "method" else s
    ).reset_index(drop=True)
    df.attrs = {
        "spec": spec.to_json(),
        "engine": engine,
        "seconds": seconds,
        "tasks": sorted(metas, key=lambda m: m["task_index"]),
    }
    return df


def run_sweep(
    spec: SweepSpec,
    *,
    client: Any = None,
    progress: Progress = None,
    encoded: Encoded | None = None,
) -> pd.DataFrame:
    """Run every configuration x method x repetition of ``spec``; one tidy row each.

    Parameters
    ----------
    spec : SweepSpec
    client : distributed.Client, None or False
        ``None``: :func:`default_client` (``DASK_SCHEDULER_ADDRESS`` or an embedded LocalCluster);
        ``False``: in-process, serially; a Client: that cluster.
    progress : callable, optional
        ``progress(fraction, message)``, called in the calling thread as tasks complete. An exception raised
        by it (or any interruption) cancels the remaining tasks and propagates.
    encoded : Encoded, optional
        Use this discretised table instead of loading ``spec.dataset``.

    Returns
    -------
    DataFrame
        Keys ``task_index, dataset, task, tau_group, tau_dpn, eps, method, repetition``; the held-out
        utility in the task's own units (``utility``, named by ``metric``, with ``higher_is_better`` and
        the non-private ``reference``), the 000 task ``loss``, the ``surrogate`` loss DepHDP predicted,
        the task's other metrics, ``configure_seconds`` (per configuration) and ``seconds`` (per
        privatisation + scoring). ``attrs`` holds the spec (JSON), the engine line, the wall-clock
        seconds and per-task meta data (pid, seconds, peak RSS in MB).
    """
    if not isinstance(spec, SweepSpec):
        raise TypeError(f"spec must be a SweepSpec, got {type(spec).__name__}")
    t0 = time.perf_counter()
    data = prepare_data(spec, encoded)
    configs = spec.configurations()
    report(progress, 0.0, f"0/{len(configs)} configurations")
    if client is False:
        with _one_blas_thread():
            return _run_serial(spec, data, configs, progress, t0)
    return _run_distributed(spec, data, configs, client, progress, t0)


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


def _run_serial(
    spec: SweepSpec,
    data: SweepData,
    configs: list[Configuration],
    progress: Callable[[float, str], None] | None,
    t0: float,
) -> pd.DataFrame:
    n = len(configs)
    rows: list[dict] = []
    metas: list[dict] = []
    stage1: dict[tuple[str, float], Any] = {}
    for k, c in enumerate(configs):
        key = _profile_key(c)
        if key not in stage1:
            skey = _stage1_key(data, spec, c)
            known = _STAGE1.get(skey)
            stage1[key] = known if known is not None else build_profiles(data, spec, c)
            _remember_stage1(skey, stage1[key])
        r, meta = run_configuration(data, spec, c, stage1[key])
        rows += r
        metas.append(meta)
        report(progress, (k + 1) / n, f"{k + 1}/{n} configurations")
    return _frame(rows, spec, describe_engine(False), metas, time.perf_counter() - t0)


def _run_distributed(
    spec: SweepSpec,
    data: SweepData,
    configs: list[Configuration],
    client: Any,
    progress: Callable[[float, str], None] | None,
    t0: float,
) -> pd.DataFrame:
    from distributed import as_completed

    if client is None:
        client = default_client()
    engine = describe_engine(client)
    shared = client.scatter(data, hash=False)
    token = f"sweep-{os.getpid()}-{time.time_ns()}"
    # stage 1 once per (task, tau_group): from this process's store when an earlier sweep built it (sent
    # once), else as its own task on the cluster; Dask moves it to the workers that need it
    stage1: dict[tuple[str, float], Any] = {}
    built: dict[Hashable, Any] = {}
    for c in configs:
        key = _profile_key(c)
        if key in stage1:
            continue
        skey = _stage1_key(data, spec, c)
        known = _STAGE1.get(skey)
        if known is not None:
            stage1[key] = client.scatter(known, hash=False)
        else:
            stage1[key] = built[skey] = client.submit(
                build_profiles, shared, spec, c, key=f"{token}-profiles-{len(stage1)}", pure=False
            )
    futures = [
        client.submit(
            run_configuration, shared, spec, c, stage1[_profile_key(c)], key=f"{token}-{c.index}", pure=False
        )
        for c in configs
    ]
    rows: list[dict] = []
    metas: list[dict] = []
    n, done = len(futures), 0
    try:
        for fut in as_completed(futures, loop=client.loop):
            r, meta = fut.result()
            rows += r
            metas.append(meta)
            done += 1
            report(progress, done / n, f"{done}/{n} configurations ({engine})")
        for skey, value in zip(built, client.gather(list(built.values())), strict=True):
            _remember_stage1(skey, value)
    finally:  # release everything on the cluster (stopped, failed or done): a traceback kept by the caller
        # must not pin results, the scattered table or stage 1 in the workers' memory
        client.cancel([*futures, *stage1.values(), shared])
    return _frame(rows, spec, engine, metas, time.perf_counter() - t0)
