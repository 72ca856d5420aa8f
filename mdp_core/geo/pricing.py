"""Certificates for outputs left out of the geo LP: one small LP per output (column pricing).

At the optimum of the city's geo LP most outputs carry next to no mass (depth 1, eps 1 / km: 66 of 117
columns below 1e-4 everywhere), yet every interior-point iteration inverts one n x n block per output.
So the exact optimum may solve the LP on the outputs it uses only (:mod:`mdp_core.geo.optimal`). Its
solution stays a mechanism (left-out columns are 0: no pair to protect there), but its multipliers only
certify the restricted problem. They certify the whole one once every left-out output z also gets
multipliers ``nu_z >= 0`` of its own rows with

    (c + G'nu)[x, z] >= floor[x] = min_{y in the LP} (c + G'nu)[x, y]       for every target x,

for then ``sum_x min_y (c + G'nu)[x, y]`` over ALL outputs is the restricted certificate
(:func:`~mdp_core.geo.bounds.certified_bound`, weak duality). Such ``nu_z`` is the dual of the pricing LP

    min (c_z - floor)'k   s.t.  k[a] <= r_ab k[b] (the rows of z),   sum k <= 1,   k >= 0,

whose value is 0 exactly when they exist, and negative when giving z mass would lower the objective (the
output must enter the LP). HiGHS dual simplex solves each (n variables, a few thousand rows: 0.12 s at
406 targets) on all cores; its multipliers, whatever their accuracy, go through ``certified_bound``, so
they only cost tightness, never validity. :class:`OutputSet` is the bookkeeping: which outputs are in the
LP (in the order of its columns), the rows of the others, and which of them the last pricing wants back.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

import highspy
import numpy as np
import scipy.sparse as sp

from mdp_core._highs import highs_model
from mdp_core.errors import DataError
from mdp_core.geo._lapack import worker_count
from mdp_core.geo.bounds import _reduced_costs, certified_bound
from mdp_core.geo.ipm import GeoLPSolution

__all__ = ["OutputSet", "column_of", "price_outputs"]


def price_outputs(
    cost: np.ndarray, rows: np.ndarray, ratios: np.ndarray, nu: np.ndarray, outputs: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Multipliers for the rows of the left-out ``outputs`` against the floor the other outputs set (module
    docstring).

    Parameters
    ----------
    cost : ndarray, shape (n, m)
        ``c[x, y] = pi(x) L(x, y)``.
    rows : ndarray of int, shape (r, 3)
        Privacy rows (a, b, y) of all outputs, those of the left-out ones included.
    ratios : ndarray, shape (r,)
        ``exp(eps d(a, b))`` per row.
    nu : ndarray, shape (r,)
        Multipliers of the rows of the outputs in the LP (those of the left-out outputs are ignored).
    outputs : ndarray of int, shape (k,)
        The left-out outputs, ``0 < k < m``.

    Returns
    -------
    nu : ndarray, shape (r,)
        ``nu`` with the left-out outputs' rows priced (``>= 0``).
    values : ndarray, shape (k,)
        The pricing LPs' optima (``<= 0``; below 0 where the output should enter the LP).
    """
    outputs = np.asarray(outputs, dtype=np.int64)
    left = np.isin(rows[:, 2], outputs)
    nu = np.where(left, 0.0, np.maximum(nu, 0.0))
    floor = np.delete(_reduced_costs(cost, rows, ratios, nu), outputs, axis=1).min(axis=1)
    mine = [np.flatnonzero(left & (rows[:, 2] == z)) for z in outputs]

    def price(k: int) -> tuple[np.ndarray, float]:
        index = mine[k]
        return _pricing_lp(cost[:, outputs[k]] - floor, rows[index, 0], rows[index, 1], ratios[index])

    with ThreadPoolExecutor(worker_count()) as pool:
        results = list(pool.map(price, range(len(outputs))))
    for index, (duals, _) in zip(mine, results, strict=True):
        nu[index] = duals
    return nu, np.array([value for _, value in results])


def _pricing_lp(c: np.ndarray, a: np.ndarray, b: np.ndarray, ratios: np.ndarray) -> tuple[np.ndarray, float]:
    """``min c'k s.t. k[a] - r k[b] <= 0, sum k <= 1, k >= 0``: (the rows' multipliers ``>= 0``, value)."""
    n, r = len(c), len(a)
    matrix = sp.csr_matrix(
        (
            np.concatenate([np.ones(r), -ratios, np.ones(n)]),
            (
                np.concatenate([np.arange(r), np.arange(r), np.full(n, r)]),
                np.concatenate([a, b, np.arange(n)]),
            ),
        ),
        shape=(r + 1, n),
    )
    upper = np.zeros(r + 1)
    upper[r] = 1.0
    h = highs_model(matrix, np.full(r + 1, -highspy.kHighsInf), upper, c, solver="simplex", threads=1)
    h.run()
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return np.zeros(r), float("-inf")  # no multipliers: the bound then takes c_z itself
    duals = -np.asarray(h.getSolution().row_dual)[:r]  # HiGHS: <= rows of a minimisation have duals <= 0
    return np.maximum(duals, 0.0), float(h.getInfo().objective_function_value)


