"""Loss-budget profiles of attribute groups and the caches behind DepHDP's interactivity (000 Sec. III-D/E).

Private helper of :mod:`mdp_core.dephdp.pipeline`. Everything here depends on the data, the grouping, the
task and ``p`` -- never on eps, tau_dpn, tau_dim or the score -- so the caller's cache (any object with
``get`` and item assignment, see :class:`Cache`; the core keeps no global state) holds it by signature. Keys
start from ``Encoded.fingerprint`` (codes, schema with its target, levels), so another target column or
another split never meets a stale entry:

* :func:`group_profile` -- per group: the loss matrix ``C_k`` (Eq. 16-17), MSE-likeness and radial-fit
  (Eq. 25-29), and loss-budget profiles ``L_k(eps)`` on one geometric grid for EM (DPN), EM + Bayesian
  remapping (RMP, 000 App. D-D) and, for groups with ``|X_k| <= opt_max_domain``, the LP optimum (OPT,
  warm-started along the grid; where an LP fails or is worse, the RMP channel is kept). Cached by group
  signature (data, attributes, levels, task, p, grid, context sample), not by the whole configuration.
* :func:`task_for`, :func:`groups_for`, :func:`surrogate_for` -- the fitted task, the NMI grouping and the
  NNLS surrogate (Eq. 18-22), each cached by its own inputs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import numpy as np

from mdp_core._validation import Progress, part, report
from mdp_core.data import Encoded
from mdp_core.data.dependency import dependency_groups, nmi_matrix
from mdp_core.dephdp._grouploss import Surrogate, fit_surrogate, group_loss_matrix
from mdp_core.dephdp.adequacy import mse_likeness, radial_fit
from mdp_core.dephdp.allocation import shifted_envelopes
from mdp_core.dephdp.config import DepHDPConfig
from mdp_core.dephdp.tasks import Task, make_task
from mdp_core.errors import DataError
from mdp_core.mechanisms import (
    VIOLATION_TOL,
    expected_loss,
    exponential_mechanism,
    mdp_violation,
    optimal_mechanisms,
    remap_outputs,
)
from mdp_core.metrics import product_distance


@dataclass(frozen=True, eq=False)
class GroupProfile:
    """Everything DepHDP knows about one group, independent of eps, tau_dpn, tau_dim and the score.

    ``curves[kind][i]`` is the group's loss at ``eps_grid[i]``: the expected loss ``L_k`` of Eq. 23 for
    record tasks; for a population task (entropy) the expected change of the group's marginal entropies,
    ``sum_{l in G} |H(pi_l) - H((pi P)_l)|`` (nats), with ``pi`` the fitting prior of the group.
    Kinds: ``"DPN"`` EM, ``"RMP"`` EM + Bayesian remapping, ``"CAL"`` EM with calibrated remapping (the
    better of the two per grid point: DepHDP's DPN, "EM with calibrated Bayesian remapping" of 000 App.
    D-D; for record tasks remapping never hurts, so CAL = RMP), ``"OPT"`` the LP optimum (or CAL where
    that is better on the criterion).
    """

    attributes: tuple[str, ...]
    sizes: tuple[int, ...]
    dist: np.ndarray
    prior: np.ndarray
    loss: np.ndarray
    mse: float
    radial: float
    eps_grid: np.ndarray
    curves: dict[str, np.ndarray]  # "DPN" (EM), "RMP" (EM + remap), "CAL", and "OPT" when computed
    envelopes: dict[str, tuple[np.ndarray, np.ndarray]]
    remap: list[np.ndarray]  # RMP output relabelling per grid point
    use_remap: np.ndarray  # CAL (calibrated remapping): remap at grid point i iff it lowers the criterion
    opt_channels: list[np.ndarray] | None  # per grid point: LP channel (or the CAL channel when better)
    opt_message: str
    seconds: dict[str, float]
    verified: dict[tuple[str, int], float] = field(default_factory=dict)

    @property
    def domain_size(self) -> int:
        return int(np.prod(self.sizes))

    def channel(self, kind: str, i: int) -> np.ndarray:
        """The verified channel of ``kind`` ("DPN", "RMP", "CAL", "OPT") at grid point ``i``."""
        eps = float(self.eps_grid[i])
        if kind == "OPT":
            if self.opt_channels is None:
                raise DataError(f"group {self.attributes} has no OPT profile")
            P = self.opt_channels[i]
        else:
            P = exponential_mechanism(self.dist, eps)
            if kind == "RMP" or (kind == "CAL" and self.use_remap[i]):
                P = _remapped(P, self.remap[i])
        key = (kind, i)
        if key not in self.verified:
            self.verified[key] = mdp_violation(P, self.dist, eps)
        if self.verified[key] > VIOLATION_TOL:
            raise DataError(
                f"{kind} channel of {self.attributes} failed verification ({self.verified[key]:.3g})"
            )
        return P


def _remapped(P: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Post-processing: output column y of ``P`` is relabelled ``target[y]`` (merged columns add up)."""
    R = np.zeros_like(P)
    np.add.at(R.T, target, P.T)
    return R


