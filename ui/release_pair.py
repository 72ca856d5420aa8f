"""A release beside the same settings released by the other method: what each keeps, in a table and in words.

DepHDP's task-optimal channels may release one value for a column the task barely uses; EM on every group
releases a noisy copy instead, which carries information only where the group's budget allows. Which of the
two a privacy officer wants depends on both numbers, so the page shows them side by side.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from mdp_core import release as rel

__all__ = [
    "INFORMATIVE",
    "METHOD_NAMES",
    "information_shares",
    "other_scenario",
    "pair_frame",
    "pair_sentence",
]

#: The page's short names of the release methods (:data:`ui.release.RELEASE_CHOICES`).
METHOD_NAMES = {"DepHDP": "DepHDP", "ALC+DPN": "EM on every group"}
#: Share of a column's information (mutual information over entropy) above which it counts as kept; the
#: release's information caption uses the same 1 %.
INFORMATIVE = 0.01
_OTHER = {"DepHDP": "ALC+DPN", "ALC+DPN": "DepHDP"}
_SHARE = f"{100 * INFORMATIVE:g} %"


def other_scenario(scenario: rel.Scenario) -> rel.Scenario:
    """The same settings released by the other method of :data:`METHOD_NAMES`."""
    return replace(scenario, method=_OTHER[scenario.method])


def information_shares(outcome: rel.ScenarioOutcome) -> pd.Series:
    """The share of each feature column's information the release keeps, by attribute."""
    return outcome.leakage.set_index("attribute")["information_kept"]


def pair_frame(first: rel.ScenarioOutcome, second: rel.ScenarioOutcome) -> pd.DataFrame:
    """One row per release: the utility (mean and where 95 % of single draws fall), the constant columns,
    the columns that keep at least :data:`INFORMATIVE` of their information and the median share kept."""
    rows = []
    for o in (first, second):
        u, kept = o.utility, information_shares(o)
        rows.append(
            {
                "release by": METHOD_NAMES[o.scenario.method],
                u["metric"]: round(float(u["mean"]), 3),
                "95 % of draws": f"{u['lo']:.3f}–{u['hi']:.3f}",
                "constant columns": f"{len(o.check.constant_columns)} of {len(kept)}",
                f"columns keeping ≥ {_SHARE}": f"{int((kept >= INFORMATIVE).sum())} of {len(kept)}",
                "median information kept": f"{100 * kept.median():.1f} %",
            }
        )
    return pd.DataFrame(rows)


def pair_sentence(first: rel.ScenarioOutcome, second: rel.ScenarioOutcome) -> str:
    """What the two releases differ in, and what helps when neither keeps most columns."""
    a, b = METHOD_NAMES[first.scenario.method], METHOD_NAMES[second.scenario.method]
    ka, kb = information_shares(first), information_shares(second)
    na, nb = int((ka >= INFORMATIVE).sum()), int((kb >= INFORMATIVE).sum())
    metric = first.utility["metric"]
    ua, ub = float(first.utility["mean"]), float(second.utility["mean"])
    overlap = first.utility["lo"] <= second.utility["hi"] and second.utility["lo"] <= first.utility["hi"]
    said = (
        f"{b}: {metric} {ub:.3f} against {ua:.3f} for {a}"
        f"{' (within each other’s spread over draws)' if overlap else ''}; {nb} of {len(kb)} columns keep at "
        f"least {_SHARE} of their information against {na}."
    )
    if len(ka) and max(na, nb) * 2 <= len(ka):
        eps = first.result.config.eps
        said += (
            f" Neither keeps information in most columns at ε = {eps:g}: a constant column and a noisy copy "
            "close to random say equally little. A larger ε, or fewer released columns (exclude them on the "
            "Data page), is what helps."
        )
    return said
