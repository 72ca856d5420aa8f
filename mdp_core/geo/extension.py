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
from mdp_core.geo.seed_lp import (
    SeedLPResult,
    _axis_excess,
    _envelope,
    axis_budget,
    seed_cost,
    solve_seed_lp,
)
from mdp_core.geo.utility import GeoProblem, expected_travel_error

#: The MLaEt variants of seed 004 (Sec. 6): A log-linear, M McShane-Whitney, O locally optimised.
VARIANTS = ("A", "M", "O")

__all__ = [
    "VARIANTS",
    "GeoMechanism",
    "extend_log",
    "extend_log_recursive",
    "lattice_excess",
    "normalise_log",
    "tree_extension",
    "tree_seed",
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

    def error_by_target_km(self, problem: GeoProblem) -> np.ndarray:
        """Expected travel error (km) of a user at each target, ``sum_y M[x, y] L(x, y)``, shape (n,):
        where privacy is expensive. Its prior-weighted mean is :meth:`utility_km`."""
        if self.matrix.shape != problem.loss.shape:
            raise DataError(f"mechanism {self.matrix.shape} and loss {problem.loss.shape} do not match")
        return np.einsum("xy,xy->x", self.matrix, problem.loss)


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


def _lattice_index(grid: GeoGrid) -> tuple[int, int]:
    """Vertices of the full fine lattice along x and y."""
    return grid.cells[0] * grid.scale + 1, grid.cells[1] * grid.scale + 1


def _lattice_bilinear(log_seed: np.ndarray, grid: GeoGrid) -> np.ndarray:
    """MLaEt-A on every fine lattice vertex (targets or not), shape (Nx, Ny, m)."""
    nx_, ny = _lattice_index(grid)
    ii, jj = np.meshgrid(np.arange(nx_), np.arange(ny), indexing="ij")
    full = GeoGrid(
        grid.origin_km,
        grid.h0,
        grid.cells,
        grid.depth,
        np.column_stack([ii.ravel(), jj.ravel()]),
        grid.outputs,
    )
    return extend_log(log_seed, full).reshape(nx_, ny, -1)


def _lattice_mcshane_whitney(log_seed: np.ndarray, grid: GeoGrid, step: float) -> np.ndarray:
    """MLaEt-M: midpoint of the McShane (upper) and Whitney (lower) extensions of ln z, shape (Nx, Ny, m).

    In the metric ``eps_t * l1`` on the lattice (``step`` per fine axis step): upper(v) = min_s ln z_s +
    step * l1(v, s) / h_fine, lower(v) = max_s ln z_s - step * l1(v, s) / h_fine over the seeds s. Both are
    exact distance transforms (forward/backward passes per axis); each is step-Lipschitz per axis step
    and equals ln z on the seeds (the seed values are, since the repaired seed LP is), so is their mean.
    """
    nx_, ny = _lattice_index(grid)
    sx, sy = grid.seed_shape
    m = log_seed.shape[1]
    seeds = log_seed.reshape(sx, sy, m)
    upper = np.full((nx_, ny, m), np.inf)
    lower = np.full((nx_, ny, m), np.inf)
    upper[:: grid.scale, :: grid.scale] = seeds
    lower[:: grid.scale, :: grid.scale] = -seeds
    upper = _envelope(upper, step)
    lower = -_envelope(lower, step)
    with np.errstate(invalid="ignore"):
        out = 0.5 * (upper + lower)
    return np.where(np.isneginf(seeds[:1, :1]), -np.inf, out)


def _box_argmin(lo: np.ndarray, hi: np.ndarray, loss: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Per row, log-values g in [lo, hi] minimising sum_y softmax(g)_y loss_y (exact: a threshold rule).

    The objective is linear-fractional in p = exp(g) over a box, so an optimum is a vertex: outputs with
    loss below the optimal value take ``hi``, the others ``lo``. ``order`` sorts each row's loss ascending;
    all m + 1 thresholds are scored with cumulative sums and the best is taken.
    """
    rows = np.arange(lo.shape[0])[:, None]
    shift = np.max(np.where(np.isfinite(hi), hi, -np.inf), axis=1, keepdims=True)
    with np.errstate(invalid="ignore", over="ignore"):
        a = np.exp(hi - shift)[rows, order]
        b = np.exp(lo - shift)[rows, order]
    a = np.nan_to_num(a)
    b = np.nan_to_num(b)
    ls = loss[rows, order]
    zero = np.zeros((lo.shape[0], 1))
    num = np.concatenate([zero, np.cumsum(a * ls, axis=1)], axis=1) + (
        np.concatenate([np.cumsum((b * ls)[:, ::-1], axis=1)[:, ::-1], zero], axis=1)
    )
    den = np.concatenate([zero, np.cumsum(a, axis=1)], axis=1) + (
        np.concatenate([np.cumsum(b[:, ::-1], axis=1)[:, ::-1], zero], axis=1)
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        value = np.where(den > 0, num / den, np.inf)
    k = np.argmin(value, axis=1)
    take_hi = np.arange(lo.shape[1])[None, :] < k[:, None]  # in sorted order
    g_sorted = np.where(take_hi, hi[rows, order], lo[rows, order])
    out = np.empty_like(lo)
    out[rows, order] = g_sorted
    return out


def _locally_optimise(
    lattice: np.ndarray, grid: GeoGrid, loss: np.ndarray, step: float, sweeps: int
) -> tuple[np.ndarray, int]:
    """MLaEt-O: red-black block-coordinate descent on the targets' pre-normalisation log-values.

    Each target vertex in turn (all vertices of one colour of the lattice checkerboard at once: their
    lattice neighbours are of the other colour) takes the values in the box [max_nb g - step, min_nb g +
    step] (its 4 axis neighbours) that minimise its own expected loss (:func:`_box_argmin`). The current
    values lie in the box, so every update keeps every axis step <= ``step`` and no target's loss rises.
    Stops after ``sweeps`` red-black sweeps or when the total loss moves by < 1e-9 (relative).
    """
    nx_, ny = lattice.shape[:2]
    i, j = grid.fine_ij[:, 0], grid.fine_ij[:, 1]
    order = np.argsort(loss, axis=1)
    colour = (i + j) % 2
    done = 0
    previous = np.inf
    for sweep in range(1, sweeps + 1):
        done = sweep
        for c in (0, 1):
            sel = colour == c
            ti, tj = i[sel], j[sel]
            lo = np.full((len(ti), lattice.shape[2]), -np.inf)
            hi = np.full_like(lo, np.inf)
            for di, dj in ((1, 0), (-1, 0), (0, 1), (0, -1)):
                ni, nj = ti + di, tj + dj
                ok = (ni >= 0) & (ni < nx_) & (nj >= 0) & (nj < ny)
                nb = lattice[ni[ok], nj[ok]]
                lo[ok] = np.maximum(lo[ok], nb - step)
                hi[ok] = np.minimum(hi[ok], nb + step)
            lattice[ti, tj] = _box_argmin(lo, hi, loss[sel], order[sel])
        rows = normalise_log(lattice[i, j])
        total = float(np.sum(rows * loss))
        if previous - total <= 1e-9 * abs(total):
            break
        previous = total
    return lattice, done


def lattice_excess(lattice: np.ndarray, step: float) -> float:
    """Largest axis-step excess |g(v) - g(v')| - step over lattice neighbours (both -inf counts 0)."""
    worst = -np.inf
    for axis in (0, 1):
        a = np.moveaxis(lattice, axis, 0)
        with np.errstate(invalid="ignore"):
            diff = np.abs(a[1:] - a[:-1])
        diff = np.where(np.isneginf(a[1:]) & np.isneginf(a[:-1]), 0.0, diff)
        if diff.size:
            worst = max(worst, float(np.nanmax(diff)) - step)
    return worst


def tree_extension(
    problem: GeoProblem,
    eps: float,
    *,
    p: float = 2.0,
    lp_method: str = "auto",
    variant: str = "A",
    sweeps: int = 30,
    seed: SeedLPResult | None = None,
    progress: Progress = None,
) -> GeoMechanism:
    """MLaEt-A / -M / -O: seed LP on the seed grid, extension to every target, row normalisation.

    The variants differ only in how ln f (pre-normalisation log-probabilities) reaches the fine vertices;
    seed 004 names them (Sec. 6) and points to its Appendix E (McShane-Whitney, log-convex and LP-based
    interpolation), which is not in the text. What we fixed (DESIGN.md "Geo optimality"):

    - ``"A"`` log-linear (log-convex) interpolation along axes, level by level = bilinear interpolation of
      ln z inside each seed cell (module docstring).
    - ``"M"`` McShane-Whitney: on the full fine lattice, the midpoint of the upper (McShane) and lower
      (Whitney) Lipschitz extensions of the seed values ln z in the metric eps_t * l1. With two anchors at
      equal distance that midpoint IS the log-linear midpoint, so a level-by-level MW with edge anchors
      would equal A; we therefore extend from all seeds at once (Borgs et al.'s global seed-set extension,
      004 Fig. 1a), which bends ln f towards the nearest seeds' values instead of blending linearly.
    - ``"O"`` locally optimised ("LP-based"): start from A on the full lattice, then each target's own
      values move inside the box its 4 lattice neighbours allow, to the exact minimiser of its expected
      travel error (a linear-fractional program over a box, solved in closed form; red-black sweeps, at
      most ``sweeps``). Never worse than A on any target (monotone).

    Privacy (all three): ln f is defined on every vertex of the full rectangular fine lattice and every
    axis step changes it by at most eps_t * h_fine (checked: :func:`lattice_excess`, raising if not). Any
    two targets are joined by a monotone lattice staircase inside the rectangle, so |ln f(x) - ln f(x')| <=
    eps_t (|dx| + |dy|) <= eps_bar d_2(x, x') (Cauchy-Schwarz, eps_t = eps_bar / sqrt 2), and normalisation
    at most doubles it: M is eps-mDP (eps = 2 eps_bar). Seed 004 Theorems 3 and 6 in lattice form.

    Parameters
    ----------
    problem : GeoProblem
        Targets, outputs, prior and travel loss.
    eps : float
        Privacy budget in 1/km; the result is eps-mDP for the Euclidean (p = 2) or l1 (p = 1) metric.
    p : {1, 2}
        Metric on locations.
    lp_method : {"auto", "colgen", "ipm", "full"}
        How the seed LP is solved (:func:`mdp_core.geo.seed_lp.solve_seed_lp`).
    seed : SeedLPResult, optional
        The seed LP already solved by :func:`tree_seed` for this problem, ``eps`` and ``p`` (the three
        variants share it). Checked: its axis ratios must respect this budget, else ``DataError``.

    Returns
    -------
    GeoMechanism with ``info["seed_lp"]`` (gap, columns, status).
    """
    eps = check_eps(eps)
    if p not in (1, 1.0, 2, 2.0):
        raise DataError(f"p must be 1 or 2, got {p!r}")
    if variant not in VARIANTS:
        raise DataError(f"variant must be one of {list(VARIANTS)}, got {variant!r}")
    if not isinstance(sweeps, int | np.integer) or sweeps < 1:
        raise DataError(f"sweeps must be a positive integer, got {sweeps!r}")
    start = time.perf_counter()
    grid = problem.grid
    if seed is None:
        result = tree_seed(problem, eps, p=p, lp_method=lp_method, progress=progress)
    else:
        result = _checked_seed(seed, grid, axis_budget(eps, p))
    t_lp = time.perf_counter()
    report(progress, 0.9, "extending to the fine grid")
    with np.errstate(divide="ignore"):
        log_seed = np.log(result.z)
    info: dict[str, object] = {}
    if variant == "A":
        matrix = normalise_log(extend_log(log_seed, grid))
    else:
        step = axis_budget(eps, p) * grid.h_fine
        if variant == "M":
            lattice = _lattice_mcshane_whitney(log_seed, grid, step)
        else:
            lattice, done = _locally_optimise(
                _lattice_bilinear(log_seed, grid), grid, problem.loss, step, int(sweeps)
            )
            info["sweeps"] = done
        excess = lattice_excess(lattice, step)
        if excess > 1e-12 * max(1.0, step):
            raise DataError(f"MLaEt-{variant}: a lattice step exceeds the axis budget by {excess:.3g}")
        matrix = normalise_log(lattice[grid.fine_ij[:, 0], grid.fine_ij[:, 1]])
    end = time.perf_counter()
    report(progress, 1.0, "done")
    return GeoMechanism(
        targets_km=grid.targets_km,
        outputs_km=grid.outputs_km,
        matrix=matrix,
        eps=eps,
        seconds=end - start,
        method="tree" if variant == "A" else f"tree_{variant.lower()}",
        stages={"seed_lp": t_lp - start, "extension": end - t_lp},
        info={
            **info,
            "variant": variant,
            "gap": result.gap,
            "columns": result.columns,
            "status": result.status,
            "message": result.message,
        },
    )


def tree_seed(
    problem: GeoProblem,
    eps: float,
    *,
    p: float = 2.0,
    lp_method: str = "auto",
    progress: Progress = None,
) -> SeedLPResult:
    """The seed LP of :func:`tree_extension` on ``problem`` at ``eps`` (1/km): the loss projected on the
    seed grid (:func:`~mdp_core.geo.seed_lp.seed_cost`), solved with the per-axis budget of ``p``. Solve
    it once and pass it as ``seed=`` to every variant."""
    eps = check_eps(eps)
    grid = problem.grid
    report(progress, 0.05, "projecting the loss on the seeds")
    cost = seed_cost(grid, problem.prior, problem.loss)
    return solve_seed_lp(
        cost, grid.seed_shape, grid.h0, axis_budget(eps, p), method=lp_method, progress=progress
    )


def _checked_seed(seed: SeedLPResult, grid: GeoGrid, eps_axis: float) -> SeedLPResult:
    """``seed`` if it fits the grid and its axis ratios respect ``eps_axis`` (solved for this budget)."""
    if not isinstance(seed, SeedLPResult):
        raise TypeError(f"seed must be a SeedLPResult (see tree_seed), got {type(seed).__name__}")
    n_seeds = grid.seed_shape[0] * grid.seed_shape[1]
    if seed.z.shape != (n_seeds, len(grid.outputs)):
        raise DataError(f"seed has shape {seed.z.shape}, this grid needs ({n_seeds}, {len(grid.outputs)})")
    if _axis_excess(seed.z, grid.seed_shape, eps_axis * grid.h0) > 1e-12:
        raise DataError("the seed mechanism breaks this budget's axis ratios: it was solved for another eps")
    return seed
