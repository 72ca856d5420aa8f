"""A near-optimal mechanism on the full target domain and its certificate: the LP on a geometric spanner.

Bordenabe, Chatzikokolakis and Palamidessi (CCS 2014, "Optimal geo-indistinguishable mechanisms for
location privacy") keep the privacy rows of the edges of a t-spanner ``G`` of the targets only
(``d <= d_G <= t d``):

    P[a, y] <= exp(eps' d(a, b)) P[b, y]        for the edges (a, b) of G only, every output y;

products along paths then give every pair the ratio ``exp(eps t d)``, so ``eps / t`` would be private as
it stands, at a cost in utility everywhere, although only the pairs whose shortest path in G is longer than
their distance are at risk. So the LP here runs at eps itself (2 |E| m privacy rows instead of
n (n - 1) m), which makes it a relaxation of the full problem, and serves twice:

* **a mechanism**: :func:`~mdp_core.mechanisms.raise_repair` fixes the pairs it left out: it raises each
  column to its least log-Lipschitz majorant at ``(1 - slack) eps`` and normalises the rows, until
  :func:`~mdp_core.mechanisms.mdp_violation` is within 1e-12 on ALL pairs (a mix with the uniform
  mechanism at the least sufficient weight if rounds do not settle it). The raise lifts far outputs of
  every row; a Bayesian remap (:func:`~mdp_core.geo.baselines.remap_matrix`: each output becomes the one
  of least expected loss given it, a post-processing, so eps-mDP is kept) merges them back, and the exact
  check runs on the result (15 km city, depth 3, 240 s of PDLP, eps 1.0 / 1.5 per km: 1.3272 / 1.0142 to
  1.3145 / 1.0067 km, 52 / 69 of 117 outputs left; a second pass moves none);
* **a lower bound**: the LP's multipliers, whatever their accuracy, certify
  ``sum_x min_y (c + A'nu)[x, y]`` by weak duality (:func:`~mdp_core.geo.bounds.certified_bound`) for
  every eps-mDP mechanism with these outputs.

So one solve brackets the optimum from both sides (measured: :func:`spanner_mechanism`).

**Finer grids** (:func:`spanner_from_coarser`): above :data:`SPANNER_MAX_TARGETS` the LP is solved on the
grid one level coarser (same outputs); every fine target starts from the mean of the LP's own rows at its
:data:`EXTENSION_NEIGHBOURS` nearest coarse targets, weighted by inverse distance, and the raise (at
:data:`EXTENSION_SLACK`) makes that exactly eps-mDP on all pairs of the fine targets. The LP's rows, not
the coarse grid's raised and remapped mechanism, start the fine grid: those two steps lose accuracy the
fine raise would inherit (15 km city, depth 3 -> 4, eps 1.0, the same 240 s of PDLP: 1.3030 against
1.3083 km). The coarse LP's multipliers bound the coarse problem only, so this mechanism carries no bound.
Measured on the 15 km city at depth 4 (8,939 targets, 117 outputs; ``python -m mdp_core.geo bench
--reference``, 900 s of PDLP at depth 3), eps 0.5 / 1 / 1.5 per km: 1.6832 / 1.2963 / 0.9912 km in 1,122
/ 1,090 / 1,505 s, against the bilinear lattice's 1.6789 / 1.3327 / 1.1142 and the 60 s bound's 1.6509 /
1.2378 / 0.9105 (4.7 % above it at eps 1, 8.9 % at eps 1.5; from the coarse mechanism after 240 s of PDLP
1.6982 / 1.3083 / 0.9954).

**The spanner.** The Yao graph (each target joined to its nearest target in each of ``cones`` equal
angular sectors), then, until the exact dilation ``max d_G / d`` over all pairs (all-pairs shortest paths)
is at most ``dilation``, the shortest pairs above it join G (a few per round: one new edge shortens many
paths). Holes in the target set (cells without roads) are where the Yao graph alone stretches most.

**Solving and the guarantee.** HiGHS PDLP (first order: it stops at ``time_limit`` with row sums off by up
to ~1e-2); the raise makes any such matrix exactly eps-mDP, and the returned ``violation`` is the exact
check over all pairs; the bound is evaluated from the multipliers in float64 with its rounding margin.
The solver's accuracy only costs utility and tightness, never privacy or validity.
"""

