"""One comparison run: the tree extension and the baselines on one city, grid and budget.

Used by the CLI (``python -m mdp_core.geo bench``), ``bench/geo.py`` and the map page.
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass, field

import numpy as np

from mdp_core._validation import Progress, check_eps, report
from mdp_core.errors import DataError
from mdp_core.geo.baselines import em_remap_geo, exponential_geo, lp_coarse
from mdp_core.geo.extension import GeoMechanism, tree_extension
from mdp_core.geo.roads import RoadNetwork, load_road_network
from mdp_core.geo.utility import GeoProblem, build_problem
from mdp_core.geo.verify import verify_geo

__all__ = ["METHODS", "GeoComparison", "compare_methods", "peak_memory_mb", "run_bench"]

#: Method keys, in display order.
METHODS = ("tree", "em", "em_remap", "lp_coarse")


@dataclass(frozen=True, eq=False)
class GeoComparison:
    """Mechanisms, utility (km), violation ratio and seconds per stage for one (problem, eps)."""

    mechanisms: dict[str, GeoMechanism]
    utility_km: dict[str, float]
    violation_ratio: dict[str, float]
    max_excess: dict[str, float]
    seconds: dict[str, float] = field(default_factory=dict)


def peak_memory_mb() -> float:
    """Peak resident memory of this process in MB (Linux ru_maxrss is in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def compare_methods(
    problem: GeoProblem,
    eps: float,
    *,
    methods: tuple[str, ...] = METHODS,
    verify_samples: int = 200_000,
    rng: np.random.Generator | None = None,
    progress: Progress = None,
) -> GeoComparison:
    """Build each method on ``problem`` at ``eps`` (1/km), score it and verify it (neighbours + samples)."""
    eps = check_eps(eps)
    unknown = set(methods) - set(METHODS)
    if unknown:
        raise DataError(f"unknown methods {sorted(unknown)}; choose from {list(METHODS)}")
    rng = np.random.default_rng(0) if rng is None else rng
    mechs: dict[str, GeoMechanism] = {}
    seconds: dict[str, float] = {}
    for k, name in enumerate(methods):
        report(progress, k / (len(methods) + 1), f"building {name}")
        if name == "tree":
            mechs[name] = tree_extension(problem, eps)
            seconds.update(mechs[name].stages)
        elif name == "em":
            mechs[name] = exponential_geo(problem, eps)
        elif name == "em_remap":
            mechs[name] = em_remap_geo(problem, eps, em=mechs.get("em"))
        else:
            mechs[name] = lp_coarse(problem, eps)
        seconds[name] = mechs[name].seconds
    report(progress, len(methods) / (len(methods) + 1), "verifying")
    start = time.perf_counter()
    checks = {name: verify_geo(m, samples=verify_samples, rng=rng) for name, m in mechs.items()}
    seconds["verify"] = time.perf_counter() - start
    report(progress, 1.0, "done")
    return GeoComparison(
        mechanisms=mechs,
        utility_km={name: m.utility_km(problem) for name, m in mechs.items()},
        violation_ratio={name: c.violation_ratio for name, c in checks.items()},
        max_excess={name: c.max_excess for name, c in checks.items()},
        seconds=seconds,
    )


def run_bench(
    city: str | os.PathLike[str] | RoadNetwork = "default",
    *,
    depth: int = 2,
    eps: float = 0.5,
    seed_n: int = 12,
    n_tasks: int = 60,
    prior: str = "uniform",
    verify_samples: int = 200_000,
    seed: int = 0,
) -> tuple[dict[str, object], GeoComparison]:
    """Load, grid, build all methods, verify; return the CLI's JSON record and the comparison."""
    start = time.perf_counter()
    network = city if isinstance(city, RoadNetwork) else load_road_network(city)
    t_load = time.perf_counter()
    problem = build_problem(
        network, seed_n=seed_n, depth=depth, n_tasks=n_tasks, prior=prior, rng=np.random.default_rng(seed)
    )
    t_problem = time.perf_counter()
    comp = compare_methods(problem, eps, verify_samples=verify_samples, rng=np.random.default_rng(seed + 1))
    seconds = {"load": t_load - start, "grid_and_loss": t_problem - t_load, **comp.seconds}
    seconds["total"] = time.perf_counter() - start
    record: dict[str, object] = {
        "targets": problem.grid.n_targets,
        "outputs": len(problem.grid.outputs),
        "seconds": {k: round(v, 4) for k, v in seconds.items()},
        "utility_km": {k: round(v, 6) for k, v in comp.utility_km.items()},
        "violation_ratio": comp.violation_ratio,
        "max_excess": {k: (v if np.isfinite(v) else "inf") for k, v in comp.max_excess.items()},
        "tree_vs_em": round(comp.utility_km["tree"] / comp.utility_km["em"], 4),
        "seed_lp": comp.mechanisms["tree"].info.get("message"),
        "peak_memory_mb": round(peak_memory_mb(), 1),
        "depth": depth,
        "eps": eps,
        "n_tasks": n_tasks,
        "prior": prior,
    }
    return record, comp
