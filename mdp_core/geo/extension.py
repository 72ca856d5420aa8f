"""Tree-based extension MLaEt-A (seed 004, Sec. 5.2-5.3, Theorems 5-6) and the geo mechanism record.

Starting from the seed mechanism z (repaired seed LP), each refinement step treats a retained cell's
corner values as anchors, fills the child-boundary vertices by log-linear (log-convex) interpolation along
the parent edges, then the child interiors by interpolation along the second axis; rows are normalised
over the outputs at the end. Pre-normalisation values f are carried from level to level (Theorem 6), so
ln f at every target is exactly the bilinear interpolation of ln z inside its seed cell (DESIGN.md).

Privacy: each axis segment of ln f has slope <= eps_t (Proposition 1), Theorem 3 (Cauchy-Schwarz for
p = 2) gives |ln f(y|x) - ln f(y|x')| <= eps_bar d_2(x, x'), and normalisation adds at most the same again
(ln sum_y f is also eps_bar-Lipschitz): M = f / sum_y f is eps-mDP with eps = 2 eps_bar.

:func:`extend_log` is the vectorised one-pass path; :func:`extend_log_recursive` the level-by-level tree
recursion (tests prove they agree).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from scipy.special import logsumexp

from mdp_core._validation import Progress, check_eps, report
from mdp_core.errors import DataError
from mdp_core.geo.grid import GeoGrid, tree_levels
from mdp_core.geo.seed_lp import axis_budget, seed_cost, solve_seed_lp
from mdp_core.geo.utility import GeoProblem, expected_travel_error

__all__ = [
    "GeoMechanism",
    "extend_log",
    "extend_log_recursive",
    "normalise_log",
    "tree_extension",
]


@dataclass(frozen=True, eq=False)
class GeoMechanism:
    """A location mechanism: ``matrix[x, y] = P(report outputs_km[y] | true targets_km[x])``.

    Attributes
    ----------
    targets_km, outputs_km : ndarray, shape (n, 2) and (m, 2)
        Positions in the projected km frame of the road network.
    matrix : ndarray, shape (n, m)
        Row-stochastic (rows sum to 1 within 1e-12).
    eps : float
        Privacy budget in 1/km (Euclidean metric on targets).
    seconds : float
        Construction time (s).
    method : str
        "tree", "em", "em_remap" or "lp_coarse".
    stages : dict
        Seconds per construction stage.
    info : dict
        Method facts (seed LP gap, columns, ...).
    """

    targets_km: np.ndarray = field(repr=False)
    outputs_km: np.ndarray = field(repr=False)
    matrix: np.ndarray = field(repr=False)
    eps: float
    seconds: float
    method: str = "tree"
    stages: dict[str, float] = field(default_factory=dict)
    info: dict[str, object] = field(default_factory=dict)

    def utility_km(self, problem: GeoProblem) -> float:
        """Expected travel-distance error (km) on ``problem``'s prior and loss."""
        return expected_travel_error(self.matrix, problem.prior, problem.loss)


