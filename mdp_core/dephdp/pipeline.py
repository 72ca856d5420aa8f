"""DepHDP end to end (000): grouping, group losses, adequacy scores, DPN / OPT selection, loss-budget
profiles, surrogate, budget allocation and the composed, verified mechanism.

Stages (000 Sec. III-B):

1. Groups: connected components of the NMI graph ``I_ij > tau_group`` on the released attributes
   (the schema target is never released), split until each joint domain is ``<= max_group_domain``.
2. Per group: the loss matrix ``C_k`` (Eq. 16-17), MSE-likeness and radial-fit (Eq. 25-29), and
   loss-budget profiles on one geometric eps grid for EM (DPN), EM + Bayesian remapping (RMP), EM with
   calibrated remapping (CAL: remap where it helps; DepHDP's DPN as in 000 App. D-D) and, for groups with
   ``|X_k| <= opt_max_domain``, the LP optimum (OPT, warm-started along the grid; where an LP fails or is
   worse the CAL channel is kept). Population tasks (entropy) profile the expected change of the group's
   marginal entropies instead of the expected record loss (see :mod:`mdp_core._profiles`). Profiles are
   cached by group signature (data, attributes, levels, task, p, grid), never by the whole configuration,
   so changing eps, tau_dpn, tau_dim or the score never recomputes them.
3. Selection by Eq. 24 (``tau_dim`` is capped at ``opt_max_domain``, the largest group with an OPT profile).
4. Surrogate ``beta`` by NNLS (Eq. 20) and allocation by :func:`mdp_core.allocation.allocate_budget`.
   Budgets are then rounded down to grid points (so every channel comes from the cache and the
   composition ``||eps_k||_q <= eps`` still holds) and greedily raised to the next grid point while the
   norm allows and the surrogate drops.

Stages 1-2 and the surrogate (:func:`dephdp_profiles`, a :class:`DepHDPProfiles`) live in
:mod:`mdp_core.dephdp._profiles`, cached per signature in the caller's cache; this module selects,
allocates, composes and verifies, which is all a change of eps, tau_dpn, tau_dim, the score or the budget
floor re-runs (pass the stage-1 object as ``profiles=``).

Budget floor: with ``min_group_eps > 0`` every group gets at least the first grid point at or above it
(the allocation runs on that part of the grid, for DepHDP and the baselines alike); infeasible floors
(``||floor||_q > eps``) raise DataError naming the largest feasible one.

Baselines on the same surrogate and the same eps: SPL (the uniform split on the grid: every group at the
largest grid budget within ``||eps_k||_q <= eps``, the first groups one grid point more while it allows) or
ALC (optimised allocation) combined with DPN (EM) or RMP (EM + remapping). Budget the surrogate leaves
unused (groups it weighs 0; at p = 1 every budget up to eps) goes to the lowest budgets, at no loss.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from mdp_core._validation import Progress, part, report
from mdp_core.data import Encoded
from mdp_core.dephdp._allocate import (
    BaselineResult,
    Selection,
    allocate,
    allocation_problem,
    baselines,
    keep_best,
    select,
)
from mdp_core.dephdp._grouploss import Surrogate
from mdp_core.dephdp._profiles import (
    Cache,
    GroupProfile,
    cached,
    group_profile,
    groups_for,
    surrogate_for,
    task_for,
)
from mdp_core.dephdp.allocation import BudgetAllocation
from mdp_core.dephdp.config import DepHDPConfig, Note
from mdp_core.dephdp.tasks import Task, release_attributes
from mdp_core.errors import DataError
from mdp_core.mechanisms import sample
from mdp_core.metrics import budget_norm, dual_exponent

__all__ = [
    "SCORE_HEADERS",
    "BaselineResult",
    "ComposedMechanism",
    "DepHDPProfiles",
    "DepHDPResult",
    "compose_mechanism",
    "dephdp_profiles",
    "released_by",
    "run_dephdp",
]


#: Readable headers of :attr:`DepHDPResult.scores`' columns, as the DepHDP page and the release report show
#: them (the frame keeps its short keys; "attributes", a count, and "has_opt" are not shown).
SCORE_HEADERS = {
    "group": "group",
    "domain_size": "joint values",
    "radial_fit": "radial fit",
    "mse_likeness": "MSE-likeness",
    "mechanism": "mechanism",
    "beta": "weight β",
    "eps_k": "budget ε_k",
}


@dataclass(frozen=True, eq=False)
class ComposedMechanism:
    """``M(x) = (M_1(x_1), ..., M_K(x_K))`` (000 Eq. 11): one verified channel per group."""

    attributes: tuple[str, ...]
    groups: tuple[tuple[str, ...], ...]
    sizes: tuple[tuple[int, ...], ...]
    channels: tuple[np.ndarray, ...]
    eps: np.ndarray
    kinds: tuple[str, ...]
    p: float
    violations: tuple[float, ...]

    def privatize(self, codes: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
        """Privatise integer-coded records (``Encoded.codes`` layout); returns the released columns only."""
        if not isinstance(codes, pd.DataFrame):
            raise TypeError(f"codes must be a DataFrame of integer codes, got {type(codes).__name__}")
        missing = [a for a in self.attributes if a not in codes.columns]
        if missing:
            raise DataError(f"codes lacks the released attributes {missing}")
        out = codes[list(self.attributes)].to_numpy().astype(np.int64).copy()
        index = {a: j for j, a in enumerate(self.attributes)}
        for group, sizes, P in zip(self.groups, self.sizes, self.channels, strict=True):
            cols = [index[a] for a in group]
            x = np.ravel_multi_index(tuple(out[:, cols].T), sizes)
            y = sample(P, x, rng)
            out[:, cols] = np.stack(np.unravel_index(y, sizes), axis=1)
        return pd.DataFrame(out, columns=list(self.attributes))


@dataclass(frozen=True, eq=False)
class DepHDPResult:
    """Outcome of :func:`run_dephdp`. ``value`` and baseline values are surrogate expected losses
    ``beta0 + sum_k beta_k L_k(eps_k)`` at the grid budgets actually used by the channels."""

    config: DepHDPConfig
    task: Task
    groups: list[tuple[str, ...]]
    profiles: list[GroupProfile]
    scores: pd.DataFrame
    selection: list[str]
    surrogate: Surrogate
    eps_grid: np.ndarray
    curves: np.ndarray  # DepHDP's L_k on the grid (K, N)
    allocation: BudgetAllocation
    eps_used: np.ndarray
    value: float
    baselines: dict[str, BaselineResult]
    mechanism: ComposedMechanism
    notes: tuple[Note, ...]  # each a str with a kind (Note)
    seconds: dict[str, float]

    components: int = 0  # NMI components of the released attributes before the max_group_domain split
    floor: float = 0.0  # smallest budget any group could get (grid[0], or the grid point >= min_group_eps)
    method: str = "DepHDP"  # what ``mechanism`` releases: DepHDP, or a baseline (:func:`released_by`)

    @property
    def starved(self) -> tuple[int, ...]:
        """Groups at the grid's minimum budget ``eps_grid[0]``: their released values say almost
        nothing about the records (nearly random, or one value where the channel remaps)."""
        return tuple(int(k) for k in np.flatnonzero(self.eps_used <= self.eps_grid[0] * (1 + 1e-9)))

    def privatize(self, codes: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
        """Privatise records with the composed DepHDP mechanism (see :meth:`ComposedMechanism.privatize`)."""
        return self.mechanism.privatize(codes, rng)

    @property
    def lower_bound(self) -> float:
        return self.allocation.lower_bound

    @property
    def rel_err(self) -> float:
        lb = self.allocation.lower_bound
        return (self.value - lb) / lb if lb > 0 else (0.0 if self.value == lb else float("inf"))


def _check_composition(mechanism: ComposedMechanism, eps: float, q: float, what: str) -> None:
    """Guard of every composed release: its group budgets compose to at most eps (000 Theorem 1)."""
    if budget_norm(mechanism.eps, q) > eps * (1 + 1e-12):
        raise DataError(f"internal error: {what} exceed eps")


def released_by(result: DepHDPResult, method: str) -> DepHDPResult:
    """``result`` with the channels of ``method`` ("DepHDP" or a name of :data:`BASELINES`) released.

    A baseline uses its own kind (DPN: EM; RMP: EM + Bayesian remapping) at its own grid budgets for every
    group; ``mechanism``, ``eps_used``, ``value``, ``curves`` and the scores' mechanism and eps_k columns
    become the baseline's, every channel verified like DepHDP's. ``selection`` (Eq. 24), the allocation
    and its lower bound stay DepHDP's (that bound is below every baseline's value too: OPT and CAL curves
    are at most the DPN and RMP ones).

    ALC+DPN is the release that collapses no column to one value: Bayesian remapping and the LP optimum
    are loss-optimal, and for attributes the task barely uses they release one value whatever the input
    (heart, prediction task, eps 1: DepHDP leaves 9 of 13 columns constant, ALC+DPN none, at a surrogate
    loss of 0.364 against 0.337). Its noisy copies are informative only where the allocation gives
    budget: groups of zero weight keep the grid's smallest budget (heart, record task: at eps 20 all 13
    columns keep information about the true values, normalised mutual information > 0.05, against 9 of
    13 for DepHDP; at eps <= 4 at most 3).
    """
    if method == "DepHDP":
        return result
    if method not in result.baselines:
        raise DataError(f"method must be 'DepHDP' or one of {sorted(result.baselines)}, got {method!r}")
    base, kind = result.baselines[method], method.split("+")[1]
    idx = np.searchsorted(result.eps_grid, base.eps)
    kinds = [kind] * len(result.profiles)
    mechanism = compose_mechanism(result.profiles, kinds, idx, result.mechanism.attributes, result.config.p)
    q = dual_exponent(result.config.p)
    _check_composition(mechanism, result.config.eps, q, f"the budgets of {method}")
    return replace(
        result,
        scores=result.scores.assign(mechanism=kinds, eps_k=mechanism.eps),
        mechanism=mechanism,
        eps_used=mechanism.eps,
        value=base.value,
        curves=np.vstack([pr.curves[kind] for pr in result.profiles]),
        method=method,
        notes=(*result.notes, Note(f"Released by the baseline {method}, not by DepHDP's choice.", "method")),
    )


# --------------------------------------------------------------------------- stage 1: profiles


@dataclass(frozen=True, eq=False)
class DepHDPProfiles:
    """Stage 1 of DepHDP: everything that does not depend on eps, tau_dpn, tau_dim, the score or the floor.

    ``settings`` is ``config.profile_settings()`` and ``fingerprint`` the fitting table's
    ``Encoded.fingerprint``: :func:`run_dephdp` accepts the object only for the same pair.
    """

    fingerprint: str
    settings: DepHDPConfig
    task: Task
    attributes: tuple[str, ...]
    groups: tuple[tuple[str, ...], ...]
    components: int
    profiles: tuple[GroupProfile, ...]
    surrogate: Surrogate
    seconds: dict[str, float]


def _check_inputs(encoded: Encoded, config: DepHDPConfig) -> None:
    if not isinstance(encoded, Encoded):
        raise TypeError(f"encoded must be an Encoded table (see discretize), got {type(encoded).__name__}")
    if not isinstance(config, DepHDPConfig):
        raise TypeError(f"config must be a DepHDPConfig, got {type(config).__name__}")


def dephdp_profiles(
    encoded: Encoded, config: DepHDPConfig, *, cache: Cache | None = None, progress: Progress = None
) -> DepHDPProfiles:
    """Groups, group loss matrices, adequacy scores, loss-budget profiles and the surrogate (000 Sec. III-B
    to III-E): the expensive, eps-independent part of :func:`run_dephdp`.

    Parameters
    ----------
    encoded : Encoded
        Discretised fitting data; the schema target is not released.
    config : DepHDPConfig
        Only the fields of ``config.profile_settings()`` matter here.
    cache : dict-like, optional
        Holds tasks, groupings, group profiles and surrogates by content key (``get`` and item
        assignment, e.g. a ``dict``); without one nothing outlives the call.
    progress : callable, optional
        ``progress(fraction, message)`` while group profiles are computed (cached ones are instant).
    """
    _check_inputs(encoded, config)
    t0 = time.perf_counter()
    task = task_for(encoded, config, cache)
    attrs = release_attributes(encoded)
    codes = encoded.codes[list(attrs)].to_numpy().astype(np.int64)
    groups, components = groups_for(encoded, attrs, config, cache)
    profiles: list[GroupProfile] = []
    bar = part(progress, 0.0, 0.9)  # the groups' profiles; the task surrogate fills the last tenth
    for k, g in enumerate(groups):
        report(bar, k / len(groups), f"group {k + 1}/{len(groups)}: {', '.join(g)}")
        sub = part(bar, k / len(groups), (k + 1) / len(groups))
        profiles.append(group_profile(encoded, task, codes, g, config, cache, sub))
    t1 = time.perf_counter()
    fit = part(progress, 0.9, 1.0)
    sur = surrogate_for(task, codes, tuple(profiles), config, encoded.fingerprint, cache, fit)
    report(progress, 1.0, "profiles ready")
    return DepHDPProfiles(
        fingerprint=encoded.fingerprint,
        settings=config.profile_settings(),
        task=task,
        attributes=attrs,
        groups=tuple(groups),
        components=components,
        profiles=tuple(profiles),
        surrogate=sur,
        seconds={"profiles": t1 - t0, "surrogate": time.perf_counter() - t1},
    )


# --------------------------------------------------------------------------- stage 2: allocation


def compose_mechanism(
    profiles: Sequence[GroupProfile],
    kinds: Sequence[str],
    idx: np.ndarray,
    attributes: tuple[str, ...],
    p: float,
) -> ComposedMechanism:
    """Compose cached, verified group channels ``kinds[k]`` at grid points ``idx[k]`` (000 Eq. 11)."""
    channels = tuple(pr.channel(kd, int(i)) for pr, kd, i in zip(profiles, kinds, idx, strict=True))
    return ComposedMechanism(
        attributes=attributes,
        groups=tuple(pr.attributes for pr in profiles),
        sizes=tuple(pr.sizes for pr in profiles),
        channels=channels,
        eps=np.array([pr.eps_grid[i] for pr, i in zip(profiles, idx, strict=True)]),
        kinds=tuple(kinds),
        p=float(p),
        violations=tuple(pr.verified[(kd, int(i))] for pr, kd, i in zip(profiles, kinds, idx, strict=True)),
    )


def _score_frame(stage: DepHDPProfiles, sel: Selection, mechanism: ComposedMechanism) -> pd.DataFrame:
    profiles = stage.profiles
    return pd.DataFrame(
        {
            "group": [" + ".join(g) for g in stage.groups],
            "attributes": [len(g) for g in stage.groups],
            "domain_size": [pr.domain_size for pr in profiles],
            "mse_likeness": [pr.mse for pr in profiles],
            "radial_fit": [pr.radial for pr in profiles],
            "mechanism": list(sel.selection),
            "beta": np.array(stage.surrogate.betas, dtype=float),
            "eps_k": mechanism.eps,
            "has_opt": [pr.opt_channels is not None for pr in profiles],
        }
    )


def _grouping_note(stage: DepHDPProfiles, config: DepHDPConfig) -> tuple[Note, ...]:
    if len(stage.groups) == stage.components:
        return ()
    return (
        Note(
            f"The NMI graph at tau_group = {config.tau_group:g} has {stage.components} components on the "
            f"{len(stage.attributes)} released attributes; components whose joint domain exceeds "
            f"max_group_domain = {config.max_group_domain} were split (weakest edge first) into "
            f"{len(stage.groups)} groups.",
            "grouping",
        ),
    )


def _lp_notes(stage: DepHDPProfiles) -> tuple[Note, ...]:
    """Groups whose OPT profile kept EM (+ remap) at some grid points (LP failure or time limit)."""
    return tuple(
        Note(f"{' + '.join(pr.attributes)}: {pr.opt_message}", "lp_time")
        for pr in stage.profiles
        if "LPs failed" in pr.opt_message
    )


def run_dephdp(
    encoded: Encoded,
    config: DepHDPConfig,
    *,
    cache: Cache | None = None,
    progress: Progress = None,
    profiles: DepHDPProfiles | None = None,
) -> DepHDPResult:
    """Configure DepHDP on ``encoded`` (the fitting data) and build its composed mechanism (000 Sec. III).

    Parameters
    ----------
    encoded : Encoded
        Discretised fitting data (see :func:`mdp_core.discretize`); the schema target is not released.
    config : DepHDPConfig
        All thresholds and budgets.
    cache : dict-like, optional
        See :func:`dephdp_profiles`; pass the same object across calls so that a change of eps, tau_dpn,
        tau_dim, the score or the floor reuses every profile.
    progress : callable, optional
        ``progress(fraction, message)`` while group profiles are computed (cached ones are instant).
    profiles : DepHDPProfiles, optional
        Stage 1 computed before by :func:`dephdp_profiles` for this table and ``config.profile_settings()``.

    Returns
    -------
    DepHDPResult
        Groups, scores, selection, surrogate, profiles, allocation with sandwich bound, baselines and the
        composed mechanism (every channel verified with ``mdp_violation <= VIOLATION_TOL``).
    """
    _check_inputs(encoded, config)
    if profiles is None:
        profiles = dephdp_profiles(encoded, config, cache=cache, progress=progress)
    elif profiles.fingerprint != encoded.fingerprint or profiles.settings != config.profile_settings():
        raise DataError("profiles were computed for another table or other settings; recompute them")
    report(progress, 1.0, "allocating budgets")
    t0 = time.perf_counter()
    sel = select(config, profiles.profiles)
    problem = allocation_problem(config, profiles.profiles, profiles.surrogate)
    bases = cached(  # independent of tau_dpn, tau_dim and the score: reused when only those move
        cache,
        ("dephdp.baselines", profiles.fingerprint, profiles.settings, problem.eps, problem.offset),
        lambda: baselines(problem),
    )
    cands = {n: b.allocation.eps for n, b in bases.items() if b.allocation is not None}
    ours = keep_best(problem, allocate(problem, sel.kinds, True, cands), bases)
    mechanism = compose_mechanism(profiles.profiles, sel.kinds, ours.idx, profiles.attributes, config.p)
    _check_composition(mechanism, problem.eps, problem.q, "composed budgets")
    return DepHDPResult(
        config=config,
        task=profiles.task,
        groups=list(profiles.groups),
        profiles=list(profiles.profiles),
        scores=_score_frame(profiles, sel, mechanism),
        selection=list(sel.selection),
        surrogate=profiles.surrogate,
        eps_grid=problem.grid,
        curves=ours.curves,
        allocation=ours.allocation,  # type: ignore[arg-type]
        eps_used=mechanism.eps,
        value=ours.value,
        baselines=bases,
        mechanism=mechanism,
        notes=sel.notes + _grouping_note(profiles, config) + _lp_notes(profiles),
        seconds={**profiles.seconds, "allocation": time.perf_counter() - t0},
        components=profiles.components,
        floor=float(problem.grid[problem.offset]),
    )
