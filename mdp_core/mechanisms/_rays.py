"""Ray master (Dantzig-Wolfe) for the LP-optimal mechanism on tree metrics.

On a tree metric (the chain-free pairs form a tree: ordinal chains, 1-D numeric attributes) the
log-Lipschitz cone ``K`` of one output column (:mod:`mdp_core._colgen`) is cut out by the tree edges alone,
and its extreme rays are the vectors with every edge tight, ``v_child = exp(+-eps d) v_parent``. Writing
each output column as a non-negative combination of rays gives the Dantzig-Wolfe master

    min sum_j w_j <c_{y_j}, r_j>   s.t.  sum_j w_j r_j = 1,  w >= 0,

with ``n`` rows only (one per input) and one column per (output ``y_j``, ray ``r_j``). Every ray is in
``K`` exactly, so the mechanism ``P[:, y] = sum_{j : y_j = y} w_j r_j`` needs no privacy row at all. The
exact tree pricing of :func:`mdp_core._colgen.tree_pricing` finds, for every output at once, the ray of least
reduced cost; when none is negative, ``sum u + sum_y min(0, g_y)`` is a lower bound on the LP optimum equal
to the master's objective (to ``m * 2e-10``): the master optimum is the LP optimum.

Plain Dantzig-Wolfe tails off badly from a cold start (chain n = 100, eps 2: 300 rounds, 40 s), so the
master starts from the *tent* rays ``exp(-eps d(., z))`` of every input ``z``, each attached to the outputs
that serve it best (least ``<c_y, tent_z>``). On a chain with equal steps the tents are the columns of the
truncated geometric mechanism, and for any prior and any loss non-decreasing in ``|x - y|`` that mechanism
followed by the Bayesian remap is optimal (Ghosh, Roughgarden and Sundararajan, STOC 2009): the start then
contains an optimum and one pricing round certifies it (measured: chain n = 300 in one round at eps 0.5,
2 and 8). Elsewhere the rounds continue; if they do not converge within a round budget, the caller falls
back to the block master of :class:`mdp_core._colgen.ColumnGeneration`.
"""

from __future__ import annotations

import time

import highspy
import numpy as np

from mdp_core._highs import row_sums_master, run_until
from mdp_core._validation import Progress, report
from mdp_core.mechanisms._colgen import _ADD_TOL, MasterSolution
from mdp_core.mechanisms._pricing import tree_pricing

#: Outputs each tent is attached to at the start (the best ones for it).
_TENT_OUTPUTS = 3


def box_minimum_bound(W: np.ndarray, order: np.ndarray, parent: np.ndarray, step: np.ndarray) -> np.ndarray:
    """Lower bound on ``min {<w, v> : v in K, 0 <= v <= 1}`` for every column ``w`` of W on a tree metric.

    For any node ``r``, ``v_r <= 1`` on the box and ``v / v_r`` has ``r``-value 1, so the box minimum is at
    least ``min(0, g_r)`` with ``g_r`` the tree pricing value rooted at ``r``
    (:func:`mdp_core._colgen.tree_pricing`). All ``g_r`` come from one leaves-first and one root-first pass
    (re-rooting: the edge term is the same in both directions), and the best of them is returned.
    """
    down = W.astype(np.float64, copy=True)  # value of each subtree, rooted at its top node

    def edge(t: np.ndarray, s: float) -> np.ndarray:  # best edge term: neighbour at exp(-s) or exp(s) times
        return np.minimum(np.exp(s) * t, np.exp(-s) * t)

    for node in order[:0:-1]:
        down[parent[node]] += edge(down[node], step[node])
    rooted = np.empty_like(down)  # g_r for every root r
    rooted[order[0]] = down[order[0]]
    for node in order[1:]:
        rest = rooted[parent[node]] - edge(down[node], step[node])  # the parent's side, rooted at the parent
        rooted[node] = down[node] + edge(rest, step[node])
    return np.minimum(rooted.max(axis=0), 0.0)


