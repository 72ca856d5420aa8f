"""Stage 2 of DepHDP: selection (Eq. 24), budget allocation on the profiles' grid with an optional floor,
the homogeneous baselines and grid snapping (000 Sec. III-C/F). Private helper of
:mod:`mdp_core.dephdp.pipeline`; every function here is cheap (no LP, no loss matrix)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from mdp_core._validation import as_float_array, check_eps
from mdp_core.dephdp._grouploss import Surrogate
from mdp_core.dephdp._profiles import GroupProfile
from mdp_core.dephdp.adequacy import select_mechanism
from mdp_core.dephdp.allocation import BudgetAllocation, allocate_budget
from mdp_core.dephdp.config import BASELINES, DepHDPConfig, Note
from mdp_core.errors import DataError, InfeasibleFloorError
from mdp_core.metrics import budget_norm, dual_exponent


@dataclass(frozen=True, eq=False)
class BaselineResult:
    """A homogeneous baseline: allocation (continuous), grid budgets used, realised surrogate loss."""

    name: str
    eps: np.ndarray
    value: float
    allocation: BudgetAllocation | None


def snap_to_grid(
    eps: np.ndarray, grid: np.ndarray, curves: np.ndarray, betas: np.ndarray, eps_total: float, q: float
) -> np.ndarray:
    """Grid indices: round each budget down to the grid, then greedily move groups one grid point up while
    ``||eps||_q <= eps_total`` holds and the weighted loss drops most; then spend what is left on moves
    that cost no loss (:func:`_raise_free`)."""
    idx = np.clip(np.searchsorted(grid, eps * (1 + 1e-12), side="right") - 1, 0, grid.size - 1)
    while True:
        best, gain = -1, 0.0
        for k in range(idx.size):
            if idx[k] + 1 >= grid.size:
                continue
            if not _step_fits(idx, k, grid, eps_total, q):
                continue
            g = betas[k] * (curves[k, idx[k]] - curves[k, idx[k] + 1])
            if g > gain:
                best, gain = k, g
        if best < 0:
            return _raise_free(idx, grid, curves, betas, eps_total, q)
        idx[best] += 1


def _raise_free(
    idx: np.ndarray, grid: np.ndarray, curves: np.ndarray, betas: np.ndarray, eps_total: float, q: float
) -> np.ndarray:
    """Move the lowest budgets one grid point up, one at a time, while the rule allows and the weighted loss
    does not rise. Audit: the loss is indifferent to the budget of a group the surrogate weighs 0 (and at
    p = 1 every budget up to eps is free), and ties went to the grid's smallest budget: wine at p = 1, eps =
    20 released two columns at 0.005 (near random) where 20 cost no privacy."""
    idx = idx.copy()
    while True:
        for k in np.argsort(idx, kind="stable"):
            if idx[k] + 1 >= grid.size or betas[k] * (curves[k, idx[k]] - curves[k, idx[k] + 1]) < 0:
                continue
            if _step_fits(idx, k, grid, eps_total, q):
                idx[k] += 1
                break
        else:
            return idx


def uniform_on_grid(grid: np.ndarray, groups: int, eps_total: float, q: float) -> np.ndarray:
    """Grid indices of the uniform split (SPL, 000 Sec. IV-A): every group at the largest grid budget whose
    composition fits, then the first groups in order one grid point up while the rule allows (budgets
    differ by at most one grid step, and which groups get the remainder does not depend on the losses).
    Audit: the remainder went by the surrogate's gains (wine, p = 2, eps 5: seven groups at 1.476, one at
    3.004, against a uniform 1.768)."""
    j = max(_fitting_index(grid, groups, eps_total, q), 0)
    idx = np.full(groups, j)
    for k in range(groups if j + 1 < grid.size else 0):
        if not _step_fits(idx, k, grid, eps_total, q):
            break
        idx[k] = j + 1
    return idx


def _step_fits(idx: np.ndarray, k: int, grid: np.ndarray, eps_total: float, q: float) -> bool:
    """Whether moving group ``k`` one grid point up keeps ``||eps||_q <= eps_total``."""
    trial = grid[idx].copy()
    trial[k] = grid[idx[k] + 1]
    return bool(budget_norm(trial, q) <= eps_total)


def _fitting_index(grid: np.ndarray, groups: int, eps: float, q: float) -> int:
    """Index of the largest grid budget ``b`` with ``||(b, ..., b)||_q <= eps`` for ``groups`` groups (-1:
    none)."""
    fits = np.flatnonzero([budget_norm(np.full(int(groups), b), q) <= eps * (1 + 1e-12) for b in grid])
    return int(fits[-1]) if fits.size else -1


@dataclass(frozen=True)
class Selection:
    """Eq. 24 per group (``selection``), the profile kind used for it (``kinds``: OPT or CAL), notes."""

    selection: tuple[str, ...]
    kinds: tuple[str, ...]
    notes: tuple[Note, ...]


@dataclass(frozen=True, eq=False)
class Problem:
    """The allocation problem shared by DepHDP and the baselines: the usable part of the grid (from the
    budget floor on, starting at full-grid index ``offset``), surrogate weights and the norm."""

    profiles: tuple[GroupProfile, ...]
    grid: np.ndarray
    offset: int
    betas: np.ndarray
    beta0: float
    eps: float
    p: float
    q: float


@dataclass(frozen=True, eq=False)
class Allocated:
    """One allocation: continuous optimum (None for a uniform split), full-grid indices, realised
    surrogate value and the full-grid curves it used."""

    allocation: BudgetAllocation | None
    idx: np.ndarray
    value: float
    curves: np.ndarray


def select(config: DepHDPConfig, profiles: Sequence[GroupProfile]) -> Selection:
    tau_dim = min(config.tau_dim, config.opt_max_domain)
    notes: list[Note] = []
    if config.tau_dim > config.opt_max_domain:
        notes.append(
            Note(
                f"tau_dim capped at {config.opt_max_domain} (largest group with an OPT profile)",
                "tau_dim_cap",
            )
        )
    selection = tuple(
        select_mechanism(
            pr.domain_size,
            pr.radial if config.score == "radial" else pr.mse,
            tau_dim=tau_dim,
            tau_dpn=config.tau_dpn,
        )
        for pr in profiles
    )
    kinds = tuple("OPT" if s == "OPT" else "CAL" for s in selection)
    return Selection(selection, kinds, tuple(notes))


def floor_offset(config: DepHDPConfig, groups: int) -> int:
    """Index of the eps-grid budget every one of ``groups`` groups gets at least: the first grid point at
    or above ``config.min_group_eps`` (0 without a floor).

    Raises
    ------
    InfeasibleFloorError
        When ``groups`` groups at that budget break ``||eps_k||_q <= eps`` (its ``largest``: the largest
        floor that works, the largest grid budget ``b`` with ``||(b, ..., b)||_q <= eps``; 0 when not even
        the grid's smallest budget fits).
    """
    grid, q, eps = config.eps_grid, dual_exponent(config.p), float(config.eps)
    K = int(groups)
    offset = int(np.searchsorted(grid, config.min_group_eps * (1 - 1e-12), side="left"))
    if offset >= grid.size:
        raise DataError(f"min_group_eps = {config.min_group_eps:g} is above the grid's top {grid[-1]:g}")
    need = budget_norm(np.full(K, grid[offset]), q)
    if need <= eps * (1 + 1e-12):
        return offset
    most = largest_floor(grid, K, eps, config.p)
    if most == 0.0:  # not even the grid's smallest budget fits: no floor helps
        raise InfeasibleFloorError(
            f"eps = {eps:g} is too small for {K} groups: each needs at least the grid's smallest budget "
            f"{grid[0]:.3g}, and ||eps_k||_q of that is {budget_norm(np.full(K, grid[0]), q):.3g}; raise eps "
            "or release fewer columns",
            largest=0.0,
        )
    raise InfeasibleFloorError(
        f"a budget floor of {grid[offset]:.3g} for each of {K} groups needs ||eps_k||_q = {need:.3g} > "
        f"eps = {eps:g}; lower the budget floor (min_group_eps) to at most {round_down(most)} or raise eps",
        largest=most,
    )


def largest_floor(eps_grid: np.ndarray, groups: int, eps: float, p: float) -> float:
    """The largest per-group budget floor that works at ``eps`` for ``groups`` groups under an l_p record
    metric: the largest budget ``b`` of the profiles' grid with ``||(b, ..., b)||_q <= eps``. A floor is
    raised to the next grid point (:func:`floor_offset`), so ``eps / K^(1/q)`` itself may not work (audit:
    heart at eps 1 named 0.333, and 0.3 failed as 0.356); 0.0 when not even the grid's smallest fits."""
    grid = as_float_array(eps_grid, "eps_grid", ndim=1)
    if not isinstance(groups, (int, np.integer)) or groups < 1:
        raise DataError(f"groups must be a positive integer, got {groups!r}")
    j = _fitting_index(grid, groups, check_eps(eps), dual_exponent(p))
    return float(grid[j]) if j >= 0 else 0.0


def round_down(value: float, digits: int = 3) -> str:
    """``value`` to ``digits`` significant digits, rounded down (a stated upper limit must itself hold)."""
    if value <= 0 or not np.isfinite(value):
        return f"{value:g}"
    scale = 10.0 ** (digits - 1 - int(np.floor(np.log10(value))))
    return f"{np.floor(value * scale * (1 + 1e-12)) / scale:.{digits}g}"


def allocation_problem(
    config: DepHDPConfig, profiles: Sequence[GroupProfile], surrogate: Surrogate
) -> Problem:
    """The allocation problem of ``config`` (usable grid from the budget floor on, :func:`floor_offset`);
    InfeasibleFloorError when the floor is infeasible, naming the largest feasible floor."""
    q = dual_exponent(config.p)
    return Problem(
        profiles=tuple(profiles),
        grid=config.eps_grid,
        offset=floor_offset(config, len(profiles)),
        betas=np.array(surrogate.betas, dtype=float),
        beta0=float(surrogate.beta0),
        eps=float(config.eps),
        p=float(config.p),
        q=q,
    )


def allocate(
    problem: Problem, kinds: Sequence[str], optimise: bool, candidates: dict | None = None
) -> Allocated:
    """Allocate on the usable grid: optimised and snapped to it, or the uniform split on it."""
    full = np.vstack([pr.curves[k] for pr, k in zip(problem.profiles, kinds, strict=True)])
    j0, K = problem.offset, full.shape[0]
    grid, curves = problem.grid[j0:], full[:, j0:]
    if optimise:
        # the profiles' shifted envelopes restricted to the usable grid (a suffix of it: same segments, so
        # they still bound the curves there) -- recomputing them would solve one LP per row
        envs = (
            np.vstack([pr.envelopes[k][0][j0:] for pr, k in zip(problem.profiles, kinds, strict=True)]),
            np.vstack([pr.envelopes[k][1][j0:] for pr, k in zip(problem.profiles, kinds, strict=True)]),
        )
        alloc = allocate_budget(
            grid,
            curves,
            problem.eps,
            p=problem.p,
            betas=problem.betas,
            beta0=problem.beta0,
            candidates=candidates,
            envelopes=envs,
        )
        idx = snap_to_grid(alloc.eps, grid, curves, problem.betas, problem.eps, problem.q) + j0
    else:
        alloc = None
        idx = uniform_on_grid(grid, K, problem.eps, problem.q) + j0
    value = float(problem.beta0 + np.dot(problem.betas, full[np.arange(K), idx]))
    return Allocated(alloc, idx, value, full)


def baselines(problem: Problem) -> dict[str, BaselineResult]:
    """SPL / ALC x DPN / RMP on the same surrogate, grid and budget floor."""
    out = {}
    for name in BASELINES:
        alloc_kind, mech = name.split("+")
        a = allocate(problem, [mech] * len(problem.profiles), alloc_kind == "ALC")
        out[name] = BaselineResult(name, problem.grid[a.idx], a.value, a.allocation)
    return out


def keep_best(problem: Problem, ours: Allocated, baselines: dict[str, BaselineResult]) -> Allocated:
    """Grid rounding can reorder near-ties: a baseline's grid budgets are feasible for DepHDP too."""
    best = min(baselines.values(), key=lambda b: b.value)
    if best.value >= ours.value:
        return ours
    idx = np.searchsorted(problem.grid, best.eps)
    value = float(problem.beta0 + np.dot(problem.betas, ours.curves[np.arange(idx.size), idx]))
    return replace(ours, idx=idx, value=value) if value < ours.value else ours