def _entropy(p: np.ndarray) -> float:
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


def _criterion(task: Task, prior: np.ndarray, loss: np.ndarray, sizes: list[int]) -> Callable:
    """``P -> criterion``: expected loss ``sum_x pi(x) sum_y P[x, y] C[x, y]`` (000 Eq. 23), or for the
    entropy task the expected marginal-entropy change ``sum_l |H(pi_l) - H((pi P)_l)|`` of the group."""
    if task.population != "entropy":
        return lambda P: expected_loss(P, prior, loss)
    axes = [tuple(j for j in range(len(sizes)) if j != a) for a in range(len(sizes))]
    joint = prior.reshape(sizes)
    before = [_entropy(joint.sum(axis=ax)) for ax in axes]

    def change(P: np.ndarray) -> float:
        out = (prior @ P).reshape(sizes)
        return float(sum(abs(h - _entropy(out.sum(axis=ax))) for h, ax in zip(before, axes, strict=True)))

    return change


# --------------------------------------------------------------------------- cache


class Cache(Protocol):
    """What DepHDP needs from a cache: ``get(key)`` (None when absent) and ``cache[key] = value``.

    A plain ``dict`` qualifies; the app passes its own locked, size-bounded store. The core keeps no
    module-global state: without a cache, nothing outlives the call.
    """

    def get(self, key: Hashable, /) -> Any: ...

    def __setitem__(self, key: Hashable, value: Any, /) -> None: ...


T = TypeVar("T")


def cached(cache: Cache | None, key: Hashable, compute: Callable[[], T]) -> T:
    """``cache[key]``, computing and storing it when absent (no cache: just compute)."""
    if cache is None:
        return compute()
    hit = cache.get(key)
    if hit is None:
        hit = compute()
        cache[key] = hit
    return hit


# --------------------------------------------------------------------------- stages


def task_for(encoded: Encoded, config: DepHDPConfig, cache: Cache | None) -> Task:
    """The fitted task, cached by the table's content (``Encoded.fingerprint``: codes, schema, target)."""
    key = ("dephdp.task", encoded.fingerprint, config.task, config.task_attribute, config.task_threshold)
    attribute, threshold = config.task_attribute, config.task_threshold
    return cached(
        cache, key, lambda: make_task(config.task, encoded, attribute=attribute, threshold=threshold)
    )


def _contexts(codes: np.ndarray, config: DepHDPConfig) -> np.ndarray:
    if codes.shape[0] <= config.max_contexts:
        return codes
    rng = np.random.default_rng(config.seed)
    return codes[np.sort(rng.choice(codes.shape[0], config.max_contexts, replace=False))]