class RayMaster:
    """Dantzig-Wolfe master over (output, ray) columns with exact tree pricing (module docstring).

    Parameters
    ----------
    prior : array (n,)
    loss : array (n, m)
    d : array (n, n)
        Input metric; a tree metric along ``tree``.
    tree : (order, parent, edge)
        BFS order and parents of the tree (:func:`mdp_core._colgen.tree_order`).

    Attributes
    ----------
    outputs : int array
        Outputs with positive mass in the last solution.
    rows : int
        Privacy rows in the master (always 0: rays are feasible by construction).
    """

    kind = "tree rays"
    rows = 0

    def __init__(self, prior: np.ndarray, loss: np.ndarray, d: np.ndarray, tree: tuple) -> None:
        self.n, self.m = loss.shape
        self.C = prior[:, None] * loss
        self.d = d
        self.order, self.parent, _ = tree
        self.tree_d = np.zeros(self.n)
        kids = self.order[1:]
        self.tree_d[kids] = d[kids, self.parent[kids]]
        self.outputs = np.empty(0, dtype=np.int64)
        # (outputs, ln ray / eps) of the last optimum
        self.shapes: tuple[np.ndarray, np.ndarray] | None = None

    def _master(self) -> highspy.Highs:
        # small_matrix_value: tiny ray entries at large eps are real. Measured on the chain n = 300 (dense
        # 300 x 1,200 start): presolve costs 0.4-1 s and saves nothing; dual simplex 0.3-0.4 s at eps 0.5 / 2
        # / 8, primal once stalled for 6.5 s
        return row_sums_master(self.n, small_matrix_value=1e-12, presolve="off", simplex_strategy=1)

    def _add(self, ys: np.ndarray, V: np.ndarray) -> None:
        """Columns ``V[:, k]`` (rays, max 1) for outputs ``ys[k]``."""
        k, n = ys.size, self.n
        if k == 0:
            return
        cost = np.einsum("xk,xk->k", self.C[:, ys], V)
        starts = np.arange(0, n * k, n, dtype=np.int32)
        index = np.tile(np.arange(n, dtype=np.int32), k)
        self.h.addCols(k, cost, np.zeros(k), np.full(k, highspy.kHighsInf), n * k, starts, index, V.T.ravel())
        self.col_y.append(ys)
        self.col_v.append(V)

    def _start(self, eps: float) -> None:
        tents = np.exp(-eps * self.d)
        # along an eps grid: the previous optimum's rays, rescaled (ln v / eps is 1-Lipschitz, so
        # exp(eps' ln v / eps) is a ray at eps'), and fewer tents
        warm = self.shapes is not None
        best = np.argsort(self.C.T @ tents, axis=0)[: 1 if warm else _TENT_OUTPUTS]  # best outputs per tent
        self.h = self._master()
        self.col_y: list[np.ndarray] = []
        self.col_v: list[np.ndarray] = []
        # the constant column of every output keeps the master feasible
        self._add(np.arange(self.m), np.ones((self.n, self.m)))
        z = np.tile(np.arange(self.n), best.shape[0])
        self._add(best.ravel(), tents[:, z])
        if warm and self.shapes is not None:
            ys, shapes = self.shapes
            V = np.exp(eps * shapes)
            self._add(ys, V / V.max(axis=0))

    def solve(
        self, eps: float, *, time_limit: float, max_rounds: int, progress: Progress = None
    ) -> MasterSolution:
        """Dantzig-Wolfe rounds at ``eps``; same result (and progress) as :meth:`ColumnGeneration.solve`."""
        deadline = time.perf_counter() + time_limit
        self.eps = eps
        self._start(eps)
        self.step = step = eps * self.tree_d
        for rounds in range(1, max_rounds + 1):
            status = run_until(self.h, deadline)
            report(progress, 1 - (deadline - time.perf_counter()) / time_limit, f"round {rounds}")
            if status != highspy.HighsModelStatus.kOptimal:
                return MasterSolution(ok=False, status=self.h.modelStatusToString(status), rounds=rounds)
            sol = self.h.getSolution()
            u = np.asarray(sol.row_dual)
            g, V = tree_pricing(self.C - u[:, None], self.order, self.parent, step)
            top = V.max(axis=0)
            enter = np.nonzero(g / top < -_ADD_TOL)[0]  # reduced cost of the ray scaled into the box
            if enter.size == 0:
                return self._result(np.asarray(sol.col_value), u, rounds)
            if time.perf_counter() > deadline:
                return MasterSolution(ok=False, status="time limit", rounds=rounds)
            self._add(enter, V[:, enter] / top[enter])
        return MasterSolution(ok=False, status="round limit", rounds=max_rounds)

    def _result(self, w: np.ndarray, u: np.ndarray, rounds: int) -> MasterSolution:
        ys = np.concatenate(self.col_y)
        V = np.hstack(self.col_v)
        used = w > 0
        P = np.zeros((self.n, self.m))
        np.add.at(P.T, ys[used], (V[:, used] * w[used]).T)
        self.outputs = np.unique(ys[used])
        with np.errstate(divide="ignore"):
            self.shapes = (ys[used], np.log(V[:, used]) / self.eps)
        lower = u.sum() + box_minimum_bound(self.C - u[:, None], self.order, self.parent, self.step).sum()
        lp_objective = float(self.h.getInfo().objective_function_value)
        if lp_objective - lower > self.m * _ADD_TOL:
            return MasterSolution(ok=False, status="not certified", rounds=rounds)
        return MasterSolution(
            ok=True, status="Optimal", rounds=rounds, Z=P, lp_objective=lp_objective, lower_bound=float(lower)
        )
