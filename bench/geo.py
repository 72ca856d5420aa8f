"""Geo benchmark: tree extension vs EM, EM + remap, LP-A on the embedded city (seed 004, Tables 2-4).

Depth 2, 3, 4 at eps 0.5, 1.0, 1.5 per km, 12 seed cells, 60 task points, uniform prior (the DESIGN.md
utility, as in the first prototype); plus a lever study at depth 3 (task count and prior), since at these
budgets the 1.0 x 1.7 km extract is small against 1/eps and the optimum is close to "report the
travel-median point". Each configuration runs in a fresh process so peak memory is per configuration.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _one(depth: int, eps: float, *, tasks: int = 60, prior: str = "uniform", samples: int = 200_000) -> dict:
    cmd = [
        sys.executable,
        "-m",
        "mdp_core.geo",
        "bench",
        "--city",
        "default",
        "--depth",
        str(depth),
        "--eps",
        str(eps),
        "--tasks",
        str(tasks),
        "--prior",
        prior,
        "--samples",
        str(samples),
        "--json",
    ]
    run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900, check=True)
    rec = json.loads(run.stdout.strip().splitlines()[-1])
    sec, util, viol = rec["seconds"], rec["utility_km"], rec["violation_ratio"]
    return {
        "depth": depth,
        "eps": eps,
        "tasks": tasks,
        "prior": prior,
        "targets": rec["targets"],
        "outputs": rec["outputs"],
        "s_load": sec["load"],
        "s_grid_loss": sec["grid_and_loss"],
        "s_seed_lp": sec["seed_lp"],
        "s_extension": sec["extension"],
        "s_em_remap": sec["em_remap"],
        "s_lp_coarse": sec["lp_coarse"],
        "s_verify": sec["verify"],
        "s_total": sec["total"],
        "peak_mb": rec["peak_memory_mb"],
        "tree_km": util["tree"],
        "em_km": util["em"],
        "em_remap_km": util["em_remap"],
        "lp_coarse_km": util["lp_coarse"],
        "tree_vs_em": rec["tree_vs_em"],
        "viol_tree": viol["tree"],
        "viol_em": viol["em"],
        "viol_em_remap": viol["em_remap"],
        "viol_lp_coarse": viol["lp_coarse"],
    }


def run(quick: bool = False) -> list[dict]:
    """One row per (depth, eps) configuration, then the lever rows (depth 3, eps 0.5)."""
    if quick:
        return [_one(2, 0.5, samples=20_000), _one(3, 1.0, samples=20_000)]
    rows = [_one(depth, eps) for depth in (2, 3, 4) for eps in (0.5, 1.0, 1.5)]
    rows += [_one(3, 0.5, tasks=tasks, prior=prior) for tasks in (1, 3, 10) for prior in ("uniform", "roads")]
    rows.append(_one(3, 0.5, tasks=60, prior="roads"))
    return rows
