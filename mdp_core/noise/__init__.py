"""Noise for numeric releases (003): generalized Gaussian scale (scalar, vector) and shape."""

from __future__ import annotations

from mdp_core.noise.scalar import (
    ggm_delta,
    ggm_logpdf,
    ggm_moment,
    ggm_pdf,
    ggm_sample,
    ggm_scale,
    ggm_scale_curve,
    ggm_second_moment,
    ggm_tolerance,
)
from mdp_core.noise.shape import CRITERIA, ShapeChoice, ShapeHeatmap, select_shape, shape_heatmap
from mdp_core.noise.vector import VectorScale, ggm_delta_vector_bounds, ggm_scale_vector
from mdp_core.noise.vector_shape import VectorShapeChoice, select_shape_vector, vector_shape_grid

__all__ = [
    "CRITERIA",
    "ShapeChoice",
    "ShapeHeatmap",
    "VectorScale",
    "VectorShapeChoice",
    "ggm_delta",
    "ggm_delta_vector_bounds",
    "ggm_logpdf",
    "ggm_moment",
    "ggm_pdf",
    "ggm_sample",
    "ggm_scale",
    "ggm_scale_curve",
    "ggm_scale_vector",
    "ggm_second_moment",
    "ggm_tolerance",
    "select_shape",
    "select_shape_vector",
    "shape_heatmap",
    "vector_shape_grid",
]
