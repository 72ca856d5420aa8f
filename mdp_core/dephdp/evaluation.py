"""Evaluation protocol of 000 Sec. IV-A: configure on a fitting split, privatise the held-out test split.

For each global budget eps, DepHDP and the four baselines (SPL+DPN, SPL+RMP, ALC+DPN, ALC+RMP) are
configured on the fitting split only (62.5 % of the records by default); every test record is then
privatised locally R times, and the task loss (:meth:`mdp_core.tasks.Task.evaluation_loss`: the mean
record loss ``mean_i gamma(U(x_i), U(M(x_i)))``, or the population metric of a population task) is
reported as ``mean +- 1.96 sd`` over the R repetitions, along with the population metrics of 000 Case III.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from mdp_core._validation import Progress, check_eps, report
from mdp_core.data import Encoded
from mdp_core.dephdp._profiles import Cache
from mdp_core.dephdp.config import BASELINES, DepHDPConfig
from mdp_core.dephdp.pipeline import compose_mechanism, run_dephdp
from mdp_core.dephdp.tasks import population_metrics, release_attributes
from mdp_core.errors import DataError

__all__ = [
    "METHODS_EVALUATED",
    "EvaluationResult",
    "evaluate_dephdp",
    "rows_of",
    "split_encoded",
    "split_rows",
]

METHODS_EVALUATED = ("DepHDP", *BASELINES)


@dataclass(frozen=True, eq=False)
class EvaluationResult:
    """``table`` has one row per (eps, method): ``mean``, ``sd``, ``lo``/``hi`` (= mean -+ 1.96 sd) of the
    test task loss, the surrogate prediction, and the mean population metrics."""

    table: pd.DataFrame
    repetitions: int
    fit_rows: int
    test_rows: int

    def pivot(self, column: str = "mean") -> pd.DataFrame:
        """eps x method table of one column."""
        return self.table.pivot(index="eps", columns="method", values=column)[list(METHODS_EVALUATED)]


def split_rows(n: int, fit_fraction: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Positions (sorted) of the fitting and the held-out records among ``n`` (000 Sec. IV-A)."""
    if not 0.0 < fit_fraction < 1.0:
        raise DataError(f"fit_fraction must lie in (0, 1), got {fit_fraction!r}")
    n_fit = round(fit_fraction * n)
    if n_fit < 2 or n - n_fit < 1:
        need = next(
            m for m in range(3, 10**6) if round(fit_fraction * m) >= 2 and m - round(fit_fraction * m)
        )
        raise DataError(
            f"the table has {n:,} row{'s' if n != 1 else ''}; at least {need} are needed, as "
            f"{fit_fraction:.1%} of the rows fit the mechanisms and the rest are held out to measure "
            "the utility of the release"
        )
    perm = rng.permutation(n)
    return np.sort(perm[:n_fit]), np.sort(perm[n_fit:])


def split_encoded(encoded: Encoded, fit_fraction: float, rng: np.random.Generator) -> tuple[Encoded, Encoded]:
    """Random fitting / test split of the rows (:func:`split_rows`); levels and metrics are shared."""
    fit, test = split_rows(len(encoded.codes), fit_fraction, rng)
    return rows_of(encoded, fit), rows_of(encoded, test)


def rows_of(encoded: Encoded, positions: np.ndarray) -> Encoded:
    """The records at ``positions`` (a copy; its content fingerprint is recomputed)."""
    return replace(encoded, codes=encoded.codes.iloc[positions].reset_index(drop=True), fingerprint="")


def evaluate_dephdp(
    encoded: Encoded,
    config: DepHDPConfig,
    *,
    eps_values: Sequence[float] = tuple(range(1, 11)),
    repetitions: int = 20,
    fit_fraction: float = 0.625,
    seed: int = 0,
    progress: Progress = None,
    cache: Cache | None = None,
) -> EvaluationResult:
    """Evaluate DepHDP and the four baselines on a held-out test split (000 Sec. IV-A, Table I).

    Parameters
    ----------
    encoded : Encoded
        The whole discretised table.
    config : DepHDPConfig
        Configuration; its ``eps`` is replaced by each of ``eps_values``.
    eps_values : sequence of float
        Global budgets.
    repetitions : int
        Privatisations of the test split per (eps, method).
    fit_fraction : float
        Share of rows used for configuration (000: 62.5 %).
    seed : int
        Seeds the split and the privatisations.
    progress : callable, optional
        ``progress(fraction, message)``.
    cache : dict-like, optional
        Profile cache shared with :func:`run_dephdp` (the fitting split is the one of
        ``split_encoded(encoded, fit_fraction, default_rng(seed))``, so a page that configured DepHDP on
        that split reuses its profiles). Without one, a cache local to this call is shared by the budgets.
    """
    if not isinstance(repetitions, (int, np.integer)) or repetitions < 2:
        raise DataError(f"repetitions must be an integer >= 2, got {repetitions!r}")
    eps_list = [check_eps(e, "eps_values") for e in eps_values]
    if not eps_list:
        raise DataError("eps_values must not be empty")
    cache = {} if cache is None else cache
    rng = np.random.default_rng(seed)
    fit, test = split_encoded(encoded, fit_fraction, rng)
    attrs = release_attributes(encoded)
    x_test = test.codes[list(attrs)].to_numpy().astype(np.int64)
    rows = []
    for j, eps in enumerate(eps_list):
        share = (
            None
            if progress is None
            else (lambda f, m, j=j: report(progress, (j + f * 0.5) / len(eps_list), m))
        )
        res = run_dephdp(fit, replace(config, eps=eps), cache=cache, progress=share)
        mechs = {"DepHDP": (res.mechanism, res.value)}
        K = len(res.profiles)
        for name, base in res.baselines.items():
            idx = np.searchsorted(res.eps_grid, base.eps)
            mechs[name] = (
                compose_mechanism(res.profiles, [name.split("+")[1]] * K, idx, attrs, config.p),
                base.value,
            )
        # the same test records in every repetition (a population task does not embed them)
        x_utility = None if res.task.population else res.task.utility(x_test)
        for k, (name, (mech, predicted)) in enumerate(mechs.items()):
            losses, pops = [], []
            for r in range(repetitions):  # a report per draw: a page can stop the run within one
                done = (j + 0.5 + 0.5 * (k + r / repetitions) / len(mechs)) / len(eps_list)
                report(progress, done, f"eps = {eps:g}: {name}, draw {r + 1} of {repetitions}")
                y = mech.privatize(test.codes, rng).to_numpy()
                losses.append(res.task.evaluation_loss(x_test, y, x_utility))
                pops.append(population_metrics(x_test, y))
            mean, sd = float(np.mean(losses)), float(np.std(losses, ddof=1))
            pop = {k: float(np.mean([d[k] for d in pops])) for k in pops[0]}
            rows.append(
                {
                    "eps": eps,
                    "method": name,
                    "mean": mean,
                    "sd": sd,
                    "lo": mean - 1.96 * sd,
                    "hi": mean + 1.96 * sd,
                    "surrogate": predicted,
                    **pop,
                }
            )
        report(progress, (j + 1) / len(eps_list), f"evaluated eps = {eps:g}")
    return EvaluationResult(pd.DataFrame(rows), int(repetitions), len(fit.codes), len(test.codes))
