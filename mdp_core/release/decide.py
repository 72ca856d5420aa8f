""" "Which eps?": from a utility target to the smallest budget that meets it, with its CI and the frontier.

:func:`which_eps` runs one sweep (:func:`mdp_core.sweep.run_sweep`: DepHDP and the four baselines over a
geometric grid of budgets, ``repetitions`` privatisations of the held-out split each) and asks
:func:`mdp_core.sweep.smallest_eps` for the smallest budget from which on every budget's 95 % CI meets
the target, optionally refined by bisection between grid points. The answer is stated in words
(:attr:`Decision.sentence`), with the meaning of the budget (:func:`mdp_core.release.budget_sentence`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, fields
from typing import Any

import pandas as pd

from mdp_core._text import share
from mdp_core._validation import Progress
from mdp_core.dephdp.utility import MAJORITY_TOLERANCE, UTILITY_METRICS
from mdp_core.errors import DataError

from .posterior import budget_sentence, posterior_bound
from .scenarios import UtilityTarget

__all__ = ["WHICH_EPS_GRID", "Decision", "sweep_options", "which_eps"]

#: Budgets tried by "which eps" (geometric-ish, 0.25 to 20 per unit of the record metric).
WHICH_EPS_GRID: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 8.0, 12.0, 20.0)


@dataclass(frozen=True, eq=False)
class Decision:
    """The answer to "which eps?" and where it came from.

    Attributes
    ----------
    choice : EpsChoice
        ``eps, estimate, ci, met, reason`` (see :func:`mdp_core.sweep.smallest_eps`).
    frontier : DataFrame
        :func:`mdp_core.sweep.frontier` of the sweep (DepHDP and the baselines, mean and 95 % CI per eps).
    target : UtilityTarget
        As stated by the user.
    metric : str
        The task's primary metric (e.g. ``accuracy``).
    reference : float
        The metric without privacy (the same model on the original records).
    seconds : float
        Wall-clock seconds of the sweep(s).
    dataset : str
    skipped : tuple of float
        Budgets of the grid left out because they cannot give every group the configuration's budget
        floor (``min_group_eps``): no release with that floor exists there.
    majority : float or None
        Prediction task: the held-out accuracy of always predicting the more frequent label
        (:attr:`mdp_core.sweep.SweepData.majority_rate`); an accuracy at or below it says nothing.
    test_rows : int
        Records the sweep releases and scores (its test split); 0 when unknown.
    """

    choice: Any
    frontier: pd.DataFrame
    target: UtilityTarget
    metric: str
    reference: float
    seconds: float
    dataset: str
    skipped: tuple[float, ...] = ()
    majority: float | None = None
    test_rows: int = 0

    @property
    def target_value(self) -> float:
        """The target in the metric's units."""
        return self.target.value * self.reference if self.target.kind == "relative" else self.target.value

    @property
    def uninformative(self) -> bool:
        """Whether the target is met by an accuracy no better than always predicting the more frequent
        label (within :data:`~mdp_core.dephdp.MAJORITY_TOLERANCE`): the budget that meets it is no answer
        (wine: 95 % of non-private is 0.777, below the majority label's 0.794, met at the smallest ε)."""
        return (
            bool(self.choice.met)
            and self.majority is not None
            and self.target_value <= self.majority + MAJORITY_TOLERANCE
        )

    @property
    def sentence(self) -> str:
        said = self._no_answer() if self.uninformative else self._answer() + self._majority_note()
        if self.skipped:
            budgets = ", ".join(f"{e:g}" for e in self.skipped)
            said += (
                f" Budgets too small to give every group the budget floor were left out (ε = {budgets}): "
                "no release with that floor exists there."
            )
        return said

    def _majority_note(self) -> str:
        """Said when the target, or an unmet answer's accuracy, is no better than always predicting the
        more frequent label (adult: 0.758 at every budget, which read as a good private accuracy)."""
        if self.majority is None:
            return ""
        c, level = self.choice, self.majority + MAJORITY_TOLERANCE
        if self.target_value <= level:
            return (
                f" Always predicting the more frequent label already scores {self.majority:.3f} on these "
                "records: a target at or below it says nothing about the release."
            )
        if not c.met and c.estimate <= level:
            return (
                f" That is no better than always predicting the more frequent label ({self.majority:.3f}): "
                "at this budget the release carries nothing the task can use."
            )
        return ""

    def _described(self) -> tuple[str, str, bool]:
        """The metric in words, the target in words (with its value when relative), higher-is-better."""
        column = self.frontier.get("higher_is_better")
        higher = bool(column.iloc[0]) if column is not None and len(column) else True
        metric = self.metric.replace("_", " ")  # "mean distance", not the column name mean_distance
        what = self.target.describe(metric, higher=higher)
        if self.target.kind == "relative":
            what += f" ({self.target_value:.3f} of {self.reference:.3f})"
        return metric, what, higher

    def _no_answer(self) -> str:
        """An :attr:`uninformative` target: that fact first, then what to ask instead (a target above the
        majority rate), and the budget that met it only as a side note."""
        c, majority = self.choice, float(self.majority or 0.0)
        level = majority + MAJORITY_TOLERANCE
        metric, what, _ = self._described()
        said = (
            f"Always predicting the more frequent label already scores {majority:.3f} on these records, "
            f"without any data released, so the target {what} says nothing about the release: it is "
            f"met at ε = {c.eps:.3g} ({metric} {c.estimate:.3f}, 95 % CI {c.ci[0]:.3f}–{c.ci[1]:.3f}) "
            "whether or not the release carries anything the task can use, so that ε is no answer. "
        )
        share = math.floor(100.0 * level / self.reference) + 1 if self.reference > 0 else math.inf
        if share <= 100:
            return said + (
                f"Set a target above {level:.3f}: keep at least {share} % of the non-private {metric} "
                f"({self.reference:.3f}), or an absolute {metric} above {level:.3f}."
            )
        return said + (
            f"Even without privacy the {metric} is {self.reference:.3f}, hardly better: on this table "
            "the prediction task measures nothing; choose another target column or task."
        )

    def _answer(self) -> str:
        c = self.choice
        metric, what, higher = self._described()
        if not c.met:
            where = "the largest budget tried (" if c.passed_below else "any budget tried (up to "
            said = (
                f"{what}: not met at {where}ε = {c.eps:g}) on {self.dataset}. At "
                f"ε = {c.eps:g} the {metric} is {c.estimate:.3f} (95 % CI {_ci(c)})."
            )
            mean_meets = c.estimate >= self.target_value if higher else c.estimate <= self.target_value
            if mean_meets and math.isfinite(c.ci[0]):  # "not met" beside a mean that meets it: why
                end = c.ci[0] if higher else c.ci[1]
                said += (
                    f" The mean meets the target, but the interval's {'lower' if higher else 'upper'} end "
                    f"({end:.3f}) does not: a target counts as met only when the whole 95 % interval "
                    "meets it. More repetitions narrow the interval."
                )
            return said + self._dip()
        p50 = posterior_bound(0.5, c.eps)
        budget = (  # met at the grid's smallest budget: a smaller one may meet it too
            f"ε = {c.eps:.3g} or less (the smallest budget tried meets it)"
            if c.grid_floor
            else f"ε = {c.eps:.3g}"
        )
        lead = "from which on every budget tried keeps" if c.passed_below else "that keeps"  # not "smallest"
        return (
            f"The smallest budget {lead} {what} on {self.dataset} is {budget} "
            f"({c.settings.get('method', 'DepHDP')}): {metric} {c.estimate:.3f}, 95 % CI "
            f"{_ci(c)}, and every larger budget tried meets it too.{self._dip()} {self._split_scope()}"
            f"{budget_sentence(c.eps)} "
            + (  # never "at most > 99.9 %"
                "A 50 % guess can become near certainty (above 99.9 %)."
                if p50 > 0.999
                else f"A 50 % guess becomes at most {share(p50)}."
            )
        )

    def _dip(self) -> str:
        """Budgets below a failing one that met the target: not an answer (a dip of the frontier, or noise;
        counting them would call met, one time in five, a target no budget meets)."""
        cut = self.choice.passed_below
        if not cut:
            return ""
        budgets = ", ".join(f"{e:g}" for e in cut)
        return (
            f" (ε = {budgets} met it too, but a larger budget did not: a dip of the frontier or noise, so "
            "the answer does not rest on it.)"
        )

    def _split_scope(self) -> str:
        """What the interval covers: the release's randomness on one split (audit: over 20 seeds the
        heart answer ranged from ε = 8 to "not met"; the interval held the seeds' mean 46 % of the time)."""
        records = f"these {self.test_rows:,} held-out records" if self.test_rows else "these held-out records"
        return (
            f"The interval covers the release's randomness on {records} only: another split of the table "
            "(another seed) can move the answer by more, the more so the fewer the records. "
        )


