"""Data: loading with guard rails, schema inference and discretisation, NMI dependencies.

Guard rails (DESIGN.md "Data-prep guard rails"): :mod:`mdp_core.data.io` reads real files (encodings,
separators, quoted headers, decimal commas, missing markers) and never guesses a target;
:mod:`mdp_core.data.guards` says which columns are excluded by default and why (identifier-like, free text,
dates/times, constant, empty); :func:`infer_schema` records the exclusions in the :class:`Schema` and
:func:`discretize` never reads an excluded column, so no privatisation, export or release can carry one.
"""

from __future__ import annotations

from mdp_core.data.dependency import (
    dependency_graph,
    dependency_groups,
    fewer_bins,
    group_domain_size,
    nmi_matrix,
    nmi_pairs,
    sparse_pairs,
)
from mdp_core.data.domain import HeldOutEncoding, encode_held_out
from mdp_core.data.encoding import (
    MISSING_LEVEL,
    Encoded,
    Kind,
    Schema,
    discretize,
    infer_schema,
)
from mdp_core.data.io import (
    DATA_DIR,
    INTERACTIVE_ROW_LIMIT,
    MAX_FILE_BYTES,
    SAMPLE_TARGETS,
    LoadReport,
    list_datasets,
    load_dataset,
    load_dataset_report,
)
from mdp_core.data.recipe import encode_table

__all__ = [
    "DATA_DIR",
    "INTERACTIVE_ROW_LIMIT",
    "MAX_FILE_BYTES",
    "MISSING_LEVEL",
    "SAMPLE_TARGETS",
    "Encoded",
    "HeldOutEncoding",
    "Kind",
    "LoadReport",
    "Schema",
    "dependency_graph",
    "dependency_groups",
    "discretize",
    "encode_held_out",
    "encode_table",
    "fewer_bins",
    "group_domain_size",
    "infer_schema",
    "list_datasets",
    "load_dataset",
    "load_dataset_report",
    "nmi_matrix",
    "nmi_pairs",
    "sparse_pairs",
]
