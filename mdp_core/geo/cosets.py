"""A lower bound for fine grids from bounds on their cosets (no aggregation).

Split the targets by their fine coordinates modulo ``step``: ``C_ab = {x : i % step = a, j % step = b}``.
Every eps-mDP mechanism K on all targets restricts to an eps-mDP mechanism on each coset (fewer pairs to
protect, rows unchanged), and its expected travel error is the prior-weighted sum of the cosets' errors
under the prior conditioned on the coset:

    U(K) = sum_ab pi(C_ab) U_ab(K|C_ab) >= sum_ab pi(C_ab) B_ab,

with B_ab any certified bound of coset ab's problem (:func:`~mdp_core.geo.bounds.geo_lower_bound`). So the
weighted sum is a certified bound of the whole problem. Its point: at depth 3 a coset with ``step=2`` has
the size of the depth-2 grid, small enough for the relaxation without aggregation, which the whole grid
cannot afford. Measured on the district at depth 3, eps 1.5 / km: 0.3519 km from 4 cosets x 60 s against
0.3481 from the aggregated bound in 60 s (bilinear mechanism 0.3674: gap 4.4 % instead of 5.5 %).
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from mdp_core._validation import Progress, report
from mdp_core.errors import DataError
from mdp_core.geo.bounds import GeoBound, geo_lower_bound
from mdp_core.geo.utility import GeoProblem, check_lp_inputs

__all__ = ["coset_lower_bound", "cosets"]


def cosets(problem: GeoProblem, step: int) -> list[tuple[float, GeoProblem]]:
    """(prior mass, problem on the coset with the prior conditioned on it) per non-empty coset."""
    fine = problem.grid.fine_ij
    parts = []
    for a in range(step):
        for b in range(step):
            rows = np.flatnonzero((fine[:, 0] % step == a) & (fine[:, 1] % step == b))
            mass = float(problem.prior[rows].sum())
            if len(rows) == 0 or mass <= 0.0:
                continue
            sub = dataclasses.replace(
                problem,
                grid=dataclasses.replace(problem.grid, fine_ij=fine[rows]),
                prior=problem.prior[rows] / mass,
                loss=problem.loss[rows],
                target_nodes=problem.target_nodes[rows],
            )
            parts.append((mass, sub))
    return parts


def coset_lower_bound(
    problem: GeoProblem,
    eps: float,
    *,
    step: int = 2,
    time_limit: float = 60.0,
    progress: Progress = None,
) -> GeoBound:
    """Certified lower bound (km) of every eps-mDP mechanism on these outputs, from bounds of the cosets.

    Parameters
    ----------
    problem : GeoProblem
        Targets (Euclidean metric, km), outputs, prior and travel loss.
    eps : float
        Privacy budget in 1/km.
    step : int
        Cosets per axis (``step**2`` cosets); 2 makes each coset at depth d the size of depth d - 1.
    time_limit : float
        Seconds for EACH coset's bound (the whole takes about ``step**2`` times as long).

    Returns
    -------
    GeoBound
        ``value`` is the prior-weighted sum of the cosets' certified bounds (module docstring); never exact.
    """
    eps = check_lp_inputs(problem, eps, time_limit)
    if not (isinstance(step, int | np.integer) and step >= 1):
        raise DataError(f"step must be a positive integer, got {step!r}")
    start = time.perf_counter()
    parts = cosets(problem, int(step))
    value, rows, methods = 0.0, 0, set()
    for k, (mass, sub) in enumerate(parts):
        report(progress, k / len(parts), f"coset {k + 1} of {len(parts)}: {sub.grid.n_targets:,} targets")
        bound = geo_lower_bound(sub, eps, time_limit=time_limit)
        value += mass * bound.value
        rows = max(rows, bound.rows)
        methods.add(bound.method)
    report(progress, 1.0, "coset bound: done")
    return GeoBound(
        value=value,
        exact=False,
        method=f"{len(parts)} cosets ({step} x {step}) of " + " / ".join(sorted(methods)),
        seconds=time.perf_counter() - start,
        rows=rows,
    )