def sweep_options(config: Any) -> tuple[tuple[str, Any], ...]:
    """The fields of a :class:`~mdp_core.DepHDPConfig` that a sweep takes as ``options`` (every field but
    the ones a sweep sets itself: eps, task, thresholds, p, score, seed), where they differ from the
    defaults: a scenario's budget floor and solver settings, so "which eps" sweeps what it releases."""
    from mdp_core.dephdp import DepHDPConfig
    from mdp_core.sweep.spec import SWEEP_OWN_FIELDS

    default = DepHDPConfig()
    return tuple(
        (f.name, getattr(config, f.name))
        for f in sorted(fields(config), key=lambda f: f.name)
        if f.name not in SWEEP_OWN_FIELDS and getattr(config, f.name) != getattr(default, f.name)
    )


def which_eps(
    dataset: str,
    target: UtilityTarget,
    *,
    encoded: Any = None,
    task: str = "prediction",
    p: float = 2.0,
    eps: tuple[float, ...] = WHICH_EPS_GRID,
    repetitions: int = 5,
    seed: int = 0,
    refine: int = 0,
    client: Any = None,
    progress: Progress = None,
    options: tuple[tuple[str, Any], ...] = (),
    method: str = "DepHDP",
) -> Decision:
    """Smallest eps meeting ``target`` for ``task`` on ``dataset`` (an embedded sample name, or any name
    with ``encoded`` = the discretised table), DepHDP and the four baselines on one budget grid.

    Parameters
    ----------
    dataset : str
        Sample name or file name (shown in the answer).
    target : UtilityTarget
        ``relative`` (share of non-private, e.g. 0.95) or ``absolute`` (in the metric's units).
    encoded : Encoded, optional
        The table to use instead of loading ``dataset``.
    task, p, eps, repetitions, seed, options
        The sweep (see :class:`mdp_core.sweep.SweepSpec`).
    refine : int
        Bisection steps between grid budgets (each runs one more one-budget sweep).
    client : distributed.Client, None or False
        Engine (``None``: embedded LocalCluster or ``DASK_SCHEDULER_ADDRESS``; ``False``: in-process).
    method : str
        Whose smallest eps: ``"DepHDP"`` or a baseline (the method a scenario releases with).
    """
    from mdp_core.sweep import SweepSpec, frontier, run_sweep, smallest_eps

    if not isinstance(target, UtilityTarget):
        raise TypeError(f"target must be a UtilityTarget, got {type(target).__name__}")
    relative = target.kind == "relative"
    name, _, higher = UTILITY_METRICS.get(task, ("", "", True))
    if relative and not higher:  # before the sweep (minutes on a large table), not after it
        raise DataError(
            f"a share of the non-private utility needs the prediction task; the {task} task measures the "
            f"{name.replace('_', ' ')} (lower is better): give an absolute target instead"
        )
    spec = SweepSpec(
        dataset=dataset, task=task, p=p, eps=tuple(eps), repetitions=repetitions, seed=seed, options=options
    )
    t0 = time.perf_counter()
    results = run_sweep(spec, client=client, progress=progress, encoded=encoded)
    skipped = [t["skipped"] for t in results.attrs.get("tasks", []) if "skipped" in t]
    if results.empty:
        if skipped:  # every budget of the grid was too small for the floor
            raise DataError(f"no budget of the grid (up to ε = {max(spec.eps):g}) allows it: {skipped[-1]}")
        raise DataError("the sweep returned no results")
    choice = smallest_eps(
        results, target.value, relative=relative, method=method, refine=refine, client=client
    )
    seconds = time.perf_counter() - t0
    reference = float(results["reference"].mean()) if "reference" in results else math.nan
    return Decision(
        choice=choice,
        frontier=frontier(results),
        target=target,
        metric=str(results["metric"].iloc[0]),
        reference=reference,
        seconds=seconds,
        dataset=dataset,
        skipped=tuple(sorted(set(spec.eps) - set(results["eps"]))),
        majority=results.attrs.get("majority_rate") if task == "prediction" else None,
        test_rows=int(results.attrs.get("test_rows", 0)),
    )


def _ci(choice: Any) -> str:
    """The choice's interval in words (none from fewer than two valid draws)."""
    lo, hi = choice.ci
    return f"{lo:.3f}–{hi:.3f}" if math.isfinite(lo) and math.isfinite(hi) else "none: fewer than two draws"
