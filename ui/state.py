"""The one owner of session state: a typed :class:`AppState` kept under a single session key.

Pages read it with :func:`get_state`; only the sidebar in app.py and the data page change it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd
import streamlit as st

from mdp_core import DepHDPConfig

__all__ = ["DEFAULT_DATASET", "AppState", "get_state"]

DEFAULT_DATASET = "heart"
_KEY = "mdp_app_state"


@dataclass
class AppState:
    """What every page shares.

    Attributes
    ----------
    dataset : str
        Embedded sample name or the uploaded file's name.
    dataset_key : str
        Identity of the loaded table (sample name + seed, or upload checksum): the cache key for it.
    frame : DataFrame or None
        The loaded table (after any interactive-size sampling).
    notes : tuple of str
        Messages about the load (sampling, ...), shown by the pages.
    error : str or None
        The last load error; the previous table stays loaded.
    target : str or None
        Target column (prediction tasks), if any.
    seed : int
        Seed of every random choice in the app.
    kind_overrides : dict
        User overrides of inferred attribute kinds.
    include : dict
        Columns excluded by default that the user re-included: column -> kind, or for a date/time column
        ``"month"`` / ``"year"`` / ``"hour"`` (None: the default).
    exclude : list of str
        Columns the user excluded (never encoded, privatised or released).
    encode_error : str or None
        Why the current table cannot be encoded with the current choices (cleared once it can).
    source_rows : int or None
        Rows of the loaded file when the table is a uniform sample of them (None: the whole file).
    csv_separator, csv_decimal : str
        The loaded file's field separator and decimal mark: a privatised CSV is written the same way.
    bins : dict
        Per-column bin counts for numeric attributes (default ``default_bins``).
    ranges, categories : dict
        Declared public ranges (lo, hi) of numeric attributes and public categories (labels) of the others
        (Data page; :mod:`mdp_core.data.public`).
    dephdp_config : DepHDPConfig or None
        Settings the DepHDP page's widgets start from (a loaded file or a suggested fix); None: defaults.
    dephdp_generation : int
        Bumped with every new ``dephdp_config``: the page then draws fresh widgets showing its values
        (no widget key is ever written from outside its widget).
    """

    dataset: str = DEFAULT_DATASET
    dataset_key: str = ""
    frame: pd.DataFrame | None = None
    notes: tuple[str, ...] = ()
    error: str | None = None
    target: str | None = None
    seed: int = 0
    kind_overrides: dict[str, str] = field(default_factory=dict)
    bins: dict[str, int] = field(default_factory=dict)
    ranges: dict[str, tuple[float, float]] = field(default_factory=dict)
    categories: dict[str, tuple[str, ...]] = field(default_factory=dict)
    default_bins: int = 8
    dephdp_config: DepHDPConfig | None = None
    dephdp_generation: int = 0
    include: dict[str, str | None] = field(default_factory=dict)
    exclude: list[str] = field(default_factory=list)
    encode_error: str | None = None
    source_rows: int | None = None
    csv_separator: str = ","
    csv_decimal: str = "."

    def set_table(
        self,
        name: str,
        key: str,
        frame: pd.DataFrame,
        notes: tuple[str, ...],
        target: str | None = None,
        source_rows: int | None = None,
        convention: tuple[str, str] = (",", "."),
    ) -> None:
        """Install a newly loaded table and reset everything that depended on the old one.

        ``target`` is an embedded sample's documented target; an upload has none until the user picks one
        (never guessed from the column names or positions). ``source_rows``: the file's rows when the
        table is a uniform sample of them. ``convention``: the file's separator and decimal mark.
        """
        self.dataset, self.dataset_key, self.frame, self.notes = name, key, frame, notes
        self.source_rows = source_rows
        self.csv_separator, self.csv_decimal = convention
        self.error = None
        self.kind_overrides, self.bins, self.ranges, self.categories = {}, {}, {}, {}
        self.include, self.exclude = {}, []
        self.encode_error = None
        self.target = target if target in [str(c) for c in frame.columns] else None


def get_state() -> AppState:
    """The session's :class:`AppState` (created on first use)."""
    if _KEY not in st.session_state:
        st.session_state[_KEY] = AppState()
    return st.session_state[_KEY]
