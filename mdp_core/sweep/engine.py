"""Run a :class:`~mdp_core.sweep.spec.SweepSpec` on dask.distributed (or in-process) into a tidy table.

One Dask task per configuration (task x tau_group x tau_dpn x eps): it configures DepHDP on the fitting
split with :func:`mdp_core.run_dephdp` (the baselines are composed from the same cached group profiles with
:func:`mdp_core.compose_mechanism`, as :func:`mdp_core.evaluate_dephdp` does), privatises the held-out test
split ``repetitions`` times per method and scores each release with :func:`mdp_core.dephdp.task_utility`.
Every privatisation draws from ``numpy.random.default_rng([seed, settings key, repetition, method index])``
with the settings key a hash of (task, tau_group, tau_dpn, eps) (:func:`~mdp_core.sweep.spec.settings_key`):
results do not depend on the number of workers, the order in which tasks finish, or the other budgets of the
grid (with the grid position as key, eps 3 scored 0.626 on one grid and 0.674 on another).

The encoded table (fitting and test split) is broadcast to the workers once per sweep. The expensive group
profiles (stage 1) are built once per (task, tau_group) as their own Dask task and moved by Dask to the
workers that need them; configurations that differ only in tau_dpn run as one task (:func:`_bundles`).
"""

from __future__ import annotations

import contextlib
import os
import resource
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import CancelledError
from typing import Any

import numpy as np
import pandas as pd

from mdp_core._validation import Progress, part, report
from mdp_core.data import Encoded
from mdp_core.dephdp import (
    METHODS_EVALUATED,
    DepHDPProfiles,
    compose_mechanism,
    dephdp_profiles,
    run_dephdp,
    task_utility,
)
from mdp_core.errors import DataError, InfeasibleFloorError
from mdp_core.sweep._releaser import Releaser
from mdp_core.sweep.cluster import (
    _as_they_finish,
    _one_blas_thread,
    _refuse_other_code,
    _setup_if_on_worker,
    _stop_check,
    _stop_tasks,
    check_worker_code,
    default_client,
    describe_engine,
)
from mdp_core.sweep.data import _PREPARED, SweepData, prepare_data
from mdp_core.sweep.spec import CODE_VERSION, Configuration, SweepSpec, loaded_code_version, settings_key

__all__ = [
    "SweepData",
    "clear_sweep_caches",
    "prepare_data",
    "run_sweep",
]


#: Columns that identify a row (everything else is a measurement).
KEY_COLUMNS = ("task_index", "dataset", "task", "tau_group", "tau_dpn", "eps", "method", "repetition")


# --------------------------------------------------------------------------- one task (runs on a worker)


def build_profiles(
    data: SweepData,
    spec: SweepSpec,
    c: Configuration,
    stop: str | None = None,
    progress: Progress = None,
    code: str | None = None,
) -> DepHDPProfiles:
    """Stage 1 of DepHDP (groups, profiles, surrogate) for ``c``'s task and tau_group, through this
    process's bounded cache (a worker that built a group profile for an earlier sweep reuses it).
    ``stop``: the sweep's stop event (:func:`_stop_check`), unless the serial engine passes ``progress``;
    ``code``: the caller's code version (:func:`_refuse_other_code`)."""
    _refuse_other_code(loaded_code_version(), code)
    _setup_if_on_worker()
    check = progress or _stop_check(stop)
    return dephdp_profiles(data.fit, spec.config(c), cache=_BoundedCache(), progress=check)


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


