"""Calibrated mechanisms: a family built at the largest nominal budget whose exact eps is still eps.

A mechanism family's privacy proof is a worst case over all maps. On a given map the tree extension at
nominal eps is only ``0.56 eps``-mDP over all pairs of its targets (the 15 km city at depth 2, eps
1.39 / km: the proof's "normalisation at most doubles it" doubles little), and the exponential mechanism
``0.79 eps`` (the normaliser moves less than its bound). :func:`calibrated_mechanism` spends the rest: it
builds the family at ``c * eps`` for a few ``c >= 1`` and keeps the largest ``c`` whose mechanism's
:func:`actual_eps` (exact, over every pair of targets and every output) is at most eps, checked again on
all pairs (:func:`_all_pairs_excess`). The search looks only at the map, prior and
task points (public), never at a user's location, so the result is eps-mDP between targets like the
family's own mechanisms, with less error: the city above, tree 1.718 -> 1.363 km, EM + remap 1.728 -> 1.516
(``python -m bench geo_calibrated``).

The exact scan (:func:`~mdp_core.geo.verify.pair_spreads`, on every core) costs ``n^2 m / 2`` (targets squared
times outputs in use): 0.07 / 0.44 / 3.8 s at depths 2 / 3 / 4 of the 15 km city (1,252 / 3,479 / 8,972
targets x 117 outputs). At depth 4, eps ln 2 / 0.5 km, the tree there is calibrated in 21 s (1.604 -> 1.318
km), EM + remap in 13 s (1.617 -> 1.439); on the district (21,171 targets) in 13 s (0.3924 -> 0.3746) and
55 s (0.3978 -> 0.3962). Maps above :data:`CALIBRATE_MAX_TARGETS` targets are refused.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np
from scipy.spatial.distance import cdist

from mdp_core._validation import Progress, check_eps, report
from mdp_core.errors import DataError
from mdp_core.geo.baselines import exponential_geo, remap_matrix
from mdp_core.geo.extension import GeoMechanism, tree_extension
from mdp_core.geo.seed_lp import SeedLPResult
from mdp_core.geo.utility import GeoProblem
from mdp_core.geo.verify import log_columns, pair_spreads, verify_geo
from mdp_core.mechanisms.verify import VIOLATION_TOL, mdp_violation

__all__ = [
    "CALIBRATED_METHODS",
    "CALIBRATE_MAX_TARGETS",
    "actual_eps",
    "calibrated_mechanism",
    "calibrated_method",
]

#: The calibrated methods and the family each calibrates: the tree extension (MLaEt-A), and EM with the
#: Bayesian remap applied after calibration (post-processing: its actual eps is at most EM's).
CALIBRATED_METHODS = {"tree_cal": "tree", "em_remap_cal": "em_remap"}

#: Largest map (targets) calibrated: depth 4 of the 15 km city (8,972 targets) and of the district (21,171;
#: the module's numbers: 13-55 s there).
CALIBRATE_MAX_TARGETS = 25_000
#: Up to this many targets the final check is :func:`~mdp_core.mechanisms.verify.mdp_violation` on the n x n
#: distances (288 MB at 6,000), independent of the search's scan; above, :func:`verify_geo` on every pair.
_MDP_VIOLATION_TARGETS = 6_000


def actual_eps(matrix: np.ndarray, targets_km: np.ndarray) -> float:
    """The least eps (1/km) for which ``matrix`` is eps-mDP between all of its targets (Euclidean metric).

    ``max_{x != x', y} |ln M[x, y] - ln M[x', y]| / d_2(x, x')`` over every pair of targets and every
    output, exactly (outputs no target reports are skipped). ``inf`` when an output is reported from some
    targets but not from others, or two targets at one place have different rows.
    """
    m = np.asarray(matrix, dtype=np.float64)
    pts = np.asarray(targets_km, dtype=np.float64)
    if m.ndim != 2 or pts.shape != (m.shape[0], 2):
        raise DataError(f"matrix {m.shape} and targets {pts.shape} must be (n, m) and (n, 2)")
    if np.any(m[:, m.any(axis=0)] == 0):
        return float("inf")

    def steepest(lo: int, spread: np.ndarray, dist: np.ndarray) -> float:
        spread[np.tril_indices(len(spread), 0, spread.shape[1])] = 0.0  # each pair once
        if np.any((dist == 0) & (spread > 0)):
            return float("inf")
        with np.errstate(divide="ignore", invalid="ignore"):
            return float(np.max(np.where(dist > 0, spread / dist, 0.0)))

    return max(pair_spreads(log_columns(m), pts, steepest), default=0.0)


def calibrated_mechanism(
    problem: GeoProblem,
    eps: float,
    build: Callable[[float], GeoMechanism],
    *,
    method: str,
    tol: float = 0.01,
    max_builds: int = 5,
    post: Callable[[np.ndarray], np.ndarray] | None = None,
    progress: Progress = None,
) -> GeoMechanism:
    """``build`` (a family: nominal eps -> mechanism, eps-mDP at its nominal eps) at the largest nominal
    budget whose mechanism is exactly eps-mDP on ``problem``'s targets.

    Parameters
    ----------
    problem : GeoProblem
        Targets (at most :data:`CALIBRATE_MAX_TARGETS`), prior and travel loss.
    eps : float
        The budget to meet (1/km).
    build : callable
        Nominal budget (1/km) -> mechanism on ``problem``'s targets and outputs.
    method : str
        Name of the result (``GeoMechanism.method``).
    tol : float
        Stop once the actual eps is within this share below ``eps`` (0 < tol < 1).
    max_builds : int
        Builds at most (the first at ``eps`` itself, then aimed by :func:`_next_scale`).
    post : callable, optional
        Post-processing of the kept matrix (Bayesian remapping, say: it cannot raise the actual eps). The
        search runs on the builds themselves (their actual eps is smooth in the budget; the remapped one
        jumps with the outputs the remap keeps), and "actual_eps" is then measured after ``post``.

    Returns
    -------
    GeoMechanism at ``eps``, with ``info`` "nominal_eps", "actual_eps" (of the released matrix, after
    ``post``),
    "builds" and "all_pairs_excess" (the final check's largest excess over every pair), and ``seconds`` for
    the whole search and checks.
    """
    eps = check_eps(eps)
    if not 0.0 < tol < 1.0:
        raise DataError(f"tol must be in (0, 1), got {tol!r}")
    if not isinstance(max_builds, int | np.integer) or max_builds < 1:
        raise DataError(f"max_builds must be a positive integer, got {max_builds!r}")
    n = len(problem.targets_km)
    if n > CALIBRATE_MAX_TARGETS:
        raise DataError(
            f"calibration checks every pair of targets: {n:,} targets is above {CALIBRATE_MAX_TARGETS:,} "
            "(a lower depth or fewer seed cells)"
        )
    start = time.perf_counter()
    tried: list[tuple[float, float]] = []  # (scale, actual eps / eps)
    kept: tuple[float, float, GeoMechanism] | None = None
    scale = 1.0
    for k in range(max_builds):
        report(progress, k / (max_builds + 1), f"calibrating: build {k + 1} at nominal ε {scale * eps:.3g}")
        mech = build(scale * eps)
        ratio = actual_eps(mech.matrix, problem.targets_km) / eps
        tried.append((scale, ratio))
        if ratio <= 1.0 and (kept is None or scale > kept[0]):
            kept = (scale, ratio, mech)
        if kept is not None and kept[1] >= 1.0 - tol:
            break
        following = _next_scale(tried, tol)
        if following is None:
            break
        scale = following
    if kept is None:  # even the family's own nominal budget failed: its proof does not hold here
        raise DataError(f"{method}: the family's mechanism at ε itself is not ε-mDP on this map")
    scale, ratio, mech = kept
    matrix = mech.matrix if post is None else post(mech.matrix)
    if post is not None:  # what is released: the remap lowers the actual eps (audit: the district's EM +
        # remap was said to be at 1.377/km, and is at 1.162/km)
        ratio = actual_eps(matrix, problem.targets_km) / eps
    report(progress, max_builds / (max_builds + 1), "calibrating: checking every pair")
    excess = _all_pairs_excess(replace(mech, matrix=matrix, eps=eps))
    if excess > VIOLATION_TOL:  # rounding beyond the check's tolerance: never return it unproven
        raise DataError(f"{method}: the calibrated mechanism fails the all-pairs check (excess {excess:.3g})")
    report(progress, 1.0, "calibrating: done")
    return replace(
        mech,
        matrix=matrix,
        eps=eps,
        seconds=time.perf_counter() - start,
        method=method,
        info={
            **mech.info,
            "nominal_eps": scale * eps,
            "actual_eps": ratio * eps,
            "builds": len(tried),
            "all_pairs_excess": excess,  # the final check, on every pair: compare_methods reuses it
        },
    )


def _all_pairs_excess(mech: GeoMechanism) -> float:
    """The largest excess over every pair of targets: :func:`~mdp_core.mechanisms.verify.mdp_violation`
    (independent of the search's scan) up to :data:`_MDP_VIOLATION_TARGETS`, above the check of every pair
    of :func:`~mdp_core.geo.verify.verify_geo`."""
    if len(mech.targets_km) <= _MDP_VIOLATION_TARGETS:
        return float(mdp_violation(mech.matrix, cdist(mech.targets_km, mech.targets_km), mech.eps))
    return verify_geo(mech, exhaustive=True).max_excess


def calibrated_method(
    problem: GeoProblem,
    eps: float,
    name: str,
    *,
    seed: SeedLPResult | None = None,
    progress: Progress = None,
) -> GeoMechanism:
    """The calibrated method ``name`` of :data:`CALIBRATED_METHODS` on ``problem`` at ``eps`` (1/km).
    ``seed``: the tree's seed LP at ``eps`` itself, solved before (:func:`tree_seed`), which the first
    build (the family's own mechanism) then takes instead of solving it again."""
    if name == "tree_cal":

        def tree(nominal: float) -> GeoMechanism:
            return tree_extension(problem, nominal, seed=seed if nominal == eps else None)

        return calibrated_mechanism(problem, eps, tree, method=name, progress=progress)
    if name == "em_remap_cal":
        return calibrated_mechanism(
            problem,
            eps,
            lambda nominal: exponential_geo(problem, nominal),
            method=name,
            post=lambda matrix: remap_matrix(matrix, problem.prior, problem.loss),
            progress=progress,
        )
    raise DataError(f"unknown calibrated method {name!r}; choose from {list(CALIBRATED_METHODS)}")


def _next_scale(tried: list[tuple[float, float]], tol: float) -> float | None:
    """The next nominal scale, aimed just inside ``1 - tol / 2`` of eps: a power law ``actual/eps ~ scale^k``
    through the closest builds below and above 1 (or the two largest below; ``k = 1`` from one build: the
    actual eps grows a little faster than the budget, ``k`` 1.1-1.2, so the power law lands closer than a
    straight secant); None when the bracket is already narrower than ``tol`` or only failures are known."""
    aim = 1.0 - tol / 2
    below = sorted(t for t in tried if t[1] <= 1.0)
    above = sorted(t for t in tried if t[1] > 1.0)
    if not below or below[-1][1] <= 0:  # only failures, or a mechanism that reveals nothing (any scale)
        return None
    lo, hi = below[-1], (above[0] if above else None)
    if hi is not None and hi[0] - lo[0] <= tol * lo[0]:
        return None
    pair = (lo, hi) if hi is not None else (below[-2], lo) if len(below) > 1 else None
    power = 1.0
    if pair is not None and pair[0][1] > 0 and pair[1][0] > pair[0][0]:
        power = np.log(pair[1][1] / pair[0][1]) / np.log(pair[1][0] / pair[0][0])
    guess = lo[0] * (aim / lo[1]) ** (1.0 / power) if power > 0 else 2.0 * lo[0]
    if hi is not None:  # strictly inside the bracket (the power law lands near its top end often)
        guess = min(max(guess, lo[0] + 0.01 * (hi[0] - lo[0])), hi[0] - 0.01 * (hi[0] - lo[0]))
    return float(guess)
