"""Correlated leakage on every ordered attribute pair of adult: DT parameters vs exact CPL* (seed 001).

For each ordered pair (released j, target k): time to build the Dependency Triad and evaluate it at 100
budgets, versus exact CPL* at the same 100 budgets (sort + hull once, then a hull scan per budget) and the
plain scan (sort once, every top-k set of every pair at each budget, 001 Table II HCC-2); the largest
relative gap DT / CPL* - 1 and the smallest DT - CPL* (must be >= 0 up to rounding). One summary row per
target attribute plus a total row; then budget calibration (eps_bar = 3) with both models.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

import mdp_core as core
from mdp_core.leakage.cpl import _log_ratio

EPS = np.geomspace(0.01, 20.0, 100)


def _codes(quick: bool) -> tuple[pd.DataFrame, str]:
    try:
        df = core.load_dataset("adult")
        name = "adult"
    except core.DataError:  # data file not there yet: a synthetic table of the same shape
        rng = np.random.default_rng(0)
        base = rng.integers(0, 8, 45_000)
        df = pd.DataFrame(
            {f"a{i}": (base * (i % 3) + rng.integers(0, 4 + i, 45_000)) % (5 + i) for i in range(15)}
        )
        name = "synthetic"
    codes = core.discretize(df, core.infer_schema(df)).codes
    if quick:
        codes = codes.iloc[:, :5]
    return codes, name


def _all_points(cond: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(B, A) of every top-k prefix of every ordered pair over all b entries (no pruning, no hull)."""
    a, _ = cond.shape
    bs, as_ = [], []
    for x in range(a):
        g, gp = cond[x][None, :], np.delete(cond, x, axis=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            key = np.where(gp > 0, g / np.where(gp > 0, gp, 1.0), np.where(g > 0, np.inf, 0.0))
        order = np.argsort(-key, axis=1, kind="stable")
        as_.append(np.cumsum(np.take_along_axis(np.broadcast_to(g, gp.shape), order, axis=1), axis=1).ravel())
        bs.append(np.cumsum(np.take_along_axis(gp, order, axis=1), axis=1).ravel())
    return (np.concatenate(bs), np.concatenate(as_)) if bs else (np.zeros(0), np.zeros(0))


def _naive_cpl(cond: np.ndarray) -> np.ndarray:
    """CPL* without pruning or hull: sort every pair by ratio once, then scan all top-k sets at each eps."""
    B, A = _all_points(cond)
    if B.size == 0:
        return np.zeros_like(EPS)
    return np.minimum(np.array([max(0.0, float(_log_ratio(B, A, e).max())) for e in EPS]), EPS)


def run(quick: bool = False) -> list[dict]:
    codes, name = _codes(quick)
    rows: list[dict] = []
    totals = {"dt_s": 0.0, "exact_s": 0.0, "naive_s": 0.0, "pairs": 0, "min_gap": np.inf, "max_rel": 0.0}
    for target in codes.columns:
        acc = {"dt_s": 0.0, "exact_s": 0.0, "pairs": 0, "min_gap": np.inf, "max_rel": 0.0, "a": 0, "b_max": 0}
        for other in codes.columns:
            if other == target:
                continue
            cond = core.conditional(codes, target, other)
            t0 = time.perf_counter()
            dt = core.dt_cpl(core.dependency_triad(cond), EPS)
            t1 = time.perf_counter()
            exact = core.cpl_exact(cond, EPS)
            t2 = time.perf_counter()
            naive = _naive_cpl(cond)
            t3 = time.perf_counter()
            assert np.allclose(naive, exact, atol=1e-12)
            acc["dt_s"] += t1 - t0
            acc["exact_s"] += t2 - t1
            acc["naive_s"] = acc.get("naive_s", 0.0) + t3 - t2
            acc["pairs"] += 1
            acc["min_gap"] = min(acc["min_gap"], float(np.min(dt - exact)))
            pos = exact > 1e-12
            if pos.any():
                acc["max_rel"] = max(acc["max_rel"], float(np.max(dt[pos] / exact[pos] - 1)))
            acc["a"], acc["b_max"] = cond.shape[0], max(acc["b_max"], cond.shape[1])
        rows.append(
            {
                "dataset": name,
                "target": target,
                "levels": acc["a"],
                "max other levels": acc["b_max"],
                "pairs": acc["pairs"],
                "DT ms": 1e3 * acc["dt_s"],
                "CPL* ms": 1e3 * acc["exact_s"],
                "CPL* scan ms": 1e3 * acc["naive_s"],
                "ratio": acc["exact_s"] / acc["dt_s"],
                "min DT-CPL*": acc["min_gap"],
                "max DT/CPL*-1": acc["max_rel"],
            }
        )
        for key in ("dt_s", "exact_s", "naive_s", "pairs"):
            totals[key] += acc[key]
        totals["min_gap"] = min(totals["min_gap"], acc["min_gap"])
        totals["max_rel"] = max(totals["max_rel"], acc["max_rel"])
    rows.append(
        {
            "dataset": name,
            "target": "ALL",
            "pairs": totals["pairs"],
            "DT ms": 1e3 * totals["dt_s"],
            "CPL* ms": 1e3 * totals["exact_s"],
            "CPL* scan ms": 1e3 * totals["naive_s"],
            "ratio": totals["exact_s"] / totals["dt_s"],
            "scan ratio": totals["naive_s"] / totals["dt_s"],
            "min DT-CPL*": totals["min_gap"],
            "max DT/CPL*-1": totals["max_rel"],
        }
    )
    for method in ("dt", "exact"):
        t0 = time.perf_counter()
        model = core.pairwise_leakage(codes, method=method)  # type: ignore[arg-type]
        t1 = time.perf_counter()
        cal = core.calibrate_budgets(model, 3.0)
        t2 = time.perf_counter()
        rows.append(
            {
                "dataset": name,
                "target": f"calibration ({method}, eps_bar=3)",
                "pairs": model.n * (model.n - 1),
                "build s": t1 - t0,
                "calibrate s": t2 - t1,
                "sum eps": cal.total,
                "uniform sum eps": cal.uniform_eps * model.n,
                "max TPL": float(cal.tpl.max()),
                "feasible": cal.success,
            }
        )
    return rows