def group_profile(
    encoded: Encoded,
    task: Task,
    codes: np.ndarray,
    group: tuple[str, ...],
    config: DepHDPConfig,
    cache: Cache | None,
    progress: Progress,
) -> GroupProfile:
    """The group's :class:`GroupProfile`, cached by group signature (data, group, task, p, grid, OPT
    eligibility, context sample), never by eps, tau_dpn, tau_dim or the score."""
    p_key = 1.0 if len(group) == 1 else float(config.p)  # one attribute: d_p does not depend on p
    with_opt = int(np.prod([encoded.domain_sizes[a] for a in group])) <= config.opt_max_domain
    grid = config.eps_grid
    key = (
        "dephdp.profile",
        encoded.fingerprint,
        group,
        task.signature,
        p_key,
        tuple(grid.tolist()),
        with_opt,
        float(config.opt_seconds) if with_opt else None,
        config.max_contexts,
        config.seed,
    )
    return cached(
        cache, key, lambda: _group_profile(encoded, task, codes, group, config, p_key, with_opt, progress)
    )


def _group_profile(
    encoded: Encoded,
    task: Task,
    codes: np.ndarray,
    group: tuple[str, ...],
    config: DepHDPConfig,
    p_key: float,
    with_opt: bool,
    progress: Progress,
) -> GroupProfile:
    grid = config.eps_grid
    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    cols = [task.attributes.index(a) for a in group]
    sizes = [encoded.domain_sizes[a] for a in group]
    dist = product_distance([encoded.components[a] for a in group], p_key)
    joint = np.ravel_multi_index(tuple(codes[:, cols].T), tuple(sizes))
    prior = np.bincount(joint, minlength=dist.shape[0]) / joint.size
    name = ", ".join(group)
    # a bar that moves and a stop that lands within seconds, also on an attribute of thousands of values
    # (audit: 4,908 values took 26 s for the loss matrix, 6 s for the scores, 6 s a budget for EM + remap)
    share = 0.3 if with_opt else 1.0  # of the group's bar for the loss, the scores and EM; OPT fills the rest
    sub = part(progress, 0.0, 0.3 * share, f"{name}: ")
    loss = group_loss_matrix(task, _contexts(codes, config), cols, sizes, dist, sub)
    seconds["loss"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    report(progress, 0.3 * share, f"{name}: adequacy scores")
    mse, rad = mse_likeness(loss, dist), radial_fit(loss, dist)
    seconds["scores"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    crit = _criterion(task, prior, loss, sizes)
    em, rmp, remap = np.empty(grid.size), np.empty(grid.size), []
    for i, e in enumerate(grid):
        report(
            progress,
            share * (0.4 + 0.6 * i / grid.size),
            f"{name}: EM and remapping, budget {i + 1}/{grid.size}",
        )
        P = exponential_mechanism(dist, float(e))
        em[i] = crit(P)
        remap.append(remap_outputs(P, prior, loss))
        rmp[i] = crit(_remapped(P, remap[-1]))
    use_remap = rmp <= em  # calibrated remapping: post-process only where it lowers the criterion
    seconds["dpn"] = time.perf_counter() - t0
    curves = {"DPN": em, "RMP": rmp, "CAL": np.minimum(em, rmp)}
    opt_channels, message = None, f"OPT not computed: {dist.shape[0]} states > opt_max_domain"
    if with_opt:
        t0 = time.perf_counter()
        lp_share = config.opt_seconds / grid.size  # per grid point: the group's LPs stay within opt_seconds
        results = optimal_mechanisms(
            prior, loss, dist, grid, progress=part(progress, share, 1.0, f"{name}: "), time_limit=lp_share
        )
        opt, opt_channels, failures = np.empty(grid.size), [], 0
        for i, r in enumerate(results):
            value = crit(r.matrix) if r.success else np.inf
            if value <= curves["CAL"][i]:
                opt[i], P = value, r.matrix
            else:  # LP failed, or (population task) the record-loss optimum is worse on the criterion
                failures += not r.success
                P = exponential_mechanism(dist, float(grid[i]))
                opt[i], P = curves["CAL"][i], (_remapped(P, remap[i]) if use_remap[i] else P)
            opt_channels.append(P)
        curves["OPT"] = opt
        message = "OPT computed" + (
            f" ({failures} of {grid.size} LPs failed or ran out of their share of the group's LP time "
            f"({config.opt_seconds:g} s): EM (+ remap) kept there)"
            if failures
            else ""
        )
        seconds["opt"] = time.perf_counter() - t0
    envelopes = {k: shifted_envelopes(grid, v[None, :]) for k, v in curves.items()}
    prof = GroupProfile(
        attributes=group,
        sizes=tuple(sizes),
        dist=dist,
        prior=prior,
        loss=loss,
        mse=mse,
        radial=rad,
        eps_grid=grid,
        curves=curves,
        envelopes={k: (lo[0], up[0]) for k, (lo, up) in envelopes.items()},
        remap=remap,
        use_remap=use_remap,
        opt_channels=opt_channels,
        opt_message=message,
        seconds=seconds,
    )
    return prof


def groups_for(
    encoded: Encoded, attrs: tuple[str, ...], config: DepHDPConfig, cache: Cache | None
) -> tuple[tuple[tuple[str, ...], ...], int]:
    """The NMI groups of the released attributes (split to ``max_domain``) and the number of NMI
    components before that split."""
    key = ("dephdp.groups", encoded.fingerprint, attrs, config.tau_group, config.max_group_domain)

    def compute() -> tuple[tuple[tuple[str, ...], ...], int]:
        nmi = nmi_matrix(encoded.codes[list(attrs)])
        groups = dependency_groups(
            nmi, config.tau_group, domain_sizes=encoded.domain_sizes, max_domain=config.max_group_domain
        )
        return tuple(groups), len(dependency_groups(nmi, config.tau_group))

    return cached(cache, key, compute)


def surrogate_for(
    task: Task,
    codes: np.ndarray,
    profiles: tuple[GroupProfile, ...],
    config: DepHDPConfig,
    fingerprint: str,
    cache: Cache | None,
    progress: Progress = None,
) -> Surrogate:
    """The NNLS surrogate of Eq. 20, cached by its inputs (``progress``: :func:`fit_surrogate`'s). The
    entropy task's is not fitted: every β_k = 1, the sum of the groups' marginal-entropy changes (its task
    loss also counts the joint entropy and the total correlation, which the surrogate does not model)."""
    groups = tuple(pr.attributes for pr in profiles)
    if task.population == "entropy":  # marginal-entropy changes of disjoint groups add up: no fit needed
        return Surrogate(0.0, (1.0,) * len(groups), float("nan"), float("nan"), 0)
    key = (
        "dephdp.surrogate",
        fingerprint,
        task.signature,
        groups,
        float(config.p),
        config.calibration_pairs,
        config.seed,
    )
    return cached(
        cache,
        key,
        lambda: fit_surrogate(
            task,
            codes,
            [[task.attributes.index(a) for a in g] for g in groups],
            [list(pr.sizes) for pr in profiles],
            [pr.dist for pr in profiles],
            calibration_grid(config.eps_grid),
            pairs=config.calibration_pairs,
            rng=np.random.default_rng(config.seed + 1),
            progress=progress,
        ),
    )


def calibration_grid(grid: np.ndarray) -> np.ndarray:
    """Budgets of the surrogate calibration pairs: grid points in [0.1, 10] (per-group budgets in use)."""
    inside = grid[(grid >= 0.1) & (grid <= 10.0)]
    return inside if inside.size else grid


def clear_profile_cache(cache: Any = None) -> None:
    """Empty ``cache`` (anything with ``clear()``); kept for callers of the old module-global cache.

    The core keeps no cache of its own any more: callers pass one to :func:`mdp_core.run_dephdp`
    (``cache=``) and own its lifetime. Without an argument this does nothing.
    """
    if cache is not None:
        cache.clear()
