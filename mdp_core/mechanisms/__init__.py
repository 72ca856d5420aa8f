"""Mechanisms on finite domains: EM and remapping, the verifier and repair, the LP optimum, loss curves."""

from __future__ import annotations

from mdp_core.mechanisms.curves import METHODS, loss_budget_curves
from mdp_core.mechanisms.finite import (
    bayesian_remap,
    expected_loss,
    exponential_mechanism,
    remap_outputs,
    sample,
)
from mdp_core.mechanisms.lp import MechanismResult, chain_free_pairs, optimal_mechanism, optimal_mechanisms
from mdp_core.mechanisms.verify import (
    ROW_SUM_TOL,
    VIOLATION_TOL,
    mdp_violation,
    raise_repair,
    repair_mechanism,
)

__all__ = [
    "METHODS",
    "ROW_SUM_TOL",
    "VIOLATION_TOL",
    "MechanismResult",
    "bayesian_remap",
    "chain_free_pairs",
    "expected_loss",
    "exponential_mechanism",
    "loss_budget_curves",
    "mdp_violation",
    "optimal_mechanism",
    "optimal_mechanisms",
    "raise_repair",
    "remap_outputs",
    "repair_mechanism",
    "sample",
]
