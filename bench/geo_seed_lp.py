"""The seed LP's solvers against each other (the seed, seed-cells or depth change of the geo page).

The 15 km city (``../shared/data/baltimore.osm.pbf``; the embedded district when absent or quick) at depth 2,
60 task points, 8 / 12 / 16 seed cells, the three named levels: seconds and objective of the column
generation (``method="colgen"``), the block interior point (``"ipm"``), what ``"auto"`` picks at that
``eps_axis * h0`` and, as the general solver's yardstick, HiGHS's interior point on the whole LP (``"full"``,
on grids up to :data:`FULL_UP_TO` variables). ``ratio_auto`` is the auto choice's seconds over the better of
the two. Objectives agree to ``rel_diff`` (interior point against column generation).

Measured (2 cores, stop 57, the city; seconds at High / Medium / Low): 81 x 60 column generation 0.14 /
0.55 / 1.04, interior point 0.27 / 0.39 / 0.31, HiGHS whole 1.01 / 1.35 / 1.83; 156 x 117 (the default)
0.71 / 3.58 / 16.8 against 1.10 / 1.69 / 1.84; 272 x 186 1.48 / 25.0 / 176 against 5.88 / 8.43 / 8.68.
``auto`` took the faster at all nine; objectives within 7.4e-7.
"""

from __future__ import annotations

import math
import time

import numpy as np

from bench._geo import CITY
from mdp_core.geo import axis_budget, build_problem, load_road_network, seed_cost, solve_seed_lp
from mdp_core.geo.seed_lp import IPM_FROM

LEVELS = {"High": 2.0, "Medium": 0.5, "Low": 0.2}  #: odds x2 within r km: eps = ln 2 / r
#: Largest seed LP (seeds x outputs) given to HiGHS whole (21 s at 156 x 117, Medium).
FULL_UP_TO = 10_000


def _timed(
    cost: np.ndarray, shape: tuple[int, int], h0: float, eps_axis: float, method: str
) -> tuple[float, float]:
    start = time.perf_counter()
    result = solve_seed_lp(cost, shape, h0, eps_axis, method=method)
    return time.perf_counter() - start, result.objective


def _rows(name: str, source: str, seed_cells: tuple[int, ...]) -> list[dict]:
    network = load_road_network(source)
    rows = []
    for seed_n in seed_cells:
        problem = build_problem(network, seed_n=seed_n, depth=2, n_tasks=60, rng=np.random.default_rng(0))
        grid = problem.grid
        cost = seed_cost(grid, problem.prior, problem.loss)
        for level, radius in LEVELS.items():
            eps_axis = axis_budget(math.log(2.0) / radius)
            colgen_s, colgen = _timed(cost, grid.seed_shape, grid.h0, eps_axis, "colgen")
            ipm_s, ipm = _timed(cost, grid.seed_shape, grid.h0, eps_axis, "ipm")
            full_s = None
            if cost.size <= FULL_UP_TO:
                full_s = _timed(cost, grid.seed_shape, grid.h0, eps_axis, "full")[0]
            auto = "ipm" if eps_axis * grid.h0 >= IPM_FROM else "colgen"
            auto_s = ipm_s if auto == "ipm" else colgen_s
            rows.append(
                {
                    "map": name,
                    "seeds_x_outputs": f"{cost.shape[0]} x {cost.shape[1]}",
                    "level": level,
                    "eps_axis_h0": eps_axis * grid.h0,
                    "colgen_s": colgen_s,
                    "ipm_s": ipm_s,
                    "highs_full_s": full_s,
                    "auto": auto,
                    "ratio_auto": auto_s / min(colgen_s, ipm_s),
                    "rel_diff": ipm / colgen - 1.0,
                }
            )
    return rows


def run(quick: bool = False) -> list[dict]:
    if quick or not CITY.exists():
        return _rows("district", "default", (8,) if quick else (8, 12, 16))
    return _rows("city (Baltimore)", str(CITY), (8, 12, 16))
