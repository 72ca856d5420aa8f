"""Exact optimum at depth 1: row generation over the block interior point against HiGHS, and how far every
mechanism is from the true optimum.

The 15 km city (``../shared/data/baltimore.osm.pbf``, skipped when absent) at depth 1, eps 0.5 / 1 / 1.5
per km, and the embedded district at eps 1.5, 12 seed cells, 60 task points, uniform prior. Per
configuration:
the optimum (``optimal_geo_mechanism``: its verified eps-mDP mechanism and certified bound, the bracket
``utility / bound - 1``, rounds, rows, seconds) and the gap of MLaEt-A / MLaEt-O / EM + remap / the
spanner LP (PDLP, 60 s) to it. The strongest alternative, in the same run: HiGHS (IPX interior point and
dual simplex) on the first round's LP alone (the 1.1-spanner relaxation), with a time limit of
``HIGHS_SECONDS`` (none finished it before), against the block interior point on the same LP. Last, the
exact optimum at depth 2 of the city (1,251 targets) at eps 1.5, started from the outputs the depth-1 optimum
(every output kept in its LPs) gives more than 1e-6 somewhere, with the seconds of both solves.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from bench._geo import CITY

ROOT = Path(__file__).resolve().parents[1]
HIGHS_SECONDS = 180.0

_SCRIPT = """
import json, sys, time
import numpy as np
from mdp_core.geo import (build_problem, em_remap_geo, exponential_geo, load_road_network,
    optimal_geo_mechanism, spanner_mechanism, tree_extension, tree_seed, verify_geo)
city, eps = sys.argv[1], float(sys.argv[2])
net = load_road_network(city)
problem = build_problem(net, seed_n=12, depth=1, n_tasks=60, rng=np.random.default_rng(0))
start = time.perf_counter()
opt = optimal_geo_mechanism(problem, eps)
seconds = time.perf_counter() - start
bound = opt.info["lower_bound"]
assert verify_geo(opt, exhaustive=True).holds
seed = tree_seed(problem, eps)
em = exponential_geo(problem, eps)
others = {
    "tree": tree_extension(problem, eps, variant="A", seed=seed),
    "tree_o": tree_extension(problem, eps, variant="O", seed=seed),
    "em_remap": em_remap_geo(problem, eps, em=em),
    "spanner": spanner_mechanism(problem, eps, time_limit=60.0),
}
utility = {k: m.utility_km(problem) for k, m in others.items()}
print(json.dumps({
    "targets": problem.grid.n_targets, "outputs": len(problem.grid.outputs),
    "optimum_km": opt.utility_km(problem), "bound_km": bound.value, "exact": bound.exact,
    "bracket": opt.utility_km(problem) / bound.value - 1.0, "rounds": opt.info["rounds"],
    "rows": opt.info["rows"], "iterations": opt.info["iterations"], "s_optimal": seconds,
    "outputs_solved": opt.info["outputs_solved"],
    "utility": utility, "spanner_certificate": others["spanner"].info["lower_bound"].value,
    "private": {k: bool(verify_geo(m, exhaustive=True).holds) for k, m in others.items()},
}))
"""

_HIGHS = """
import json, sys, time
import numpy as np
from mdp_core.geo import build_problem, load_road_network, solve_geo_lp, spanner_pairs
from mdp_core.geo.bounds import _privacy_rows, _relaxation_lp, certified_bound
from mdp_core.geo.seed_lp import _highs
city, eps, solver, limit = sys.argv[1], float(sys.argv[2]), sys.argv[3], float(sys.argv[4])
problem = build_problem(load_road_network(city), seed_n=12, depth=1, n_tasks=60, rng=np.random.default_rng(0))
cost = problem.cost
m = cost.shape[1]
pts = problem.targets_km
rows = _privacy_rows(spanner_pairs(pts, 1.1)[0], m)
ratios = np.exp(eps * np.linalg.norm(pts[rows[:, 0]] - pts[rows[:, 1]], axis=1))
start = time.perf_counter()
if solver == "block":
    sol = solve_geo_lp(cost, rows, ratios, tol=1e-9)
    out = {"status": "Optimal" if sol.converged else f"gap {sol.gap:.1e}", "objective": sol.objective,
           "certificate": certified_bound(cost, rows, ratios, sol.nu)}
else:
    h = _highs(*_relaxation_lp(cost, rows, ratios), cost.ravel(), solver=solver)
    h.setOptionValue("time_limit", limit)
    h.run()
    out = {"status": h.modelStatusToString(h.getModelStatus()),
           "objective": float(h.getInfo().objective_function_value), "certificate": None}