def run_configuration(
    data: SweepData, spec: SweepSpec, c: Configuration, profiles: Any = None, check: Progress = None
) -> tuple[list[dict], dict]:
    """All rows of one configuration (every method x repetition) and the task's own meta data.

    Deterministic: depends only on ``data``, ``spec`` and ``c`` (not on the process or earlier tasks; the
    per-process cache only holds values that are functions of their keys).
    ``profiles``: :func:`build_profiles` for this configuration (optional). ``check``: called between
    units of work; what it raises ends the configuration (:func:`_stop_check`).
    """
    _setup_if_on_worker()
    t_start, cpu_start = time.perf_counter(), time.process_time()
    config = spec.config(c)
    cache = _BoundedCache()
    try:
        res = run_dephdp(data.fit, config, cache=cache, profiles=profiles, progress=check)
    except InfeasibleFloorError as exc:  # a budget too small for the floor: no release exists there, say so
        return [], _task_meta(c, t_start, cpu_start, skipped=str(exc))
    attrs = data.attributes
    mechs = {"DepHDP": res.mechanism}
    K = len(res.profiles)
    for name, base in res.baselines.items():
        if name not in spec.methods:
            continue
        idx = np.searchsorted(res.eps_grid, base.eps)
        mechs[name] = compose_mechanism(res.profiles, [name.split("+")[1]] * K, idx, attrs, config.p)
    configure = time.perf_counter() - t_start
    x_test = data.x_test
    rows: list[dict] = []
    mech0 = res.mechanism
    releaser = Releaser(x_test, attrs, mech0.groups, mech0.sizes)
    for m in spec.methods:
        mi = METHODS_EVALUATED.index(m)
        if mechs[m].groups != mech0.groups or tuple(mechs[m].attributes) != attrs:
            raise DataError(f"internal error: {m} is composed over other groups than DepHDP")
        for r in range(spec.repetitions):
            report(check, r / spec.repetitions, f"{m}, repetition {r + 1}")
            t0 = time.perf_counter()
            rng = np.random.default_rng([spec.seed, settings_key(c), r, mi])
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
    return rows, _task_meta(c, t_start, cpu_start)


def _task_meta(c: Configuration, t_start: float, cpu_start: float, skipped: str = "") -> dict:
    """One configuration's meta data; ``skipped``: why it has no rows (a budget floor it cannot give)."""
    meta: dict[str, Any] = {
        "task_index": c.index,
        "pid": os.getpid(),
        "seconds": time.perf_counter() - t_start,
        "cpu_seconds": time.process_time() - cpu_start,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
    }
    if skipped:
        meta["skipped"] = skipped
    return meta


def _bundles(configs: list[Configuration]) -> list[list[Configuration]]:
    """Configurations that differ only in tau_dpn, one Dask task each: they share the budget's baseline
    allocations (:data:`_PROCESS_CACHE`), which two workers would otherwise both compute, and a heart
    configuration (~0.15 s) is short against Dask's per-task overhead."""
    bundles: dict[tuple[str, float, float], list[Configuration]] = {}
    for c in configs:
        bundles.setdefault((c.task, c.tau_group, c.eps), []).append(c)
    return list(bundles.values())


def run_bundle(
    data: SweepData,
    spec: SweepSpec,
    bundle: Sequence[Configuration],
    profiles: Any = None,
    stop: str | None = None,
    code: str | None = None,
) -> list[tuple[list[dict], dict]]:
    """:func:`run_configuration` for each configuration of ``bundle`` (one Dask task); ``stop``: the name
    of the sweep's stop event (:func:`_stop_check`); each meta records the code that computed it."""
    _refuse_other_code(loaded_code_version(), code)
    check = _stop_check(stop)
    done = [run_configuration(data, spec, c, profiles, check) for c in bundle]
    return [(rows, {**meta, "code": loaded_code_version()}) for rows, meta in done]


# --------------------------------------------------------------------------- engine


