"""City-scale lower bounds in the same time: the cell relaxation against the fine grid's cosets.

The embedded district and the 15 km city (``../shared/data/baltimore.osm.pbf``, skipped when absent) at
depths 3 and 4, 12 seed cells, 60 task points, uniform prior, eps 0.5 / 1 / 1.5 per km: the bound
:func:`~mdp_core.geo.auto_lower_bound` takes in ``SECONDS`` (cells at city scale,
:mod:`mdp_core.geo.cells`) against the cosets it took before (:func:`~mdp_core.geo.cosets.fitting_step`'s,
the same ``SECONDS``), their ratio, and the gap of the best verified mechanism measured on the city at
depth 4, eps 1.5 (``BEST_KNOWN_KM``: the spanner LP of the coarser grid raised to eps-mDP on all pairs,
``python -m mdp_core.geo bench --reference``, 20 minutes) to each. Quick: the city at depth 4, eps 1.5
(the moonshot's configuration), else the district at depth 3.
"""

from __future__ import annotations

import time

from bench._geo import CITY, bench_problem
from mdp_core.geo import auto_lower_bound, coset_lower_bound, load_road_network
from mdp_core.geo.cosets import DILATION, fitting_step

SECONDS = 60.0
#: (map, depth, eps) -> utility (km) of the best verified eps-mDP mechanism measured there.
BEST_KNOWN_KM = {("city", 4, 1.5): 0.9971}


def _row(name: str, source: str, depth: int, eps: float) -> dict:
    problem = bench_problem(load_road_network(source), depth)
    start = time.perf_counter()
    cells = auto_lower_bound(problem, eps, time_limit=SECONDS)
    s_cells = time.perf_counter() - start
    start = time.perf_counter()
    step = fitting_step(problem, eps, SECONDS)
    cosets = coset_lower_bound(problem, eps, step=step, time_limit=SECONDS)
    s_cosets = time.perf_counter() - start
    best = BEST_KNOWN_KM.get((name, depth, eps))
    return {
        "map": name,
        "depth": depth,
        "eps": eps,
        "targets": problem.grid.n_targets,
        "cells_bound_km": cells.value,
        "s_cells": s_cells,
        "cells": cells.method.removeprefix("cell relaxation: ").split(f", {DILATION}-spanner")[0],
        "cosets_bound_km": cosets.value,
        "s_cosets": s_cosets,
        "cosets": f"{step} x {step}",
        "cells_over_cosets": cells.value / cosets.value,
        "best_known_km": best,
        "gap_best_cells": None if best is None else best / cells.value - 1.0,
        "gap_best_cosets": None if best is None else best / cosets.value - 1.0,
    }


def run(quick: bool = False) -> list[dict]:
    if quick:
        return [_row("city", str(CITY), 4, 1.5) if CITY.exists() else _row("district", "default", 3, 1.5)]
    maps = [("district", "default")] + ([("city", str(CITY))] if CITY.exists() else [])
    return [
        _row(name, source, depth, eps) for name, source in maps for depth in (3, 4) for eps in (0.5, 1.0, 1.5)
    ]
