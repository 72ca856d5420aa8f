"""The privacy rows that matter (chain-free pairs) and exact pricing of outputs for the masters
(:mod:`._colgen`, :mod:`._rays`, :mod:`._floor`).

Tree metrics: a leaves-first dynamic programme, O(n m); the discrete metric: a closed form, O(n m); any
other metric: one small HiGHS LP per output (``_LPPricer``), restarted from the previous basis.
"""

from __future__ import annotations

import highspy
import numpy as np
from numpy.typing import ArrayLike, NDArray

from mdp_core._highs import new_highs
from mdp_core._validation import check_distance_matrix
from mdp_core.errors import DataError

#: ln 1e9. A privacy row ``z_i <= exp(eps d) z_j`` whose factor passes 1e9 is left out of the LPs (master
#: and pricing): a relaxation, so the LP optimum stays a lower bound, and the repair sets the tails it
#: governs (``z_j >= 1e-9 z_i`` at most: below what a solver with a 1e-10 tolerance can enforce anyway).
#: HiGHS rejects a whole batch of rows holding a coefficient above its ``large_matrix_value`` (1e15): at
#: eps 20 on three heart attributes rows went missing silently and the repair could not certify the LP's
#: solution; with factors of 1e11-1e15 the pricing LP failed.
MAX_LOG_FACTOR = 20.7
#: ln 1e6: the limit of a second try when HiGHS fails with factors up to 1e9 (heart, three attributes, eps
#: 15-20: "Solve error", "Unknown" in 7 of 21 cases; none at 1e6, at a cost of 1e-5-2e-4 of the loss).
RETRY_LOG_FACTOR = 13.8
_BLOCK = 8_000_000  # elements per temporary block


def precision_hint(d: np.ndarray, eps: float) -> str:
    """Plain words for a failure at a budget whose factors exp(eps d) pass 1e9 (else ""): a master solved
    to an absolute tolerance of 1e-10 then breaks ratios of its small entries by more than the repair can
    mend (heart, three attributes, l_1 / l_2, eps 10-20, eps * max d = 26-35: "could not certify" or
    solver errors; no failure was seen below :data:`MAX_LOG_FACTOR`)."""
    span = eps * float(d.max())
    if span <= MAX_LOG_FACTOR:
        return ""
    return (
        f" At this budget the privacy constraints relate probabilities by factors up to e^(eps d) = "
        f"{np.exp(span):.0e}, more than a floating-point LP can certify; below eps = "
        f"{MAX_LOG_FACTOR / float(d.max()):.3g} it usually solves."
    )


