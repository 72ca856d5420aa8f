"""Shape selection for a vector query: the generalized Gaussian shape with the least error per coordinate.

For a vector query with coordinate-wise sensitivity Delta every coordinate gets noise GG(0, b(p), p) with
the scale :func:`~mdp_core.noise.vector.ggm_scale_vector` certifies (exact at p = 2 and inf, Monte Carlo
otherwise: (eps, delta + alpha)-DP), so the error per coordinate is ``E|Z_i|^2 = b(p)^2 G(3/p) / G(1/p)``.
The search evaluates a grid of shapes (003 Table 5 selects p = 1.2947 for Delta = (1, 2) at eps 1, delta
0.01): every Monte Carlo certificate draws the same random stream (common random numbers), yet the
certified scales carry ~1 % of Monte Carlo noise, so the grid's best is reported, not refined.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from mdp_core._validation import Progress, check_positive, report
from mdp_core.errors import DataError
from mdp_core.noise.scalar import ggm_second_moment
from mdp_core.noise.vector import VectorScale, ggm_scale_vector

__all__ = ["VectorShapeChoice", "select_shape_vector", "vector_shape_grid"]

#: The classical shapes the selected one is compared with.
_CLASSICAL = (1.0, 2.0, np.inf)


@dataclass(frozen=True)
class VectorShapeChoice:
    """Result of :func:`select_shape_vector` (scales and moments in query units).

    ``p``, ``scale``, ``second_moment``: the shape with the least ``E|Z_i|^2`` among those certified, its
    scale and moment; ``total_delta`` its guarantee's delta (``delta + alpha`` for a Monte Carlo scale);
    ``classical_p`` / ``classical_second_moment`` the best of p = 1, 2, inf; ``improvement`` = 1 - the
    ratio of the two moments; ``scales`` (p, its certified scale) of every shape certified; ``skipped`` the
    shapes not certified (too small a delta for the Monte Carlo, or out of time), with why.
    """

    p: float
    scale: float
    second_moment: float
    total_delta: float
    classical_p: float
    classical_second_moment: float
    improvement: float
    scales: tuple[tuple[float, VectorScale], ...]
    skipped: tuple[tuple[float, str], ...] = ()

    def scale_of(self, p: float) -> VectorScale | str:
        """The certified scale of shape ``p``, or why it was not certified."""
        found = dict(self.scales).get(p)
        return found if found is not None else dict(self.skipped).get(p, "not evaluated")


def vector_shape_grid(p_max: float, step: float = 0.05, coarse: int = 12) -> np.ndarray:
    """Shapes 1 to 2 by ``step`` (where the optimum of a few coordinates lies; ``step`` in [0.001, 1]),
    then ``coarse`` shapes spaced geometrically up to ``p_max``, then inf."""
    p_max = check_positive(p_max, "p_max")
    if p_max < 2:
        raise DataError(f"p_max must be at least 2, got {p_max!r}")
    if not 1e-3 <= check_positive(step, "step") <= 1.0:  # every shape is a Monte Carlo certificate
        raise DataError(f"step must lie in [0.001, 1], got {step!r}")
    fine = np.round(np.arange(1.0, 2.0 + step / 2, step), 6)
    wide = np.round(np.geomspace(2.0, p_max, coarse + 1)[1:], 4) if p_max > 2 else np.zeros(0)
    return np.concatenate([fine, wide, [np.inf]])


def select_shape_vector(
    eps: float,
    delta: float,
    sensitivity: object,
    *,
    p_max: float = 10.0,
    alpha: float = 1e-3,
    seed: int = 0,
    n_samples: int = 100_000,
    time_limit: float = 60.0,
    progress: Progress = None,
) -> VectorShapeChoice:
    """The shape of :func:`vector_shape_grid` with the least certified ``E|Z_i|^2`` (module docstring).

    Shapes are evaluated within ``time_limit`` seconds overall (each certificate within what is left), the
    classical ones first; shapes that cannot be certified are skipped and listed. Raises DataError when
    none is.
    """
    time_limit = check_positive(time_limit, "time_limit", allow_inf=True)
    grid = vector_shape_grid(p_max)
    # the classical shapes first: the comparison needs them even when time runs out on the rest
    grid = np.concatenate([[1.0, 2.0, np.inf], grid[~np.isin(grid, _CLASSICAL)]])
    deadline = time.perf_counter() + time_limit
    evaluated: list[tuple[float, float, VectorScale]] = []  # p, E|Z_i|^2, scale
    skipped: list[tuple[float, str]] = []
    for i, p in enumerate(grid):
        left = deadline - time.perf_counter()
        report(progress, i / len(grid), f"certifying p = {p:g}")
        if left <= 0:
            skipped.append((float(p), "out of time"))
            continue

        def part(fraction: float, message: str, i: int = i, p: float = float(p)) -> None:
            report(progress, (i + fraction) / len(grid), f"p = {p:g}: {message}")

        try:
            v = ggm_scale_vector(
                float(p), eps, delta, sensitivity, rng=np.random.default_rng(seed), alpha=alpha,
                n_samples=n_samples, time_limit=left, progress=None if progress is None else part,
            )  # fmt: skip
        except DataError as exc:
            if i == 0 and "must" in str(exc):  # bad input (p = 1 is tried first), not a hard shape
                raise
            skipped.append((float(p), str(exc)))
            continue
        evaluated.append((float(p), ggm_second_moment(float(p), v.scale), v))
    report(progress, 1.0, "done")
    if not evaluated:
        raise DataError(f"no shape could be certified at these settings: {skipped[0][1]}")
    best = min(evaluated, key=lambda e: e[1])
    classical = [e for e in evaluated if e[0] in _CLASSICAL]
    ref = min(classical, key=lambda e: e[1]) if classical else (float("nan"), float("nan"))
    return VectorShapeChoice(
        p=best[0],
        scale=best[2].scale,
        second_moment=best[1],
        total_delta=best[2].total_delta,
        classical_p=ref[0],
        classical_second_moment=ref[1],
        improvement=1.0 - best[1] / ref[1] if classical else float("nan"),
        scales=tuple((p, v) for p, _, v in evaluated),
        skipped=tuple(skipped),
    )