from __future__ import annotations

import time

import numpy as np
from scipy.spatial import cKDTree

from mdp_core._validation import Progress, report
from mdp_core.errors import DataError
from mdp_core.geo.baselines import remap_matrix
from mdp_core.geo.bounds import GeoBound, _privacy_rows, _row_ratios, _solve, certified_bound
from mdp_core.geo.extension import GeoMechanism
from mdp_core.geo.pairs import spanner_pairs
from mdp_core.geo.utility import (
    GeoProblem,
    check_lp_inputs,
    check_same_outputs,
    check_target_count,
    expected_travel_error,
)
from mdp_core.mechanisms.verify import VIOLATION_TOL, mdp_violation, raise_repair

__all__ = [
    "EXTENSION_NEIGHBOURS",
    "EXTENSION_SLACK",
    "EXTENSION_SPANNER_SECONDS",
    "FINE_GRID_TARGETS",
    "SPANNER_FROM_COARSER_TARGETS",
    "SPANNER_MAX_TARGETS",
    "spanner_from_coarser",
    "spanner_mechanism",
    "spanner_slacks",
]

#: Largest target count :func:`spanner_mechanism` accepts by default (all-pairs distances and the repair
#: are O(n^2 m): with 60 s of PDLP 1,251 targets of the 15 km city at depth 2 take 71 s in all, its
#: 3,469 at depth 3 ~2 min: spanner 19 s, PDLP 60 s, raise 21-48 s).
SPANNER_MAX_TARGETS = 4_000
#: Default ``slack`` of the raise: :data:`SLACK` on grids up to :data:`FINE_GRID_TARGETS` targets,
#: :data:`FINE_GRID_SLACK` above. On finer grids the neighbours are closer, so normalising the rows moves
#: more of their small ratios and the raise settles slowly. 15 km city, eps 1.5 / km, 60 s of PDLP:
#: depth 2 (1,251 targets) 1.0414 km at 0.003 (19 rounds, 127 s in all) against 1.0547 at 0.02 (6
#: rounds, 88 s); depth 3 (3,469) 1.0875 at 0.003 (12 raise rounds, then 51 lowering: 642 s) against
#: 1.0764 at 0.02 (17 rounds: 290 s); the bilinear lattice mechanism there: 1.1361. A longer LP leaves
#: smoother rows, and then a small slack wins there too: with :data:`LONG_LP_SECONDS` of PDLP or more,
#: :data:`LONG_LP_FINE_SLACKS`. Depth 3, 240 s of PDLP, the same LP solution raised with slack 0.04 / 0.02
#: / 0.01 / 0.005: eps 1.0 1.3580 / 1.3402 / 1.3315 / 1.3272 km (6 / 12 / 18 / 19 rounds, 14-51 s), eps
#: 1.5 - / 1.0263 / 1.0182 / 1.0142 km. How small a slack still settles depends on the LP solution, so
#: after a long LP both :data:`LONG_LP_FINE_SLACKS` are tried and the better remapped matrix is kept: an
#: LP solution of a machine 2x faster (eps 1.5) gave 1.0018 / 0.9999 / 0.9988 km remapped at 0.005 / 0.0025
#: / 0.001 (19-27 rounds, 28-47 s), where one of a slower machine gave 1.0244 at 0.003 (63 rounds).
SLACK = 0.003
#: Largest fine grid :func:`spanner_from_coarser` takes (the raise and the check stay O(n^2 m) on it):
#: depth 4 of the 15 km city has 8,939 targets.
SPANNER_FROM_COARSER_TARGETS = 10_000
#: Seconds of PDLP for the coarse LP in :func:`spanner_from_coarser`: its rows start every fine target,
#: so their accuracy carries to the fine grid. 15 km city, depth 3 -> 4, eps 1.0 / km: 240 / 900 s gave
#: 1.3030 / 1.2983 km at depth 4 (slack 0.005).
EXTENSION_SPANNER_SECONDS = 900.0
#: The raise's slack in :func:`spanner_from_coarser`. 15 km city, depth 3 -> 4, eps 1.0 / km, the same
#: coarse LP solution (900 s of PDLP): 0.0025 gave 1.2964 km remapped (26 rounds, 208 s), 0.005 1.2983
#: (21 rounds, 143 s); from the coarse mechanism instead, 1.3011 / 1.3023. At eps 1.5 from a coarse
#: mechanism, 0.005 gave 1.0035 km (22 rounds, 219 s), 0.02 1.0120 (18 rounds, 169 s).
EXTENSION_SLACK = 0.0025
#: Coarse rows each fine target's starting row mixes. The same eps 1.5 mechanism, raised and remapped:
#: 0.9956 km from the 4 nearest (20 rounds), 1.0035 from the nearest alone (22 rounds); their geometric
#: mean (normalised) 0.9954.
EXTENSION_NEIGHBOURS = 4
#: What a refusal for too many targets advises.
SPANNER_ADVICE = (
    f"use a smaller depth, or the grid one level coarser through spanner_from_coarser (up to "
    f"{SPANNER_FROM_COARSER_TARGETS:,} targets; the CLI's --reference takes it from depth 2 on)"
)
FINE_GRID_SLACK = 0.02
FINE_GRID_TARGETS = 1_500
LONG_LP_SECONDS = 240.0
LONG_LP_FINE_SLACKS = (0.005, 0.001)


