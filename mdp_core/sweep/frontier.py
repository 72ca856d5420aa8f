"""The privacy-utility frontier of a sweep and the smallest budget that meets a utility target.

* :func:`frontier`: per (task, tau_group, tau_dpn, method, eps) the mean of the held-out utility and loss
  over the repetitions with a 95 % confidence interval of the mean (Student t, ``mean +- t_{0.975, R-1}
  sd / sqrt(R)``), the 000 spread of a single release (``mean +- 1.96 sd``), and Pareto flags: a point is
  Pareto-optimal within its task when no other point has a budget ``<=`` and a mean utility at least as good,
  one of them strictly.
* :func:`smallest_eps`: the smallest budget on the grid from which on every budget's confidence bound meets
  the target (the lower bound for a higher-is-better metric, the upper bound for a loss), tested from the
  largest budget down and stopped at the first failure (fixed-sequence testing: with one setting and method
  per budget, as "which eps" asks, the chance of calling a target met that no budget meets stays at 2.5 %,
  where taking the smallest passing budget of nine made it 20 %; taking the best of k settings or methods
  per budget raises it towards 1 - 0.975^k), optionally refined by bisection (in log eps) between that
  budget and the failing one below it. The intervals cover the release's randomness on the sweep's test
  records, not another split of the table.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import t as student_t

from mdp_core.errors import DataError
from mdp_core.sweep.spec import SweepSpec

__all__ = ["EpsChoice", "frontier", "smallest_eps"]

SETTINGS = ("task", "tau_group", "tau_dpn")
_HIGHER = {"accuracy", "auc", "agreement", "accuracy_reference", "auc_reference"}


#: Relative slack of a target comparison: a release scoring exactly the reference meets "100 %" (the mean
#: of 45 equal references differs from one of them in the last bit).
_TARGET_RTOL = 1e-12


def _ci(mean: pd.Series, sd: pd.Series, n: pd.Series) -> tuple[pd.Series, pd.Series]:
    """The Student t 95 % interval of a mean of ``n`` values, its lower end clipped at 0 (every metric here
    is >= 0); NaN below two values (one draw, or all but one NaN, gives no interval, not a zero-width one)."""
    q = pd.Series(student_t.ppf(0.975, np.maximum(n.to_numpy() - 1, 1)), index=n.index)
    half = (q * sd / np.sqrt(n)).where(n >= 2)
    return (mean - half).clip(lower=0.0), mean + half


def _check_results(results: object) -> pd.DataFrame:
    if not isinstance(results, pd.DataFrame):
        raise TypeError(f"results must be the DataFrame run_sweep returns, got {type(results).__name__}")
    need = {*SETTINGS, "method", "eps", "utility", "loss", "higher_is_better"}
    missing = sorted(need - set(results.columns))
    if missing:
        raise DataError(f"results lack the columns {missing} (pass the DataFrame run_sweep returns)")
    if results.empty:
        raise DataError("results are empty")
    return results


def _pareto(eps: np.ndarray, value: np.ndarray, higher: bool) -> np.ndarray:
    v = value if higher else -value
    flags = np.ones(eps.size, dtype=bool)
    for i in range(eps.size):
        dominated = (eps <= eps[i]) & (v >= v[i]) & ((eps < eps[i]) | (v > v[i]))
        flags[i] = not dominated.any()
    return flags


def frontier(results: pd.DataFrame) -> pd.DataFrame:
    """Mean and 95 % CI of utility and loss per (task, tau_group, tau_dpn, method, eps), with Pareto flags.

    Returns
    -------
    DataFrame
        ``task, tau_group, tau_dpn, method, eps, n, metric, higher_is_better, utility_mean, utility_sd,
        utility_ci_lo, utility_ci_hi, utility_lo, utility_hi`` (``lo``/``hi``: ``mean -+ 1.96 sd``, the
        spread of one release), ``reference_mean``, ``loss_mean, loss_sd, loss_ci_lo, loss_ci_hi`` and
        ``pareto`` (on the mean utility within each task), sorted by task, settings, method and eps.
    """
    df = _check_results(results)
    keys = [*SETTINGS, "method", "eps"]
    agg = df.groupby(keys, sort=True).agg(
        n=("utility", "count"),
        metric=("metric", "first") if "metric" in df else ("utility", "size"),
        higher_is_better=("higher_is_better", "first"),
        utility_mean=("utility", "mean"),
        utility_sd=("utility", "std"),
        reference_mean=("reference", "mean") if "reference" in df else ("utility", "size"),
        loss_mean=("loss", "mean"),
        loss_sd=("loss", "std"),
        loss_n=("loss", "count"),
    )
    agg = agg.reset_index()
    for col in ("utility", "loss"):
        n = agg[f"{col}_n"] if col == "loss" else agg["n"]
        agg[f"{col}_ci_lo"], agg[f"{col}_ci_hi"] = _ci(agg[f"{col}_mean"], agg[f"{col}_sd"], n)
    agg["utility_lo"] = agg["utility_mean"] - 1.96 * agg["utility_sd"].fillna(0.0)
    agg["utility_hi"] = agg["utility_mean"] + 1.96 * agg["utility_sd"].fillna(0.0)
    agg["pareto"] = False
    for _, idx in agg.groupby("task").groups.items():
        sub = agg.loc[idx]
        higher = bool(sub["higher_is_better"].iloc[0])
        agg.loc[idx, "pareto"] = _pareto(sub["eps"].to_numpy(), sub["utility_mean"].to_numpy(), higher)
    cols = [
        *keys,
        "n",
        "metric",
        "higher_is_better",
        "utility_mean",
        "utility_sd",
        "utility_ci_lo",
        "utility_ci_hi",
        "utility_lo",
        "utility_hi",
        "reference_mean",
        "loss_mean",
        "loss_sd",
        "loss_ci_lo",
        "loss_ci_hi",
        "pareto",
    ]
    return agg[cols]


@dataclass(frozen=True)
class EpsChoice:
    """The answer to "which eps?".

    Attributes
    ----------
    eps : float
        When ``met``, the smallest grid budget from which on every grid budget meets the target (or the
        bisection's budget below it); else the largest budget tried.
    estimate : float
        Mean of the metric at ``eps`` over the repetitions.
    ci : tuple of float
        95 % confidence interval of that mean.
    met : bool
        Whether the target is met at ``eps`` (by the conservative end of the interval).
    reason : str
        One sentence a person can read ("not met at any budget tried (up to eps = X)" when not met).
    settings : dict
        The method and the settings (task, tau_group, tau_dpn) at ``eps``.
    target : float
        The target in the metric's units (a relative target is multiplied by the reference).
    metric : str
        The metric judged.
    grid_floor : bool
        Met at the smallest budget tried: a smaller one may meet the target too.
    passed_below : tuple of float
        Budgets below the first failure (counted from the top) whose interval met the target: a dip of
        the frontier, or noise, that the answer does not rely on.
    """

    eps: float
    estimate: float
    ci: tuple[float, float]
    met: bool
    reason: str
    settings: Mapping[str, Any] = field(default_factory=dict)
    target: float = math.nan
    metric: str = "utility"
    grid_floor: bool = False
    passed_below: tuple[float, ...] = ()


def _direction(df: pd.DataFrame, metric: str) -> bool:
    if metric == "utility":
        return bool(df["higher_is_better"].iloc[0])
    if metric == "loss":
        return False
    if metric not in df.columns:
        raise DataError(f"metric {metric!r} is not a column of the results")
    return metric in _HIGHER


def _points(df: pd.DataFrame, metric: str) -> pd.DataFrame:
    keys = [*SETTINGS, "method", "eps"]
    g = df.groupby(keys, sort=True)[metric]
    out = g.agg(["mean", "std", "count"]).reset_index()
    out["lo"], out["hi"] = _ci(out["mean"], out["std"], out["count"])
    return out


def _filter(df: pd.DataFrame, method: str | None, where: Mapping[str, Any] | None) -> pd.DataFrame:
    if method is not None:
        if method not in set(df["method"]):
            raise DataError(f"method {method!r} is not in the results (have {sorted(set(df['method']))})")
        df = df[df["method"] == method]
    for key, value in (where or {}).items():
        if key not in df.columns:
            raise DataError(f"where: {key!r} is not a column of the results")
        df = df[df[key] == value]
    if df.empty:
        raise DataError("no results match the method and settings asked for")
    if df["task"].nunique() > 1:
        raise DataError("results hold several tasks: choose one with where={'task': ...}")
    return df


def _judge(pts: pd.DataFrame, target: float, higher: bool) -> pd.DataFrame:
    pts = pts.copy()
    slack = _TARGET_RTOL * max(abs(target), 1.0)
    pts["ok"] = pts["lo"] >= target - slack if higher else pts["hi"] <= target + slack  # NaN: not met
    pts["score"] = pts["mean"] if higher else -pts["mean"]
    return pts


def smallest_eps(
    results: pd.DataFrame | SweepSpec,
    target: float,
    *,
    metric: str = "utility",
    relative: bool = False,
    method: str | None = "DepHDP",
    where: Mapping[str, Any] | None = None,
    refine: int = 0,
    client: Any = False,
) -> EpsChoice:
    """The smallest budget from which on every grid budget's 95 % confidence interval meets ``target``.

    Budgets are tested from the largest down, stopping at the first that fails (fixed-sequence testing:
    with one setting and method per budget the chance of calling met a target that no budget meets stays
    2.5 %; the smallest passing budget of nine made it 20 %; ``method=None`` or free settings take the best
    of k per budget, which raises it towards 1 - 0.975^k). A noisy dip below the target therefore ends the
    search even if smaller budgets pass again.

    Parameters
    ----------
    results : DataFrame or SweepSpec
        :func:`~mdp_core.sweep.run_sweep` output, or a spec to run first (with ``client``).
    target : float
        In the metric's units (e.g. accuracy 0.78, or bits 0.1); with ``relative=True`` a share of the
        non-private reference (e.g. 0.95 = "accuracy >= 95 % of non-private").
    metric : str
        ``"utility"`` (the task's primary metric), ``"loss"`` (the 000 task loss) or another metric
        column (``"auc"``, ...). Higher-is-better metrics are met when the CI's lower end is ``>= target``,
        the others when its upper end is ``<= target``.
    method : str or None
        The method to configure (``None``: any method; the best one per budget is taken).
    where : mapping, optional
        Settings to fix, e.g. ``{"task": "prediction", "tau_dpn": 0.2}``; otherwise, per budget, the
        setting with the best mean among those that meet the target is taken.
    refine : int
        Bisection steps (in log eps) between the chosen budget and the largest failing grid budget below
        it; each step runs a one-budget sweep of the spec (needs the spec: a SweepSpec argument or
        ``results.attrs["spec"]``).
    client : distributed.Client, None or False
        Engine of the sweeps this function runs (``False``: in-process).
    """
    from mdp_core.sweep.engine import run_sweep

    spec = results if isinstance(results, SweepSpec) else None
    if spec is not None:
        results = run_sweep(spec, client=client)
    elif isinstance(results, pd.DataFrame) and results.attrs.get("spec"):
        spec = SweepSpec.from_json(results.attrs["spec"])
    df = _filter(_check_results(results), method, where)
    try:
        target = float(target)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"target must be a number, got {target!r}") from exc
    if not math.isfinite(target) or target < 0:
        raise DataError(f"target must be a finite number >= 0 (every metric here is), got {target!r}")
    higher = _direction(df, metric)
    if relative:
        if not higher or metric not in ("utility", "accuracy", "auc", "agreement"):
            raise DataError("a relative target needs a higher-is-better metric with a non-private reference")
        ref_col = "reference" if metric == "utility" else f"{metric}_reference"
        ref = float(df[ref_col].mean()) if ref_col in df else 1.0
        target = target * ref
    pts = _judge(_points(df, metric), target, higher)
    best = pts.sort_values(["eps", "ok", "score"], ascending=[True, False, False]).groupby("eps").head(1)
    best = best.set_index("eps").sort_index()
    # fixed-sequence test from the largest budget down: the answer is met at every grid budget above it
    ok_flags = best["ok"].to_numpy(dtype=bool)
    failing = np.nonzero(~ok_flags)[0]
    first = int(failing[-1]) + 1 if failing.size else 0
    eps_max = float(best.index[-1])
    # budgets under the last failure that passed: a dip or noise the answer does not rely on
    cut = tuple(float(e) for e, ok in zip(best.index[: max(first - 1, 0)], ok_flags, strict=False) if ok)
    if first == len(best):
        top = best.iloc[-1]
        said = "at any budget tried (up to " if not cut else "at the largest budget tried ("
        return _choice(
            eps_max,
            top,
            False,
            target,
            metric,
            f"not met {said}eps = {eps_max:g}): at "
            f"eps = {eps_max:g} the {metric} is {top['mean']:.4g} "
            f"[{top['lo']:.4g}, {top['hi']:.4g}] against the target {target:.4g}",
            passed_below=cut,
        )
    eps0 = float(best.index[first])
    row = best.iloc[first]
    below = best.iloc[:first]
    where_met = "the smallest budget tried" if first == 0 else "the smallest budget on the grid"
    choice = _choice(
        eps0,
        row,
        True,
        target,
        metric,
        f"eps = {eps0:g} is {where_met} from which on every budget's 95 % CI meets the target "
        f"({row['mean']:.4g} [{row['lo']:.4g}, {row['hi']:.4g}] vs {target:.4g})",
        floor=first == 0,
        passed_below=cut,
    )
    if refine > 0 and not below.empty:
        if spec is None:
            raise DataError("refine needs the sweep spec: pass a SweepSpec or run_sweep's results")
        choice = _bisect(spec, choice, float(below.index[-1]), target, metric, higher, refine, client)
    return choice


def _choice(
    eps: float,
    row: pd.Series,
    met: bool,
    target: float,
    metric: str,
    reason: str,
    floor: bool = False,
    passed_below: tuple[float, ...] = (),
) -> EpsChoice:
    settings = {k: (row[k].item() if hasattr(row[k], "item") else row[k]) for k in (*SETTINGS, "method")}
    return EpsChoice(
        eps=eps,
        estimate=float(row["mean"]),
        ci=(float(row["lo"]), float(row["hi"])),
        met=met,
        reason=reason,
        settings=settings,
        target=float(target),
        metric=metric,
        grid_floor=floor,
        passed_below=passed_below,
    )


def _bisect(
    spec: SweepSpec,
    choice: EpsChoice,
    eps_fail: float,
    target: float,
    metric: str,
    higher: bool,
    steps: int,
    client: Any,
) -> EpsChoice:
    from mdp_core.sweep.engine import run_sweep

    s = choice.settings
    base = replace(
        spec, task=s["task"], tau_group=(s["tau_group"],), tau_dpn=(s["tau_dpn"],), methods=(s["method"],)
    )
    lo, hi = eps_fail, choice.eps
    for _ in range(steps):
        mid = float(math.sqrt(lo * hi))
        res = run_sweep(replace(base, eps=(mid,)), client=client)
        if res.empty:  # too small for the spec's budget floor (the engine skips it): no release there
            lo = mid
            continue
        row = _judge(_points(res, metric), target, higher).iloc[0]
        if bool(row["ok"]):
            hi = mid
            choice = _choice(
                mid,
                row,
                True,
                target,
                metric,
                f"eps = {mid:.4g} meets the target by bisection "
                f"between {lo:.4g} (fails) and the grid ({row['mean']:.4g} [{row['lo']:.4g}, "
                f"{row['hi']:.4g}] vs {target:.4g})",
                passed_below=choice.passed_below,
            )
        else:
            lo = mid
    return choice


def choice_json(choice: EpsChoice) -> str:
    """The choice as one JSON object (for the CLI and reports)."""
    return json.dumps({**choice.__dict__, "ci": list(choice.ci), "settings": dict(choice.settings)})