def _frame(
    rows: list[dict],
    spec: SweepSpec,
    engine: str,
    metas: list[dict],
    seconds: float,
    majority_rate: float | None = None,
    test_rows: int = 0,
) -> pd.DataFrame:
    order = {m: i for i, m in enumerate(METHODS_EVALUATED)}
    # rows in task order before the frame is built: its columns follow the first rows' keys, and tasks of
    # different kinds (prediction, entropy) carry different metrics, so completion order must not matter
    rows = sorted(rows, key=lambda r: (r["task_index"], order.get(r["method"], len(order)), r["repetition"]))
    df = pd.DataFrame(rows)
    if len(df):  # empty when every configuration was skipped (a budget floor none of them can give)
        df = df.sort_values(
            ["task_index", "method", "repetition"], key=lambda s: s.map(order) if s.name == "method" else s
        ).reset_index(drop=True)
    df.attrs = {
        "spec": spec.to_json(),
        "engine": engine,
        "seconds": seconds,
        "tasks": sorted(metas, key=lambda m: m["task_index"]),
        "majority_rate": majority_rate,
        "test_rows": test_rows,
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
        seconds, per-task meta data (pid, seconds, peak RSS in MB) and the held-out records' ``majority_rate``
        (:attr:`SweepData.majority_rate`: what always predicting the more frequent label scores; None
        without a target) and ``test_rows``, their number.
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
    try:
        return _run_distributed(spec, data, configs, client, progress, t0)
    except CancelledError as exc:  # a worker died with data only it held: once more (deterministic)
        reason = str(getattr(exc, "reason", "") or "")
        if not reason.startswith(("already forgotten", "lost dependencies")):  # not a lost scheduler
            raise
        report(progress, 0.0, "a Dask worker was lost with data the sweep needed: running it again")
        return _run_distributed(spec, data, configs, client, progress, t0)


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
            if (known := _STAGE1.get(skey)) is None:  # minutes on a wide table: the bar says so
                step = part(progress, k / n, k / n, f"{k}/{n} configurations; group profiles first: ")
                known = build_profiles(data, spec, c, progress=step)
            stage1[key] = known
            _remember_stage1(skey, known)
        r, meta = run_configuration(data, spec, c, stage1[key])
        rows += r
        metas.append(meta)
        report(progress, (k + 1) / n, f"{k + 1}/{n} configurations")
    seconds = time.perf_counter() - t0
    return _frame(rows, spec, describe_engine(False), metas, seconds, data.majority_rate, len(data.x_test))


def _run_distributed(
    spec: SweepSpec,
    data: SweepData,
    configs: list[Configuration],
    client: Any,
    progress: Callable[[float, str], None] | None,
    t0: float,
) -> pd.DataFrame:
    if client is None:
        client = default_client()
    check_worker_code(client)  # each task's numbers would otherwise depend on the worker that ran it
    engine = describe_engine(client)
    # a copy on every worker (adult: 8 MB each): scattered to one worker only, every task would depend on
    # data held there and the scheduler placed the whole sweep on it (the others had to steal every task)
    shared = client.scatter(data, hash=False, broadcast=True)
    token = f"sweep-{os.getpid()}-{time.time_ns()}"
    stop = f"{token}-stop"  # set when the sweep ends early: running tasks then end at their next check
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
        if known is not None:  # on every worker: held by one, it was lost with that worker (audit)
            stage1[key] = client.scatter(known, hash=False, broadcast=True)
        else:
            stage1[key] = built[skey] = client.submit(
                build_profiles,
                shared,
                spec,
                c,
                stop,
                code=CODE_VERSION,
                key=f"{token}-profiles-{len(stage1)}",
                pure=False,
            )
    futures = [
        client.submit(
            run_bundle,
            shared,
            spec,
            bundle,
            stage1[_profile_key(bundle[0])],
            stop,
            code=CODE_VERSION,
            key=f"{token}-{k}",
            pure=False,
        )
        for k, bundle in enumerate(_bundles(configs))
    ]
    rows: list[dict] = []
    metas: list[dict] = []
    n, done, finished = len(configs), 0, False

    def idle() -> None:
        first = done == 0 and any(not f.done() for f in built.values())
        report(progress, done / n, f"{done}/{n} configurations ({engine}{'; group profiles first' * first})")

    try:
        for fut in _as_they_finish(futures, client, idle):
            for r, meta in fut.result():
                _refuse_other_code(meta.get("code"), CODE_VERSION)  # a worker with older code: no own check
                rows += r
                metas.append(meta)
                done += 1
            idle()
        for skey, value in zip(built, client.gather(list(built.values())), strict=True):
            _remember_stage1(skey, value)
        check_worker_code(client)  # and the stage-1 tasks: a worker that joined with other code
        finished = True
    finally:  # release everything on the cluster (stopped, failed or done): a traceback kept by the caller
        # must not pin results, the scattered table or stage 1 in the workers' memory; on a lost scheduler
        # this cleanup fails too, and must not replace the sweep's own error (audit)
        if not finished:
            with contextlib.suppress(Exception):
                _stop_tasks(client, stop)
        with contextlib.suppress(Exception):
            client.cancel([*futures, *stage1.values(), shared])
    return _frame(rows, spec, engine, metas, time.perf_counter() - t0, data.majority_rate, len(data.x_test))
