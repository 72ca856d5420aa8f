"""Correlation-induced leakage (001): exact CPL*, the Dependency Triad, sources, calibration."""

from __future__ import annotations

from mdp_core.leakage.calibration import (
    CALIBRATION_NEGLIGIBLE,
    BudgetCalibration,
    PairwiseLeakage,
    calibrate_budgets,
    common_budget,
    leakage_matrix,
    pairwise_leakage,
    total_leakage,
    uniform_split,
)
from mdp_core.leakage.cpl import conditional, cpl_exact, cpl_from_hull, cpl_hull
from mdp_core.leakage.sources import cpl_source_band, source_conditionals, uncertainty_from_sources
from mdp_core.leakage.triad import DependencyTriad, dependency_triad, dt_cpl

__all__ = [
    "CALIBRATION_NEGLIGIBLE",
    "BudgetCalibration",
    "DependencyTriad",
    "PairwiseLeakage",
    "calibrate_budgets",
    "common_budget",
    "conditional",
    "cpl_exact",
    "cpl_from_hull",
    "cpl_hull",
    "cpl_source_band",
    "dependency_triad",
    "dt_cpl",
    "leakage_matrix",
    "pairwise_leakage",
    "source_conditionals",
    "total_leakage",
    "uncertainty_from_sources",
    "uniform_split",
]
