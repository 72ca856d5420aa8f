"""Release and decisions: budgets in plain words, the whole table privatised, its audit record, scenarios
and the self-contained HTML report (DESIGN.md "Release and decisions")."""

from __future__ import annotations

from .audit import AUDIT_FIELDS, audit_record, dataset_fingerprint, package_versions, release_scope
from .decide import WHICH_EPS_GRID, Decision, sweep_options, which_eps
from .outcome import (
    ScenarioOutcome,
    compare_scenarios,
    encode_for,
    evaluate_scenario,
    information_kept,
    leakage_per_attribute,
    majority_clause,
    tuning_table,
)
from .posterior import budget_sentence, odds_factor, posterior_bound, posterior_table
from .privatise import ReleaseCheck, privatise, release_report, target_channel
from .report import METHOD_COLORS, build_report, frontier_figure, information_figure, report_figures
from .scenarios import (
    RELEASE_METHODS,
    RELEASE_ROWS,
    SCENARIO_SCHEMA,
    Scenario,
    UtilityTarget,
    load_scenarios,
    save_scenarios,
)

__all__ = [
    "AUDIT_FIELDS",
    "METHOD_COLORS",
    "RELEASE_METHODS",
    "RELEASE_ROWS",
    "SCENARIO_SCHEMA",
    "WHICH_EPS_GRID",
    "Decision",
    "ReleaseCheck",
    "Scenario",
    "ScenarioOutcome",
    "UtilityTarget",
    "audit_record",
    "budget_sentence",
    "build_report",
    "compare_scenarios",
    "dataset_fingerprint",
    "encode_for",
    "evaluate_scenario",
    "frontier_figure",
    "information_figure",
    "information_kept",
    "leakage_per_attribute",
    "load_scenarios",
    "majority_clause",
    "odds_factor",
    "package_versions",
    "posterior_bound",
    "posterior_table",
    "privatise",
    "release_report",
    "release_scope",
    "report_figures",
    "save_scenarios",
    "sweep_options",
    "target_channel",
    "tuning_table",
    "which_eps",
]
