"""Data: loading with guard rails, schema inference and discretisation, NMI dependencies."""

from __future__ import annotations

from mdp_core.data.dependency import (
    dependency_graph,
    dependency_groups,
    group_domain_size,
    nmi_matrix,
    nmi_pairs,
    sparse_pairs,
)
from mdp_core.data.encoding import Encoded, Kind, Schema, discretize, infer_schema
from mdp_core.data.io import (
    DATA_DIR,
    INTERACTIVE_ROW_LIMIT,
    MAX_FILE_BYTES,
    LoadReport,
    list_datasets,
    load_dataset,
    load_dataset_report,
)

__all__ = [
    "DATA_DIR",
    "INTERACTIVE_ROW_LIMIT",
    "MAX_FILE_BYTES",
    "Encoded",
    "Kind",
    "LoadReport",
    "Schema",
    "dependency_graph",
    "dependency_groups",
    "discretize",
    "group_domain_size",
    "infer_schema",
    "list_datasets",
    "load_dataset",
    "load_dataset_report",
    "nmi_matrix",
    "nmi_pairs",
    "sparse_pairs",
]
