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
they only cost tightness, never validity.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import highspy
import numpy as np
import scipy.sparse as sp

from mdp_core.geo._lapack import worker_count
from mdp_core.geo.seed_lp import _highs

__all__ = ["price_outputs"]


def price_outputs(
    cost: np.ndarray, rows: np.ndarray, ratios: np.ndarray, nu: np.ndarray, outputs: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Multipliers for the rows of the left-out ``outputs`` against the floor the others' set (module
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
    reduced = cost.copy()
    np.add.at(reduced, (rows[:, 0], rows[:, 2]), nu)
    np.add.at(reduced, (rows[:, 1], rows[:, 2]), -ratios * nu)
    floor = np.delete(reduced, outputs, axis=1).min(axis=1)
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
    h = _highs(matrix, np.full(r + 1, -highspy.kHighsInf), upper, c, solver="simplex", threads=1)
    h.run()
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return np.zeros(r), float("-inf")  # no multipliers: the bound then takes c_z itself
    duals = -np.asarray(h.getSolution().row_dual)[:r]  # HiGHS: <= rows of a minimisation have duals <= 0
    return np.maximum(duals, 0.0), float(h.getInfo().objective_function_value)
