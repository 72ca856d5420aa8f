"""Baselines on the same targets and outputs (seed 004, Sec. 6 "Predefined", "Hybrid", "Optimization-based").

- :func:`exponential_geo` EM: P(y | x) proportional to exp(-eps d_2(x, y) / 2) (eps-mDP on any targets).
- :func:`em_remap_geo` EM followed by Bayesian remapping (post-processing, keeps the guarantee exactly).
- :func:`lp_coarse` LP-A: the LP on the seed grid only (full budget, axis ratio exp(eps h0 / sqrt 2)),
  repaired to exact mDP on the seeds; every target reports through its nearest seed, which breaks the
  guarantee between nearby targets on either side of a Voronoi boundary (the paper's Table 4).
- :func:`planar_laplace_utility` the continuous planar Laplace mechanism, scored by sampling.
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp
from scipy.spatial import cKDTree

from mdp_core._validation import Progress, check_eps, check_log_ratio, report
from mdp_core.errors import DataError
from mdp_core.geo.extension import GeoMechanism
from mdp_core.geo.seed_lp import axis_budget, solve_seed_lp
from mdp_core.geo.utility import GeoProblem, travel_loss

__all__ = ["em_remap_geo", "exponential_geo", "lp_coarse", "planar_laplace_utility", "remap_matrix"]

_CHUNK = 4096


def exponential_geo(problem: GeoProblem, eps: float) -> GeoMechanism:
    """Exponential mechanism ``P[x, y] = exp(-eps ||x - y||_2 / 2) / Z(x)`` over the problem's outputs."""
    eps = check_eps(eps)
    start = time.perf_counter()
    targets, outputs = problem.targets_km, problem.outputs_km
    matrix = np.empty((len(targets), len(outputs)))
    for lo in range(0, len(targets), _CHUNK):
        d = np.linalg.norm(targets[lo : lo + _CHUNK, None, :] - outputs[None, :, :], axis=2)
        score = -0.5 * eps * d
        score -= score.max(axis=1, keepdims=True)
        check_log_ratio(float(-score.min()), "exponential mechanism")
        block = np.exp(score)
        matrix[lo : lo + _CHUNK] = block / block.sum(axis=1, keepdims=True)
    seconds = time.perf_counter() - start
    return GeoMechanism(targets, outputs, matrix, eps, seconds, method="em", stages={"em": seconds})


def remap_matrix(matrix: np.ndarray, prior: np.ndarray, loss: np.ndarray) -> np.ndarray:
    """Bayesian remap: output y becomes ``argmin_y' sum_x prior[x] matrix[x, y] loss[x, y']``.

    The (m x m) score ``matrix' diag(prior) loss`` is accumulated over target chunks in float32 for the
    argmin search (ENGINEERING.md), then the columns are merged exactly in float64.
    """
    matrix, prior, loss = np.asarray(matrix), np.asarray(prior), np.asarray(loss)
    if matrix.ndim != 2 or prior.shape != matrix.shape[:1] or loss.shape != matrix.shape:
        raise DataError(
            "remap_matrix needs matrix (n x m), prior (n,) and loss (n x m) alike; got shapes "
            f"{matrix.shape}, {prior.shape} and {loss.shape}"
        )
    m = matrix.shape[1]
    score = np.zeros((m, m), dtype=np.float64)
    for lo in range(0, matrix.shape[0], _CHUNK):
        weighted = (prior[lo : lo + _CHUNK, None] * matrix[lo : lo + _CHUNK]).astype(np.float32)
        score += weighted.T @ loss[lo : lo + _CHUNK].astype(np.float32)
    target = np.argmin(score, axis=1)
    merge = sp.csr_matrix((np.ones(m), (np.arange(m), target)), shape=(m, m))
    return np.asarray(matrix @ merge)


def em_remap_geo(problem: GeoProblem, eps: float, *, em: GeoMechanism | None = None) -> GeoMechanism:
    """EM + Bayesian remapping (Chatzikokolakis et al. 2017) under the problem's prior and travel loss."""
    start = time.perf_counter()
    em = exponential_geo(problem, eps) if em is None else em
    matrix = remap_matrix(em.matrix, problem.prior, problem.loss)
    seconds = em.seconds + time.perf_counter() - start
    return GeoMechanism(
        em.targets_km, em.outputs_km, matrix, em.eps, seconds, method="em_remap", stages={"em_remap": seconds}
    )


def lp_coarse(problem: GeoProblem, eps: float, *, progress: Progress = None) -> GeoMechanism:
    """LP-A: optimise on the seed grid with the full budget, each target reports via its nearest seed.

    Seed cost: the summed prior-weighted loss of the targets whose nearest seed is s. Constraints: axis
    ratio ``exp(eps h0 / sqrt 2)`` (valid for d_2 on the seeds by Cauchy-Schwarz), repaired exactly.
    Not mDP on the fine targets in general (see module docstring).
    """
    eps = check_eps(eps)
    start = time.perf_counter()
    grid = problem.grid
    nearest = cKDTree(grid.seeds_km).query(problem.targets_km)[1]
    n_seeds = grid.seed_shape[0] * grid.seed_shape[1]
    assign = sp.csr_matrix((problem.prior, (nearest, np.arange(len(nearest)))), shape=(n_seeds, len(nearest)))
    cost = np.asarray(assign @ problem.loss)
    report(progress, 0.1, "LP-A: seed LP")
    result = solve_seed_lp(cost, grid.seed_shape, grid.h0, axis_budget(eps, 2.0, halve=False))
    matrix = result.z[nearest]
    seconds = time.perf_counter() - start
    return GeoMechanism(
        problem.targets_km,
        problem.outputs_km,
        matrix,
        eps,
        seconds,
        method="lp_coarse",
        stages={"lp_coarse": seconds},
        info={"gap": result.gap, "columns": result.columns, "status": result.status},
    )


def planar_laplace_utility(
    problem: GeoProblem, eps: float, rng: np.random.Generator, *, samples: int = 20
) -> float:
    """Expected travel error (km) of planar Laplace (density eps^2/(2 pi) exp(-eps d_2)) by sampling.

    Each target draws ``samples`` reports: radius ~ Gamma(2, 1/eps), uniform angle; a report is scored at
    its nearest road node against the problem's task points.
    """
    eps = check_eps(eps)
    targets = problem.targets_km
    n = len(targets)
    radius = rng.gamma(2.0, 1.0 / eps, size=(n, samples))
    angle = rng.uniform(0.0, 2.0 * np.pi, size=(n, samples))
    reports = targets[:, None, :] + radius[..., None] * np.stack([np.cos(angle), np.sin(angle)], axis=-1)
    report_nodes = problem.network.nearest_nodes(reports.reshape(-1, 2))
    uniq, inverse = np.unique(report_nodes, return_inverse=True)
    tx, tx_inverse = np.unique(problem.target_nodes, return_inverse=True)
    loss = travel_loss(problem.network, tx, uniq, problem.task_nodes)  # distinct nodes only
    per = loss[np.repeat(tx_inverse, samples), inverse].reshape(n, samples).mean(axis=1)
    return float(problem.prior @ per)
