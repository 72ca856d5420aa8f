"""Release and decisions: budgets in plain words, the whole table privatised, its audit record, scenarios
and the self-contained HTML report (DESIGN.md "Release and decisions")."""

from __future__ import annotations

from .audit import AUDIT_FIELDS, audit_record, dataset_fingerprint, package_versions
from .posterior import budget_sentence, odds_factor, posterior_bound, posterior_table
from .privatise import ReleaseCheck, privatise, release_report, target_channel

__all__ = [
    "AUDIT_FIELDS",
    "ReleaseCheck",
    "audit_record",
    "budget_sentence",
    "dataset_fingerprint",
    "odds_factor",
    "package_versions",
    "posterior_bound",
    "posterior_table",
    "privatise",
    "release_report",
    "target_channel",
]
