"""Calibrated ε: the tree extension and EM + remap at the largest budget whose exact ε is still ε.

The embedded district and the 15 km city (``../shared/data/baltimore.osm.pbf``; skipped when absent), depths 2
and 3 (the city's depth 3: 3,479 targets, the district's 5,311) at the page's three named levels and depth 4
(8,972 / 21,171 targets) at its default (Medium; grids above ``CALIBRATE_MAX_TARGETS`` are skipped), 12 seed
cells, 60 task points: utility (km) of each family at its nominal ε and calibrated, the share of error
calibration removes, the nominal budget it reached and how many builds, seconds, and the certified lower bound
(30 s) as the yardstick of how far each is from the best possible (``gap_*`` = utility / bound - 1). The
strongest alternative on the page is the spanner LP (near-optimal, 26 s on the city at depth 2, Medium: 1.109
km); it is not rebuilt here.
"""

from __future__ import annotations

import math
import time

from bench._geo import CITY, bench_problem
from mdp_core.geo import (
    CALIBRATE_MAX_TARGETS,
    RoadNetwork,
    calibrated_method,
    compare_methods,
    load_road_network,
    tree_seed,
)
from mdp_core.geo.cosets import auto_lower_bound

LEVELS = {"High": 2.0, "Medium": 0.5, "Low": 0.2}  #: odds x2 within r km: eps = ln 2 / r
BOUND_SECONDS = 30.0


def _row(name: str, network: RoadNetwork, depth: int, level: str, bound: bool) -> dict:
    eps = math.log(2.0) / LEVELS[level]
    problem = bench_problem(network, depth)
    if problem.grid.n_targets > CALIBRATE_MAX_TARGETS:  # refused by the calibration: nothing to measure
        return {"map": name, "depth": depth, "targets": problem.grid.n_targets, "level": level, "eps": eps}
    seed = tree_seed(problem, eps)  # the tree row's seed LP, which the calibrated tree's first build takes
    base = compare_methods(problem, eps, methods=("tree", "em_remap"), verify_samples=1_000, seed=seed)
    row: dict = {"map": name, "depth": depth, "targets": problem.grid.n_targets, "level": level, "eps": eps}
    lower = auto_lower_bound(problem, eps, time_limit=BOUND_SECONDS).value if bound else None
    for family, calibrated in (("tree", "tree_cal"), ("em_remap", "em_remap_cal")):
        start = time.perf_counter()
        mech = calibrated_method(problem, eps, calibrated, seed=seed)  # as the page builds it
        seconds = time.perf_counter() - start
        before, after = base.utility_km[family], mech.utility_km(problem)
        row[f"{family}_km"] = before
        row[f"{calibrated}_km"] = after
        row[f"{family}_less_%"] = 100 * (1 - after / before)
        row[f"{family}_nominal_x"] = float(mech.info["nominal_eps"]) / eps  # type: ignore[arg-type]
        row[f"{family}_builds"] = mech.info["builds"]
        row[f"s_{calibrated}"] = seconds
        if lower:
            row[f"gap_{family}"] = before / lower - 1
            row[f"gap_{calibrated}"] = after / lower - 1
    row["bound_km"] = lower
    return row


def run(quick: bool = False) -> list[dict]:
    """District and city (when ../shared/data holds it) at depths 2-3, the three levels, and depth 4 at the
    page's default level (Medium); quick: the district at depth 2, no bound."""
    maps = [("district", "default")] + ([("city", str(CITY))] if CITY.exists() and not quick else [])
    rows = []
    for name, source in maps:
        network = load_road_network(source)
        for depth in (2,) if quick else (2, 3, 4):
            levels = ["Medium"] if depth == 4 else list(LEVELS)
            rows += [_row(name, network, depth, level, bound=not quick) for level in levels]
    return rows
