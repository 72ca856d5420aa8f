"""The exact optimum at depth 2 the way the map page finds it, against the same solver in float64 only.

The page's button "Find the exact optimum" runs :func:`~mdp_core.geo.auto_lower_bound` with 600 s (its
10-minute bound), which solves the exact optimum by row generation over the block interior point
(:mod:`mdp_core.geo.optimal`) where that closes. Moonshot (b) of issue #15: depth 2 of the 15 km city
(``../shared/data/baltimore.osm.pbf``, skipped when absent) in under 10 minutes. Maps: the district and
the city at depth 2, 12 seed cells, 60 task points, the page's Medium level (eps = ln 2 / 0.5 km); on the
city also its High and Low levels (odds x2 within 2 km / 0.2 km).

Per run, in its own process (its peak memory): the bound (km), whether it is the exact optimum, the whole
seconds, the interior point's iterations per LP and the peak resident memory. ``precision``: ``mixed`` is
the solver as shipped (early Newton blocks in float32 on grids of :data:`~mdp_core.geo.ipm._SINGLE_FROM`
targets or more, :mod:`mdp_core.geo._newton`); ``float64`` patches that threshold above the grid, so every
block is inverted in float64 (the element-wise work is chunked in both). HiGHS does not finish even the
first round's LP at depth 1 (``bench geo_optimal``), so the alternative here is the solver's own older path.
Quick: nothing (a depth-2 optimum takes minutes).

Measured (stop 49, 2 cores): district Medium exact in 259.5 s (2.53 GB); city Medium exact in 419.2 s
(3.15 GB), 458.9 s in float64 only; city High exact in 297 s (2.30 GB); city Low not closed in 600 s (a
third LP; bracket below 0.005 %, 3.70 GB). The High and Low values by the same call in a script.
Stop 50 (shifted blocks, every spanner row kept when most look spare): district Medium 278.9 s, city High
306.9 s, city Medium 522.3 s (its round 2 converges through shifted blocks: 87 iterations where stop 49's
stopped at 72 on a block that was not definite), city Low still not closed (595 s: round 2 stopped at its
certificate, 3.3e-6 below its objective, and the raising repair cost 6.7e-6 more: a bracket of 1.01e-5).
Stop 51 (the raising repair also at 3e-7 of the budget: 6.2e-6, a bracket of 9.5e-6): district Medium exact
in 276.0 s (2.54 GB); city High exact in 306.8 s (2.32 GB), Medium in 502.6 s (3.28 GB; 541.5 s in float64
only, 3.21 GB), Low exact in 396.2 s (2.58 GB, two LPs of 35 + 71 iterations).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

from bench._geo import CITY

ROOT = Path(__file__).resolve().parents[1]
LEVELS = {"High": math.log(2.0) / 2.0, "Medium": math.log(2.0) / 0.5, "Low": math.log(2.0) / 0.2}  #: 1/km
LIMIT = 600.0  #: the page's longest bound, s

_SCRIPT = """
import json, resource, sys, time
import numpy as np
from mdp_core.geo import auto_lower_bound, build_problem, ipm, load_road_network
source, eps, limit, precision = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
rng = np.random.default_rng(0)
problem = build_problem(load_road_network(source), seed_n=12, depth=2, n_tasks=60, rng=rng)
if precision == "float64":
    ipm._SINGLE_FROM = 10**9
found = []
start = time.perf_counter()
bound = auto_lower_bound(problem, eps, time_limit=limit, on_optimum=found.append)
seconds = time.perf_counter() - start
info = found[0].info if found else {}
print(json.dumps({
    "targets": problem.grid.n_targets, "outputs": problem.cost.shape[1], "bound_km": bound.value,
    "exact": bound.exact, "s_total": seconds, "iterations": info.get("iterations"),
    "rows": info.get("rows"), "peak_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6,
}))
"""


def _run(name: str, source: str, level: str, precision: str) -> dict:
    eps = LEVELS[level]
    cmd = [sys.executable, "-c", _SCRIPT, source, str(eps), str(LIMIT), precision]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=2 * LIMIT, check=True)
    row = {"map": name, "depth": 2, "level": level, "eps": eps, "precision": precision}
    row.update(json.loads(done.stdout.strip().splitlines()[-1]))
    print(json.dumps(row), file=sys.stderr, flush=True)
    return row


def run(quick: bool = False) -> list[dict]:
    if quick:
        return []
    rows = [_run("district", "default", "Medium", "mixed")]
    if CITY.exists():
        rows += [_run("city", str(CITY), level, "mixed") for level in LEVELS]
        rows.append(_run("city", str(CITY), "Medium", "float64"))
    return rows