def extend_log(log_seed: np.ndarray, grid: GeoGrid) -> np.ndarray:
    """Vectorised extension: ln f at every target = bilinear interpolation of ln z in its seed cell.

    Parameters
    ----------
    log_seed : ndarray, shape (S, m)
        ln z on all seed vertices (C order over ``grid.seed_shape``); ``-inf`` allowed only for columns
        that are -inf at every seed.
    grid : GeoGrid

    Returns
    -------
    ndarray, shape (n_targets, m): pre-normalisation log values.
    """
    scale = grid.scale
    sy = grid.seed_shape[1]
    i, j = grid.fine_ij[:, 0], grid.fine_ij[:, 1]
    ci = np.minimum(i // scale, grid.cells[0] - 1)
    cj = np.minimum(j // scale, grid.cells[1] - 1)
    a = ((i - ci * scale) / scale)[:, None]
    b = ((j - cj * scale) / scale)[:, None]
    s00, s10 = ci * sy + cj, (ci + 1) * sy + cj
    # along x on the two horizontal cell edges, then along y (the order of seed 004 Sec. 5.3)
    with np.errstate(invalid="ignore"):
        bottom = (1 - a) * log_seed[s00] + a * log_seed[s10]
        top = (1 - a) * log_seed[s00 + 1] + a * log_seed[s10 + 1]
        out = (1 - b) * bottom + b * top
    return np.where(np.isneginf(log_seed[:1]), -np.inf, out)


def extend_log_recursive(log_seed: np.ndarray, grid: GeoGrid) -> np.ndarray:
    """Level-by-level tree recursion (reference implementation, small grids).

    For every retained cell at level r (breadth first), the child-boundary vertices get the log-linear
    midpoint of their parent edge's endpoints and the child centre the midpoint of the two new vertical-edge
    midpoints; values are stored by fine coordinate, and a vertex shared by neighbouring cells must receive
    the same value from each (overlap consistency A2, checked).
    """
    scale = grid.scale
    sy = grid.seed_shape[1]
    values: dict[tuple[int, int], np.ndarray] = {}
    for cell in tree_levels(grid)[0]:
        for di in (0, 1):
            for dj in (0, 1):
                s = (cell[0] + di) * sy + cell[1] + dj
                values[((cell[0] + di) * scale, (cell[1] + dj) * scale)] = log_seed[s]
    levels = tree_levels(grid)
    for r in range(grid.depth):
        size = 2 ** (grid.depth - r)
        half = size // 2
        for a, b in levels[r]:
            x0, y0, x1, y1 = a * size, b * size, (a + 1) * size, (b + 1) * size
            c00, c10, c01, c11 = values[(x0, y0)], values[(x1, y0)], values[(x0, y1)], values[(x1, y1)]
            new = {
                (x0 + half, y0): 0.5 * (c00 + c10),  # parent edges first
                (x0 + half, y1): 0.5 * (c01 + c11),
                (x0, y0 + half): 0.5 * (c00 + c01),
                (x1, y0 + half): 0.5 * (c10 + c11),
            }
            new[(x0 + half, y0 + half)] = 0.5 * (new[(x0 + half, y0)] + new[(x0 + half, y1)])
            for key, val in new.items():
                old = values.get(key)
                if old is not None and not np.allclose(old, val, rtol=0, atol=1e-12, equal_nan=True):
                    raise AssertionError(f"overlap inconsistency at {key}")
                values.setdefault(key, val)
    return np.stack([values[(int(i), int(j))] for i, j in grid.fine_ij])


def normalise_log(log_f: np.ndarray) -> np.ndarray:
    """Rows of ``exp(log_f)`` normalised to sum to 1 (log-sum-exp, float64)."""
    return np.exp(log_f - logsumexp(log_f, axis=1, keepdims=True))


def tree_extension(
    problem: GeoProblem,
    eps: float,
    *,
    p: float = 2.0,
    lp_method: str = "colgen",
    progress: Progress = None,
) -> GeoMechanism:
    """MLaEt-A: seed LP on the seed grid, log-linear extension to every target, row normalisation.

    Parameters
    ----------
    problem : GeoProblem
        Targets, outputs, prior and travel loss.
    eps : float
        Privacy budget in 1/km; the result is eps-mDP for the Euclidean (p = 2) or l1 (p = 1) metric.
    p : {1, 2}
        Metric on locations.
    lp_method : {"colgen", "full"}
        How the seed LP is solved (:func:`mdp_core.geo.seed_lp.solve_seed_lp`).

    Returns
    -------
    GeoMechanism with ``info["seed_lp"]`` (gap, columns, status).
    """
    eps = check_eps(eps)
    if p not in (1, 1.0, 2, 2.0):
        raise DataError(f"p must be 1 or 2, got {p!r}")
    start = time.perf_counter()
    grid = problem.grid
    report(progress, 0.05, "projecting the loss on the seeds")
    cost = seed_cost(grid, problem.prior, problem.loss)
    t_cost = time.perf_counter()
    result = solve_seed_lp(
        cost, grid.seed_shape, grid.h0, axis_budget(eps, p), method=lp_method, progress=progress
    )
    t_lp = time.perf_counter()
    report(progress, 0.9, "extending to the fine grid")
    with np.errstate(divide="ignore"):
        log_seed = np.log(result.z)
    matrix = normalise_log(extend_log(log_seed, grid))
    end = time.perf_counter()
    report(progress, 1.0, "done")
    return GeoMechanism(
        targets_km=grid.targets_km,
        outputs_km=grid.outputs_km,
        matrix=matrix,
        eps=eps,
        seconds=end - start,
        method="tree",
        stages={"seed_cost": t_cost - start, "seed_lp": t_lp - t_cost, "extension": end - t_lp},
        info={
            "gap": result.gap,
            "columns": result.columns,
            "status": result.status,
            "message": result.message,
        },
    )
