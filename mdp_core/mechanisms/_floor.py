"""Floor master for the LP-optimal mechanism on a discrete metric ``d = c 1[x != x']`` (nominal attributes).

On a discrete metric the log-Lipschitz cone of one output column (:mod:`mdp_core.mechanisms._colgen`) is
``K = {v >= 0 : max v <= r min v}`` with ``r = exp(eps c)``, and ``v`` is in ``K`` exactly when some *floor*
``t >= 0`` has ``t <= v_x <= r t`` for every ``x``. Writing ``v = t + s`` the ``n (n - 1)`` privacy rows of a
column become ``n`` rows and one variable:

    min sum_y (t_y sum_x c_y[x] + <c_y, s_y>)
    s.t. sum_y (t_y + s_y[x]) = 1 for every x,   0 <= s_y[x] <= (r - 1) t_y.

Outputs enter by column generation with the closed-form pricing of
:func:`~mdp_core.mechanisms._pricing.nominal_pricing`; when none prices out, ``sum u + sum_y min(0, mu_y)``
over all outputs is a certified lower bound equal to the master's optimum (as in ``_colgen``).

Measured on a 200,000 x 15 table (prediction task, a 40-level nominal group, the OPT profile's LPs): the
pairwise block master took 233 s at eps 2 (40,560 of 62,400 privacy rows, a degenerate simplex) and 44 s at
a warm grid point, which made a sweep run for hours; the floor master 0.1 s at every grid point, with the
same optima.
"""

from __future__ import annotations

import time

import highspy
import numpy as np

from mdp_core._highs import row_sums_master, run_until
from mdp_core._validation import Progress, report
from mdp_core.mechanisms._colgen import _ADD_TOL, MasterSolution
from mdp_core.mechanisms._pricing import nominal_pricing

#: ln 1e13: floors are kept while their one coefficient ``r - 1`` stays well inside HiGHS's 1e15
#: (``large_matrix_value``). Beyond it they are left out, a relaxation the repair makes private. At the
#: pairwise rows' limit (:data:`~mdp_core.mechanisms._pricing.MAX_LOG_FACTOR`, 20.7) 26 of 300 random
#: solves past it ended "Near-optimal" (gaps up to 9.5 %); kept to eps c = 30, 150 of 150 were "Optimal",
#: and their losses lower (review audit).
FLOOR_LOG_LIMIT = 30.0


class FloorMaster:
    """Column generation over outputs with one floor per output (module docstring).

    Parameters
    ----------
    prior : array (n,)
    loss : array (n, m)
    d : array (n, n)
        The discrete metric ``c 1[x != x']``.
    c : float
        Its one off-diagonal distance.

    Attributes
    ----------
    outputs : int array
        Active outputs of the last master.
    rows : int
        Privacy rows in the master (always 0: the floors replace them).
    """

    kind = "nominal floor"
    rows = 0

    def __init__(self, prior: np.ndarray, loss: np.ndarray, d: np.ndarray, c: float) -> None:
        self.n, self.m = loss.shape
        self.C = prior[:, None] * loss
        self.d = d
        self.c = c
        self.outputs = np.empty(0, dtype=np.int64)

    def _add(self, ys: np.ndarray, spread: float) -> None:
        """Blocks for outputs ``ys``: ``s`` (n columns) then the floor ``t``; rows ``s - spread t <= 0``."""
        n, k0, k = self.n, self.outputs.size, ys.size
        cost = np.hstack([self.C[:, ys].T, self.C[:, ys].sum(axis=0)[:, None]]).ravel()
        count = np.tile(np.append(np.ones(n, dtype=np.int64), n), k)  # an s has one entry, a floor n
        starts = np.concatenate([[0], np.cumsum(count)[:-1]]).astype(np.int32)
        index = np.tile(np.concatenate([np.arange(n), np.arange(n)]), k).astype(np.int32)
        cols = k * (n + 1)
        self.h.addCols(
            cols,
            cost,
            np.zeros(cols),
            np.full(cols, highspy.kHighsInf),
            index.size,
            starts,
            index,
            np.ones(index.size),
        )
        self.outputs = np.concatenate([self.outputs, ys])
        if spread == np.inf:  # past the factor limit: the floors are left out (a relaxation the repair fixes)
            return
        first = (n + 1) * np.arange(k0, self.outputs.size)  # first column of each new block
        s_cols = (first[:, None] + np.arange(n)).ravel()
        t_cols = np.repeat(first + n, n)
        count = s_cols.size
        index = np.empty(2 * count, dtype=np.int32)
        index[0::2], index[1::2] = s_cols, t_cols
        value = np.empty(2 * count)
        value[0::2], value[1::2] = 1.0, -spread
        starts = np.arange(0, 2 * count, 2, dtype=np.int32)
        self.h.addRows(
            count, np.full(count, -highspy.kHighsInf), np.zeros(count), 2 * count, starts, index, value
        )

    def solve(
        self,
        eps: float,
        start: np.ndarray,
        *,
        time_limit: float,
        max_rounds: int,
        progress: Progress = None,
    ) -> MasterSolution:
        """Column generation at ``eps`` from the outputs ``start``; same result (and progress) as
        :meth:`~mdp_core.mechanisms._colgen.ColumnGeneration.solve`."""
        deadline = time.perf_counter() + time_limit
        ratio = float(np.exp(eps * self.c))
        spread = ratio - 1.0 if eps * self.c <= FLOOR_LOG_LIMIT else np.inf
        self.h = row_sums_master(self.n)
        self.outputs = np.empty(0, dtype=np.int64)
        self._add(np.unique(start), spread)
        for rounds in range(1, max_rounds + 1):
            status = run_until(self.h, deadline)
            report(progress, 1 - (deadline - time.perf_counter()) / time_limit, f"round {rounds}")
            if status != highspy.HighsModelStatus.kOptimal:
                return MasterSolution(ok=False, status=self.h.modelStatusToString(status), rounds=rounds)
            sol = self.h.getSolution()
            u = np.asarray(sol.row_dual)[: self.n]
            mu = np.minimum(nominal_pricing(self.C - u[:, None], ratio)[0], 0.0)
            inactive = np.ones(self.m, dtype=bool)
            inactive[self.outputs] = False
            enter = np.nonzero(inactive & (mu < -_ADD_TOL))[0]
            if enter.size == 0:
                return self._result(np.asarray(sol.col_value), rounds, float(u.sum() + mu.sum()))
            if time.perf_counter() > deadline:
                return MasterSolution(ok=False, status="time limit", rounds=rounds)
            self._add(enter, spread)
        return MasterSolution(ok=False, status="round limit", rounds=max_rounds)

    def _result(self, w: np.ndarray, rounds: int, lower: float) -> MasterSolution:
        blocks = w.reshape(-1, self.n + 1)  # per output: s (n values), then t
        Z = np.zeros((self.n, self.m))
        Z[:, self.outputs] = np.maximum(blocks[:, : self.n] + blocks[:, self.n :], 0.0).T  # HiGHS's -1e-12s
        used = Z.max(axis=0) > 0
        self.outputs = np.nonzero(used)[0]
        return MasterSolution(
            ok=True,
            status="Optimal",
            rounds=rounds,
            Z=Z,
            lp_objective=float(self.h.getInfo().objective_function_value),
            lower_bound=lower,
        )
