"""Widgets shared by several pages."""

from __future__ import annotations

import numpy as np
import streamlit as st

__all__ = ["eps_slider", "log_grid"]


def log_grid(lo: float, hi: float, per_decade: int = 12) -> list[float]:
    """Geometric grid from ``lo`` to ``hi`` with 3 significant digits (slider stops)."""
    count = max(2, round(np.log10(hi / lo) * per_decade) + 1)
    return sorted({float(f"{v:.3g}") for v in np.geomspace(lo, hi, count)})


def eps_slider(
    label: str = "Privacy budget ε",
    *,
    key: str,
    default: float = 1.0,
    lo: float = 0.05,
    hi: float = 20.0,
    help: str | None = "Log scale: each step multiplies ε by about 1.2.",
    sidebar: bool = False,
) -> float:
    """A log-scale slider for a privacy budget; returns the chosen value."""
    options = log_grid(lo, hi)
    value = min(options, key=lambda v: abs(np.log(v / default)))
    where = st.sidebar if sidebar else st
    return float(where.select_slider(label, options=options, value=value, key=key, help=help))
