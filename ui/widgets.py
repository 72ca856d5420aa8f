"""Widgets shared by several pages."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

__all__ = ["eps_slider", "formula_cells", "formula_note", "log_grid"]


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


#: What a spreadsheet (Excel, LibreOffice, Google Sheets) may read as the start of a formula in a CSV cell.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _formula_like(value: object) -> bool:
    """A text value (not a number, not a numeric string such as "-1.5") a spreadsheet may run as a formula."""
    if not isinstance(value, str) or not value.startswith(FORMULA_STARTS):
        return False
    try:
        float(value)
    except ValueError:
        return True
    return False


def formula_cells(table: pd.DataFrame) -> int:
    """How many text cells and column names of ``table`` start like a formula (``=``, ``+``, ``-``, ``@``, a
    tab or a carriage return): a spreadsheet that opens the CSV may run them (``=HYPERLINK(…)``). Numbers
    never count; the data itself is left as it is."""
    count = sum(_formula_like(str(c)) for c in table.columns)
    for _, values in table.items():
        kind = values.dtype
        if pd.api.types.is_numeric_dtype(kind) or pd.api.types.is_datetime64_any_dtype(kind):
            continue  # numbers, booleans, dates: no text cell
        counts = values.value_counts()  # each distinct value checked once
        count += int(sum(n for value, n in counts.items() if _formula_like(value)))
    return count


def formula_note(table: pd.DataFrame, where: DeltaGenerator | None = None) -> None:
    """A caption beside a CSV download of ``table`` when some text cell or column name starts like a
    spreadsheet formula: how many, and to open the file as text (nothing when none does)."""
    count = formula_cells(table)
    if count:
        (where or st).caption(
            f"{count:,} cell{'s' if count != 1 else ''} of this CSV start{'s' if count == 1 else ''} with "
            "=, +, -, @ or a tab: a spreadsheet may run such a cell as a formula when it opens the file. "
            "Open it in a text editor, or import it into the spreadsheet with every column set to Text, "
            "rather than opening it with a double click."
        )
