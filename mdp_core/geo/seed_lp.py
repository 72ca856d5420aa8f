"""Seed LP of the tree extension (seed 004, Sec. 5.3 "Seed record optimization"; DESIGN.md) with HiGHS.

Variables z[s, y] >= 0 for every seed vertex s of the rectangular seed grid and output y. Constraints:

    sum_y z[s, y] = 1                                   (one row per seed)
    z[s, y] <= exp(eps_t * h0) * z[s', y]               (axis neighbours s, s' at spacing h0, per output)

with the per-axis budget ``eps_t`` (DESIGN.md: eps_bar = eps / 2, eps_t = eps_bar / sqrt 2 for l2, eps_bar
for l1). The objective is the target loss projected on the seeds with bilinear weights,
``C[s, y] = sum_x pi(x) w_s(x) L(x, y)``.

Solving (``method="colgen"``): axis-neighbour rows with one common per-axis budget are exactly
``eps_axis``-mDP for the seed grid's path metric ``h0 * l1`` (any two seeds are joined by a monotone axis
staircase whose ratios multiply; conversely every axis pair is such a pair), so the seed LP *is* the
LP-optimal mechanism of :func:`mdp_core.optimal_mechanism` with inputs = seeds, ``dist_in = h0 * l1``, a
uniform prior and ``loss = S * C`` (``prior[s] * loss[s, y] = C[s, y]``; seeds of zero weight get zero loss,
which is allowed). That solver's column generation over outputs (chain-free pair elimination leaves exactly
the axis pairs; tent screening and exact LP pricing; a persistent simplex master) certifies the optimum by a
Lagrangian bound; measured 4-5x faster than an older IPM-restart column generation (since removed) on
central Baltimore (156 seeds x 117 outputs). Its first master is solved by IPM (half the time of a cold
simplex there) and every master solve reports to ``progress`` (a stop raised there ends the solve). Measured
and left out: starting from the previous solve's outputs (another seed's task points, depth or eps) or its
basis: the larger first master costs what the saved rounds save (seed change 2.3 vs 2.4 s; High 1.5 vs 0.5
s, Low 20 vs 14 s), as HiGHS's simplex time grows faster than the master; restricting the master to the rows
binding before (26 %) needed 20-100 row-generation rounds.

``method="ipm"`` solves the whole LP by the block interior point of :func:`~mdp_core.geo.ipm.solve_geo_lp`
(one S x S block per output, the outputs coupled by the row sums), its gap certified by the axis rows'
multipliers. It wins once the mechanism is local (``eps_axis * h0`` from :data:`IPM_FROM`, which
``method="auto"``, the default, uses to choose): the column generation then needs many rounds of a simplex
master whose time grows faster than it (:data:`IPM_FROM` has the measurements; Low on the city's default
grid 9.8 s against 2.0 s, with 16 seed cells 182 s against 9 s), while at High it is 3x faster (0.32 s
against 1.03 s). ``method="full"`` solves the whole LP in one HiGHS IPM call (reference for tests).

Every solution goes through :func:`repair_seed`, which makes the axis constraints hold exactly (ENGINEERING.md
"LP tolerances"): raw solver output is never returned.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import highspy
import numpy as np
import scipy.sparse as sp

from mdp_core._highs import highs_model
from mdp_core._validation import Progress, check_eps, report
from mdp_core.errors import DataError
from mdp_core.geo.bounds import _privacy_rows, certified_bound
from mdp_core.geo.grid import GeoGrid
from mdp_core.geo.ipm import solve_geo_lp
from mdp_core.mechanisms import optimal_mechanism

#: Relative tightening of the LP's ratio bound that leaves room for the exact repair.
REPAIR_MARGIN = 1e-5

#: ``eps_axis * h0`` from which ``method="auto"`` takes the block interior point: the column generation
#: needs more rounds as the mechanism gets local, the interior point's time depends on the size only.
#: 15 km city, depth 2, seconds (column generation / interior point) at ``eps_axis * h0`` 0.1 / 0.15 / 0.2 /
#: 0.25: 81 seeds x 60 outputs 0.06 / 0.21, 0.12 / 0.22, 0.23 / 0.21, 0.34 / 0.31; 156 x 117 (12 seed
#: cells) 0.34 / 1.22, 0.83 / 1.03, 1.46 / 1.47, 1.41 / 1.58; 272 x 186 1.3 / 5.1, 4.7 / 7.7, 7.9 / 11.9,
#: 20.0 / 9.4. At the named levels (156 x 117: 0.086 / 0.34 / 0.86) 0.32 / 1.03, 2.56 / 1.47, 9.8 / 2.0.
IPM_FROM = 0.22

#: Relative gap at which the interior point stops (the repaired objective is then within ~1e-5).
_IPM_TOL = 1e-7

#: Outputs entering the seed LP's master per pricing round. City, 6 problems at Medium: 12.7 s with 3 (2 the
#: same), 14.2 s with 4 (the core's default: more outputs enter that end unused); at Low 11.7 / 13.2 / 10.7 s.
_SEED_ENTER = 3

#: Ways to solve the seed LP (:func:`solve_seed_lp`).
METHODS = ("auto", "colgen", "ipm", "full")

__all__ = [
    "IPM_FROM",
    "METHODS",
    "REPAIR_MARGIN",
    "SeedLPResult",
    "axis_budget",
    "bilinear_weights",
    "repair_seed",
    "seed_cost",
    "solve_seed_lp",
]


@dataclass(frozen=True, eq=False)
class SeedLPResult:
    """Repaired seed mechanism ``z`` (S x m, rows sum to 1) and solver facts."""

    z: np.ndarray
    objective: float
    success: bool
    status: str
    message: str
    seconds: float
    gap: float
    columns: int
    iterations: int


def axis_budget(eps: float, p: float = 2.0, *, halve: bool = True) -> float:
    """Per-axis budget eps_t: eps_bar / sqrt 2 (p = 2) or eps_bar (p = 1), eps_bar = eps/2 if ``halve``.

    Seed 004 Eq. (12)-(13): sum_t eps_t^(p/(p-1)) <= eps_bar^(p/(p-1)) for p > 1, max_t eps_t <= eps_bar
    for p = 1; with two equal axes eps_t = eps_bar * 2^(-(p-1)/p) (eps_bar / 2 for p = inf, the limit).
    """
    eps = check_eps(eps)
    if not p >= 1:  # (also NaN)
        raise DataError(f"p must be >= 1 (or inf), got {p}")
    bar = eps / 2.0 if halve else eps
    return bar if p == 1 else bar * 2.0 ** (-1.0 if np.isinf(p) else -(p - 1.0) / p)


def bilinear_weights(grid: GeoGrid) -> sp.csr_matrix:
    """Sparse (n_targets x S) bilinear interpolation weights of each target on its seed cell's corners."""
    scale = grid.scale
    sx, sy = grid.seed_shape
    i, j = grid.fine_ij[:, 0], grid.fine_ij[:, 1]
    ci = np.minimum(i // scale, grid.cells[0] - 1)
    cj = np.minimum(j // scale, grid.cells[1] - 1)
    a = (i - ci * scale) / scale
    b = (j - cj * scale) / scale
    rows = np.repeat(np.arange(len(i)), 4)
    cols = np.column_stack([ci * sy + cj, (ci + 1) * sy + cj, ci * sy + cj + 1, (ci + 1) * sy + cj + 1])
    vals = np.column_stack([(1 - a) * (1 - b), a * (1 - b), (1 - a) * b, a * b])
    return sp.csr_matrix((vals.ravel(), (rows, cols.ravel())), shape=(len(i), sx * sy))


def seed_cost(grid: GeoGrid, prior: np.ndarray, loss: np.ndarray) -> np.ndarray:
    """Projected objective ``C = W' diag(pi) L`` (S x m): seed s pays the loss of the targets it weighs."""
    weights = bilinear_weights(grid)
    return np.asarray(weights.T @ (np.asarray(prior)[:, None] * np.asarray(loss)))


def _axis_pairs(shape: tuple[int, int]) -> np.ndarray:
    """Undirected axis-neighbour pairs of a C-ordered (sx, sy) vertex grid, shape (k, 2)."""
    idx = np.arange(shape[0] * shape[1]).reshape(shape)
    return np.concatenate(
        [
            np.column_stack([idx[:-1, :].ravel(), idx[1:, :].ravel()]),
            np.column_stack([idx[:, :-1].ravel(), idx[:, 1:].ravel()]),
        ]
    )


def _cone_rows(shape: tuple[int, int], ratio: float) -> sp.csr_matrix:
    """Rows z_a - ratio z_b <= 0 for every directed axis pair of one column (2k x S)."""
    pairs = _axis_pairs(shape)
    directed = np.concatenate([pairs, pairs[:, ::-1]])
    k = len(directed)
    rows = np.repeat(np.arange(k), 2)
    cols = directed.ravel()
    vals = np.tile([1.0, -ratio], k)
    return sp.csr_matrix((vals, (rows, cols)), shape=(k, shape[0] * shape[1]))


def _master(cost: np.ndarray, cone: sp.csr_matrix) -> tuple[np.ndarray, str]:
    """The whole LP in one HiGHS IPM solve: (z S x m, model status)."""
    n_seeds, k = cost.shape
    blocks = sp.block_diag([cone] * k, format="csr")  # variables ordered column by column: y * S + s
    sums = sp.hstack([sp.identity(n_seeds, format="csr")] * k, format="csr")
    a = sp.vstack([blocks, sums], format="csc")
    n_priv = blocks.shape[0]
    lower = np.concatenate([np.full(n_priv, -highspy.kHighsInf), np.ones(n_seeds)])
    upper = np.concatenate([np.zeros(n_priv), np.ones(n_seeds)])
    h = highs_model(a, lower, upper, cost.T.ravel(), solver="ipm", primal_feasibility_tolerance=1e-9)
    h.run()
    z = np.asarray(h.getSolution().col_value).reshape(k, n_seeds).T
    return z, h.modelStatusToString(h.getModelStatus())


def solve_seed_lp(
    cost: np.ndarray,
    shape: tuple[int, int],
    h0: float,
    eps_axis: float,
    *,
    method: str = "auto",
    progress: Progress = None,
) -> SeedLPResult:
    """Minimise ``sum C[s, y] z[s, y]`` over row-stochastic z with axis ratio bounds ``exp(eps_axis h0)``.

    Parameters
    ----------
    cost : ndarray, shape (S, m)
        Projected seed cost (:func:`seed_cost`); S = shape[0] * shape[1] in C order.
    shape : tuple of int
        Seed vertices along x and y.
    h0 : float
        Seed spacing (km).
    eps_axis : float
        Per-axis budget eps_t (1/km), see :func:`axis_budget`.
    method : {"auto", "colgen", "ipm", "full"}
        ``"auto"`` (default) takes the column generation below ``eps_axis * h0 =`` :data:`IPM_FROM` and
        the block interior point from there (module docstring); ``"full"`` solves the whole LP in one
        HiGHS IPM call (reference for tests).

    Returns
    -------
    SeedLPResult
        ``z`` repaired by :func:`repair_seed` (axis constraints exact, rows sum to 1).
    """
    cost = np.asarray(cost, dtype=np.float64)
    n_seeds, n_out = cost.shape
    if n_seeds != shape[0] * shape[1]:
        raise DataError(f"cost has {n_seeds} rows but the seed grid {shape} has {shape[0] * shape[1]} seeds")
    if not (np.isfinite(eps_axis) and eps_axis > 0 and h0 > 0):
        raise DataError(f"eps_axis and h0 must be positive, got {eps_axis}, {h0}")
    if method not in METHODS:
        raise DataError(f"method must be one of {list(METHODS)}, got {method!r}")
    start = time.perf_counter()
    if method == "auto":
        method = "ipm" if eps_axis * h0 >= IPM_FROM else "colgen"
    if method == "colgen":
        result = _solve_grid_mdp(cost, shape, h0, eps_axis, start, progress)
        if result is not None:
            return result
        # the core solver could not certify its solution (seen at eps 3/km, violation 1.5e-8 after its
        # repair, and on the 15 km city at eps ln 2 / 0.2 km, 1e-4): the interior point's solution is
        # made exact on the grid by repair_seed
        report(progress, 0.3, "seed LP: solving again by interior point")
        method = "ipm"
    if method == "ipm":
        return _solve_block_ipm(cost, shape, h0, eps_axis, start, progress)
    ratio = float(np.exp((1.0 - REPAIR_MARGIN) * eps_axis * h0))
    z, status = _master(cost, _cone_rows(shape, ratio))
    if status != "Optimal":
        raise DataError(f"the seed LP failed: HiGHS status {status!r}")
    z = repair_seed(np.maximum(z, 0.0), shape, h0, eps_axis)
    return SeedLPResult(
        z=z,
        objective=float(np.sum(cost * z)),
        success=True,
        status=status,
        message=f"one HiGHS IPM solve of {n_seeds} seeds x {n_out} outputs",
        seconds=time.perf_counter() - start,
        gap=0.0,
        columns=n_out,
        iterations=1,
    )


def _solve_block_ipm(
    cost: np.ndarray,
    shape: tuple[int, int],
    h0: float,
    eps_axis: float,
    start: float,
    progress: Progress,
) -> SeedLPResult:
    """The seed LP by the block interior point of :func:`~mdp_core.geo.ipm.solve_geo_lp` (one S x S block
    per output), repaired by :func:`repair_seed`; its gap certified by the multipliers of the axis rows
    (:func:`~mdp_core.geo.bounds.certified_bound`, valid whether or not the solve converged)."""
    n_seeds, n_out = cost.shape
    report(progress, 0.2, f"seed LP: {n_seeds} seeds x {n_out} outputs, interior point")
    rows = _privacy_rows(_axis_pairs(shape), n_out)  # both directions of every axis pair, per output
    scale = _uniform_cost(cost)  # the LP then costs at most 1
    tight = np.full(len(rows), np.exp((1.0 - REPAIR_MARGIN) * eps_axis * h0))

    def steps(done: float, message: str) -> None:
        report(progress, 0.2 + 0.7 * done, f"seed LP: {message}")

    sol = solve_geo_lp(cost / scale, rows, tight, tol=_IPM_TOL, progress=steps)
    z = repair_seed(np.maximum(sol.p, 0.0), shape, h0, eps_axis)
    objective = float(np.sum(cost * z))
    # the gap of the LP solved (at the tightened budget), as the column generation reports it
    lower = max(scale * certified_bound(cost / scale, rows, tight, sol.nu), 0.0)  # costs are >= 0
    gap = max(0.0, objective - lower) / max(objective, 1e-300)
    report(progress, 0.9, f"seed LP: interior point, {sol.iterations} iterations")
    return SeedLPResult(
        z=z,
        objective=objective,
        success=True,
        status="Optimal" if sol.converged else "Not converged",
        message=f"interior point, {sol.iterations} iterations, certified gap {gap:.3%}",
        seconds=time.perf_counter() - start,
        gap=float(gap),
        columns=int(np.count_nonzero(z.max(axis=0) > 1e-9)),
        iterations=sol.iterations,
    )


def _uniform_cost(cost: np.ndarray) -> float:
    """What the uniform mechanism costs, ``sum(C) / m`` (>= the optimum; 1 when C is all 0): a scale."""
    return float(cost.sum()) / cost.shape[1] if cost.size and cost.sum() > 0 else 1.0


def grid_l1_distance(shape: tuple[int, int], h0: float) -> np.ndarray:
    """Path metric of the seed grid graph, ``h0 * (|di| + |dj|)`` (S x S, C order), in km."""
    ii, jj = np.meshgrid(np.arange(shape[0]), np.arange(shape[1]), indexing="ij")
    i, j = ii.ravel(), jj.ravel()
    return h0 * (np.abs(i[:, None] - i[None, :]) + np.abs(j[:, None] - j[None, :])).astype(np.float64)


def _solve_grid_mdp(
    cost: np.ndarray,
    shape: tuple[int, int],
    h0: float,
    eps_axis: float,
    start: float,
    progress: Progress,
) -> SeedLPResult | None:
    """The seed LP as the LP-optimal ``eps_axis``-mDP mechanism on the grid metric (module docstring).

    :func:`mdp_core.optimal_mechanism` (its column generation, its repair and verification), with the first
    master solved by IPM (2x faster than a cold simplex here), three outputs entering per round and
    ``progress`` after every master solve, so that a stop raised there ends it. Solved at
    ``(1 - REPAIR_MARGIN) eps_axis`` like the other methods, so that :func:`repair_seed` only removes
    float rounding. Returns None when the solver fails or its solution cannot be certified.
    """
    n_seeds, n_out = cost.shape
    scale = _uniform_cost(cost)  # the LP then costs at most 1
    report(progress, 0.2, f"seed LP: {n_seeds} seeds x {n_out} outputs")
    done = [0]

    def rounds(_: float, message: str) -> None:  # the solver's fraction is of its time limit: count rounds
        done[0] += 1
        report(progress, 0.2 + 0.7 * done[0] / (done[0] + 8), f"seed LP: {message}")

    res = optimal_mechanism(
        np.full(n_seeds, 1.0 / n_seeds),
        cost * (n_seeds / scale),
        grid_l1_distance(shape, h0),
        (1.0 - REPAIR_MARGIN) * eps_axis,
        max_inputs=max(1000, n_seeds),
        max_variables=max(2_000_000, cost.size),
        progress=rounds,
        first_solver="ipm",
        max_enter=_SEED_ENTER,
    )
    if not res.success:
        return None
    try:
        z = repair_seed(res.matrix, shape, h0, eps_axis)
    except DataError:
        return None
    objective = float(np.sum(cost * z))
    lower = float(res.extra.get("lower_bound", np.nan)) * scale  # certified: Lagrangian bound, any duals
    gap = max(0.0, objective - lower) / max(abs(objective), 1e-300) if np.isfinite(lower) else np.inf
    used = int(res.extra.get("outputs", 0))
    report(progress, 0.9, f"seed LP: optimal, {used} outputs")
    return SeedLPResult(
        z=z,
        objective=objective,
        success=True,
        status=res.status,
        message=f"{used} of {n_out} outputs, certified gap {gap:.3%}",
        seconds=time.perf_counter() - start,
        gap=float(gap),
        columns=used,
        iterations=int(res.rounds),
    )


def _envelope(logz: np.ndarray, step: float) -> np.ndarray:
    """Largest function below ``logz`` (sx, sy, m) with |difference| <= step between axis neighbours.

    The l1 distance transform ``min_s' logz[s'] + step * l1(s, s')`` computed by forward/backward passes
    along each axis (exact: the l1 metric is the sum of the axis metrics).
    """
    out = logz.copy()
    for axis in (0, 1):
        moved = np.moveaxis(out, axis, 0)
        for k in range(1, moved.shape[0]):
            np.minimum(moved[k], moved[k - 1] + step, out=moved[k])
        for k in range(moved.shape[0] - 2, -1, -1):
            np.minimum(moved[k], moved[k + 1] + step, out=moved[k])
    return out


def repair_seed(
    z: np.ndarray, shape: tuple[int, int], h0: float, eps_axis: float, *, margin: float = REPAIR_MARGIN
) -> np.ndarray:
    """Make a near-feasible seed mechanism exactly feasible: |ln z_s - ln z_s'| <= eps_axis h0 on axis pairs.

    Per output column, ln z is replaced by its lower envelope with axis steps ``(1 - margin) eps_axis h0``
    over the grid's l1 path metric (ENGINEERING.md "LP tolerances"; exact for any metric), then rows are
    re-normalised. Dividing row s by its sum moves ln z_s by |ln sum_s|, so every axis pair ends within
    ``(1 - margin) eps_axis h0 + 2 max_s |ln sum_s|``, certified ``<= eps_axis h0`` below. The LP is solved
    with the tightened ratio, so the envelope only removes solver tolerance (sums move by ~1e-10).
    Columns that vanish stay zero. Raises DataError when the bound cannot be certified.
    """
    z = np.maximum(np.asarray(z, dtype=np.float64), 0.0)
    sx, sy = shape
    bound = eps_axis * h0
    with np.errstate(divide="ignore"):
        logz = np.log(z).reshape(sx, sy, -1)
    mass = np.exp(_envelope(logz, (1.0 - margin) * bound)).reshape(sx * sy, -1)
    sums = mass.sum(axis=1)
    if np.any(sums <= 0):
        raise DataError("the seed mechanism has an all-zero row; the LP solution is unusable")
    shift = float(np.max(np.abs(np.log(sums))))
    if 2.0 * shift > margin * bound:
        raise DataError(
            f"cannot certify the repaired seed mechanism: row sums moved by {shift:.3g} in log "
            f"(allowed {margin * bound / 2:.3g}); the LP solution is too inaccurate"
        )
    result = mass / sums[:, None]
    excess = _axis_excess(result, shape, bound)
    if excess > 1e-12:
        raise DataError(f"seed repair left an axis excess of {excess:.3g}")
    return result


def _axis_excess(z: np.ndarray, shape: tuple[int, int], bound: float) -> float:
    """max over axis pairs and outputs of |ln z_a - ln z_b| - bound (both zero counts 0, one zero +inf)."""
    pairs = _axis_pairs(shape)
    a, b = z[pairs[:, 0]], z[pairs[:, 1]]
    with np.errstate(divide="ignore", invalid="ignore"):
        diff = np.abs(np.log(a) - np.log(b))
    diff = np.where((a == 0) & (b == 0), 0.0, diff)
    diff = np.where((a == 0) ^ (b == 0), np.inf, diff)
    return float(diff.max() - bound) if diff.size else -bound