def spanner_slacks(n_targets: int, time_limit: float = 0.0) -> tuple[float, ...]:
    """The raise's default slacks on a grid of ``n_targets`` targets after ``time_limit`` seconds of
    PDLP (the mechanism keeps the best): :data:`SLACK` up to :data:`FINE_GRID_TARGETS`; above,
    :data:`LONG_LP_FINE_SLACKS` from :data:`LONG_LP_SECONDS` on, else :data:`FINE_GRID_SLACK`."""
    if n_targets <= FINE_GRID_TARGETS:
        return (SLACK,)
    return LONG_LP_FINE_SLACKS if time_limit >= LONG_LP_SECONDS else (FINE_GRID_SLACK,)


def spanner_mechanism(
    problem: GeoProblem,
    eps: float,
    *,
    dilation: float = 1.1,
    time_limit: float = 30.0,
    slack: float | None = None,
    max_targets: int = SPANNER_MAX_TARGETS,
    progress: Progress = None,
) -> GeoMechanism:
    """The LP-optimal mechanism on a spanner of the targets, raised and verified eps-mDP on all pairs.

    Measured (``bench geo``, 60 task points, 12 seed cells, 60 s of PDLP, eps 0.5 / 1 / 1.5 per km): on
    the 15 km city this mechanism is within 1.1 / 2.0 / 2.3 % of the certified bound at depth 1 (406
    targets) and 3.8 / 4.6 / 5.9 % at depth 2 (1,251), against 16-67 % for MLaEt-O; at depth 2 the
    spanner LP at ``eps / t`` had been 10.7-13.7 % above the relaxation bound of the time. Its own
    certificate was the tighter bound in 6 of the 12 district and city configurations at depths 1-2.
    Against the exact optimum at depth 1 (``bench geo_optimal``) it is 0.4 / 0.7 / 0.8 % above it, its
    certificate 0.7 / 1.3 / 1.7 % below: most of the bracket is the bound's. At depth 3 of the city (3,469
    targets, slack 0.02) 60 s of PDLP leave a rough solution, which the raise pays for: 1.8678 / 1.3959 /
    1.0764 km; with 240 s (a comparison's default there) 1.7793 / 1.3403 / 1.0267 km in 288-314 s in all,
    and 1.3272 / 1.0142 at eps 1.0 / 1.5 with slack 0.005 (one of :func:`spanner_slacks` after 240 s),
    remapped 1.3145 / 1.0067, against the bilinear lattice's 1.7522 / 1.3941 / 1.1361 (a remap moves
    none of its outputs); the comparison keeps the better of the two.

    Parameters
    ----------
    problem : GeoProblem
        Targets (Euclidean metric, km), outputs, prior and travel loss.
    eps : float
        Privacy budget in 1/km.
    dilation : float
        Largest ``d_G / d`` of the spanner (fewer rows against more for the raise to fix).
    time_limit : float
        Seconds of PDLP (the rest, spanner and repair, comes on top).
    slack : float, optional
        Relative budget the raise keeps back (it raises to ``(1 - slack) eps``) for normalising the rows;
        default: each of :func:`spanner_slacks` of the target count and ``time_limit``, the best kept (a
        choice by the public prior and loss, not by any location: privacy is that of each candidate).
    max_targets : int
        Refuse larger problems (DataError): the repair and the check are O(n^2 m).

    Returns
    -------
    GeoMechanism
        ``method="spanner"``; ``info`` holds the dilation, edges, LP status and objective, the verified
        violation (``<= 1e-9``) and ``lower_bound``, the LP's certified lower bound (a ``GeoBound``) on
        the utility of every eps-mDP mechanism with these outputs (module docstring).
    """
    eps = check_lp_inputs(problem, eps, time_limit)
    slacks = spanner_slacks(problem.grid.n_targets, time_limit) if slack is None else (slack,)
    if not all(0.0 < s < 0.5 for s in slacks):
        raise DataError(f"slack must be in (0, 0.5), got {slack!r}")
    check_target_count(problem.grid.n_targets, max_targets, "the spanner LP", SPANNER_ADVICE)
    start = time.perf_counter()
    raw, lp_info, stages = _spanner_lp(problem, eps, dilation, time_limit, progress)
    t_lp = time.perf_counter()
    report(progress, 0.8, "spanner LP: raising to exact eps-mDP on all pairs")
    return _raised_mechanism(problem, raw, eps, slacks, (start, t_lp), stages, lp_info, progress)


