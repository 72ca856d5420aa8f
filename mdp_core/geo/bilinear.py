"""The bilinear lattice mechanism: the optimal piecewise-bilinear mechanism, eps-mDP on the whole plane.

LP-A (seed 004, :func:`~mdp_core.geo.baselines.lp_coarse`) solves the mechanism on a square lattice and
interpolates it bilinearly to the targets, but is not private between targets. This module adds the
constraints that make the interpolated mechanism exactly eps-mDP for the Euclidean metric, between ANY two
points of the lattice's rectangle, so at every depth of the grid.

**Why corner constraints suffice.** Fix an output y and a lattice cell of side D with corner values K00,
K10, K01, K11 (one lattice row per corner, rows summing to 1, so every interpolated row sums to 1). Inside
the cell ``K = sum w_c K_c`` is bilinear in the local coordinates (s, t) in [0, 1]^2, ``dK/dx`` is affine in
t only, ``dK/dy`` affine in s only. For any direction u, ``u . grad K - eps K`` is therefore bilinear in
(s, t) and takes its largest value at a corner. So ``|grad ln K| <= eps`` on the whole cell iff at each
corner c ``|g_c| <= eps K_c``, with g_c the cell's gradient at c: the two edge differences at c divided by
D. K is continuous across cells, so ``|ln K(x, y) - ln K(x', y)| <= eps |x - x'|`` for every two points of
the rectangle (the segment between them stays inside it).

**The cone program.** Per (cell corner, output) the second-order cone ``|g_c| <= eps' K_c`` with
``eps' = (1 - margin) eps``, rows summing to 1, the targets' expected travel error as objective (the
bilinear weights project it onto the lattice, as for LP-A). Clarabel, an interior point for cone programs,
solves it to ~1e-8, so the repair below is one round that moves nothing. (The 16-gon LP solved by
PDLP that stood in before gave up 2 % of eps to the polygon and met its rows only to ~1e-3, and its
repair cost 1-3 % of utility.)

**Coarse to fine.** Level 0 (the seed grid's spacing) is solved on every output; each finer level (spacing
halved, up to ``level``) only on the outputs the previous optimum uses (an entry above
:data:`SUPPORT_TOL`; the optima use few: 4 of 112 on the district at eps 1.5, 43 of 117 on the city). The
previous level's optimum is bilinear on the finer lattice too, so each level's optimum is at most the
last one's, and a left-out output can cost only utility, never privacy. A level is tried while its time,
predicted from the last one's (times the outputs ratio and the lattice points ratio to the power
:data:`_TIME_EXPONENT`), fits what is left of
``time_limit``; should Clarabel stop short of a finer level, its last iterate, repaired, replaces the
previous optimum only where it is better.

**Repair and check.** Each column is raised (never lowered) until every corner meets
``|g_c| <= (1 - margin) eps K_c`` (a corner too small for its neighbours is raised to the smallest value
that fits; neighbours too small for a corner are raised towards it), rows are normalised, and this
repeats until the corner test holds at eps itself. Should it not within the rounds (a level 0 that ran out
of time), the lattice is mixed with the uniform mechanism at the least weight beta the corner test allows
(``|g| - eps K`` of the mixture is at most ``(1 - beta)`` that of K plus ``-beta eps / m``). The returned
mechanism's corner excess (the certificate above) is computed from the final numbers and must be <= 0.

Measured (2 cores, depth 3, 240 s as in the comparison; each level's own seconds): the district (Helsinki,
112 outputs) at eps 1.5 / km, levels 0-3 in 15 / 3 / 20 / 147 s on 112 / 7 / 7 / 7 outputs (support above
1e-7; at 1e-6 level 1 keeps 4 and gives 0.36425): 0.36602 /
0.36421 / 0.36313 / 0.36257 km (the 16-gon LP at level 0 by PDLP in 60 s: 0.3687, by HiGHS IPX exactly:
0.36632 in 137 s; Clarabel on all 112 outputs at level 1: 0.36421 in 236 s, the same as on 7). The 15 km
city (Baltimore, 117 outputs): eps 0.5 level 1 on 23 outputs, 1.7637 km in 87 s (PDLP: 1.8083); eps 1.0
level 1 on 26 outputs, 1.3941 in 62 s (1.5056); eps 1.5 level 1 on 43 outputs, 1.1361 in 137 s (1.2323).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import clarabel
import numpy as np
import scipy.sparse as sp

from mdp_core._validation import Progress, report
from mdp_core.errors import DataError
from mdp_core.geo.extension import GeoMechanism
from mdp_core.geo.utility import GeoProblem, check_lp_inputs, expected_travel_error

__all__ = ["SUPPORT_TOL", "bilinear_mechanism", "corner_excess"]

#: A finer level keeps the outputs of which the previous level's optimum has an entry above this (the
#: interior point leaves ~1e-8 on unused outputs; at 1e-7 the city's level 1 had 81 outputs, at 1e-6 43).
SUPPORT_TOL = 1e-6
#: A level's predicted seconds: the last level's, times the outputs ratio, times the lattice points ratio
#: to this power (measured: district levels 1 -> 2 -> 3 predicted 24.6 / 157 s, took 20.4 / 147 s; city
#: level 0 -> 1 on 43 outputs 112 s, took 133 s).
_TIME_EXPONENT = 1.5
#: Clarabel statuses whose solution is taken as the level's optimum.
_SOLVED = frozenset({"Solved", "AlmostSolved"})
#: Rounds of raise-and-normalise before the uniform mix takes over.
_REPAIR_ROUNDS = 40


@dataclass(frozen=True, eq=False)
class _Lattice:
    """A square lattice of side ``spacing`` km covering the targets' bounding box."""

    spacing: float
    weights: sp.csr_matrix  # (n targets, P points): bilinear weights, rows sum to 1
    corners: np.ndarray  # (C, 3): a cell corner, its x-neighbour and its y-neighbour in that cell

    @property
    def points(self) -> int:
        """Number of lattice points P."""
        return int(self.weights.shape[1])


