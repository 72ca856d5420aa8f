"""The public API that DESIGN.md fixes is importable from mdp_core (and mdp_core.geo) under its names."""

from __future__ import annotations

import mdp_core

DESIGN_NAMES = [
    "DataError", "list_datasets", "load_dataset", "infer_schema", "discretize", "nmi_matrix",
    "dependency_groups", "product_distance", "exponential_mechanism", "optimal_mechanism", "MechanismResult",
    "bayesian_remap", "expected_loss", "sample", "mdp_violation", "mse_likeness", "radial_fit",
    "select_mechanism", "allocate_budget", "BudgetAllocation", "run_dephdp", "DepHDPConfig", "DepHDPResult",
    "conditional", "cpl_exact", "dependency_triad", "DependencyTriad", "dt_cpl", "ggm_scale", "select_shape",
    "ShapeChoice",
]  # fmt: skip


def test_design_names_are_exported() -> None:
    assert set(DESIGN_NAMES) <= set(mdp_core.__all__)
    assert all(callable(getattr(mdp_core, name)) for name in DESIGN_NAMES)
    assert all(not name.startswith("_") for name in mdp_core.__all__)


def test_geo_names_are_exported() -> None:
    import mdp_core.geo as geo

    assert {"load_road_network", "build_grid", "tree_extension", "GeoMechanism", "save_mechanism"} <= set(
        geo.__all__
    )
