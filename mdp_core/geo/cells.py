"""A lower bound for fine grids from the average rows of their cells (the cell relaxation).

Group the targets into cells of ``size x size`` points of the fine grid. For any eps-mDP mechanism K, a cell
X, with the prior conditioned on it as weights w, has the average row ``A[X] = sum_{x in X} w_x K[x]``, a
distribution over the outputs, and for every output y:

* **Cost.** ``sum_{x in X} pi_x L(x, y) K(x, y) >= pi(X) T[X, y] A[X, y]``: within X the column K(., y)
  varies by at most ``r = exp(eps diam X)``, so its w-weighted mean of L(., y) is at least ``T[X, y]``, the
  least such mean over columns with ``max <= r min``, which puts the cheapest targets at r times the others
  (a threshold in L; :func:`tilted_loss`).
* **Privacy.** ``A[X, y] <= lam(X, Y) A[Y, y]`` for any two cells. For a matching g of X's weights onto
  Y's targets, ``sum_x w_x K(x, y) = sum g(x, x') K(x, y)``, which is at most
  ``sum_x' K(x', y) sum_x g(x, x') e^(eps d(x, x'))``, so ``lam = max_x' sum_x g(x, x') e^(eps d(x, x')) /
  w_x'``. A cell and its translate by t with the same weights match place by place, ``lam = e^(eps |t|)``,
  as if the cells were points at their centres (:func:`average_ratios`; other pairs take a north-west-corner
  coupling along t, or Jensen's ``1 / sum_x' w_x' / sum_x w_x e^(eps d(x, x'))`` where smaller).

So the LP over the cells' rows, with cost ``pi(X) T[X, y]`` and these rows between the cells joined by a
:data:`~mdp_core.geo._parts.DILATION`-spanner of their centres (fewer rows: still a relaxation), is below
every eps-mDP mechanism's utility, and its weak-duality certificate is a certified bound. It keeps every
target's cost and every cell's long-range rows, where the cosets (:mod:`mdp_core.geo.cosets`) keep a target's
rows only to the few in its coset. Above one LP's time the cells are split into parts, cosets of cells:
like a checkerboard (cell (i, j) in part (i + j) % 2) or 2 x 2, each part bounded on its own core
(:func:`cell_plan` picks the size and split that fit the time).

Measured on the 15 km city at depth 4 (8,972 targets, 117 outputs), eps 1.5 / km, two cores: 4 x 4 cells
(1,077) in two parts certify 0.95345 km in 60 s (0.95359 converged, 65 s), 4 x 4 in 2 x 2 parts 0.94773 in
34 s, 3 x 3 in 2 x 2 parts 0.95382 converged, 6 x 6 in one LP 0.9413: coarser cells lose more. The fine
grid's cosets gave 0.884 in 60 s and 0.9507 in 495 s (4 x 4 cosets); the best verified mechanism errs 0.9971.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np

from mdp_core._cores import machine_slowdown, worker_count
from mdp_core._validation import Progress
from mdp_core.errors import DataError
from mdp_core.geo._parts import COSET_GAP, DILATION, Part, bound_parts, rows_bound
from mdp_core.geo.bounds import GeoBound, _privacy_rows
from mdp_core.geo.pairs import spanner_pairs
from mdp_core.geo.utility import GeoProblem, check_lp_inputs

__all__ = [
    "CELL_SECONDS",
    "CUT_SLACK",
    "MAX_CELL_SIZE",
    "PART_CELLS",
    "PART_SPLITS",
    "CellRelaxation",
    "average_ratios",
    "cell_lower_bound",
    "cell_parts",
    "cell_plan",
    "cell_relaxation",
    "part_seconds",
    "tilted_loss",
]

#: Largest cell side (fine grid points) :func:`cell_plan` considers: coarser cells lose more than cosets.
MAX_CELL_SIZE = 6
#: ``(a, b)``: seconds per output that a part of s = cells / 1000 takes to converge to
#: :data:`~mdp_core.geo._parts.COSET_GAP` on one core of a quiet machine while the other parts run on the
#: others, ``a s (s + 0.02) + b s^3`` (:func:`part_seconds`). Fitted on a machine whose probe read 1.65x
#: slower than quiet (:func:`~mdp_core._cores.machine_slowdown`), divided by that: the city at depth 4, eps
#: 1.5, 117 outputs, 2 cores, 4 parts of 4 x 4 cells (~270) converged in 34 s, 2 parts (539 / 538) in 65 s;
#: at depth 3, 4 parts of 2 x 2 (~285) in 34 s; the district at depth 3, 2 parts of 3 x 3 (336) in 17 s.
CELL_SECONDS = (0.97, 0.03)
#: Parts predicted to converge within this many times the time they get are still taken: cut near their end
#: the certificates lose little. The city at depth 4, eps 1.5, the two parts of 4 x 4 cells converged in 65 s
#: to 0.95359 km; cut at 60 / 52 / 45 s 0.95345 / 0.95312 / 0.95044, where its 4 parts converge to 0.94773.
#: Not much more: the 4 parts of 3 x 3 cells there (predicted 1.18x the time) cut at 60 s gave 0.95145.
CUT_SLACK = 1.15
#: The splits of the cells into parts, fewest first (:func:`cell_parts`).
PART_SPLITS = (1, 2, 4)
#: Most cells in a part (the block interior point's n x n blocks, one per output).
PART_CELLS = 600
#: Pairs of cells whose ratios are computed at once (their distance blocks: pairs x size^2 x size^2 floats).
_PAIR_CHUNK = 2048


@dataclass(frozen=True, eq=False)
class CellRelaxation:
    """The cells of a problem's fine grid and the relaxation's LP data over them (module docstring).

    Attributes
    ----------
    size : int
        Cell side in fine grid points.
    ij : ndarray of int, shape (k, 2)
        Each cell's coordinates (fine coordinates // size); only cells with prior mass.
    members : ndarray of int, shape (k, size^2)
        Target index at each place ``(i % size) size + j % size`` of the cell, -1 where it has none.
    weights : ndarray, shape (k, size^2)
        The prior conditioned on the cell (0 where it has no target).
    mass : ndarray, shape (k,)
        Prior mass of each cell.
    cost : ndarray, shape (k, m)
        ``pi(X) T[X, y]`` (km): the relaxation's cost.
    centres_km : ndarray, shape (k, 2)
        Prior-weighted centre of each cell (km).
    """

    size: int
    ij: np.ndarray
    members: np.ndarray
    weights: np.ndarray
    mass: np.ndarray
    cost: np.ndarray
    centres_km: np.ndarray


def tilted_loss(loss: np.ndarray, weights: np.ndarray, ratio: np.ndarray) -> np.ndarray:
    """``T[X, y]``: the least ``sum_x w_x L(x, y) K_x / sum_x w_x K_x`` over columns with ``max K <= ratio
    min K``, per cell and output (module docstring).

    The least is at a column with the targets cheaper than a threshold at ``ratio`` and the others at 1
    (a linear-fractional objective over that cone takes its least at an extreme ray), so every threshold of
    the sorted losses is tried.

    Parameters
    ----------
    loss : ndarray, shape (k, s, m)
        L(x, y) of each cell's targets (any finite value at the padding).
    weights : ndarray, shape (k, s)
        Weights per cell summing to 1 (0 at the padding).
    ratio : ndarray, shape (k,)
        ``exp(eps diam X) >= 1``.
    """
    order = np.argsort(loss, axis=1)
    sorted_loss = np.take_along_axis(loss, order, axis=1)
    sorted_w = np.take_along_axis(np.broadcast_to(weights[:, :, None], loss.shape), order, axis=1)
    k, _, m = loss.shape
    first = np.zeros((k, 1, m))
    part_cost = np.concatenate([first, np.cumsum(sorted_w * sorted_loss, axis=1)], axis=1)
    part_mass = np.concatenate([first, np.cumsum(sorted_w, axis=1)], axis=1)
    r = ratio[:, None, None]
    total = part_cost[:, -1:, :]
    values = (r * part_cost + (total - part_cost)) / (r * part_mass + (part_mass[:, -1:, :] - part_mass))
    return values.min(axis=1)


def cell_relaxation(problem: GeoProblem, eps: float, size: int) -> CellRelaxation:
    """Cells of ``size x size`` fine grid points with prior mass, their weights and the relaxation's cost."""
    if not (isinstance(size, int | np.integer) and size >= 1):
        raise DataError(f"the cell size must be a positive integer, got {size!r}")
    size = int(size)
    keys, cell_of = np.unique(problem.grid.fine_ij // size, axis=0, return_inverse=True)
    slot = (problem.grid.fine_ij % size) @ np.array([size, 1])  # a target's place within its cell
    members = np.full((len(keys), size * size), -1, dtype=np.int64)
    members[cell_of.ravel(), slot] = np.arange(len(slot))
    prior = np.append(problem.prior, 0.0)[members]  # index -1, an empty place: weight 0
    mass = prior.sum(axis=1)
    keep = mass > 0.0  # a cell without mass costs nothing: dropping its rows is still a relaxation
    members, mass, keys = members[keep], mass[keep], keys[keep]
    weights = prior[keep] / mass[:, None]
    filled = _filled(members)
    points = problem.targets_km[filled]
    diam = np.linalg.norm(points[:, :, None, :] - points[:, None, :, :], axis=3).max(axis=(1, 2))
    tilted = tilted_loss(problem.loss[filled], weights, np.exp(eps * diam))
    return CellRelaxation(
        size=size,
        ij=keys,
        members=members,
        weights=weights,
        mass=mass,
        cost=mass[:, None] * tilted,
        centres_km=np.einsum("ks,ksd->kd", weights, points),
    )


def _filled(members: np.ndarray) -> np.ndarray:
    """``members`` with each empty place (-1) at a target of its own cell (whose weight there stays 0)."""
    return np.where(members >= 0, members, members.max(axis=1, keepdims=True))


def average_ratios(
    cells: CellRelaxation, targets_km: np.ndarray, eps: float, pairs: np.ndarray
) -> np.ndarray:
    """``lam(a, b)`` per directed pair (a, b) of cells: ``A[a, y] <= lam A[b, y]`` for every eps-mDP
    mechanism (module docstring), each the least of the three couplings' ratios."""
    lam = np.empty(len(pairs))
    for lo in range(0, len(pairs), _PAIR_CHUNK):
        chunk = pairs[lo : lo + _PAIR_CHUNK]
        lam[lo : lo + len(chunk)] = _chunk_ratios(cells, targets_km, eps, chunk)
    return lam


def _chunk_ratios(cells: CellRelaxation, targets_km: np.ndarray, eps: float, pairs: np.ndarray) -> np.ndarray:
    a, b = pairs[:, 0], pairs[:, 1]
    wa, wb = cells.weights[a], cells.weights[b]
    xa, xb = targets_km[_filled(cells.members[a])], targets_km[_filled(cells.members[b])]
    growth = np.exp(eps * np.linalg.norm(xa[:, :, None, :] - xb[:, None, :, :], axis=3))  # (p, s, s)
    inner = np.einsum("ps,pst->pt", wa, growth)  # E_x e^(eps d(x, x')) per target x' of b
    lam = 1.0 / np.sum(np.where(wb > 0.0, wb / inner, 0.0), axis=1)  # Jensen's
    # place by place (a translate): wherever a's weight sits, b has weight at the same place of its cell
    diagonal = np.einsum("pss->ps", growth)
    matched = np.where(wa > 0.0, wa * diagonal / np.where(wb > 0.0, wb, 1.0), 0.0).max(axis=1)
    contained = np.all((wa > 0.0) <= (wb > 0.0), axis=1)
    lam = np.where(contained, np.minimum(lam, matched), lam)
    for p in np.flatnonzero(~contained):
        lam[p] = min(lam[p], _corner_ratio(wa[p], wb[p], xa[p], xb[p], growth[p]))
    return lam


def _corner_ratio(
    wa: np.ndarray, wb: np.ndarray, xa: np.ndarray, xb: np.ndarray, growth: np.ndarray
) -> float:
    """The ratio of the north-west-corner coupling of the weights in the order along the cells' offset."""
    along = xb[wb > 0].mean(axis=0) - xa[wa > 0].mean(axis=0)
    along = along / max(float(np.linalg.norm(along)), 1e-300)
    across = np.array([-along[1], along[0]])
    order_a = [i for i in np.lexsort((xa @ across, xa @ along)) if wa[i] > 0.0]
    order_b = [j for j in np.lexsort((xb @ across, xb @ along)) if wb[j] > 0.0]
    left_a, left_b = wa.copy(), wb.copy()
    sent = np.zeros(len(wb))
    i = j = 0
    while i < len(order_a) and j < len(order_b):
        x, y = order_a[i], order_b[j]
        q = min(left_a[x], left_b[y])
        sent[y] += q * growth[x, y]
        left_a[x] -= q
        left_b[y] -= q
        i += left_a[x] <= 1e-15 * wa[x]
        j += left_b[y] <= 1e-15 * wb[y]
    if i < len(order_a):  # rounding left some of a's weight: it goes to b's last target
        y = order_b[-1]
        sent[y] += sum(left_a[x] * growth[x, y] for x in order_a[i:])
    return float(np.max(sent[wb > 0] / wb[wb > 0]))


def cell_parts(cells: CellRelaxation, parts: int) -> list[np.ndarray]:
    """The cells of each part: all in one (``parts`` 1), a checkerboard (2) or 2 x 2 cosets of cells (4)."""
    labels = _part_labels(cells.ij, parts)
    return [np.flatnonzero(labels == k) for k in range(parts) if np.any(labels == k)]


def _part_labels(ij: np.ndarray, parts: int) -> np.ndarray:
    """The part of each cell at coordinates ``ij`` (:func:`cell_parts`)."""
    if parts not in PART_SPLITS:
        raise DataError(f"parts must be 1, 2 or 4, got {parts!r}")
    i, j = ij[:, 0], ij[:, 1]
    return {1: np.zeros_like(i), 2: (i + j) % 2, 4: (i % 2) * 2 + j % 2}[parts]


def part_seconds(cells: int, outputs: int) -> float:
    """Seconds of one core in which a part of this many cells and outputs converges (:data:`CELL_SECONDS`)."""
    size = cells / 1000.0
    quadratic, cubic = CELL_SECONDS
    return outputs * (quadratic * size * (size + 0.02) + cubic * size**3)


def cell_plan(problem: GeoProblem, time_limit: float, slowdown: float = 1.0) -> tuple[int, int] | None:
    """``(size, parts)`` of the tightest cells whose parts converge within ``time_limit`` seconds shared over
    this process's cores, ``slowdown`` times slower than quiet: the smallest size, with the fewest parts
    (:func:`cell_parts`), whose parts :func:`part_seconds` predicts within :data:`CUT_SLACK` times the time;
    None when none up to :data:`MAX_CELL_SIZE` does."""
    thread_seconds = float(time_limit) * worker_count() / slowdown
    outputs = problem.cost.shape[1]
    for size in range(2, MAX_CELL_SIZE + 1):
        ij = np.unique(problem.grid.fine_ij // size, axis=0)
        for parts in PART_SPLITS:
            counts = np.bincount(_part_labels(ij, parts))
            seconds = sum(part_seconds(int(c), outputs) for c in counts)
            if counts.max() <= PART_CELLS and seconds <= CUT_SLACK * thread_seconds:
                return size, parts
    return None


def cell_lower_bound(
    problem: GeoProblem,
    eps: float,
    *,
    size: int | None = None,
    parts: int = 2,
    time_limit: float = 60.0,
    progress: Progress = None,
) -> GeoBound:
    """Certified lower bound (km) of every eps-mDP mechanism on these outputs, from the LP over cells.

    Parameters
    ----------
    problem : GeoProblem
        Targets (Euclidean metric, km), outputs, prior and travel loss.
    eps : float
        Privacy budget in 1/km.
    size : int, optional
        Cell side in fine grid points; default :func:`cell_plan`'s for ``time_limit`` on this machine now
        (then ``parts`` is its choice too), else :data:`MAX_CELL_SIZE` in two parts.
    parts : int
        1, 2 or 4: the cells' LP whole, split like a checkerboard, or into 2 x 2 cosets of cells, each part
        bounded on its own (a relaxation: the rows between parts are dropped).
    time_limit : float
        Seconds for the whole bound, shared among the parts; each part certifies what it reached by then.
    progress : callable, optional
        ``progress(fraction, message)``, as for :func:`~mdp_core.geo.cosets.coset_lower_bound`.

    Returns
    -------
    GeoBound
        ``value`` is the prior-weighted sum of the parts' certified bounds; never exact.
    """
    eps = check_lp_inputs(problem, eps, time_limit)
    start = time.perf_counter()
    if size is None:
        size, parts = cell_plan(problem, time_limit, machine_slowdown()) or (MAX_CELL_SIZE, 2)
    cells = cell_relaxation(problem, eps, size)
    groups = cell_parts(cells, parts)
    outputs = problem.cost.shape[1]

    def part(group: np.ndarray) -> Part:
        def solve(deadline: float, stop: threading.Event) -> GeoBound:
            begun = time.perf_counter()
            pairs = spanner_pairs(cells.centres_km[group], DILATION)[0]
            directed = np.concatenate([pairs, pairs[:, ::-1]])
            lam = average_ratios(cells, problem.targets_km, eps, group[directed])
            rows = _privacy_rows(pairs, outputs)  # the directed pairs in the same order, per output
            cost = cells.cost[group] / cells.mass[group].sum()  # the prior conditioned on the part
            value = rows_bound(cost, rows, np.repeat(lam, outputs), COSET_GAP, deadline, stop)
            return GeoBound(value, False, "cells", time.perf_counter() - begun, len(rows))

        return solve

    left = float(time_limit) - (time.perf_counter() - start)
    bounds = bound_parts([part(group) for group in groups], left, progress, "parts of cells")
    value = sum(float(cells.mass[g].sum()) * b.value for g, b in zip(groups, bounds, strict=True))
    split = {1: "", 2: ", in two parts (a checkerboard)", 4: ", in 2 x 2 parts"}[parts]
    return GeoBound(
        value=max(value, 0.0),
        exact=False,
        method=f"cell relaxation: {len(cells.mass):,} cells of {size} x {size} targets{split}, "
        f"{DILATION}-spanner rows (block interior point)",
        seconds=time.perf_counter() - start,
        rows=max(b.rows for b in bounds),
    )
