"""Sweeps on Dask (issue 13): the 48-configuration sweep (12 eps x 2 tau_dpn x 2 tasks, 5 repetitions, all
five methods) on heart and adult, serial in-process vs an embedded LocalCluster with 2 workers.

Reported per dataset: wall-clock seconds of both, speed-up, the overhead per task (wall x workers minus the
workers' compute seconds from Dask's task stream, per task, and as a share of the mean task compute time),
the transfer + deserialisation seconds per task, and each worker's peak RSS after its first and its last
task (flat = no leak per task). Both runs give identical rows (checked). Quick mode: heart only, 4 eps,
2 repetitions.
"""

from __future__ import annotations

import logging
import time

import numpy as np
import pandas as pd
from distributed import Client, LocalCluster, get_task_stream

from mdp_core import clear_profile_cache
from mdp_core.sweep import SweepSpec, run_sweep

TIMINGS = ["configure_seconds", "seconds"]


def _spec(dataset: str, quick: bool) -> SweepSpec:
    n_eps = 4 if quick else 12
    eps = sorted({float(f"{v:.3g}") for v in np.geomspace(0.5, 10.0, n_eps)})
    return SweepSpec(
        dataset,
        task=["prediction", "entropy"],
        eps=eps,
        tau_dpn=[0.2, 0.5],
        repetitions=2 if quick else 5,
        seed=0,
    )


def _one(dataset: str, quick: bool) -> dict:
    spec = _spec(dataset, quick)
    clear_profile_cache()
    t0 = time.perf_counter()
    serial = run_sweep(spec, client=False)
    t_serial = time.perf_counter() - t0
    with (
        LocalCluster(
            n_workers=2,
            processes=True,
            threads_per_worker=1,
            dashboard_address=None,
            silence_logs=logging.ERROR,
        ) as cluster,
        Client(cluster, set_as_default=False) as client,
    ):
        client.run(lambda: __import__("mdp_core.sweep"))  # imports are start-up, not sweep time
        with get_task_stream(client) as stream:
            t0 = time.perf_counter()
            dist = run_sweep(spec, client=client)
            t_dist = time.perf_counter() - t0
        compute = transfer = 0.0
        for task in stream.data:
            for ss in task["startstops"]:
                d = ss["stop"] - ss["start"]
                if ss["action"] == "compute":
                    compute += d
                else:
                    transfer += d
        n_tasks = len(stream.data)
    identical = serial.drop(columns=TIMINGS).equals(dist.drop(columns=TIMINGS))
    metas = pd.DataFrame(dist.attrs["tasks"])
    mem = []
    for _pid, grp in metas.groupby("pid"):  # ru_maxrss only grows: min = after the first task
        mem.append(f"{grp['peak_rss_mb'].min():.0f}->{grp['peak_rss_mb'].max():.0f}")
    overhead = (t_dist * 2 - compute) / n_tasks
    return {
        "dataset": dataset,
        "configurations": spec.n_configurations,
        "rows": len(dist),
        "serial s": t_serial,
        "2 workers s": t_dist,
        "speed-up": t_serial / t_dist,
        "dask tasks": n_tasks,
        "mean task compute s": compute / n_tasks,
        "overhead/task s": overhead,
        "overhead % of task": 100 * overhead / (compute / n_tasks),
        "transfer/task s": transfer / n_tasks,
        "worker peak RSS MB (first->last)": ", ".join(mem),
        "identical": identical,
    }


def run(quick: bool = False) -> list[dict]:
    return [_one(d, quick) for d in (("heart",) if quick else ("heart", "adult"))]
