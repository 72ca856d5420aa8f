"""Time to the "which eps" answer (issue 14): heart and adult, prediction task, "accuracy >= 95 % of
non-private", DepHDP and the four baselines on the 9-point grid 0.25-20, 5 repetitions, embedded engine
(Dask LocalCluster started by the first call, as the page does).

Rows: ``cold`` (first question in a fresh process: cluster start, data preparation, every group profile),
``warm`` (the same question again on the running cluster: profiles cached in the workers, every
configuration re-run), ``cached`` (the page's store: the answer is looked up, nothing runs). Each row carries
the answer: eps, estimate, CI, met. Quick mode: heart only, grid (1, 5, 20), 2 repetitions.
"""

from __future__ import annotations

import time

from mdp_core.release import WHICH_EPS_GRID, UtilityTarget, which_eps


def _row(dataset: str, mode: str, seconds: float, decision: object) -> dict:
    c = decision.choice  # type: ignore[attr-defined]
    return {
        "dataset": dataset,
        "mode": mode,
        "seconds": seconds,
        "eps": float(c.eps),
        "met": bool(c.met),
        "estimate": float(c.estimate),
        "ci_lo": float(c.ci[0]),
        "ci_hi": float(c.ci[1]),
        "reference": float(decision.reference),  # type: ignore[attr-defined]
        "sentence": decision.sentence,  # type: ignore[attr-defined]
    }


def run(quick: bool = False) -> list[dict]:
    from mdp_core.sweep import close_default_client

    datasets = ("heart",) if quick else ("heart", "adult")
    grid = (1.0, 5.0, 20.0) if quick else WHICH_EPS_GRID
    reps = 2 if quick else 5
    target = UtilityTarget("relative", 0.95)
    rows: list[dict] = []
    for name in datasets:
        close_default_client()  # cold: a fresh embedded cluster, no worker holds a profile yet
        store: dict = {}
        key = (name, target, grid, reps)
        for mode in ("cold", "warm"):
            t0 = time.perf_counter()
            d = which_eps(name, target, eps=grid, repetitions=reps, client=None)
            rows.append(_row(name, mode, time.perf_counter() - t0, d))
            store[key] = d
        t0 = time.perf_counter()
        d = store[key]
        rows.append(_row(name, "cached", time.perf_counter() - t0, d))
    close_default_client()
    return rows
