"""Widgets shared by several pages."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import streamlit as st

__all__ = ["eps_slider", "log_grid"]


_MANTISSAS = (1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0)  # round stops, ratio about 1.25


def log_grid(lo: float, hi: float) -> list[float]:
    """Log-spaced round slider stops from ``lo`` to ``hi`` (…, 0.5, 0.6, 0.8, 1, 1.2, 1.5, 2, …)."""
    decades = range(int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi))) + 1)
    stops = {round(m * 10.0**d, 12) for d in decades for m in _MANTISSAS}
    return sorted({float(lo), float(hi)} | {v for v in stops if lo <= v <= hi})


def eps_slider(
    label: str = "Privacy budget ε",
    *,
    key: str,
    default: float = 1.0,
    lo: float = 0.05,
    hi: float = 20.0,
    help: str | None = "Log scale: each step multiplies ε by about 1.25.",
    sidebar: bool = False,
    stops: Sequence[float] = (),
) -> float:
    """A log-scale slider for a privacy budget; returns the chosen value. ``stops``: budgets offered
    besides the round ones (the geo page's named levels, so switching to a custom ε keeps the level's
    value, and its cached mechanisms, instead of moving to the nearest round stop)."""
    options = sorted(set(log_grid(lo, hi)) | {float(s) for s in stops if lo <= s <= hi})
    value = min(options, key=lambda v: abs(np.log(v / default)))
    where = st.sidebar if sidebar else st
    return float(
        where.select_slider(label, options=options, value=value, key=key, help=help, format_func=_eps_label)
    )


def _eps_label(value: float) -> str:
    """A round stop as it always read ("1.5"); another stop to 3 significant digits (ln 2 / 0.5 = "1.39")."""
    text = str(value)
    return text if len(text) <= 8 else f"{value:.3g}"
