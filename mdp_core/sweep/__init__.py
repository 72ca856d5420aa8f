"""Sweeps at scale (DESIGN.md "Sweeps at scale"): a validated, JSON round-trip :class:`SweepSpec`,
:func:`run_sweep` on dask.distributed (embedded LocalCluster, a cluster, or in-process), the frontier with
95 % confidence intervals and Pareto flags, and :func:`smallest_eps`. CLI: ``python -m mdp_core.sweep``."""

from __future__ import annotations

from mdp_core.sweep.cluster import close_default_client, default_client, describe_engine
from mdp_core.sweep.data import SweepData, prepare_data
from mdp_core.sweep.engine import run_sweep
from mdp_core.sweep.frontier import EpsChoice, frontier, smallest_eps
from mdp_core.sweep.geo import compare_over_eps
from mdp_core.sweep.spec import SPEC_VERSION, SWEEP_OWN_FIELDS, Configuration, SweepSpec

__all__ = [
    "SPEC_VERSION",
    "SWEEP_OWN_FIELDS",
    "Configuration",
    "EpsChoice",
    "SweepData",
    "SweepSpec",
    "close_default_client",
    "compare_over_eps",
    "default_client",
    "describe_engine",
    "frontier",
    "prepare_data",
    "run_sweep",
    "smallest_eps",
]
