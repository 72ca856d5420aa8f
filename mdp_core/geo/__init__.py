"""Geo mechanisms on city road maps (seed 004): seed LP, tree-based extension, baselines, verification.

Import as ``mdp_core.geo`` (not star-imported by ``mdp_core``); osmnx is only imported when a map is read.
"""

from __future__ import annotations

from mdp_core.geo.baselines import (
    em_remap_geo,
    exponential_geo,
    lp_coarse,
    planar_laplace_utility,
    remap_matrix,
)
from mdp_core.geo.bilinear import bilinear_mechanism
from mdp_core.geo.bounds import GeoBound, geo_lower_bound
from mdp_core.geo.calibrate import (
    CALIBRATE_MAX_TARGETS,
    CALIBRATED_METHODS,
    actual_eps,
    calibrated_mechanism,
    calibrated_method,
)
from mdp_core.geo.cells import cell_lower_bound
from mdp_core.geo.compare import (
    EM_REMAP_RIVAL,
    METHODS,
    TREE_VARIANTS,
    GeoComparison,
    compare_methods,
    peak_memory_mb,
    run_bench,
    tighter_bound,
)
from mdp_core.geo.cosets import auto_lower_bound, coset_lower_bound
from mdp_core.geo.export import (
    check_metadata,
    export_geojson,
    km_to_lonlat,
    load_mechanism,
    mechanism_metadata,
    save_mechanism,
)
from mdp_core.geo.extension import (
    VARIANTS,
    GeoMechanism,
    extend_log,
    extend_log_recursive,
    normalise_log,
    tree_extension,
    tree_seed,
)
from mdp_core.geo.grid import GeoGrid, build_grid, tree_levels
from mdp_core.geo.ipm import GeoLPSolution, solve_geo_lp
from mdp_core.geo.optimal import OPTIMAL_MAX_TARGETS, START_MASS, coarser_start, optimal_geo_mechanism
from mdp_core.geo.pairs import relaxation_pairs, spanner_pairs, yao_pairs
from mdp_core.geo.roads import (
    DEFAULT_CITY,
    RoadNetwork,
    grid_road_network,
    load_road_network,
    network_from_graph,
)
from mdp_core.geo.seed_lp import (
    SeedLPResult,
    axis_budget,
    bilinear_weights,
    repair_seed,
    seed_cost,
    solve_seed_lp,
)
from mdp_core.geo.spanner import (
    FINE_GRID_TARGETS,
    SPANNER_FROM_COARSER_TARGETS,
    SPANNER_MAX_TARGETS,
    spanner_from_coarser,
    spanner_mechanism,
    spanner_slacks,
)
from mdp_core.geo.utility import GeoProblem, build_problem, expected_travel_error, travel_loss
from mdp_core.geo.verify import GeoVerification, verify_geo

__all__ = [
    "CALIBRATED_METHODS",
    "CALIBRATE_MAX_TARGETS",
    "DEFAULT_CITY",
    "EM_REMAP_RIVAL",
    "FINE_GRID_TARGETS",
    "METHODS",
    "OPTIMAL_MAX_TARGETS",
    "SPANNER_FROM_COARSER_TARGETS",
    "SPANNER_MAX_TARGETS",
    "START_MASS",
    "TREE_VARIANTS",
    "VARIANTS",
    "GeoBound",
    "GeoComparison",
    "GeoGrid",
    "GeoLPSolution",
    "GeoMechanism",
    "GeoProblem",
    "GeoVerification",
    "RoadNetwork",
    "SeedLPResult",
    "actual_eps",
    "auto_lower_bound",
    "axis_budget",
    "bilinear_mechanism",
    "bilinear_weights",
    "build_grid",
    "build_problem",
    "calibrated_mechanism",
    "calibrated_method",
    "cell_lower_bound",
    "check_metadata",
    "coarser_start",
    "compare_methods",
    "coset_lower_bound",
    "em_remap_geo",
    "expected_travel_error",
    "exponential_geo",
    "export_geojson",
    "extend_log",
    "extend_log_recursive",
    "geo_lower_bound",
    "grid_road_network",
    "km_to_lonlat",
    "load_mechanism",
    "load_road_network",
    "lp_coarse",
    "mechanism_metadata",
    "network_from_graph",
    "normalise_log",
    "optimal_geo_mechanism",
    "peak_memory_mb",
    "planar_laplace_utility",
    "relaxation_pairs",
    "remap_matrix",
    "repair_seed",
    "run_bench",
    "save_mechanism",
    "seed_cost",
    "solve_geo_lp",
    "solve_seed_lp",
    "spanner_from_coarser",
    "spanner_mechanism",
    "spanner_pairs",
    "spanner_slacks",
    "tighter_bound",
    "travel_loss",
    "tree_extension",
    "tree_levels",
    "tree_seed",
    "verify_geo",
    "yao_pairs",
]
