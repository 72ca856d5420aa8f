"""Loss-budget profiles of attribute groups and the caches behind DepHDP's interactivity (000 Sec. III-D/E).

Private helper of :mod:`mdp_core.pipeline`. Everything here depends on the data, the grouping, the task and
``p`` -- never on eps, tau_dpn, tau_dim or the score -- so it is computed once and cached by signature:

* :func:`group_profile` -- per group: the loss matrix ``C_k`` (Eq. 16-17), MSE-likeness and radial-fit
  (Eq. 25-29), and loss-budget profiles ``L_k(eps)`` on one geometric grid for EM (DPN), EM + Bayesian
  remapping (RMP, 000 App. D-D) and, for groups with ``|X_k| <= opt_max_domain``, the LP optimum (OPT,
  warm-started along the grid; where an LP fails or is worse, the RMP channel is kept). Cached by group
  signature (data, attributes, levels, task, p, grid, context sample), not by the whole configuration.
* :func:`task_for`, :func:`groups_for`, :func:`surrogate_for` -- the fitted task, the NMI grouping and the
  NNLS surrogate (Eq. 18-22), each cached by its own inputs.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from mdp_core._validation import Progress
from mdp_core.data import Encoded
from mdp_core.data.dependency import dependency_groups, nmi_matrix
from mdp_core.dephdp._grouploss import Surrogate, fit_surrogate, group_loss_matrix
from mdp_core.dephdp.adequacy import mse_likeness, radial_fit
from mdp_core.dephdp.allocation import shifted_envelopes
from mdp_core.dephdp.config import DepHDPConfig
from mdp_core.dephdp.tasks import Task, make_task
from mdp_core.errors import DataError
from mdp_core.mechanisms import expected_loss, exponential_mechanism, mdp_violation, remap_outputs
from mdp_core.mechanisms.lp import optimal_mechanisms
from mdp_core.metrics import product_distance

VIOLATION_TOL = 1e-9


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


class _LRU:
    def __init__(self, size: int) -> None:
        self.size, self.data = size, OrderedDict()

    def get(self, key: object) -> object | None:
        if key in self.data:
            self.data.move_to_end(key)
            return self.data[key]
        return None

    def put(self, key: object, value: object) -> None:
        self.data[key] = value
        self.data.move_to_end(key)
        while len(self.data) > self.size:
            self.data.popitem(last=False)


_PROFILES = _LRU(256)
_OTHER = _LRU(32)


def clear_profile_cache() -> None:
    """Forget every cached group profile, task and surrogate (tests and memory)."""
    _PROFILES.data.clear()
    _OTHER.data.clear()


def data_key(encoded: Encoded) -> str:
    h = hashlib.sha1(np.ascontiguousarray(encoded.codes.to_numpy(dtype=np.int64)).tobytes())
    h.update(",".join(encoded.columns).encode())
    for c in encoded.columns:
        h.update(np.asarray(encoded.components[c], dtype=float).tobytes())
    return h.hexdigest()


# --------------------------------------------------------------------------- stages


def task_for(encoded: Encoded, config: DepHDPConfig, dkey: str) -> Task:
    key = ("task", dkey, config.task, config.task_attribute, config.task_threshold)
    task = _OTHER.get(key)
    if task is None:
        task = make_task(
            config.task, encoded, attribute=config.task_attribute, threshold=config.task_threshold
        )
        _OTHER.put(key, task)
    return task  # type: ignore[return-value]


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
    dkey: str,
    progress: Progress,
) -> GroupProfile:
    grid = config.eps_grid
    p_key = 1.0 if len(group) == 1 else float(config.p)  # one attribute: d_p does not depend on p
    with_opt = int(np.prod([encoded.domain_sizes[a] for a in group])) <= config.opt_max_domain
    key = (dkey, group, task.signature, p_key, tuple(grid), with_opt, config.max_contexts, config.seed)
    cached = _PROFILES.get(key)
    if cached is not None:
        return cached  # type: ignore[return-value]
    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    cols = [task.attributes.index(a) for a in group]
    sizes = [encoded.domain_sizes[a] for a in group]
    dist = product_distance([encoded.components[a] for a in group], p_key)
    joint = np.ravel_multi_index(tuple(codes[:, cols].T), tuple(sizes))
    prior = np.bincount(joint, minlength=dist.shape[0]) / joint.size
    loss = group_loss_matrix(task, _contexts(codes, config), cols, sizes, dist)
    seconds["loss"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    mse, rad = mse_likeness(loss, dist), radial_fit(loss, dist)
    seconds["scores"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    crit = _criterion(task, prior, loss, sizes)
    em, rmp, remap = np.empty(grid.size), np.empty(grid.size), []
    for i, e in enumerate(grid):
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
        results = optimal_mechanisms(prior, loss, dist, grid, progress=progress)
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
        message = "OPT computed" + (f" ({failures} LP failures: EM (+ remap) kept there)" if failures else "")
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
    _PROFILES.put(key, prof)
    return prof


def groups_for(
    encoded: Encoded, attrs: tuple[str, ...], config: DepHDPConfig, dkey: str
) -> list[tuple[str, ...]]:
    key = ("groups", dkey, attrs, config.tau_group, config.max_group_domain)
    groups = _OTHER.get(key)
    if groups is None:
        nmi = nmi_matrix(encoded.codes[list(attrs)])
        groups = dependency_groups(
            nmi, config.tau_group, domain_sizes=encoded.domain_sizes, max_domain=config.max_group_domain
        )
        _OTHER.put(key, groups)
    return groups  # type: ignore[return-value]


def surrogate_for(
    task: Task, codes: np.ndarray, profiles: list[GroupProfile], config: DepHDPConfig, dkey: str
) -> Surrogate:
    groups = tuple(pr.attributes for pr in profiles)
    if task.population == "entropy":  # marginal-entropy changes of disjoint groups add up: no fit needed
        return Surrogate(0.0, (1.0,) * len(groups), float("nan"), float("nan"), 0)
    key = ("surrogate", dkey, task.signature, groups, float(config.p), config.calibration_pairs, config.seed)
    sur = _OTHER.get(key)
    if sur is None:
        sur = fit_surrogate(
            task,
            codes,
            [[task.attributes.index(a) for a in g] for g in groups],
            [list(pr.sizes) for pr in profiles],
            [pr.dist for pr in profiles],
            calibration_grid(config.eps_grid),
            pairs=config.calibration_pairs,
            rng=np.random.default_rng(config.seed + 1),
        )
        _OTHER.put(key, sur)
    return sur  # type: ignore[return-value]


def calibration_grid(grid: np.ndarray) -> np.ndarray:
    """Budgets of the surrogate calibration pairs: grid points in [0.1, 10] (per-group budgets in use)."""
    inside = grid[(grid >= 0.1) & (grid <= 10.0)]
    return inside if inside.size else grid