def tree_order(n: int, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Breadth-first order of the graph with edges ``(a, b)`` rooted at 0, or None if it is not a tree.

    Returns
    -------
    (order, parent, edge) : int arrays
        Nodes in BFS order, each node's parent (``-1`` for the root) and the index of the edge to it.
    """
    if a.size != n - 1:
        return None
    adj: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for k, (i, j) in enumerate(zip(a.tolist(), b.tolist(), strict=True)):
        adj[i].append((j, k))
        adj[j].append((i, k))
    parent = np.full(n, -2, dtype=np.int64)
    edge = np.full(n, -1, dtype=np.int64)
    parent[0] = -1
    order = [0]
    for node in order:
        for nxt, k in adj[node]:
            if parent[nxt] == -2:
                parent[nxt] = node
                edge[nxt] = k
                order.append(nxt)
    if len(order) != n:
        return None
    return np.asarray(order, dtype=np.int64), parent, edge


def tree_pricing(
    W: np.ndarray, order: np.ndarray, parent: np.ndarray, step: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Exact minimum of ``<w, v>`` over ``{v in K : v_root = 1}`` for a tree metric, for every column of W.

    Parameters
    ----------
    W : array (n, m)
        One objective ``w`` per column.
    order, parent : int arrays (n,)
        BFS order from the root and parents (:func:`tree_order`).
    step : array (n,)
        ``eps d(x, parent(x))`` (unused at the root).

    Returns
    -------
    (g_root, V)
        ``g_root[y] = min <W[:, y], v>`` with ``v_root = 1``, and the minimising rays (columns of ``V``,
        ``V[root] = 1``, each tree edge tight).
    """
    G = W.astype(np.float64, copy=True)
    up = np.zeros(W.shape, dtype=bool)  # child sits at exp(+step) times its parent
    for node in order[:0:-1]:  # leaves first, root excluded
        g = G[node]
        hi = np.exp(step[node]) * g
        lo = np.exp(-step[node]) * g
        up[node] = hi < lo
        G[parent[node]] += np.minimum(hi, lo)
    logv = np.zeros(W.shape)
    for node in order[1:]:
        logv[node] = logv[parent[node]] + np.where(up[node], step[node], -step[node])
    return G[order[0]], np.exp(logv)


def chain_free_pairs(dist_in: ArrayLike, *, rtol: float = 1e-10) -> tuple[np.ndarray, np.ndarray]:
    """Unordered pairs ``(a, b)``, ``a < b``, whose privacy rows are not implied by a chain.

    A pair is implied when some ``z`` with ``d(a, z) > 0`` and ``d(z, b) > 0`` has
    ``d(a, z) + d(z, b) <= d(a, b) + tol`` (``tol = rtol * max d``): the rows for ``(a, z)`` and ``(z, b)``
    multiply to the row for ``(a, b)``; both parts are strictly shorter, so by induction on the distance
    every dropped row is implied by kept rows. On an l1 grid or an ordinal chain only neighbours remain; on
    an l2 grid only primitive directions; a nominal (discrete) metric keeps every pair. Returns the kept
    pairs as two int arrays ``(a, b)``.
    """
    d = check_distance_matrix(dist_in, "dist_in", check_triangle=False)
    a, b = np.nonzero(np.triu(~chain_implied(d, rtol=rtol), k=1))
    return a.astype(np.int64), b.astype(np.int64)


def chain_implied(d: np.ndarray, *, rtol: float = 1e-10) -> np.ndarray:
    """``implied[a, b]``: the pair's rows follow from those of shorter pairs through some ``z``
    (:func:`chain_free_pairs`, which validates ``d``; here ``d`` is taken as given). Boolean, n x n,
    symmetric when ``d`` is; O(n^3) time (0.1 s at 406 targets)."""
    if not 0.0 <= rtol < 1e-3:  # a large one would drop rows that no chain implies
        raise DataError(f"rtol must lie in [0, 0.001) (a relative tolerance), got {rtol!r}")
    n = d.shape[0]
    tol = rtol * max(float(d.max()), 1e-300)
    implied = np.zeros((n, n), dtype=bool)
    positive = d > tol
    for z in range(n):
        col = d[:, z]
        ok = positive[:, z]
        if not ok.any():
            continue
        via = (col[:, None] + col[None, :] <= d + tol) & ok[:, None] & ok[None, :]
        implied |= via
    return implied


def discrete_step(d: np.ndarray) -> float | None:
    """The one off-diagonal distance ``c`` of a discrete metric ``d = c 1[x != x']``, else None."""
    off = d[~np.eye(d.shape[0], dtype=bool)]
    if off.size and np.ptp(off) <= 1e-12 * off.max():
        return float(off.max())
    return None


def nominal_pricing(W: np.ndarray, ratio: float) -> tuple[np.ndarray, np.ndarray]:
    """Exact box minimum of ``<w, v>`` over ``{v : max v <= ratio min v, v <= 1}`` per column of W.

    Returns
    -------
    (mu, V)
        ``mu[y] = sum_x W[x, y] (1 if W[x, y] < 0 else 1 / ratio)`` and the rays attaining it.
    """
    V = np.where(W < 0, 1.0, 1.0 / ratio)
    return np.einsum("xy,xy->y", W, V), V


class _LPPricer:
    """Pricing LP ``min <w, v>, v in K, 0 <= v <= 1`` on one HiGHS model (objective changed in place)."""

    def __init__(
        self, d: np.ndarray, a: np.ndarray, b: np.ndarray, max_log_factor: float = MAX_LOG_FACTOR
    ) -> None:
        n = d.shape[0]
        self.max_log_factor = max_log_factor
        self.n = n
        self.pi = np.concatenate([a, b])
        self.pj = np.concatenate([b, a])
        self.pd = d[self.pi, self.pj]
        self.eps = float("nan")
        rows = self.pi.size
        h = new_highs()
        h.setOptionValue("primal_feasibility_tolerance", 1e-10)
        h.setOptionValue("dual_feasibility_tolerance", 1e-10)
        lp = highspy.HighsLp()
        lp.num_col_ = n
        lp.num_row_ = rows
        lp.col_cost_ = np.zeros(n)
        lp.col_lower_ = np.zeros(n)
        lp.col_upper_ = np.ones(n)
        lp.row_lower_ = np.full(rows, -highspy.kHighsInf)
        lp.row_upper_ = np.zeros(rows)
        lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
        lp.a_matrix_.start_ = np.arange(0, 2 * rows + 1, 2, dtype=np.int32)
        index = np.empty(2 * rows, dtype=np.int32)
        index[0::2] = self.pi
        index[1::2] = self.pj
        lp.a_matrix_.index_ = index
        lp.a_matrix_.value_ = np.tile([1.0, -1.0], rows)
        h.passModel(lp)
        self.h = h
        self.cols = np.arange(n, dtype=np.int32)
        self.rows = rows

    def set_eps(self, eps: float) -> None:
        """Change every row's factor in place; rows past ``max_log_factor`` are freed (left out)."""
        if eps == self.eps:
            return
        self.eps = eps
        log_factor = eps * self.pd
        change = self.h.changeCoeff
        values = -np.exp(np.minimum(log_factor, self.max_log_factor))
        for r, (j, v) in enumerate(zip(self.pj.tolist(), values.tolist(), strict=True)):
            change(r, j, v)
        bound = self.h.changeRowBounds
        for r, free in enumerate((log_factor > self.max_log_factor).tolist()):
            bound(r, -highspy.kHighsInf, highspy.kHighsInf if free else 0.0)

    def price(self, w: np.ndarray) -> tuple[float, np.ndarray] | None:
        """Box minimum and minimiser for one objective; None if HiGHS fails."""
        self.h.changeColsCost(self.n, self.cols, w)
        self.h.run()
        if self.h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            return None
        v = np.asarray(self.h.getSolution().col_value)
        return float(self.h.getInfo().objective_function_value), v


def undominated_outputs(loss: np.ndarray, *, rtol: float = 1e-12) -> NDArray[np.intp]:
    """Outputs not dominated by another: ``y`` is dropped when some ``y'`` has
    ``loss[:, y'] <= loss[:, y] + rtol * max|loss|`` for every input (the first of equal ones is kept).

    Moving the mass of a dominated output to its dominator keeps every column of ``P`` in the
    log-Lipschitz cone (a sum of cone members) and raises the expected loss by at most
    ``rtol * max|loss|``, so the LP over the kept outputs has the same optimum up to that.

    Returns
    -------
    int array
        Kept output indices, ascending.
    """
    m = loss.shape[1]
    tol = rtol * max(float(np.abs(loss).max()), 1e-300)
    L = loss.T  # (m, n)
    dominated = np.zeros(m, dtype=bool)
    step = max(1, _BLOCK // max(m * loss.shape[0], 1))
    for lo in range(0, m, step):
        block = L[lo : lo + step]  # candidates y in this block
        le = np.all(L[None, :, :] <= block[:, None, :] + tol, axis=2)  # le[y, y']: y' dominates y
        ge = np.all(block[:, None, :] <= L[None, :, :] + tol, axis=2)
        ys = np.arange(lo, lo + block.shape[0])
        # y' strictly better somewhere, or equal and earlier
        earlier = np.arange(m)[None, :] < ys[:, None]
        dominated[ys] = np.any(le & (~ge | earlier), axis=1)
    if dominated.all():  # only possible through tolerance cycles
        dominated[np.argmin(loss.sum(axis=0))] = False
    return np.nonzero(~dominated)[0]