out["seconds"] = time.perf_counter() - start
out["rows"] = len(rows)
print(json.dumps(out))
"""


_DEPTH2 = """
import json, sys, time
import numpy as np
from mdp_core.geo import build_problem, coarser_start, load_road_network, optimal_geo_mechanism, verify_geo
from mdp_core.geo.compare import OPTIMAL_FROM_COARSER_TARGETS
city, eps = sys.argv[1], float(sys.argv[2])
net = load_road_network(city)
start = time.perf_counter()
coarse = build_problem(net, seed_n=12, depth=1, n_tasks=60, rng=np.random.default_rng(0))
fine = build_problem(net, seed_n=12, depth=2, n_tasks=60, rng=np.random.default_rng(0))
used = coarser_start(coarse, fine, eps)  # the outputs the depth-1 optimum uses
s_depth1 = time.perf_counter() - start
limit = OPTIMAL_FROM_COARSER_TARGETS
opt = optimal_geo_mechanism(fine, eps, max_targets=limit, outputs=used, time_limit=1800.0)
seconds = time.perf_counter() - start
bound = opt.info["lower_bound"]
print(json.dumps({
    "targets": fine.grid.n_targets, "outputs": len(fine.grid.outputs), "start_outputs": len(used),
    "optimum_km": opt.utility_km(fine), "bound_km": bound.value, "exact": bound.exact,
    "bracket": opt.utility_km(fine) / bound.value - 1.0, "s_depth1": s_depth1, "s_total": seconds,
    "iterations": opt.info["iterations"], "outputs_solved": opt.info["outputs_solved"],
    "rows": opt.info["rows"], "private": bool(verify_geo(opt, exhaustive=True).holds),
}))
"""


def _python(script: str, *args: str, timeout: float = 3600) -> dict:
    cmd = [sys.executable, "-c", script, *args]
    run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=True)
    return json.loads(run.stdout.strip().splitlines()[-1])


def _one(city: str, eps: float) -> dict:
    rec = _python(_SCRIPT, city, str(eps))
    row: dict = {"city": "district" if city == "default" else Path(city).stem.split(".")[0], "eps": eps}
    row.update({k: rec[k] for k in ("targets", "outputs", "optimum_km", "bound_km", "bracket", "exact")})
    row.update({k: rec[k] for k in ("rounds", "rows", "s_optimal")})
    solves = zip(rec["iterations"], rec["outputs_solved"], strict=True)
    row["iterations"] = "+".join(  # an LP over fewer outputs than all says how many
        str(it) if k == rec["outputs"] else f"{it} ({k} outputs)" for it, k in solves
    )
    for name, u in rec["utility"].items():
        row[f"gap_{name}"] = u / rec["optimum_km"] - 1.0
    row["spanner_certificate_gap"] = 1.0 - rec["spanner_certificate"] / rec["optimum_km"]
    row["all_private"] = all(rec["private"].values())
    print(json.dumps(row), file=sys.stderr, flush=True)
    return row


def _depth2(city: str, eps: float) -> dict:
    """The exact optimum at depth 2 (moonshot: under 10 minutes), started from the outputs the depth-1
    optimum uses; ``s_total`` includes that depth-1 solve."""
    rec = _python(_DEPTH2, city, str(eps), timeout=2400)
    row = {"city": Path(city).stem.split(".")[0], "depth": 2, "eps": eps}
    row.update(rec)
    print(json.dumps(row), file=sys.stderr, flush=True)
    return row


def _solver_race(city: str, eps: float) -> list[dict]:
    """The first round's LP (1.1-spanner rows) by the block interior point and by HiGHS (IPX, simplex)."""
    rows = []
    for solver in ("block", "ipm", "simplex"):
        start = time.perf_counter()
        rec = _python(_HIGHS, city, str(eps), solver, str(HIGHS_SECONDS), timeout=HIGHS_SECONDS + 600)
        rec.update({"city": Path(city).stem.split(".")[0], "eps": eps, "solver": solver})
        rec["s_wall"] = time.perf_counter() - start
        print(json.dumps(rec), file=sys.stderr, flush=True)
        rows.append(rec)
    return rows


def run(quick: bool = False) -> list[dict]:
    """Depth 1 of the city at eps 0.5 / 1 / 1.5 and the district at eps 1.5, then the solver race on the
    city at eps 1.5 (quick: the district only)."""
    if quick:
        return [_one("default", 1.5)]
    rows = [_one(str(CITY), eps) for eps in (0.5, 1.0, 1.5)] if CITY.exists() else []
    rows.append(_one("default", 1.5))
    if CITY.exists():
        rows += _solver_race(str(CITY), 1.5)
        rows.append(_depth2(str(CITY), 1.5))
    return rows
