"""Aggregated costs for the city-scale lower bound (:func:`mdp_core.geo.geo_lower_bound`).

**Aggregation (city scale).** Above ``aggregate_above`` targets the LP is too large to solve in a minute
(city depth 4: 9,000 targets x 117 outputs, 1 M variables; the axis-only relaxation under PDLP certified
0.19 km against a best mechanism of 1.90). Then the bound is taken on R representative targets
(farthest-point sampling, R = ``representatives``), with every target x attached to its nearest
representative r(x) at distance d_x, ``w = exp(-eps d_x)``. For every eps-mDP P the rows of x and r(x) obey
``w P[r, y] <= P[x, y] <= P[r, y] / w``, so ``P[x] = w P[r] + (1 - w) Q`` with Q a distribution and
``Q <= k P[r]``, ``k = (1/w - w) / (1 - w) = 1 + exp(eps d_x)``. For any threshold t_x (weak duality of
``min c_x'Q`` over those Q, multiplier t_x on ``sum Q = 1``)

    c_x'P[x] >= w c_x'P[r] + (1 - w) (t_x - k sum_y (t_x - c[x, y])^+ P[r, y]),

which is linear in P[r]: summed over x, ``c'P >= sum_x (1 - w) t_x + sum_r sum_y C[r, y] P[r, y]`` with
``C[r, y] = sum_{x : r(x) = r} w c[x, y] - (1 - w) k (t_x - c[x, y])^+``. P restricted to the
representatives is eps-mDP on them, so a certified bound of the R-target problem with cost C (the
relaxation of :mod:`mdp_core.geo.bounds`) plus the constant is a bound: for ANY thresholds.
``t_x = min_y c[x, y]`` is the plain aggregation (it gives the part (1 - w) of x's row away at x's cheapest
output; measured mean w 0.93 at eps 0.5 with ~150 representatives over a 8 x 8 km city); the next rounds take
the thresholds that are best for the previous round's representative rows (:func:`knapsack_thresholds`: x can
at most put k times r's mass on its cheap outputs) and keep the best certified value. Never exact.

**Onto the next coarser grid** (:func:`coarser_problem`). The representatives can also be the targets of
the grid one level coarser (both fine coordinates even): nearly every target is then within
``h_fine sqrt 2`` of one (98.5 % on the 15 km city at depth 4, spacing 44 m: mean w 0.945 at eps 1.5 / km,
the least 0.67), so the aggregation costs little, and the coarser problem is a grid again, whose
cosets :mod:`mdp_core.geo.cosets` bounds on request (``aggregate=True``) where the fine grid's cosets
would not get their time.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from scipy.spatial import cKDTree

from mdp_core.geo.utility import GeoProblem

__all__ = ["aggregate_cost", "coarser_problem", "knapsack_thresholds", "representatives"]


def representatives(targets_km: np.ndarray, count: int) -> np.ndarray:
    """``count`` target indices spread by farthest-point sampling (the first nearest the centre).

    Each new representative is the target farthest from those chosen so far, so the covering radius is
    within a factor 2 of the best possible with ``count`` points.
    """
    pts = np.asarray(targets_km, dtype=np.float64)
    count = min(int(count), len(pts))
    chosen = np.empty(count, dtype=np.int64)
    chosen[0] = int(np.argmin(np.linalg.norm(pts - pts.mean(axis=0), axis=1)))
    dist = np.linalg.norm(pts - pts[chosen[0]], axis=1)
    for k in range(1, count):
        chosen[k] = int(np.argmax(dist))
        np.minimum(dist, np.linalg.norm(pts - pts[chosen[k]], axis=1), out=dist)
    return np.sort(chosen)


def aggregate_cost(
    targets_km: np.ndarray,
    cost: np.ndarray,
    reps: np.ndarray,
    eps: float,
    thresholds: np.ndarray | None = None,
) -> tuple[np.ndarray, float, np.ndarray, float]:
    """The aggregated problem of the module docstring: (C, constant, owner, magnitude).

    Parameters
    ----------
    targets_km : ndarray, shape (n, 2)
    cost : ndarray, shape (n, m)
        ``c[x, y] = pi(x) L(x, y) >= 0``.
    reps : ndarray of int, shape (R,)
        Representative targets.
    eps : float
        Budget (1/km).
    thresholds : ndarray, shape (n,), optional
        ``t_x`` per target (any real numbers give a valid bound; default ``min_y c[x, y]``, the plain
        aggregation; :func:`knapsack_thresholds` gives better ones).

    Returns
    -------
    C : ndarray, shape (R, m)
        ``C[r, y] = sum_{x : r(x) = r} w_x c[x, y] - (1 - w_x) k_x (t_x - c[x, y])^+`` with
        ``w_x = exp(-eps d_x)`` and ``k_x = 1 + exp(eps d_x)``.
    constant : float
        ``sum_x (1 - w_x) t_x``.
    owner : ndarray of int, shape (n,)
        Position in ``reps`` of each target's nearest representative.
    magnitude : float
        Sum of the absolute values of every term added up in C and the constant (the float rounding of
        those sums is below ``(n + 1) * machine epsilon * magnitude``).
    """
    pts = np.asarray(targets_km, dtype=np.float64)
    dist, owner = cKDTree(pts[reps]).query(pts)
    t = cost.min(axis=1) if thresholds is None else np.asarray(thresholds, dtype=np.float64)
    w, kappa = np.exp(-eps * dist), 1.0 + np.exp(eps * dist)
    gain = w[:, None] * cost
    penalty = ((1.0 - w) * kappa)[:, None] * np.maximum(t[:, None] - cost, 0.0)
    agg = np.zeros((len(reps), cost.shape[1]))
    np.add.at(agg, owner, gain - penalty)
    constant = (1.0 - w) * t
    magnitude = float(np.abs(gain).sum() + penalty.sum() + np.abs(constant).sum())
    return agg, float(constant.sum()), owner, magnitude


def knapsack_thresholds(
    targets_km: np.ndarray, cost: np.ndarray, reps: np.ndarray, eps: float, p_reps: np.ndarray
) -> np.ndarray:
    """The best ``t_x`` of :func:`aggregate_cost` if the representatives' rows were ``p_reps``.

    For that ``p = p_reps[r(x)]`` the term of x is ``min c_x'Q`` over distributions Q <= k_x p (module
    docstring): fill x's cheapest outputs up to ``k_x p_y`` until the mass reaches 1; the cost where it
    does is the best threshold. Any thresholds are valid; these make the next bound tight near ``p_reps``.
    """
    pts = np.asarray(targets_km, dtype=np.float64)
    dist, owner = cKDTree(pts[reps]).query(pts)
    kappa = 1.0 + np.exp(eps * dist)
    p = np.maximum(np.asarray(p_reps, dtype=np.float64), 0.0)
    p /= np.maximum(p.sum(axis=1, keepdims=True), 1e-300)
    order = np.argsort(cost, axis=1)
    mass = np.cumsum(kappa[:, None] * np.take_along_axis(p[owner], order, axis=1), axis=1)
    full = np.minimum((mass < 1.0 - 1e-12).sum(axis=1), cost.shape[1] - 1)
    return np.take_along_axis(cost, order, axis=1)[np.arange(len(pts)), full]


def coarser_problem(problem: GeoProblem, eps: float) -> tuple[GeoProblem, float, float] | None:
    """The problem aggregated onto the targets of the grid one level coarser (module docstring).

    Returns
    -------
    (GeoProblem, float, float) or None
        The coarser problem (those targets on the coarser grid, prior = the mass each one carries, cost =
        the aggregated cost ``C`` of :func:`aggregate_cost` with plain thresholds, less its row minima,
        so ``cost >= 0``), the constant to add to any certified bound of it, and that sum's float rounding
        margin (km; subtract it). None at depth 0 or when no target lies on the coarser grid.
    """
    grid, fine = problem.grid, problem.grid.fine_ij
    reps = np.flatnonzero((fine % 2 == 0).all(axis=1))
    if grid.depth == 0 or len(reps) == 0:
        return None
    targets, cost = problem.targets_km, problem.cost
    agg, constant, owner, magnitude = aggregate_cost(targets, cost, reps, eps)
    least = agg.min(axis=1)  # a row's constant shift moves every mechanism's cost by the same amount
    agg -= least[:, None]
    mass = np.bincount(owner, weights=problem.prior, minlength=len(reps))
    kept = mass > 0.0  # a representative that only represents zero-prior targets carries no cost
    coarse = replace(
        problem,
        grid=replace(grid, depth=grid.depth - 1, fine_ij=fine[reps[kept]] // 2),
        prior=mass[kept],
        loss=agg[kept] / mass[kept, None],
        target_nodes=problem.target_nodes[reps[kept]],
    )
    margin = (len(targets) + 64) * np.finfo(np.float64).eps * (magnitude + float(np.abs(least).sum()))
    return coarse, constant + float(least[kept].sum()), margin
