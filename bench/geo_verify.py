"""Privacy checks of geo mechanisms: every pair of targets against the sample, and against the pair list.

The embedded district and the 15 km city (``../shared/data/baltimore.osm.pbf``; skipped when absent), depths
2 and 3, the page's Medium level (eps ln 2 / 0.5 km), 12 seed cells, 60 task points; per method (tree, EM,
EM + remap, LP-A): seconds of :func:`~mdp_core.geo.verify_geo` on every pair (``s_every``, the blocked scan
on every core), on the page's sample (``s_sampled``: nearest neighbours plus 50,000 random pairs) and, the
strongest alternative, the same every-pair check as a list of pairs evaluated output by output
(``s_pair_list``: what ``exhaustive=True`` did before; up to 2,000 targets), with the largest excess and
violation ratio each finds (the sample's are estimates: ``*_sampled``). ``auto`` says which the default picks
(:data:`~mdp_core.geo.verify.EXHAUSTIVE_WORK`).
"""

from __future__ import annotations

import math
import time

import numpy as np

from bench._geo import CITY, bench_problem
from mdp_core.geo import RoadNetwork, compare_methods, load_road_network, verify_geo
from mdp_core.geo.verify import EXHAUSTIVE_WORK, _excess, pair_work

EPS = math.log(2.0) / 0.5
PAIR_LIST_MAX_TARGETS = 2_000


def _timed(check, *args, **kwargs):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    result = check(*args, **kwargs)
    return result, time.perf_counter() - start


def _rows(name: str, network: RoadNetwork, depth: int) -> list[dict]:
    problem = bench_problem(network, depth)
    methods = ("tree", "em", "em_remap", "lp_coarse")
    comp = compare_methods(problem, EPS, methods=methods, bound=False, verify_samples=1_000)
    rows = []
    for method, mech in comp.mechanisms.items():
        n, used = len(mech.targets_km), int(mech.matrix.any(axis=0).sum())
        every, s_every = _timed(verify_geo, mech, exhaustive=True)
        sampled, s_sampled = _timed(verify_geo, mech, samples=50_000, exhaustive=False)
        row = {"map": name, "depth": depth, "targets": n, "outputs_used": used, "method": method}
        row |= {"auto": "every" if pair_work(mech.matrix) <= EXHAUSTIVE_WORK else "sampled"}
        row |= {"s_every": s_every, "s_sampled": s_sampled, "s_pair_list": None}
        if n <= PAIR_LIST_MAX_TARGETS:
            a, b = np.triu_indices(n, 1)
            with np.errstate(divide="ignore"):
                logm = np.log(mech.matrix)
            (worst, bad), row["s_pair_list"] = _timed(
                _excess, logm, mech.targets_km, mech.eps, np.column_stack([a, b]), 1e-9, 8192
            )
            ratio = bad / (len(a) * mech.matrix.shape[1])
            assert worst == every.max_excess and ratio == every.violation_ratio  # the same check
        row |= {"max_excess": every.max_excess, "max_excess_sampled": sampled.max_excess}
        row |= {"ratio": every.violation_ratio, "ratio_sampled": sampled.violation_ratio}
        rows.append(row)
    return rows


def run(quick: bool = False) -> list[dict]:
    maps = [("district", load_road_network("default"))]
    if CITY.exists():
        maps.append(("city", load_road_network(CITY)))
    depths = (2,) if quick else (2, 3)
    return [row for name, network in maps for depth in depths for row in _rows(name, network, depth)]