@dataclass
class OutputSet:
    """The outputs in a geo LP, in the order of its columns (``active``), the rows of those left out
    (``left_rows``: they only price them) and those the last pricing wants back (``entering``)."""

    m: int
    active: np.ndarray
    left_rows: np.ndarray
    entering: np.ndarray

    @classmethod
    def every(cls, m: int) -> OutputSet:
        return cls(m, np.arange(m), np.empty((0, 3), dtype=np.int64), np.empty(0, dtype=np.int64))

    def start_with(self, rows: np.ndarray, outputs: np.ndarray) -> np.ndarray:
        """Only ``outputs`` in the LP: returns their rows; those of the others go to pricing."""
        active = np.unique(np.asarray(outputs, dtype=np.int64))
        if len(active) < 2 or active[0] < 0 or active[-1] >= self.m:
            raise DataError(f"outputs must hold at least two of the {self.m} output indices")
        self.active = active
        mine = np.isin(rows[:, 2], active)
        self.left_rows = rows[~mine]
        return rows[mine]

    def leave_out(
        self, rows: np.ndarray, sol: GeoLPSolution, below: float
    ) -> tuple[np.ndarray, GeoLPSolution]:
        """Leave out the outputs that ``sol`` (the LP's solution on the first ``len(sol.nu)`` of ``rows``)
        gives less than ``below`` anywhere: the rows and solution of the LP without them."""
        used = sol.p.max(axis=0) >= below
        if used.sum() < 2 or used.all():
            return rows, sol
        self.active = self.active[used]
        mine = np.isin(rows[:, 2], self.active)
        self.left_rows = np.concatenate([self.left_rows, rows[~mine]])
        return rows[mine], replace(sol, p=sol.p[:, used], nu=sol.nu[mine[: len(sol.nu)]])

    def enter(self, rows: np.ndarray, sol: GeoLPSolution) -> tuple[np.ndarray, GeoLPSolution]:
        """Bring the ``entering`` outputs back, with their rows (after those of ``sol``, which a warm start
        needs first) and zero columns."""
        if len(self.entering) == 0:
            return rows, sol
        back = np.isin(self.left_rows[:, 2], self.entering)
        rows = np.concatenate([rows, self.left_rows[back]])
        self.left_rows = self.left_rows[~back]
        p = np.concatenate([sol.p, np.zeros((len(sol.p), len(self.entering)))], axis=1)
        self.active = np.concatenate([self.active, self.entering])
        self.entering = np.empty(0, dtype=np.int64)
        return rows, replace(sol, p=p)

    def position(self) -> np.ndarray:
        """Each output's column in the LP (-1 when left out)."""
        return column_of(self.active, self.m)

    def positions(self, rows: np.ndarray) -> np.ndarray:
        """``rows`` with each output replaced by its column in the LP."""
        return np.column_stack([rows[:, :2], self.position()[rows[:, 2]]])

    def expand(self, p: np.ndarray) -> np.ndarray:
        """An LP solution as a mechanism over all outputs (left-out columns 0)."""
        out = np.zeros((len(p), self.m))
        out[:, self.active] = p
        return out

    def certificate(
        self,
        cost: np.ndarray,
        rows: np.ndarray,
        ratios: np.ndarray,
        left_ratios: np.ndarray,
        sol: GeoLPSolution,
        enter_below: float,
    ) -> float:
        """The bound that ``sol``'s multipliers (of ``rows``), with those pricing the left-out outputs,
        certify for ALL outputs; the outputs whose pricing is below ``-enter_below`` times the objective
        become ``entering``."""
        if len(self.active) == self.m:  # nothing left out
            return certified_bound(cost, rows, ratios, sol.nu)
        every = np.concatenate([rows, self.left_rows])
        every_ratios = np.concatenate([ratios, left_ratios])
        left = np.setdiff1d(np.arange(self.m), self.active)
        nu = np.concatenate([sol.nu, np.zeros(len(self.left_rows))])
        nu, values = price_outputs(cost, every, every_ratios, nu, left)
        self.entering = left[values < -enter_below * abs(sol.objective)]
        return certified_bound(cost, every, every_ratios, nu)


def column_of(outputs: np.ndarray, m: int) -> np.ndarray:
    """Each of the ``m`` outputs' column in an LP over ``outputs`` in that order (-1 when not in it)."""
    position = np.full(m, -1)
    position[outputs] = np.arange(len(outputs))
    return position
