"""Column generation over outputs for the LP-optimal mechanism of 000 Definition 3, Eq. 3.

Apart from the row sums ``sum_y P[x, y] = 1`` the LP separates by output column: every column
``P[:, y]`` lies in the log-Lipschitz cone

    K = {v >= 0 : v_x <= exp(eps d(x, x')) v_x'  for all x, x'},

which only depends on ``d`` and ``eps`` (not on ``y``); the chain-free pairs of
:func:`~mdp_core.mechanisms.lp.chain_free_pairs` already cut it out. So the LP is

    min sum_y <c_y, v_y>   s.t.  sum_y v_y = 1,  v_y in K,        c_y[x] = prior[x] loss[x, y].

The *master* is this LP restricted to an active set ``Y'`` of outputs (all ``n`` variables of each; its
privacy rows generated on demand, the violated ones added until none is left); outputs outside ``Y'`` are
zero. Its duals ``u`` of the row sums price every inactive output by

    mu_y = min { <c_y - u, v> : v in K, v <= 1 }       (the box only bounds the cone; mu_y <= 0),

and outputs with ``mu_y < 0`` enter. When none does, the master optimum is optimal for the full LP: for
any ``u``, ``sum_x u_x + sum_y mu_y`` is a lower bound on the LP optimum (Lagrangian relaxation of the row
sums, valid as ``P[x, y] <= 1``; active outputs contribute ``mu_y = 0`` by the master's optimality), so
the gap is at most ``m * 2e-10`` and is reported as ``lower_bound``.

Exact pricing:

* tree metrics (the chain-free pairs form a tree; ordinal chains, 1-D numeric): ``K`` is cut out by the
  tree edges alone. With ``v_root = 1`` (no loss: every non-zero ``v`` in ``K`` is positive everywhere
  and ``K`` is a cone), ``g(p) = w_p + sum_children min(exp(-eps d) g(c), exp(eps d) g(c))`` computed
  leaves-first gives ``min <w, v> = g(root)`` (for fixed ``v_p`` the subtree minimum is linear in
  ``v_p``, so each child sits at an end of its interval ``[exp(-eps d) v_p, exp(eps d) v_p]``); and
  ``mu >= min(0, g(root))`` since ``v_root <= 1`` on the box. O(n m) for all outputs.
* the discrete metric ``d = c 1[x != x']``: ``K = {max v <= exp(eps c) min v}``, and the box minimum is
  ``sum_x w_x (1 if w_x < 0 else exp(-eps c))`` (or 0). O(n m).
* any other metric: the tents ``exp(-eps d(., z))`` (in ``K`` by the triangle inequality) screen all
  outputs with one matrix product (a negative tent value is an upper bound on ``mu_y``: the output
  enters); only when no tent prices out is the per-output pricing LP (``n`` variables, one row per
  chain-free ordered pair, the box as bounds) solved with HiGHS for every inactive output, its objective
  changed in place so that primal simplex restarts from the previous basis.

Along an ascending eps grid, :func:`~mdp_core.mechanisms.lp.optimal_mechanisms` seeds each grid point's master
with the previous optimum's outputs, the rows binding there and its basis
(:meth:`ColumnGeneration.warm_start`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import highspy
import numpy as np

from mdp_core._highs import row_sums_master, run_until
from mdp_core._validation import Progress, report
from mdp_core.mechanisms._pricing import (
    MAX_LOG_FACTOR,
    _LPPricer,
    discrete_step,
    nominal_pricing,
    tree_order,
    tree_pricing,
)


@dataclass(frozen=True, eq=False)
class MasterSolution:
    """Outcome of one master solve (block or ray master) at one eps.

    ``Z`` is the raw (|X|, |Y'|) solution over the undominated outputs, ``lp_objective`` the master's optimum
    and ``lower_bound`` the certified Lagrangian bound on the full LP; all three are only set when ``ok``.
    """

    ok: bool
    status: str
    rounds: int
    Z: np.ndarray | None = None
    lp_objective: float = float("nan")
    lower_bound: float = float("nan")


@dataclass(frozen=True, eq=False)
class WarmStart:
    """A block master's optimum as a start for a nearby eps (see :meth:`ColumnGeneration.warm_start`).

    ``cols`` (n, m) and ``rows`` (ordered pair, output) hold HiGHS basis statuses, -1 where absent;
    ``sums`` the statuses of the row sums.
    """

    outputs: np.ndarray
    cols: np.ndarray
    sums: np.ndarray
    rows: np.ndarray


#: An output enters the master when its pricing value ``mu_y`` is below ``-_ADD_TOL``.
_ADD_TOL = 2e-10
_MASTER_DUAL_TOL = 1e-10
_DUAL, _PRIMAL = 1, 4  # HiGHS simplex_strategy: after adding rows / after adding columns
#: Primal iterations after outputs enter before a general master restarts from its basis with the dual:
#: runs take up to ~11,000; a nominal x near-copy binary group stalled 253,831 (92 s; the dual: 0.35 s).
_PRIMAL_ITERATIONS = 10_000
_SHARE_ROWS = False
_CUTS_PER_INPUT = 1_000_000  # all violated rows (measured: fewer rounds than 1 or 4 per input)
# a privacy row is "violated" when z[x,y] - e^(eps d) z[x',y] > _ROW_ATOL (absolute, like HiGHS's own row
# tolerance; a relative test carried 61k instead of 42k rows on the l2 grid n = 100, eps = 2, for the same
# optimum: ratios of tiny entries are the repair step's job, which is verified)
_ROW_ATOL = 1e-10


class ColumnGeneration:
    """Restricted master over an active set of outputs, with row generation, plus exact pricing.

    The master is the LP restricted to the active outputs ``Y'`` (all ``n`` variables of each, the
    privacy rows of its chain-free pairs generated on demand); the outputs outside ``Y'`` are zero. After
    the master is optimal and violates no chain-free row, the duals ``u`` of the row sums price every
    inactive output (module docstring); outputs with ``mu_y < 0`` enter. When none does, the master
    optimum is the optimum of the full LP. Reusable along an ascending eps grid (coefficients changed in
    place, basis kept).

    Parameters
    ----------
    prior : array (n,)
    loss : array (n, m)
    d : array (n, n)
        Input metric.
    a, b : int arrays
        Chain-free pairs of ``d`` (:func:`~mdp_core.mechanisms.lp.chain_free_pairs`).
    start : int array
        Outputs active from the start.
    warm : WarmStart, optional
        :meth:`warm_start` of a solve at a nearby eps: its outputs join ``start``, its binding privacy
        rows are put in the master, and its optimal basis (restricted to those rows) starts the simplex.
    max_log_factor : float
        Privacy rows with ``eps d`` above it are left out of master and pricing (a relaxation:
        :data:`~mdp_core.mechanisms._pricing.MAX_LOG_FACTOR`).
    first_solver : {"choose", "ipm"}
        HiGHS ``solver`` of the first master solve of a cold start (``"choose"``: HiGHS's default, simplex);
        later ones are simplex from the previous basis (IPM ends with a crossover basis). The seed LP's grid
        (156 seeds, 574 rows per output) measured its first master 2x faster by IPM (0.4 vs 0.9 s; 3.6 vs
        6.7 s at 48 outputs).
    """

    def __init__(
        self,
        prior: np.ndarray,
        loss: np.ndarray,
        d: np.ndarray,
        a: np.ndarray,
        b: np.ndarray,
        start: np.ndarray,
        warm: WarmStart | None = None,
        max_log_factor: float = MAX_LOG_FACTOR,
        first_solver: str = "choose",
    ) -> None:
        self.n, self.m = loss.shape
        self.first_solver = "choose" if warm is not None else first_solver
        self.max_log_factor = max_log_factor
        n = self.n
        self.C = prior[:, None] * loss
        self.d = d
        self.eps = float("nan")
        self.kind = "general"
        self.tree = tree_order(n, a, b)
        if self.tree is not None:
            self.kind = "tree"
            order, parent, _ = self.tree
            self.tree_d = np.zeros(n)
            self.tree_d[order[1:]] = d[order[1:], parent[order[1:]]]
        elif (step := discrete_step(d)) is not None:
            self.kind = "nominal"
            self.nominal_c = step
        self.pricer = _LPPricer(d, a, b, max_log_factor) if self.kind == "general" else None
        # ordered chain-free pairs (i -> j): row z[i, y] - exp(eps d_ij) z[j, y] <= 0
        self.pi = np.concatenate([a, b])
        self.pj = np.concatenate([b, a])
        self.pd = d[self.pi, self.pj]
        self.enforced = np.ones(self.pi.size, dtype=bool)  # rows within the factor limit (set_eps)
        near = np.full(n, np.inf)
        np.minimum.at(near, self.pi, self.pd)
        self.near_pairs = np.nonzero(self.pd <= near[self.pi] * (1 + 1e-9))[0]
        half = a.size
        self.near_pairs = np.union1d(self.near_pairs, (self.near_pairs + half) % (2 * half))
        self.all_rows = self.kind != "general"
        self.block_of = np.full(self.m, -1, dtype=np.int64)  # output -> master block
        self.outputs = np.empty(0, dtype=np.int64)  # block -> output
        self.in_model = np.zeros((self.pi.size, 0), dtype=bool)
        self.row_pair = np.empty(0, dtype=np.int64)
        self.row_block = np.empty(0, dtype=np.int64)
        self.h = row_sums_master(n, dual_feasibility_tolerance=_MASTER_DUAL_TOL)
        self.warm = warm
        self.start = np.unique(start if warm is None else np.concatenate([start, warm.outputs]))
        self.lp_rounds = 0
        # per master solve: (simplex strategy, seconds, privacy rows, active outputs, simplex iterations)
        self.log: list[tuple] = []

    def warm_start(self) -> WarmStart | None:
        """The master's optimum as a start for a nearby eps: outputs, and the basis status of every
        variable (array (n, m), -1 where absent), of the row sums, and of the binding privacy rows (array
        (ordered pair, output), -1 elsewhere). Only binding rows are kept (seeding with every generated
        row measured 7.3 s vs 6.1 s for a 20-point sweep on the l2 grid n = 49); dropping rows whose slack
        is basic keeps the basis square, so it remains a valid start. None when HiGHS holds no basis of
        the current model's size (seen after a solve HiGHS finished without simplex): the next grid point
        then starts cold, which only costs time."""
        basis = self.h.getBasis()
        col = np.array([int(v) for v in basis.col_status], dtype=np.int8)
        row = np.array([int(v) for v in basis.row_status], dtype=np.int8)
        if not basis.valid or col.size != self.n * self.outputs.size or row.size != self.n + self.rows:
            return None
        cols = np.full((self.n, self.m), -1, dtype=np.int8)
        cols[:, self.outputs] = col.reshape(-1, self.n).T
        rows = np.full((self.pi.size, self.m), -1, dtype=np.int8)
        tight = row[self.n :] != int(highspy.HighsBasisStatus.kBasic)
        rows[self.row_pair[tight], self.outputs[self.row_block[tight]]] = row[self.n :][tight]
        return WarmStart(outputs=self.outputs.copy(), cols=cols, sums=row[: self.n], rows=rows)

    def _set_warm_basis(self) -> None:
        """Start the simplex from the warm basis (new variables at zero, new rows' slacks basic)."""
        warm = self.warm
        assert warm is not None
        col = warm.cols[:, self.outputs].T.ravel()
        col = np.where(col < 0, int(highspy.HighsBasisStatus.kLower), col)
        row = warm.rows[self.row_pair, self.outputs[self.row_block]]
        row = np.where(row < 0, int(highspy.HighsBasisStatus.kBasic), row)
        basis = highspy.HighsBasis()
        basis.col_status = [highspy.HighsBasisStatus(int(v)) for v in col]
        basis.row_status = [highspy.HighsBasisStatus(int(v)) for v in np.concatenate([warm.sums, row])]
        basis.valid = True
        self.h.setBasis(basis)  # an unusable basis is rejected by HiGHS, which then starts cold

    @property
    def rows(self) -> int:
        """Privacy rows in the master."""
        return int(self.row_pair.size)

    # -- master ---------------------------------------------------------------------------------------
    def add_outputs(self, ys: np.ndarray) -> None:
        """Activate outputs ``ys``: their ``n`` variables each, and their initial privacy rows."""
        ys = ys[self.block_of[ys] < 0]
        if ys.size == 0:
            return
        n, k0, k = self.n, self.outputs.size, ys.size
        self.block_of[ys] = np.arange(k0, k0 + k)
        self.outputs = np.concatenate([self.outputs, ys])
        self.in_model = np.hstack([self.in_model, np.zeros((self.pi.size, k), dtype=bool)])
        nv = n * k
        self.h.addCols(
            nv,
            self.C[:, ys].T.ravel(),
            np.zeros(nv),
            np.ones(nv),
            nv,
            np.arange(nv, dtype=np.int32),
            np.tile(np.arange(n, dtype=np.int32), k),
            np.ones(nv),
        )
        if self.all_rows:
            pairs = np.arange(self.pi.size)
        elif _SHARE_ROWS and k0:  # rows other outputs needed are likely needed here too
            pairs = np.union1d(self.near_pairs, np.nonzero(self.in_model[:, :k0].any(axis=1))[0])
        else:
            pairs = self.near_pairs
        blocks = np.arange(k0, k0 + k)
        self.add_rows(np.tile(pairs, k), np.repeat(blocks, pairs.size))

    def add_rows(self, pairs: np.ndarray, blocks: np.ndarray) -> None:
        """Put the privacy rows of ``pairs`` x ``blocks`` in the master (those past ``max_log_factor``
        never)."""
        keep = self.enforced[pairs]
        pairs, blocks = pairs[keep], blocks[keep]
        if pairs.size == 0:
            return
        n, count = self.n, pairs.size
        index = np.empty(2 * count, dtype=np.int32)
        index[0::2] = blocks * n + self.pi[pairs]
        index[1::2] = blocks * n + self.pj[pairs]
        value = np.empty(2 * count)
        value[0::2] = 1.0
        value[1::2] = -np.exp(self.eps * self.pd[pairs])
        starts = np.arange(0, 2 * count, 2, dtype=np.int32)
        self.h.addRows(
            count, np.full(count, -highspy.kHighsInf), np.zeros(count), 2 * count, starts, index, value
        )
        self.in_model[pairs, blocks] = True
        self.row_pair = np.concatenate([self.row_pair, pairs])
        self.row_block = np.concatenate([self.row_block, blocks])

    def set_eps(self, eps: float) -> None:
        """Change every privacy coefficient ``-exp(eps d)`` in place (keeps the basis)."""
        if eps == self.eps:
            return
        self.eps = eps
        self.enforced = eps * self.pd <= self.max_log_factor
        if self.pricer is not None:
            self.pricer.set_eps(eps)
        self.tents = np.exp(-eps * self.d)  # column z: the tent at z, peak 1
        if self.outputs.size == 0:
            self.add_outputs(self.start)
            if self.warm is not None:
                if not self.all_rows:
                    extra = (self.warm.rows[:, self.outputs] >= 0) & ~self.in_model
                    self.add_rows(*np.nonzero(extra))
                self._set_warm_basis()
            return
        cols = (self.row_block * self.n + self.pj[self.row_pair]).tolist()
        vals = (-np.exp(np.minimum(eps * self.pd[self.row_pair], self.max_log_factor))).tolist()
        change = self.h.changeCoeff
        for r, c, v in zip(range(self.n, self.n + len(cols)), cols, vals, strict=True):
            change(r, c, v)
        freed = np.nonzero(~self.enforced[self.row_pair])[0]  # past the limit at this larger eps: left out
        for r in (self.n + freed).tolist():
            self.h.changeRowBounds(r, -highspy.kHighsInf, highspy.kHighsInf)

    def violated(self, Z: np.ndarray, per_input: int = _CUTS_PER_INPUT) -> tuple[np.ndarray, np.ndarray]:
        """Chain-free rows (pair, block) not in the master that ``Z`` violates: per input and block the
        ``per_input`` most violated ones (later rounds find the others if they are still violated)."""
        viol = Z[self.pi] - np.exp(self.eps * self.pd)[:, None] * Z[self.pj]
        viol[self.in_model | ~self.enforced[:, None]] = 0.0
        pairs, blocks = np.nonzero(viol > _ROW_ATOL)
        if pairs.size == 0:
            return pairs, blocks
        key = self.pi[pairs] * Z.shape[1] + blocks
        order = np.lexsort((-viol[pairs, blocks], key))
        sorted_key = key[order]
        group_start = np.r_[0, np.nonzero(sorted_key[1:] != sorted_key[:-1])[0] + 1]
        rank = np.arange(order.size) - np.repeat(group_start, np.diff(np.r_[group_start, order.size]))
        keep = order[rank < per_input]
        return pairs[keep], blocks[keep]

    # -- pricing --------------------------------------------------------------------------------------
    def active_bound(self, u: np.ndarray) -> float:
        """The active outputs' share of the Lagrangian bound (0 if the master's duals are optimal). Priced
        where pricing is closed-form (tree, discrete metric): at eps 20 on a nominal attribute HiGHS
        called a master optimal 3.6e6 times above the optimum, and assuming 0 certified it (audit)."""
        if self.kind not in ("tree", "nominal"):
            return 0.0
        active = np.nonzero(self.block_of >= 0)[0]
        return float(self.price(self.C[:, active] - u[:, None], np.inf)[0].sum())

    def price(self, W: np.ndarray, deadline: float) -> tuple[np.ndarray, bool]:
        """Pricing values ``mu`` (``-inf`` where not computed) for the columns of ``W``; True if exact."""
        if self.kind == "tree" and self.tree is not None:
            order, parent, _ = self.tree
            g, _ = tree_pricing(W, order, parent, self.eps * self.tree_d)
            return np.minimum(g, 0.0), True
        if self.kind == "nominal":
            mu, _ = nominal_pricing(W, np.exp(self.eps * self.nominal_c))
            return np.minimum(mu, 0.0), True
        rc = (W.T @ self.tents).min(axis=1)  # best tent per output: an upper bound on mu
        if np.any(rc < -_ADD_TOL):
            return np.where(rc < -_ADD_TOL, rc, 0.0), False
        assert self.pricer is not None  # general metrics always carry a pricing LP
        self.lp_rounds += 1
        mu = np.zeros(W.shape[1])
        for y in range(W.shape[1]):
            if time.perf_counter() > deadline:
                return np.full(W.shape[1], -np.inf), False
            res = self.pricer.price(W[:, y])
            if res is None:
                raise RuntimeError("pricing LP failed")
            mu[y] = min(res[0], 0.0)
        return mu, True

    def solve(
        self,
        eps: float,
        *,
        time_limit: float,
        max_rounds: int,
        max_enter: int = 0,
        progress: Progress = None,
    ) -> MasterSolution:
        """Row and column generation at ``eps`` from the current master; returns the raw solution.

        ``progress(fraction of time_limit used, message)`` is called after every master solve (a stop
        raised by it ends the solve there)."""
        deadline = time.perf_counter() + time_limit
        self.set_eps(eps)
        rounds = 0
        # general metrics: a few outputs per pricing round (each brings thousands of rows to generate into
        # a degenerate master). Measured after dropping dominated outputs, l2 grid n = 100 at eps 2 / 8:
        # 1.6 / 4.7 s with one per round, 0.95 / 3.1 s with four, 1.4 / 3.7 s with all; with the squared
        # distance as loss (100 undominated outputs) at eps 2: 25 s with one, 12 s with four.
        # Tree / nominal metrics carry all their rows from the start and take many outputs at once.
        if not max_enter:
            max_enter = 4 if self.kind == "general" else max(8, self.n // 4)
        # every row is present from the start on tree / nominal metrics: only columns ever enter
        strategy = _PRIMAL if self.all_rows else _DUAL
        while True:
            if time.perf_counter() >= deadline:
                return MasterSolution(ok=False, status="time limit", rounds=rounds)
            if rounds >= max_rounds:
                return MasterSolution(ok=False, status="round limit", rounds=rounds)
            self.h.setOptionValue("simplex_strategy", strategy)
            self.h.setOptionValue("solver", "choose" if self.log else self.first_solver)
            t0 = time.perf_counter()
            guarded = strategy == _PRIMAL and not self.all_rows
            limit = _PRIMAL_ITERATIONS if guarded else None
            status = run_until(self.h, deadline, max_primal_iterations=limit)
            self.h.setOptionValue("solver", "choose")
            iterations = self.h.getInfo().simplex_iteration_count
            self.log.append((strategy, time.perf_counter() - t0, self.rows, self.outputs.size, iterations))
            rounds += 1
            report(
                progress,
                1 - (deadline - time.perf_counter()) / time_limit,
                f"round {rounds}: {self.outputs.size} outputs, {self.rows:,} privacy rows",
            )
            if status != highspy.HighsModelStatus.kOptimal and time.perf_counter() < deadline:
                self.h.clearSolver()  # numerical trouble from a warm basis: one cold retry
                self.h.setOptionValue("simplex_strategy", 0)
                status = run_until(self.h, deadline)
            if status != highspy.HighsModelStatus.kOptimal:
                return MasterSolution(ok=False, status=self.h.modelStatusToString(status), rounds=rounds)
            sol = self.h.getSolution()
            Z = np.asarray(sol.col_value).reshape(-1, self.n).T  # (n, blocks)
            pairs, blocks = self.violated(Z)
            if pairs.size:
                self.add_rows(pairs, blocks)
                strategy = _DUAL
                continue
            u = np.asarray(sol.row_dual)[: self.n]
            inactive = np.nonzero(self.block_of < 0)[0]
            try:
                mu, exact = self.price(self.C[:, inactive] - u[:, None], deadline)
            except RuntimeError as exc:
                return MasterSolution(ok=False, status=str(exc), rounds=rounds)
            enter = np.nonzero(mu < -_ADD_TOL)[0]
            if enter.size:
                enter = enter[np.argsort(mu[enter])[:max_enter]]
                self.add_outputs(inactive[enter])
                strategy = _PRIMAL
                continue
            if not exact:
                return MasterSolution(ok=False, status="time limit", rounds=rounds)
            P = np.zeros((self.n, self.m))
            P[:, self.outputs] = Z
            return MasterSolution(
                ok=True,
                status="Optimal",
                rounds=rounds,
                Z=P,
                lp_objective=float(self.h.getInfo().objective_function_value),
                lower_bound=float(u.sum() + mu.sum() + self.active_bound(u)),
            )
