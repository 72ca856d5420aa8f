"""A table coded in the levels of an encoding computed from some of its rows only.

A held-out release (DESIGN.md "Release scope") must not let a released record shape the values it is
released at. :func:`encode_held_out` computes the schema and the domain (bin centres, categories, ranks)
from the fitting rows alone, keeps their codes exactly as :func:`~mdp_core.data.encoding.discretize` gave
them, and codes every other row by a rule that depends only on that domain and the row itself:

* a declared public range or public categories (:mod:`mdp_core.data.public`): as for the fitting rows;
* numeric: the fitting rows' bin (the same equal-width edges over their range), and a value beyond that
  range the outermost bin; a bin no fitting row falls in, or a value that is not one of the levels of an
  unbinned column, the nearest level;
* ordinal: its level, else the nearest level by value (numbers) or the next level below in sort order,
  clipped to the lowest (other labels, e.g. dates);
* nominal / binary, and a missing value of a column whose domain has no ``missing`` level: its level, else
  the level most frequent among the fitting rows.

Date/time columns are read in the format detected on the fitting rows (a held-out value that does not parse
is missing). Rows with a missing numeric value (or one that is not a number) are left out, as
:func:`~mdp_core.data.encoding.discretize` leaves out those with a missing one.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from mdp_core.errors import DataError

from .encoding import Encoded
from .guards import date_labels, detect_date
from .public import categorised_column, cut_bins, ranged_column

__all__ = ["HeldOutEncoding", "encode_held_out"]


@dataclass(frozen=True)
class HeldOutEncoding:
    """:func:`encode_held_out`'s result.

    Attributes
    ----------
    encoded : Encoded
        Every row of the table with a value in each numeric column, in the table's order, coded in the
        fitting rows' levels (schema, levels and component distances are theirs).
    fit, held_out : ndarray of int
        Positions in ``encoded.codes`` of the fitting rows and of the other rows (ascending).
    outside : tuple of (str, int)
        Per column without a declared public domain (only columns with any), held-out values that are not
        one of the fitting rows' levels and were coded by the nearest-level rule (module docstring); those
        outside a declared domain are counted, with the fitting rows', in ``encoded.outside_public``.
    """

    encoded: Encoded
    fit: np.ndarray
    held_out: np.ndarray
    outside: tuple[tuple[str, int], ...]

    @property
    def outside_text(self) -> str:
        """The values coded by the nearest-level rule, in words ('' when none)."""
        if not self.outside:
            return ""
        cols = ", ".join(f"{c!r} ({n:,})" for c, n in self.outside)
        return (
            f"Held-out values outside the fitting records' levels are released as the nearest level "
            f"(numbers: the outermost or nearest bin centre; ordered levels: the nearest; categories: "
            f"the most frequent one): {cols}."
        )


def encode_held_out(
    df: pd.DataFrame, fit_rows: np.ndarray, encode: Callable[[pd.DataFrame], Encoded]
) -> HeldOutEncoding:
    """Encode ``df`` with the schema and levels that ``encode`` computes from the rows ``fit_rows`` alone.

    Parameters
    ----------
    df : DataFrame
        The whole table.
    fit_rows : ndarray of int
        Positions in ``df`` of the fitting rows (e.g. :func:`mdp_core.split_rows` of ``len(df)``).
    encode : callable
        The encoding recipe, applied to the fitting rows only (e.g. a scenario's
        :func:`~mdp_core.release.encode_for`).
    """
    fit_rows = np.asarray(fit_rows)
    if fit_rows.ndim != 1 or not np.issubdtype(fit_rows.dtype, np.integer) or fit_rows.size == 0:
        raise TypeError("fit_rows must be a non-empty 1-D array of row positions")
    if fit_rows.min() < 0 or fit_rows.max() >= len(df) or np.unique(fit_rows).size != fit_rows.size:
        raise DataError(f"fit_rows must be distinct positions in 0..{len(df) - 1}")
    domain = encode(df.iloc[fit_rows])
    schema = domain.schema
    is_fit = np.zeros(len(df), dtype=bool)
    is_fit[fit_rows] = True
    numeric = [c for c, k in schema.kinds if k == "numeric"]
    values = pd.DataFrame({c: _as_fitted(df, fit_rows, c, domain) for c in schema.columns}, index=df.index)
    for c in numeric:
        values[c] = pd.to_numeric(values[c], errors="coerce")
    complete = values[numeric].notna().all(axis=1).to_numpy()
    fit_kept = is_fit & complete
    if int(fit_kept.sum()) != len(domain.codes):
        raise DataError("the encoding recipe dropped fitting rows other than those with a missing number")
    other = ~is_fit & complete
    codes = np.empty((int(complete.sum()), len(schema.columns)), dtype=np.int64)
    at_fit = fit_kept[complete]
    codes[at_fit] = domain.codes.to_numpy(dtype=np.int64)
    outside, public = [], dict(domain.outside_public)
    for j, (col, kind) in enumerate(schema.kinds):
        level, moved = _nearest_levels(values.loc[other, col], values.loc[fit_kept, col], domain, col, kind)
        codes[~at_fit, j] = level
        if moved and (col in domain.ranges or col in domain.categories):  # outside the declared domain
            public[col] = public.get(col, 0) + moved
        elif moved:
            outside.append((str(col), moved))
    encoded = replace(
        domain,
        codes=pd.DataFrame(codes, columns=list(schema.columns)),
        dropped_rows=int((~complete).sum()),
        missing=tuple((str(c), int(n)) for c, n in values.isna().sum().items() if n > 0),
        input_rows=len(df),
        outside_public=tuple((c, public[c]) for c in schema.columns if c in public),
        fingerprint="",
    )
    return HeldOutEncoding(encoded, np.flatnonzero(at_fit), np.flatnonzero(~at_fit), tuple(outside))


def _as_fitted(df: pd.DataFrame, fit_rows: np.ndarray, column: str, domain: Encoded) -> pd.Series:
    """The column's values to code: a date/time column's labels in the format of its fitting rows."""
    granularity = domain.schema.date_granularity.get(column)
    if granularity is None:
        return df[column]
    fmt = detect_date(df[column].iloc[fit_rows].dropna())
    if fmt is None:  # pragma: no cover - the recipe encoded it as a date from these very rows
        raise DataError(f"column {column!r} is not a date or time in the fitting rows")
    return date_labels(df[column], fmt, granularity)


def _nearest_levels(
    values: pd.Series, fitting: pd.Series, domain: Encoded, col: str, kind: str
) -> tuple[np.ndarray, int]:
    """Codes of ``values`` in ``domain``'s levels of ``col`` by the module's rule, and how many are not
    one of the fitting rows' values (numbers cut into bins: outside the fitting rows' range)."""
    levels = domain.levels[col]
    if kind == "numeric":
        x = values.to_numpy(dtype=float)
        span = domain.ranges.get(col)
        if span is not None:  # a declared public range: discretize's own bins, whatever the rows
            coded, _, _, moved = ranged_column(x, domain.bins[col], span)
            return coded, moved
        return _nearest_bins(x, fitting.to_numpy(dtype=float), levels, domain.bins[col])
    if col in domain.categories:  # declared: the same rule as for the fitting rows
        coded, _, _, moved = categorised_column(values, kind, domain.categories[col])
        return coded, moved
    has_missing = bool(fitting.isna().any())  # then the domain's last level stands for a missing value
    known = list(levels[:-1] if has_missing else levels)
    index = {v: i for i, v in enumerate(known)}
    frequent = int(np.bincount(domain.codes[col].to_numpy()).argmax())
    out = np.empty(len(values), dtype=np.int64)
    moved = 0
    for i, v in enumerate(values.tolist()):
        absent = bool(pd.isna(v))
        code = (len(known) if has_missing else None) if absent else index.get(v)
        if code is None:
            moved += 1
            code = _nearest_rank(v, known, index) if kind == "ordinal" and not absent else frequent
        out[i] = code
    return out, moved


def _nearest_bins(x: np.ndarray, seen: np.ndarray, levels: np.ndarray, bins: int) -> tuple[np.ndarray, int]:
    """Codes of numbers ``x`` among ``levels`` (the fitting values ``seen`` cut into ``bins`` equal-width
    bins as :func:`~mdp_core.data.encoding.discretize` cuts them, or their distinct values), and how many
    lie outside: beyond the range when binned, else not a level."""
    uniq = np.unique(seen)
    binned = uniq.size > bins
    key = x  # an unbinned column's levels are its fitting values
    if binned:
        cell, centres = cut_bins(x, uniq[0], uniq[-1], bins)
        key = centres[cell]  # discretize's bin of each value, bit for bit
    own = np.minimum(np.searchsorted(levels, key), len(levels) - 1)  # its own level (bin) ...
    nearest = np.searchsorted((levels[:-1] + levels[1:]) / 2, x, side="right")  # ... else the nearest
    code = np.where(levels[own] == key, own, nearest)
    outside = (x < uniq[0]) | (x > uniq[-1]) if binned else levels[code] != x
    return code.astype(np.int64), int(np.count_nonzero(outside))


def _nearest_rank(value: object, known: list, index: dict) -> int:
    """The nearest ordinal level: by value for numbers, else the next one below in sort order (clipped)."""
    try:
        if isinstance(value, (int, float, np.integer, np.floating)):
            x = float(value)
            return index[min(known, key=lambda v: (abs(float(v) - x), float(v)))]
        below = bisect.bisect_right(known, value) - 1
        return index[known[max(below, 0)]]
    except (TypeError, ValueError):  # labels that do not compare with this value: the lowest level
        return 0
