"""DepHDP (000): tasks, adequacy scores, budget allocation, group profiles, pipeline, evaluation."""

from __future__ import annotations

from mdp_core.dephdp._allocate import floor_offset, largest_floor
from mdp_core.dephdp._grouploss import Surrogate
from mdp_core.dephdp._profiles import Cache, GroupProfile, clear_profile_cache
from mdp_core.dephdp.adequacy import DELTA, Mechanism, mse_likeness, radial_fit, select_mechanism
from mdp_core.dephdp.allocation import (
    BudgetAllocation,
    allocate_budget,
    greatest_convex_minorant,
    least_convex_majorant,
    pl_value,
    shifted_envelopes,
)
from mdp_core.dephdp.config import BASELINES, DepHDPConfig
from mdp_core.dephdp.evaluation import (
    METHODS_EVALUATED,
    EvaluationResult,
    evaluate_dephdp,
    rows_of,
    split_encoded,
    split_rows,
)
from mdp_core.dephdp.pipeline import (
    SCORE_HEADERS,
    BaselineResult,
    ComposedMechanism,
    DepHDPProfiles,
    DepHDPResult,
    compose_mechanism,
    dephdp_profiles,
    released_by,
    run_dephdp,
)
from mdp_core.dephdp.tasks import (
    TASKS,
    Task,
    entropy_change,
    entropy_loss,
    make_task,
    marginal_tv,
    population_metrics,
    release_attributes,
    total_correlation_change,
)
from mdp_core.dephdp.utility import (
    MAJORITY_TOLERANCE,
    UTILITY_METRICS,
    TaskUtility,
    majority_rate,
    prediction_labels,
    task_utility,
)

__all__ = [
    "BASELINES",
    "DELTA",
    "MAJORITY_TOLERANCE",
    "METHODS_EVALUATED",
    "SCORE_HEADERS",
    "TASKS",
    "UTILITY_METRICS",
    "BaselineResult",
    "BudgetAllocation",
    "Cache",
    "ComposedMechanism",
    "DepHDPConfig",
    "DepHDPProfiles",
    "DepHDPResult",
    "EvaluationResult",
    "GroupProfile",
    "Mechanism",
    "Surrogate",
    "Task",
    "TaskUtility",
    "allocate_budget",
    "clear_profile_cache",
    "compose_mechanism",
    "dephdp_profiles",
    "entropy_change",
    "entropy_loss",
    "evaluate_dephdp",
    "floor_offset",
    "greatest_convex_minorant",
    "largest_floor",
    "least_convex_majorant",
    "majority_rate",
    "make_task",
    "marginal_tv",
    "mse_likeness",
    "pl_value",
    "population_metrics",
    "prediction_labels",
    "radial_fit",
    "release_attributes",
    "released_by",
    "rows_of",
    "run_dephdp",
    "select_mechanism",
    "shifted_envelopes",
    "split_encoded",
    "split_rows",
    "task_utility",
    "total_correlation_change",
]
