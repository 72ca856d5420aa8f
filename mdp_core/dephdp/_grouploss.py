"""Within-group loss matrices and the end-to-end linear surrogate (000 Sec. III-D, Eq. 16-22).

Private helpers of :mod:`mdp_core.pipeline`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import lsq_linear

from mdp_core._validation import Progress, report
from mdp_core.dephdp.tasks import Task
from mdp_core.errors import DataError
from mdp_core.mechanisms import exponential_mechanism, sample

_BLOCK = 8_000_000  # elements per temporary block


def group_scores(task: Task, cols: list[int], sizes: list[int]) -> np.ndarray:
    """Pre-link contribution ``sum_{l in G} E_l[x_l]`` of every joint group value x (C order), (|X|, dim)."""
    grids = np.indices(sizes).reshape(len(sizes), -1).T  # (|X|, |G|) codes in C order
    out = np.zeros((grids.shape[0], task.tables[0].shape[1]))
    for j, col in enumerate(cols):
        out += task.tables[col][grids[:, j]]
    return out


def group_loss_matrix(
    task: Task,
    contexts: np.ndarray,
    cols: list[int],
    sizes: list[int],
    dist: np.ndarray,
    progress: Progress = None,
) -> np.ndarray:
    """``C_k[x, y] = E_{X_-k | X_k = x} gamma(U(x, X_-k), U(y, X_-k))`` (000 Eq. 16-17).

    The conditional expectation averages the plug-in loss over the context records whose group value is
    nearest to x in the group metric (exact matches when x occurs; otherwise the nearest observed values:
    the bin-based averaging of 000 Sec. III-D).

    Parameters
    ----------
    task : Task
    contexts : int array (n, L)
        Context records (codes in ``task.attributes`` order).
    cols : list of int
        Positions of the group's attributes in ``task.attributes``.
    sizes : list of int
        Their domain sizes; the joint domain is in C order.
    dist : array (|X|, |X|)
        Group metric (for the nearest-context rule).
    progress : callable, optional
        Called per block of rows (a 4,908-value attribute takes ~26 s; its raise stops the work).
    """
    n = contexts.shape[0]
    S_G = group_scores(task, cols, sizes)  # (X, dim)
    xr = np.ravel_multi_index(tuple(contexts[:, cols].T), tuple(sizes))  # group value of each context
    S_rest = task.scores(contexts) - S_G[xr]  # (n, dim)
    V = task.apply_link(S_rest[:, None, :] + S_G[None, :, :])  # (n, X, dim)
    dx = dist[:, xr]  # (X, n)
    W = (dx <= dx.min(axis=1, keepdims=True) + 1e-12).astype(float)
    W /= W.sum(axis=1, keepdims=True)
    X = S_G.shape[0]
    if task.gamma_kind == "sq":
        N2 = np.einsum("rxj,rxj->rx", V, V)  # (n, X)
        a = np.einsum("xr,rx->x", W, N2)
        A = (W.T[:, :, None] * V).transpose(1, 0, 2).reshape(X, -1)  # (X, n*dim)
        B = V.transpose(0, 2, 1).reshape(-1, X)  # (n*dim, Y)
        C = a[:, None] + W @ N2 - 2.0 * (A @ B)
    else:
        C = np.empty((X, X))
        step = max(1, _BLOCK // max(n * X * V.shape[2], 1))
        for s in range(0, X, step):
            report(progress, s / X, f"loss matrix, {s:,} of {X:,} values")
            vals = np.abs(V[:, s : s + step, None, :] - V[:, None, :, :]).sum(axis=-1)  # (n, c, Y)
            C[s : s + step] = np.einsum("xr,rxy->xy", W[s : s + step], vals)
    np.fill_diagonal(C, 0.0)
    return np.maximum(C, 0.0)


@dataclass(frozen=True)
class Surrogate:
    """``c(y|x) ~ beta0 + sum_k beta_k c_k(y_k|x_k; x_-k)`` with ``beta_k >= 0`` (000 Eq. 20-22).

    ``r2_heldout`` is the coefficient of determination on held-out calibration pairs (25 %); NaN (and
    ``pairs = 0``) when no fit was needed because the task's group losses add up exactly (entropy task).
    """

    beta0: float
    betas: tuple[float, ...]
    r2_train: float
    r2_heldout: float
    pairs: int


def _r2(y: np.ndarray, pred: np.ndarray) -> float:
    sst = float(np.sum((y - y.mean()) ** 2))
    sse = float(np.sum((y - pred) ** 2))
    return 1.0 - sse / sst if sst > 0 else (1.0 if sse <= 1e-24 else 0.0)


def fit_surrogate(
    task: Task,
    codes: np.ndarray,
    group_cols: list[list[int]],
    group_sizes: list[list[int]],
    dists: list[np.ndarray],
    eps_grid: np.ndarray,
    *,
    pairs: int,
    rng: np.random.Generator,
    progress: Progress = None,
) -> Surrogate:
    """Calibrate the linear surrogate on ``pairs`` (x, y) pairs (000 Eq. 18-20); ``progress`` hears of
    every group's plug-in losses (a caller stops the fit from it: 300 groups took 45 s, audit).

    x is a fitting record; y perturbs every group with the exponential mechanism at a budget drawn
    uniformly from the grid (a mix of perturbation magnitudes, before any mechanism is chosen). The
    record loss ``c = gamma(U(x), U(y))`` is regressed on ``[1, c_1, ..., c_K]`` with
    ``c_k = gamma(U(x), U(Plug_k(x, y_k)))`` by bounded least squares (``beta_k >= 0``, ``beta0`` free).

    The fit is exact for tasks whose discrepancy adds up over groups (record fidelity, mismatch). For
    ``|f(x) - f(y)|`` of a model score (prediction) it is poor by nature, not by implementation: the group
    effects are signed shifts of one logit, so ``|sum_k delta_k|`` cancels where ``sum_k |delta_k|``
    does not, and with every group perturbed at once the record loss hardly depends on any single group's
    isolated loss (on heart, even unconstrained least squares explains ~10 % of held-out variance); the
    constrained fit then sets most ``beta_k`` to 0 and the intercept takes the mean loss.
    """
    if pairs < 8:
        raise DataError(f"calibration pairs must be >= 8, got {pairs}")
    X = codes[rng.integers(0, codes.shape[0], pairs)]
    eps_idx = rng.integers(0, eps_grid.size, pairs)
    Y = X.copy()
    for cols, sizes, dist in zip(group_cols, group_sizes, dists, strict=True):
        xk = np.ravel_multi_index(tuple(X[:, cols].T), tuple(sizes))
        yk = np.empty(pairs, dtype=np.int64)
        for i in np.unique(eps_idx):
            sel = eps_idx == i
            yk[sel] = sample(exponential_mechanism(dist, float(eps_grid[i])), xk[sel], rng)
        Y[:, cols] = np.stack(np.unravel_index(yk, tuple(sizes)), axis=1)
    ux = task.utility(X)
    c = task.gamma(ux, task.utility(Y))
    feats = [np.ones(pairs)]
    for k, cols in enumerate(group_cols):
        report(progress, k / len(group_cols), f"task surrogate: group {k + 1} of {len(group_cols)}")
        plug = X.copy()
        plug[:, cols] = Y[:, cols]
        feats.append(task.gamma(ux, task.utility(plug)))
    F = np.column_stack(feats)
    cut = round(0.75 * pairs)
    lower = np.r_[-np.inf, np.zeros(len(group_cols))]  # Eq. 20: beta_k >= 0; the intercept is free
    coef = lsq_linear(F[:cut], c[:cut], bounds=(lower, np.inf), method="bvls").x
    return Surrogate(
        beta0=float(coef[0]),
        betas=tuple(float(b) for b in coef[1:]),
        r2_train=_r2(c[:cut], F[:cut] @ coef),
        r2_heldout=_r2(c[cut:], F[cut:] @ coef),
        pairs=pairs,
    )
