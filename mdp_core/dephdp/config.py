"""The DepHDP configuration: every knob of :func:`~mdp_core.dephdp.pipeline.run_dephdp` (000 Sec. III)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from numbers import Integral, Real
from typing import Literal

import numpy as np

from mdp_core._validation import check_eps
from mdp_core.errors import DataError

__all__ = ["BASELINES", "DepHDPConfig", "Note"]
from mdp_core.dephdp.tasks import TASKS
from mdp_core.metrics import dual_exponent

BASELINES = ("SPL+DPN", "SPL+RMP", "ALC+DPN", "ALC+RMP")
#: Most points of the profiles' eps grid (default 36): every point costs an EM, a remap and an LP per group.
MAX_GRID_POINTS = 500
_NUMBERS = (
    "eps",
    "p",
    "tau_group",
    "tau_dim",
    "tau_dpn",
    "grid_lo",
    "grid_hi",
    "min_group_eps",
    "opt_seconds",
)
_COUNTS = ("max_group_domain", "opt_max_domain", "grid_points", "calibration_pairs", "max_contexts", "seed")
NoteKind = Literal["tau_dim_cap", "grouping", "lp_time", "method"]


class Note(str):
    """A note of a DepHDP result: its text, plus what it is about (``kind``), so that a page that says a
    fact in its own words can leave out the core's sentence without matching its wording.

    Kinds: ``"tau_dim_cap"`` (tau_dim acts as ``opt_max_domain``), ``"grouping"`` (components split at
    ``max_group_domain``), ``"lp_time"`` (a group's LPs kept EM (+ remap) at some budgets), ``"method"``
    (a baseline is released instead of DepHDP: :func:`~mdp_core.dephdp.pipeline.released_by`).
    """

    kind: NoteKind

    def __new__(cls, text: str, kind: NoteKind) -> Note:
        note = super().__new__(cls, text)
        note.kind = kind
        return note

    def __getnewargs__(self) -> tuple[str, NoteKind]:  # type: ignore[override]  # pickling keeps the kind
        return str(self), self.kind


@dataclass(frozen=True)
class DepHDPConfig:
    """Every knob of :func:`run_dephdp` (frozen: usable as a cache key and saved as JSON by the page).

    Attributes
    ----------
    eps : float
        Global budget (record metric ``d_p``).
    p : float
        Record metric exponent (``>= 1`` or ``inf``); budgets compose with the dual norm q.
    tau_group, tau_dim, tau_dpn : float
        Grouping NMI threshold, OPT domain-size threshold and DPN-adequacy threshold (Eq. 24).
    task : str
        A key of :data:`mdp_core.tasks.TASKS`.
    score : {"radial", "mse"}
        Adequacy score used for selection (DepHDP-r / DepHDP-m).
    max_group_domain : int
        Groups are split (weakest NMI edge first) until their joint domain is at most this.
    opt_max_domain : int
        OPT profiles (LPs) are computed for groups up to this domain size. 48 is measured, not arbitrary:
        a 36-point OPT profile takes ~5 s at 32 states but 50-180 s at 48-64 states and > 100 s for
        heart's 168-state group (column-generation LP of 2026-11, 2 shared cores).
    grid_lo, grid_hi, grid_points : float, float, int
        Geometric eps grid of the loss-budget profiles (3 to ``MAX_GRID_POINTS = 500`` points).
    calibration_pairs, max_contexts, seed : int
        Surrogate pairs, context records per group loss matrix, and the seed of both samples.
    task_attribute, task_threshold : optional
        Threshold task: the attribute and the threshold (see :func:`mdp_core.make_task`).
    opt_seconds : float
        Wall-clock budget of one group's OPT profile (all grid points share it equally). A grid point whose
        LP does not finish in its share keeps the CAL channel there, and the result's notes say so: the page
        never waits minutes for an LP (measured: a 48-state wine group took 221 s for 36 points on 2 busy
        cores). Results of groups whose LPs all finish do not depend on it.
    min_group_eps : float
        Per-group budget floor (same unit as eps; 0 = none): every group gets at least the first grid
        point at or above it, so no group is released at the grid's minimum, where its values are nearly
        uniform noise. Must satisfy ``||floor||_q <= eps`` for the number of groups (checked by
        :func:`run_dephdp`, which names the largest feasible floor).
    """

    eps: float = 1.0
    p: float = 2.0
    tau_group: float = 0.1
    tau_dim: int = 300
    tau_dpn: float = 0.2
    task: str = "prediction"
    score: Literal["radial", "mse"] = "radial"
    max_group_domain: int = 512
    opt_max_domain: int = 48
    grid_lo: float = 0.005
    grid_hi: float = 20.0
    grid_points: int = 36
    calibration_pairs: int = 3000
    max_contexts: int = 200
    seed: int = 0
    task_attribute: str | None = None
    task_threshold: float | None = None
    min_group_eps: float = 0.0
    opt_seconds: float = 30.0

    def __post_init__(self) -> None:
        for name in _NUMBERS + _COUNTS:  # a JSON "1" would pass float() here and fail deep in a run
            value, kinds = getattr(self, name), (Integral if name in _COUNTS else Real)
            if not isinstance(value, kinds) or isinstance(value, bool):
                what = "an integer" if name in _COUNTS else "a number"
                raise TypeError(f"{name} must be {what}, got {type(value).__name__} {value!r}")
        check_eps(self.eps)
        dual_exponent(self.p)
        if not 0.0 <= self.tau_group <= 1.0:
            raise DataError(f"tau_group must lie in [0, 1], got {self.tau_group!r}")
        if not 0.0 <= self.tau_dpn <= 1.0:
            raise DataError(f"tau_dpn must lie in [0, 1], got {self.tau_dpn!r}")
        if not self.tau_dim >= 1:
            raise DataError(f"tau_dim must be >= 1, got {self.tau_dim!r}")
        if self.task not in TASKS:
            raise DataError(f"task must be one of {sorted(TASKS)}, got {self.task!r}")
        if self.score not in ("radial", "mse"):
            raise DataError(f"score must be 'radial' or 'mse', got {self.score!r}")
        if not 0 < self.grid_lo < self.grid_hi or not 3 <= self.grid_points <= MAX_GRID_POINTS:
            raise DataError(f"need 0 < grid_lo < grid_hi and grid_points in [3, {MAX_GRID_POINTS}]")
        if not (isinstance(self.min_group_eps, (int, float)) and 0.0 <= self.min_group_eps <= self.grid_hi):
            raise DataError(
                f"min_group_eps must lie in [0, grid_hi = {self.grid_hi:g}], got {self.min_group_eps!r}"
            )
        if not (isinstance(self.opt_seconds, (int, float)) and self.opt_seconds > 0):
            raise DataError(f"opt_seconds must be > 0, got {self.opt_seconds!r}")
        for name in ("max_group_domain", "opt_max_domain", "calibration_pairs", "max_contexts"):
            if int(getattr(self, name)) < 1:
                raise DataError(f"{name} must be a positive integer")

    @property
    def eps_grid(self) -> np.ndarray:
        """The geometric grid of the loss-budget profiles (unit of eps), ``grid_points`` values."""
        return np.geomspace(self.grid_lo, self.grid_hi, int(self.grid_points))

    def profile_settings(self) -> DepHDPConfig:
        """This configuration with the allocation-only knobs (eps, tau_dim, tau_dpn, score,
        min_group_eps) at their defaults: the identity of the expensive profile stage, a cache key."""
        return replace(self, eps=1.0, tau_dim=300, tau_dpn=0.2, score="radial", min_group_eps=0.0)
