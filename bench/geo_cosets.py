"""Depth-3 lower bounds: the coset bound (block interior point per coset) against the default bound.

The embedded district and the 15 km city (``../shared/data/baltimore.osm.pbf``, skipped when absent) at
depth 3, 12 seed cells, 60 task points, uniform prior; per eps: :func:`~mdp_core.geo.coset_lower_bound`
with the automatic step and :func:`~mdp_core.geo.geo_lower_bound` (the aggregated relaxation at this
size), each with ``SECONDS`` for the whole bound, and the bilinear lattice mechanism (the best verified
one at depths 3-4; the comparison's BILINEAR_SECONDS) with its gap to each bound. Quick: the district at
eps 1.5 only.

Stop 34, the bilinear lattice as an exact cone program refined coarse to fine (240 s), against the bound
the comparison takes (:func:`~mdp_core.geo.auto_lower_bound`, 60 s), eps 0.5 / 1 / 1.5: district depth 3
0.39815 / 0.37873 / 0.36257 km against 0.39146 / 0.37439 / 0.35685 (cosets): gap 1.7 / 1.2 / 1.6 %;
district depth 4 0.39737 / 0.37802 / 0.36207 against 0.39078 / 0.36561 / 0.34674 (aggregated): 1.7 / 3.4 /
4.4 %; city depth 3 1.7637 / 1.3941 / 1.1361 against 1.7143 / 1.2597 / 0.9413 (cosets): 2.9 / 10.7 /
20.7 % (the 16-gon LP by PDLP in 60 s before: 1.8083 / 1.5056 / 1.2323).

Measured at eps 0.5 / 1 / 1.5 (2 cores, 60 s each, the interior point with centrality correctors): city
1.726 / 1.268 / 0.9434 km by cosets against 1.689 / 1.178 / 0.8539 by default (bilinear 1.789 / 1.474 /
1.204: gap 3.7 / 16.3 / 27.6 % instead of 5.9 / 25.2 / 41.0 %); district 0.3969 / 0.3772 / 0.3598 against
0.3933 / 0.3727 / 0.3548 (bilinear 0.3987 / 0.383 / 0.3667: 0.5 / 1.5 / 1.9 % instead of 1.4 / 2.8 / 3.3 %).
Before the correctors, at eps 1.5: city 0.9347, district 0.3592. With the cosets on a thread per core,
on a machine 1.5x slower: city 1.718 / 1.260 / 0.9314 by cosets against 1.624 / 1.133 / 0.8190 by default
(bilinear 1.807 / 1.516 / 1.221: gap 5.2 / 20.3 / 31.1 %); one after the other there the cosets gave
1.695 at eps 0.5 and 0.9155 at 1.5, and given 400 s they converge to 1.727 at eps 0.5 (in 108 s).
"""

from __future__ import annotations

import time

from bench._geo import CITY, bench_problem
from mdp_core.geo import (
    bilinear_mechanism,
    coset_lower_bound,
    geo_lower_bound,
    load_road_network,
)
from mdp_core.geo.compare import BILINEAR_SECONDS
from mdp_core.geo.cosets import coset_step

SECONDS = 60.0


def _row(name: str, source: str, depth: int, eps: float) -> dict:
    problem = bench_problem(load_road_network(source), depth)
    start = time.perf_counter()
    cosets = coset_lower_bound(problem, eps, time_limit=SECONDS)
    s_cosets = time.perf_counter() - start
    start = time.perf_counter()
    default = geo_lower_bound(problem, eps, time_limit=SECONDS)
    s_default = time.perf_counter() - start
    mechanism = bilinear_mechanism(problem, eps, time_limit=BILINEAR_SECONDS)
    bilinear = mechanism.utility_km(problem)
    return {
        "map": name,
        "depth": depth,
        "eps": eps,
        "targets": problem.grid.n_targets,
        "cosets": coset_step(problem) ** 2,
        "coset_bound_km": cosets.value,
        "s_cosets": s_cosets,
        "default_bound_km": default.value,
        "s_default": s_default,
        "bilinear_km": bilinear,
        "bilinear_level": mechanism.info["level"],
        "gap_bilinear_cosets": bilinear / cosets.value - 1.0,
        "gap_bilinear_default": bilinear / default.value - 1.0,
    }


def run(quick: bool = False) -> list[dict]:
    maps = [("district", "default")] + ([("city", str(CITY))] if CITY.exists() and not quick else [])
    return [
        _row(name, source, 3, eps) for name, source in maps for eps in ((1.5,) if quick else (0.5, 1.0, 1.5))
    ]
