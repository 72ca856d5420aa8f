"""The bound against the time it is given (the map page's "Time for the bound"): more time must never give a
looser bound.

The embedded district at depths 1 and 2 and the 15 km city (``../shared/data/baltimore.osm.pbf``, skipped
when absent) at depths 1-3, 12 seed cells, 60 task points, the page's Medium level (eps = ln 2 / 0.5 km).
Per time limit: :func:`~mdp_core.geo.auto_lower_bound` (what the page and the comparison run) and, beside
it, :func:`~mdp_core.geo.geo_lower_bound` (what ``auto_lower_bound`` took on grids below the aggregation
threshold before stop 45). ``looser_than_less_time`` flags a bound below the one of a shorter limit.
Quick: the district at 20 and 60 s.

Measured (2 cores, stop 45), auto against geo_lower_bound, km: district depth 2 20 / 60 / 120 s 0.3655 /
0.3659 / 0.3659 (geo_lower_bound at 60 / 120 s: 0.3629 / 0.3648, looser than 20 s of cosets); city depth 2
1.0379 / 1.0663 / 1.0663; city depth 3 0.9914 / 1.0131 / 1.0131. Depth 1 is one block: since stop 46 the
exact optimum's bound (``exact``), which geo_lower_bound's relaxation never reached there: the district
0.3725 at every limit, exact in 15 s (geo_lower_bound 0.3701-0.3707), the city 1.121 / 1.123 / 1.123
(exact from 60 s on, in 31 s; geo_lower_bound 1.088 / 1.105 / 1.106).
"""

from __future__ import annotations

import math

from bench._geo import CITY, bench_problem
from mdp_core.geo import auto_lower_bound, geo_lower_bound, load_road_network

EPS = math.log(2.0) / 0.5  #: the page's Medium level, 1/km


def _rows(name: str, source: str, depth: int, limits: tuple[float, ...]) -> list[dict]:
    problem = bench_problem(load_road_network(source), depth)
    rows, best = [], -math.inf
    for limit in limits:
        bound = auto_lower_bound(problem, EPS, time_limit=limit)
        alone = geo_lower_bound(problem, EPS, time_limit=limit)
        rows.append(
            {
                "map": name,
                "depth": depth,
                "targets": problem.grid.n_targets,
                "time_limit_s": limit,
                "bound_km": bound.value,
                "bound_s": bound.seconds,
                "method": bound.method,
                "exact": bound.exact,
                "geo_lower_bound_km": alone.value,
                "looser_than_less_time": bound.value < best,
            }
        )
        best = max(best, bound.value)
    return rows


def run(quick: bool = False) -> list[dict]:
    if quick:
        return _rows("district", "default", 2, (20.0, 60.0))
    limits = (20.0, 60.0, 120.0)
    rows = _rows("district", "default", 1, limits) + _rows("district", "default", 2, limits)
    if CITY.exists():
        rows += [row for depth in (1, 2, 3) for row in _rows("city", str(CITY), depth, limits)]
    return rows
