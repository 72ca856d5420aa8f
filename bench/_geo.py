"""What the geo benchmarks share: the 15 km city's file (``../shared/data``, never copied into the project;
the benchmarks skip it when absent) and their problem on a map."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mdp_core.geo import GeoProblem, RoadNetwork, build_problem

CITY = Path(__file__).resolve().parents[2] / "shared" / "data" / "baltimore.osm.pbf"


def bench_problem(network: RoadNetwork, depth: int) -> GeoProblem:
    """The benchmarks' problem on ``network`` at ``depth``: 12 seed cells, 60 task points, uniform prior,
    seed 0."""
    return build_problem(network, seed_n=12, depth=depth, n_tasks=60, rng=np.random.default_rng(0))