def _spanner_lp(
    problem: GeoProblem, eps: float, dilation: float, time_limit: float, progress: Progress
) -> tuple[np.ndarray, dict[str, object], dict[str, float]]:
    """The LP on the rows of a ``dilation``-spanner, ``time_limit`` seconds of PDLP: its raw solution
    (not yet private; rows off 1 by up to ~1e-2), its record (dilation, edges, status, objective and the
    certified ``lower_bound``) and the seconds of the spanner and of the LP."""
    targets, cost = problem.targets_km, problem.cost
    start = time.perf_counter()
    report(progress, 0.02, f"spanner LP: spanner of {len(targets):,} targets")
    pairs, reached = spanner_pairs(targets, dilation)
    t_spanner = time.perf_counter()
    rows = _privacy_rows(pairs, cost.shape[1])
    ratios = _row_ratios(targets, rows, eps)
    report(progress, 0.1, f"spanner LP: {len(rows):,} privacy rows, up to {time_limit:.0f} s")
    t_solve = time.perf_counter()
    raw, nu, objective, status = _solve(cost, rows, ratios, t_solve + time_limit)
    if status not in {"Optimal", "Time limit reached"}:
        raise DataError(f"the spanner LP failed: HiGHS status {status!r}")
    t_lp = time.perf_counter()
    lower = GeoBound(
        value=max(certified_bound(cost, rows, ratios, nu), 0.0),
        exact=False,
        method=f"multipliers of the spanner LP (dilation {reached:.3f}, {len(pairs):,} edges)",
        seconds=t_lp - t_solve,
        rows=len(rows),
        lp_objective=objective,
    )
    info: dict[str, object] = {
        "dilation": reached,
        "edges": len(pairs),
        "lower_bound": lower,
        "lp_status": status,
        "lp_objective": objective,
    }
    return raw, info, {"spanner": t_spanner - start, "lp": t_lp - t_solve}


def _raised_mechanism(
    problem: GeoProblem,
    start_rows: np.ndarray,
    eps: float,
    slacks: tuple[float, ...],
    times: tuple[float, float],
    stages: dict[str, float],
    info: dict[str, object],
    progress: Progress,
) -> GeoMechanism:
    """``start_rows`` raised at each slack and remapped (post-processing: eps-mDP kept, module docstring):
    the matrix of least expected error, checked over all pairs, as the "spanner" mechanism; ``times`` are
    the ``perf_counter`` times at which the build and its repair started."""
    dist = problem.target_distances_km()
    # a row the solver left without mass (PDLP at ratios near e^40) is raised from its neighbours' columns
    start_rows = np.where(start_rows.sum(axis=1, keepdims=True) > 0, start_rows, np.finfo(np.float64).tiny)
    candidates = []
    for slack in slacks:
        raised, _, rounds = raise_repair(start_rows, dist, eps, slack=slack)
        matrix = remap_matrix(raised, problem.prior, problem.loss)
        candidates.append((expected_travel_error(matrix, problem.prior, problem.loss), slack, rounds, matrix))
    _, slack, rounds, matrix = min(candidates, key=lambda candidate: candidate[0])
    violation = mdp_violation(matrix, dist, eps)  # the check of the returned matrix over all pairs
    if violation > VIOLATION_TOL:  # float rounding beyond the mix's margin: never return it unproven
        raise DataError(f"the spanner LP's solution could not be made eps-mDP (excess {violation:.3g})")
    end = time.perf_counter()
    report(progress, 1.0, "spanner LP: done")
    return GeoMechanism(
        problem.targets_km,
        problem.outputs_km,
        matrix,
        eps,
        end - times[0],
        method="spanner",
        stages={**stages, "repair": end - times[1]},
        info={**info, "repair_rounds": rounds, "slack": slack, "violation": violation},
    )


