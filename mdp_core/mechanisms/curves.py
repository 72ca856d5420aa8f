"""Loss-budget curves: expected loss versus eps for EM, EM + remap and the LP optimum (000 Sec. III-D)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mdp_core._validation import (
    Progress,
    as_float_array,
    check_distance_matrix,
    check_loss_matrix,
    check_prior,
    report,
)
from mdp_core.errors import DataError
from mdp_core.mechanisms.finite import bayesian_remap, expected_loss, exponential_mechanism
from mdp_core.mechanisms.lp import optimal_mechanisms

__all__ = ["METHODS", "loss_budget_curves"]


#: Methods understood by :func:`loss_budget_curves`.
METHODS = ("EM", "EM+remap", "OPT")


def loss_budget_curves(
    prior: object,
    loss: object,
    dist_in: object,
    eps_grid: Sequence[float] | np.ndarray,
    *,
    methods: Sequence[str] = METHODS,
    progress: Progress = None,
    time_limit: float = 600.0,
) -> dict[str, np.ndarray]:
    """Expected loss versus eps for EM, EM + Bayesian remapping and the LP optimum (000 Sec. III-D profiles).

    EM uses ``dist_in`` between inputs and outputs, so ``loss`` must be square (outputs = inputs).

    Parameters
    ----------
    prior : array (n,)
        Prior over inputs.
    loss : array (n, n)
        Task loss.
    dist_in : array (n, n)
        Input metric.
    eps_grid : sequence of float
        Ascending budgets > 0.
    methods : sequence of str
        Subset of ``("EM", "EM+remap", "OPT")``.
    progress : callable, optional
        ``progress(fraction, message)``.
    time_limit : float
        Seconds for all OPT solves together (each grid point gets an equal share; a point whose LP does not
        finish in its share is NaN).

    Returns
    -------
    dict
        ``method -> ndarray (len(eps_grid),)`` of expected losses (NaN where OPT failed).
    """
    d = check_distance_matrix(dist_in, "dist_in")
    n = d.shape[0]
    p = check_prior(prior, n)
    c = check_loss_matrix(loss, (n, n))
    grid = as_float_array(eps_grid, "eps_grid", ndim=1)
    if not time_limit > 0:
        raise DataError(f"time_limit must be > 0 seconds, got {time_limit!r}")
    if np.any(grid <= 0) or np.any(np.diff(grid) <= 0):
        raise DataError("eps_grid must be strictly ascending budgets > 0")
    unknown = sorted(set(methods) - set(METHODS))
    if unknown:
        raise DataError(f"methods must be a subset of {METHODS}, got unknown {unknown}")
    out: dict[str, np.ndarray] = {}
    want_em = [mth for mth in methods if mth in ("EM", "EM+remap")]
    if want_em:
        em = np.empty(grid.size)
        remap = np.empty(grid.size)
        for i, eps in enumerate(grid):
            P = exponential_mechanism(d, eps)
            em[i] = expected_loss(P, p, c)
            if "EM+remap" in methods:
                remap[i] = expected_loss(bayesian_remap(P, p, c), p, c)
            report(progress, 0.2 * (i + 1) / grid.size, f"EM at eps = {eps:.3g}")
        if "EM" in methods:
            out["EM"] = em
        if "EM+remap" in methods:
            out["EM+remap"] = remap
    if "OPT" in methods:
        start = 0.2 if want_em else 0.0

        def sub(frac: float, msg: str) -> None:
            report(progress, start + (1 - start) * frac, msg)

        results = optimal_mechanisms(p, c, d, grid, progress=sub, time_limit=time_limit / grid.size)
        out["OPT"] = np.array([r.objective if r.success else np.nan for r in results])
    report(progress, 1.0, "done")
    return {mth: out[mth] for mth in methods}
