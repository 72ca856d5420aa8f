"""Run a scenario on its table: the decision metrics a comparison, a report and the release page show.

:func:`evaluate_scenario` encodes the table as the scenario says, configures DepHDP on the 62.5 % fitting
split (000 Sec. IV-A, seeded), measures utility in the task's own units on the held-out split over
``repetitions`` privatisations (mean and a 95 % prediction band of one draw, :func:`draw_band`), privatises
the whole table once (or, with ``release_rows="held_out"``, only the held-out records, whose channels the
tuning chose without them and whose released values the tuning records alone define:
:func:`mdp_core.data.encode_held_out`, :func:`mdp_core.release.release_scope`) for the degeneracy checks,
bounds the leakage about every attribute and measures how much of each attribute the release keeps
(:func:`information_kept`), and writes the audit record.
:func:`compare_scenarios` puts two to four outcomes side by side, one row per scenario.

Leakage per attribute (001 Eq. 5, nats): ``TPL_a <= eps_g(a) + sum_{j not in g(a)} CPL_{j -> a}(eps_g(j))``:
the attribute's own group channel (component distance <= 1, so at most ``eps_g(a)``) plus what every
attribute released through another group's channel reveals about it through their dependence
(Dependency-Triad bound, :func:`mdp_core.pairwise_leakage`). Summing over the attributes of a jointly
released group is sequential composition: an upper bound. ``e^TPL`` is the attacker's largest odds factor.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import entr
from scipy.stats import t as student_t

from mdp_core._validation import Progress, report
from mdp_core.data import Encoded, encode_held_out, encode_table
from mdp_core.dephdp import MAJORITY_TOLERANCE, DepHDPResult, released_by, rows_of, run_dephdp, split_rows
from mdp_core.errors import DataError
from mdp_core.leakage import pairwise_leakage

from .audit import audit_record, dataset_fingerprint
from .privatise import ReleaseCheck, privatise, release_report
from .scenarios import Scenario

__all__ = [
    "ScenarioOutcome",
    "compare_scenarios",
    "draw_band",
    "encode_for",
    "evaluate_scenario",
    "information_kept",
    "leakage_per_attribute",
    "majority_clause",
    "tuning_table",
]

FIT_FRACTION = 0.625


@dataclass(frozen=True, eq=False)
class ScenarioOutcome:
    """Everything measured for one scenario (see :func:`evaluate_scenario`)."""

    scenario: Scenario
    table: pd.DataFrame
    encoded: Encoded
    fit: Encoded
    test: Encoded
    result: DepHDPResult
    utility: dict[str, Any]
    released: pd.DataFrame
    check: ReleaseCheck
    leakage: pd.DataFrame
    audit: dict


def encode_for(scenario: Scenario, df: pd.DataFrame) -> Encoded:
    """The table encoded as the scenario's data settings say (excluded columns, kinds, bins, public ranges
    and categories, target)."""

    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"df must be a pandas DataFrame, got {type(df).__name__}")
    named = (*scenario.exclude, *(c for c, _ in (*scenario.include, *scenario.kind_overrides)))
    unknown = [c for c in named if c not in df.columns]
    if unknown:
        raise DataError(f"scenario {scenario.name!r} names columns the table lacks: {unknown}")
    if scenario.target is not None and scenario.target in scenario.exclude:
        raise DataError(f"scenario {scenario.name!r} excludes its own target {scenario.target!r}")
    return encode_table(
        df,
        target=scenario.target,
        include=scenario.include,
        exclude=scenario.exclude,
        kinds=scenario.kind_overrides,
        bins=scenario.bins,
        ranges=scenario.ranges,
        categories=scenario.categories,
        strict=True,
    )


def tuning_table(scenario: Scenario, df: pd.DataFrame) -> Encoded:
    """The table the scenario's choices (and "Which eps?") may look at: every record, or for a held-out
    release only the records that tune its channels, encoded by themselves, so that no released record
    shapes the eps either."""
    if scenario.release_rows != "held_out":
        return encode_for(scenario, df)
    return encode_for(scenario, df.iloc[_tuning_rows(scenario, df)])


def _tuning_rows(scenario: Scenario, df: pd.DataFrame) -> np.ndarray:
    """Positions in ``df`` of the records that tune a held-out release (over the file's rows, so that no
    other record's missing value moves them)."""
    return split_rows(len(df), FIT_FRACTION, np.random.default_rng(scenario.seed))[0]


def leakage_per_attribute(encoded: Encoded, result: DepHDPResult) -> pd.DataFrame:
    """Per released attribute: its group, the group's eps, the TPL bound (nats) and the odds factor."""

    mech = result.mechanism
    group_of = {a: k for k, g in enumerate(mech.groups) for a in g}
    attrs = list(mech.attributes)
    eps_attr = np.array([float(mech.eps[group_of[a]]) for a in attrs])
    if len(attrs) >= 2:
        model = pairwise_leakage(encoded.codes[attrs], method="dt")
        rows = np.vstack([model.row(j, float(eps_attr[j])) for j in range(len(attrs))])  # rows[j, a]
    else:
        rows = np.zeros((1, 1))
    tpl = []
    for a_idx, a in enumerate(attrs):
        others = [j for j, b in enumerate(attrs) if group_of[b] != group_of[a]]
        tpl.append(float(eps_attr[a_idx] + sum(rows[j, a_idx] for j in others)))
    return pd.DataFrame(
        {
            "attribute": attrs,
            "group": [" + ".join(mech.groups[group_of[a]]) for a in attrs],
            "eps_group": eps_attr,
            "leakage_nats": tpl,
            "odds_factor": np.exp(np.minimum(tpl, 700.0)),
        }
    )


def information_kept(encoded: Encoded, result: DepHDPResult) -> pd.Series:
    """Per released attribute, the share of its entropy that its released value keeps, ``I(X_a; Y_a) /
    H(X_a)``: 0 when the release says nothing about the true value (a constant or uniformly random column),
    1 when it determines it. Exact for the table's distribution of the attribute's group and the group's
    channel (no sampling); an attribute with one value keeps 0."""

    mech = result.mechanism
    kept = {}
    for group, sizes, P in zip(mech.groups, mech.sizes, mech.channels, strict=True):
        x = np.ravel_multi_index(tuple(encoded.codes[list(group)].to_numpy().T), sizes)
        prior = np.bincount(x, minlength=P.shape[0]) / len(x)
        joint = (prior[:, None] * P).reshape(sizes + sizes)  # P(true joint value, released joint value)
        k = len(sizes)
        for j, a in enumerate(group):
            pair = joint.sum(axis=tuple(i for i in range(2 * k) if i not in (j, k + j)))
            h_true, h_released = entr(pair.sum(axis=1)).sum(), entr(pair.sum(axis=0)).sum()
            mutual = max(h_true + h_released - entr(pair).sum(), 0.0)  # >= 0 up to rounding
            kept[a] = float(min(mutual / h_true, 1.0)) if h_true > 0 else 0.0
    return pd.Series(kept, name="information_kept")[list(mech.attributes)]


def draw_band(values: list[float], upper: float = np.inf) -> tuple[float, float, float]:
    """Mean of ``values`` and the 95 % prediction interval of one more draw, ``mean -+ t_{0.975, n-1} sd
    sqrt(1 + 1/n)`` within ``[0, upper]`` (every metric is >= 0; an accuracy <= 1). Mean -+ 1.96 sd over
    10 draws held 90 % of new draws, not the 95 % the page said."""
    n, mean = len(values), float(np.mean(values))
    if n < 2:
        return mean, mean, mean
    half = float(student_t.ppf(0.975, n - 1) * np.std(values, ddof=1) * np.sqrt(1 + 1 / n))
    return mean, max(mean - half, 0.0), min(mean + half, upper)


def _utility(result: DepHDPResult, fit: Encoded, test: Encoded, reps: int, seed: int) -> dict:
    from mdp_core.dephdp import majority_rate, prediction_labels, task_utility

    rng = np.random.default_rng([seed, 1])
    labels = prediction_labels(fit, test.codes) if result.task.name == "prediction" else None
    vals, rel, ref, aucs = [], [], None, []
    for _ in range(reps):
        y = result.privatize(test.codes, rng)
        u = task_utility(result.task, test.codes, y, encoded=test, labels=labels, p=result.config.p)
        vals.append(u.value)
        rel.append(u.relative)
        ref = u
        aucs.append(u.metrics.get("auc", np.nan))
    if ref is None:  # pragma: no cover - reps >= 2
        raise DataError("no repetition ran")
    mean, lo, hi = draw_band(vals, 1.0 if ref.higher_is_better else np.inf)  # higher: an accuracy
    rmean, rlo, rhi = draw_band(rel)
    return {
        "metric": ref.metric,
        "unit": ref.unit,
        "higher_is_better": ref.higher_is_better,
        "mean": mean,
        "lo": lo,
        "hi": hi,
        "reference": ref.reference,
        "relative": rmean,
        "relative_lo": rlo,
        "relative_hi": rhi,
        "auc": float(np.nanmean(aucs)) if not np.all(np.isnan(aucs)) else None,
        "auc_reference": ref.metrics.get("auc_reference"),
        "repetitions": reps,
        "test_rows": len(test.codes),
        "majority": None if labels is None else majority_rate(labels),
    }


def majority_clause(utility: dict) -> str:
    """``"; always predicting the more frequent label X"`` for an accuracy (``utility`` of an outcome), and
    that the release does no better when so (adult: 0.758); ``""`` for other metrics."""
    majority = utility.get("majority")
    if majority is None:
        return ""
    said = f"; always predicting the more frequent label {majority:.3f}"
    if utility["mean"] <= majority + MAJORITY_TOLERANCE:
        said += " (this release does no better: it carries nothing the task can use)"
    return said


def evaluate_scenario(
    scenario: Scenario,
    df: pd.DataFrame,
    *,
    repetitions: int = 10,
    progress: Progress = None,
    source_rows: int | None = None,
) -> ScenarioOutcome:
    """Configure, measure and release one scenario on ``df`` (its fingerprint is checked when it has one;
    ``source_rows``: the file's rows when ``df`` is a uniform sample of them, stated in the audit)."""

    if not isinstance(scenario, Scenario):
        raise TypeError(f"scenario must be a Scenario, got {type(scenario).__name__}")
    if not isinstance(repetitions, int) or repetitions < 2:
        raise DataError(f"repetitions must be an integer >= 2, got {repetitions!r}")
    fp = dataset_fingerprint(df)
    if scenario.fingerprint and scenario.fingerprint != fp:
        raise DataError(
            f"scenario {scenario.name!r} was made on another table (fingerprint "
            f"{scenario.fingerprint[:12]}…, this table {fp[:12]}…)"
        )
    report(progress, 0.0, "encoding")
    strict = scenario.release_rows == "held_out"
    outside: tuple[tuple[str, int], ...] = ()
    fit_in_df = None
    if strict:  # the domain from the tuning records alone: no released record shapes its released values
        fit_in_df = _tuning_rows(scenario, df)
        split = encode_held_out(df, fit_in_df, lambda part: encode_for(scenario, part))
        encoded, fit_rows, test_rows, outside = split.encoded, split.fit, split.held_out, split.outside
    else:
        encoded = encode_for(scenario, df)
        shuffle = np.random.default_rng(scenario.seed)
        fit_rows, test_rows = split_rows(len(encoded.codes), FIT_FRACTION, shuffle)
    fit, test = rows_of(encoded, fit_rows), rows_of(encoded, test_rows)
    config = replace(scenario.config, seed=scenario.seed)
    sub = None if progress is None else (lambda f, m: report(progress, 0.05 + 0.75 * f, m))
    result = released_by(run_dephdp(fit, config, progress=sub), scenario.method)
    report(progress, 0.85, "measuring utility on the held-out split")
    utility = _utility(result, fit, test, repetitions, scenario.seed)
    report(progress, 0.92, "releasing the held-out records" if strict else "releasing the whole table")
    include, target_eps = scenario.include_target, scenario.target_eps
    rng = np.random.default_rng(scenario.release_seed)  # None: fresh entropy, recorded nowhere
    released = privatise(
        df, result, encoded=encoded, rng=rng, include_target=include, target_eps=target_eps,
        rows=test_rows if strict else None, domain_rows=fit_in_df,
    )  # fmt: skip
    # in a random order: the file's own order can give values away (a table sorted by a column; privacy
    # audit, stop 63: wine's type recovered for 96.6 % of records from the row order at eps 0.17)
    released = released.sample(frac=1.0, random_state=rng, ignore_index=True)
    check = release_report(df, released, result=result, rows_tuning=len(fit_rows) if strict else 0)
    described = fit if strict else encoded  # a held-out release's statistics describe the tuning records
    leakage = leakage_per_attribute(described, result)
    leakage["information_kept"] = information_kept(described, result).to_numpy()
    audit = audit_record(
        df,
        encoded,
        result,
        seed=scenario.seed,
        release_seed=scenario.release_seed,
        fresh_entropy=scenario.release_seed is None,
        shuffled=True,
        dataset=scenario.dataset,
        privatised=released,
        include_target=include,
        target_eps=target_eps,
        release_rows=scenario.release_rows,
        rows_tuning=len(fit_rows),
        source_rows=source_rows,
        outside=outside,
    )
    report(progress, 1.0, "done")
    return ScenarioOutcome(scenario, df, encoded, fit, test, result, utility, released, check, leakage, audit)


def compare_scenarios(
    items: list[ScenarioOutcome] | list[Scenario], *, data: pd.DataFrame | None = None, repetitions: int = 10
) -> pd.DataFrame:
    """One row per scenario, one column per decision metric.

    ``items`` are outcomes, or scenarios run here on ``data``. Columns: eps, task, the method that released
    the features, the budget floor per group (``budget_floor``, 0: none), groups, mechanisms, per-group eps,
    the composed budget, utility with its CI (and relative to non-private), information kept per attribute
    (``kept:<attribute>``), leakage per attribute (the
    largest, and one column per attribute), degeneracy flags.
    """
    outs: list[ScenarioOutcome] = []
    for it in items:
        if isinstance(it, ScenarioOutcome):
            outs.append(it)
        elif isinstance(it, Scenario):
            if data is None:
                raise DataError("pass data= (the table) to compare scenarios that have not been run")
            outs.append(evaluate_scenario(it, data, repetitions=repetitions))
        else:
            raise TypeError(f"items must be Scenario or ScenarioOutcome, got {type(it).__name__}")
    if not outs:
        raise DataError("nothing to compare: pass at least one scenario")
    rows = []
    for o in outs:
        mech, u, comp = o.result.mechanism, o.utility, o.audit["composition"]
        row: dict[str, Any] = {
            "scenario": o.scenario.name,
            "eps": float(o.result.config.eps),
            "task": o.result.task.name,
            "method": o.result.method,
            "budget_floor": float(o.result.config.min_group_eps),
            "groups": " | ".join(" + ".join(g) for g in mech.groups),
            "mechanisms": " | ".join(mech.kinds),
            "eps_k": " | ".join(f"{e:.3g}" for e in mech.eps),
            "record_budget": comp["norm"],
            "released_rows": o.scenario.release_rows,
            "utility_metric": u["metric"],
            "utility": u["mean"],
            "utility_lo": u["lo"],
            "utility_hi": u["hi"],
            "non_private": u["reference"],
            "relative": u["relative"],
            "max_leakage_nats": float(o.leakage["leakage_nats"].max()),
            "constant_columns": ", ".join(o.check.constant_columns),
            "min_budget_groups": len(o.check.min_budget_groups),
            "degenerate": o.check.degenerate,
        }
        leak = zip(o.leakage["attribute"], o.leakage["leakage_nats"], strict=True)
        row.update({f"leak:{a}": float(v) for a, v in leak})
        kept = zip(o.leakage["attribute"], o.leakage["information_kept"], strict=True)
        row.update({f"kept:{a}": float(v) for a, v in kept})
        rows.append(row)
    return pd.DataFrame(rows)