def spanner_from_coarser(
    coarse: GeoProblem,
    fine: GeoProblem,
    eps: float,
    *,
    time_limit: float = EXTENSION_SPANNER_SECONDS,
    dilation: float = 1.1,
    max_targets: int = SPANNER_FROM_COARSER_TARGETS,
    progress: Progress = None,
) -> GeoMechanism:
    """The spanner LP's solution on the grid one level coarser, extended to ``fine`` and raised to exact
    eps-mDP on all pairs of its targets (module docstring, "Finer grids").

    Parameters
    ----------
    coarse, fine : GeoProblem
        The same map at two depths: ``coarse`` must have the same outputs and at most
        :data:`SPANNER_MAX_TARGETS` targets.
    eps : float
        Privacy budget in 1/km.
    time_limit : float
        Seconds of PDLP for the coarse LP (the raise on the fine grid comes on top).
    dilation : float
        Of the coarse grid's spanner.
    max_targets : int
        Refuse finer grids (DataError): the raise and the check are O(n^2 m).

    Returns
    -------
    GeoMechanism
        ``method="spanner"`` on ``fine``; ``info`` holds the coarse LP's record (targets, dilation, edges,
        status, objective) under ``"coarse"``, the raise's slack and rounds and the verified violation
        (``<= 1e-9``), and no ``lower_bound``.
    """
    eps = check_lp_inputs(fine, eps, time_limit)
    check_same_outputs(coarse, fine, "its spanner LP cannot be extended")
    n = fine.grid.n_targets
    smaller = "use a smaller depth"
    check_target_count(n, max_targets, "the spanner LP from the coarser grid", smaller)
    check_lp_inputs(coarse, eps, time_limit)
    check_target_count(coarse.grid.n_targets, SPANNER_MAX_TARGETS, "the coarser grid's spanner LP", smaller)
    start = time.perf_counter()

    def on_coarse(fraction: float, message: str) -> None:  # the coarse LP: the first 70 %
        report(progress, 0.7 * fraction, f"coarser grid: {message}")

    raw, lp_info, _ = _spanner_lp(coarse, eps, dilation, time_limit, on_coarse)
    t_coarse = time.perf_counter()
    report(progress, 0.7, f"spanner LP: extending to {n:,} targets, raising to exact eps-mDP")
    start_rows = _interpolated_rows(coarse.targets_km, fine.targets_km, raw)
    coarse_info = {k: v for k, v in lp_info.items() if k != "lower_bound"}  # it bounds the coarse grid
    info: dict[str, object] = {"coarse": {"targets": coarse.grid.n_targets, **coarse_info}}
    times, stages = (start, t_coarse), {"coarse": t_coarse - start}
    return _raised_mechanism(fine, start_rows, eps, (EXTENSION_SLACK,), times, stages, info, progress)


def _interpolated_rows(coarse_km: np.ndarray, fine_km: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """Per fine target, the rows of ``matrix`` at its :data:`EXTENSION_NEIGHBOURS` nearest coarse targets,
    weighted by inverse distance (a target on a coarse one takes that row)."""
    k = min(EXTENSION_NEIGHBOURS, len(coarse_km))
    dist, nearest = cKDTree(coarse_km).query(fine_km, k=k)
    dist, nearest = dist.reshape(len(fine_km), k), nearest.reshape(len(fine_km), k)
    weights = 1.0 / np.maximum(dist, 1e-12)
    weights /= weights.sum(axis=1, keepdims=True)
    return np.einsum("nk,nkm->nm", weights, matrix[nearest])