def _lattice(problem: GeoProblem, level: int) -> _Lattice:
    """The level-``level`` lattice (spacing ``h0 / 2**level``) over the targets, aligned with the grid."""
    grid = problem.grid
    step = 2 ** (grid.depth - level)
    i, j = grid.fine_ij[:, 0], grid.fine_ij[:, 1]
    i0, j0 = i.min() // step, j.min() // step
    # a target on the far border lies in the last cell (s = 1), so every cell of the box holds targets
    ci = np.maximum(np.minimum(i // step, (i.max() - 1) // step), i0) - i0
    cj = np.maximum(np.minimum(j // step, (j.max() - 1) // step), j0) - j0
    s, t = (i - (ci + i0) * step) / step, (j - (cj + j0) * step) / step
    nx, ny = int(ci.max()) + 2, int(cj.max()) + 2
    n = len(i)
    cols = np.column_stack([ci * ny + cj, (ci + 1) * ny + cj, ci * ny + cj + 1, (ci + 1) * ny + cj + 1])
    vals = np.column_stack([(1 - s) * (1 - t), s * (1 - t), (1 - s) * t, s * t])
    weights = sp.csr_matrix((vals.ravel(), (np.repeat(np.arange(n), 4), cols.ravel())), shape=(n, nx * ny))
    ii, jj = np.meshgrid(np.arange(nx - 1), np.arange(ny - 1), indexing="ij")
    p00 = (ii * ny + jj).ravel()
    p10, p01, p11 = p00 + ny, p00 + 1, p00 + ny + 1
    corners = np.concatenate(
        [np.column_stack(c) for c in ((p00, p10, p01), (p10, p00, p11), (p01, p11, p00), (p11, p01, p10))]
    )
    return _Lattice(grid.h_fine * step, weights, corners)


def corner_excess(lattice_matrix: np.ndarray, corners: np.ndarray, spacing: float, eps: float) -> np.ndarray:
    """``|g_c| - eps K_c`` per (cell corner, output): <= 0 everywhere iff the interpolation is eps-mDP.

    Parameters
    ----------
    lattice_matrix : ndarray, shape (P, m)
        Lattice mechanism (rows = lattice points).
    corners : ndarray of int, shape (C, 3)
        Each cell corner with its x- and y-neighbour in that cell.
    spacing : float
        Lattice side D in km.
    eps : float
        Budget in 1/km.
    """
    k = lattice_matrix
    c, xn, yn = corners.T
    return np.hypot(k[xn] - k[c], k[yn] - k[c]) / spacing - eps * k[c]


def _socp(
    lattice: _Lattice, cost: np.ndarray, eps_socp: float, seconds: float
) -> tuple[np.ndarray, str, float]:
    """The lattice cone program (module docstring), by Clarabel: (matrix (P, m), status, objective)."""
    p, m = cost.shape
    d = lattice.spacing
    c, xn, yn = lattice.corners.T
    # cone (corner i, output y) holds s = (eps K_c, (K_c - K_xn) / D, (K_c - K_yn) / D) = -A x in rows
    # p + 3 (i m + y) + {0, 1, 2}; variable (point, y) is column point * m + y
    cone = 3 * (np.arange(len(c))[:, None] * m + np.arange(m))
    column = lambda points: points[:, None] * m + np.arange(m)  # noqa: E731
    terms = [(0, c, -eps_socp), (1, c, -1.0 / d), (1, xn, 1.0 / d), (2, c, -1.0 / d), (2, yn, 1.0 / d)]
    rows = [np.repeat(np.arange(p), m)] + [(p + cone + k).ravel() for k, _, _ in terms]
    cols = [np.arange(p * m)] + [column(points).ravel() for _, points, _ in terms]
    vals = [np.ones(p * m)] + [np.full(cone.size, w) for _, _, w in terms]
    a = sp.csc_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(p + 3 * cone.size, p * m)
    )
    b = np.concatenate([np.ones(p), np.zeros(3 * cone.size)])
    cones = [clarabel.ZeroConeT(p)] + [clarabel.SecondOrderConeT(3)] * cone.size
    settings = clarabel.DefaultSettings()
    settings.verbose, settings.time_limit = False, float(seconds)
    settings.direct_solve_method, settings.max_threads = "faer", 0  # supernodal, on all cores
    solution = clarabel.DefaultSolver(
        sp.csc_matrix((p * m, p * m)), cost.ravel(), a, b, cones, settings
    ).solve()
    k = np.nan_to_num(np.asarray(solution.x, dtype=float)).reshape(p, m)
    return k, str(solution.status), float(solution.obj_val)


def _raise(
    k: np.ndarray, corners: np.ndarray, spacing: float, eps: float, max_sweeps: int = 5_000
) -> np.ndarray:
    """Raise entries (never lower them) until every corner meets ``|g_c| <= eps K_c`` (module docstring)."""
    c, xn, yn = corners.T
    lam = eps * spacing
    k = k.copy()
    for _ in range(max_sweeps):
        a, b, kc = k[xn], k[yn], k[c]
        # smallest K_c with (a - K_c)^2 + (b - K_c)^2 <= (lam K_c)^2: the lower root, in a stable form
        disc = lam * lam * (a * a + b * b) - (a - b) ** 2
        with np.errstate(invalid="ignore", divide="ignore"):
            low = (a * a + b * b) / (a + b + np.sqrt(np.maximum(disc, 0.0)))
        low = np.where(disc >= 0, np.nan_to_num(low), 0.0)
        # neighbours below K_c move towards it until the corner's gradient fits
        u, v = np.maximum(kc - a, 0.0), np.maximum(kc - b, 0.0)
        above = np.maximum(a - kc, 0.0) ** 2 + np.maximum(b - kc, 0.0) ** 2
        room = np.sqrt(np.maximum((lam * kc) ** 2 - above, 0.0))
        drop = np.hypot(u, v)
        with np.errstate(invalid="ignore", divide="ignore"):
            shrink = np.where(drop > room, np.nan_to_num(room / drop), 1.0)
        new = k.copy()
        np.maximum.at(new, c, low)
        np.maximum.at(new, xn, kc - shrink * u)
        np.maximum.at(new, yn, kc - shrink * v)
        if np.all(new <= k * (1.0 + 1e-14)):
            return new
        k = new
    return k


def _repair(
    raw: np.ndarray, lattice: _Lattice, eps: float, margin: float
) -> tuple[np.ndarray, int, float, float]:
    """Exactly eps-mDP lattice rows from a solver's: (matrix, rounds, uniform mix weight, corner excess)."""
    m = raw.shape[1]
    k = np.maximum(raw, 0.0)
    sums = k.sum(axis=1, keepdims=True)
    k = np.where(sums > 0, k / np.where(sums > 0, sums, 1.0), 1.0 / m)
    corners, d = lattice.corners, lattice.spacing
    for rounds in range(1, _REPAIR_ROUNDS + 1):
        k = _raise(k, corners, d, (1.0 - margin) * eps)
        k /= k.sum(axis=1, keepdims=True)
        excess = corner_excess(k, corners, d, eps)
        if excess.max() <= 0.0:
            return k, rounds, 0.0, float(excess.max())
    over = np.maximum(excess, 0.0)
    beta = min(1.0, float((over / (over + eps / m)).max()) * (1.0 + 1e-9))
    k = (1.0 - beta) * k + beta / m
    return k, _REPAIR_ROUNDS, beta, float(corner_excess(k, corners, d, eps).max())


def _ladder(
    problem: GeoProblem, eps_socp: float, finest: int, seconds: float, progress: Progress
) -> tuple[list[tuple[_Lattice, np.ndarray, dict[str, Any]]], list[dict[str, Any]]]:
    """Solve level 0 on every output, then finer levels on the outputs used, while the time allows.

    Returns the candidates (lattice, matrix over all outputs (P, m), record): the finest solved level,
    and after it the next level's last iterate when that one ran out of time; and every level's record.
    """
    start, m = time.perf_counter(), problem.loss.shape[1]
    outputs = np.arange(m)
    candidates: list[tuple[_Lattice, np.ndarray, dict[str, Any]]] = []
    records: list[dict[str, Any]] = []
    for level in range(finest + 1):
        lattice = _lattice(problem, level)
        left = seconds - (time.perf_counter() - start)
        if records:
            last = records[-1]
            scale = len(outputs) / last["outputs"] * (lattice.points / last["points"]) ** _TIME_EXPONENT
            if last["seconds"] * scale > left:
                break
        report(progress, 0.05 + 0.8 * level / (finest + 1), f"bilinear: level {level}, {len(outputs)} outs")
        t = time.perf_counter()
        cost = np.asarray(lattice.weights.T @ problem.cost)[:, outputs]
        k, status, objective = _socp(lattice, cost, eps_socp, max(left, 1.0))
        record = {"level": level, "points": lattice.points, "outputs": len(outputs), "status": status}
        records.append(record | {"objective": objective, "seconds": time.perf_counter() - t})
        full = np.zeros((lattice.points, m))
        full[:, outputs] = k
        candidates = [*candidates[-1:], (lattice, full, records[-1])]
        if status not in _SOLVED:
            break
        candidates = candidates[-1:]  # a solved level's optimum is at most the coarser one's
        outputs = outputs[k.max(axis=0) > SUPPORT_TOL]
    return candidates, records


def bilinear_mechanism(
    problem: GeoProblem,
    eps: float,
    *,
    level: int | None = None,
    time_limit: float = 30.0,
    margin: float = 0.003,
    progress: Progress = None,
) -> GeoMechanism:
    """The optimal piecewise-bilinear mechanism on a lattice, certified eps-mDP between all targets.

    Parameters
    ----------
    problem : GeoProblem
        Targets (Euclidean metric, km), outputs, prior and travel loss.
    eps : float
        Privacy budget in 1/km.
    level : int, optional
        Finest lattice level tried, spacing ``h0 / 2**level`` km (0 = the seed grid, at most the grid's
        depth, which is the default). Levels come coarse to fine while the time allows (module docstring).
    time_limit : float
        Seconds for the cone programs (lattice, repair and interpolation come on top, usually < 2 s).
    margin : float
        Relative budget kept back for the repair (module docstring).

    Returns
    -------
    GeoMechanism
        ``method="bilinear"``; ``info`` holds the level reached, its spacing (km), lattice points and
        outputs, the cone program's eps, status and objective, one record per level tried (``levels``),
        repair rounds, the uniform mix weight (0 when the raise sufficed) and the corner excess.
    """
    eps = check_lp_inputs(problem, eps, time_limit)
    if not 0.0 < margin < 0.5:
        raise DataError(f"margin must be in (0, 0.5), got {margin!r}")
    depth = problem.grid.depth
    if level is None:
        level = depth
    elif not (isinstance(level, int | np.integer) and 0 <= level <= depth):
        raise DataError(f"level must be an integer from 0 to the grid's depth {depth}, got {level!r}")
    start = time.perf_counter()
    eps_socp = (1.0 - margin) * eps
    candidates, levels = _ladder(problem, eps_socp, int(level), time_limit, progress)
    t_repair = time.perf_counter()
    report(progress, 0.9, "bilinear: repairing to exact eps-mDP")
    # an unfinished finer level (last candidate) is kept only when it is better once repaired
    repaired = [(_repair(raw, lattice, eps, margin), lattice, record) for lattice, raw, record in candidates]
    matrices = [np.asarray(lattice.weights @ fixed[0]) for fixed, lattice, _ in repaired]
    errors = [expected_travel_error(matrix, problem.prior, problem.loss) for matrix in matrices]
    best = int(np.argmin(errors))
    (_, rounds, beta, excess), lattice, final = repaired[best]
    matrix = matrices[best]
    if excess > 0.0:  # the mix always succeeds in exact arithmetic; never return an unproven mechanism
        raise DataError(f"the bilinear mechanism's corner test failed (excess {excess:.3g})")
    end = time.perf_counter()
    report(progress, 1.0, "bilinear: done")
    return GeoMechanism(
        problem.targets_km,
        problem.outputs_km,
        matrix,
        eps,
        end - start,
        method="bilinear",
        stages={"socp": t_repair - start, "repair": end - t_repair},
        info={
            "level": final["level"],
            "spacing_km": lattice.spacing,
            "lattice_points": lattice.points,
            "outputs": final["outputs"],
            "socp_eps": eps_socp,
            "socp_status": final["status"],
            "socp_objective": final["objective"],
            "levels": levels,
            "repair_rounds": rounds,
            "uniform_mix": beta,
            "corner_excess": excess,
        },
    )
