"""Guard rails of schema inference: columns that must not be released as they are.

DESIGN.md "Data-prep guard rails": identifier-like columns (unique per row, or text with > 50 % distinct
values), free text, dates/times and constant or empty columns are excluded by default, each with a stated
reason. A date column may be re-included as an ordinal attribute at a coarse granularity (year or month;
time-of-day columns by hour), see :func:`date_labels`.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from mdp_core.errors import DataError

__all__ = [
    "DATE_GRANULARITIES",
    "MIN_ROWS_FOR_RATIO",
    "DateFormat",
    "check_column_names",
    "date_labels",
    "detect_date",
    "exclusion_reason",
]

#: How a re-included date/time column is coarsened: ``year`` (2019), ``month`` (2019-03), ``hour`` (13:00).
DATE_GRANULARITIES: tuple[str, ...] = ("month", "year", "hour")

#: The "> 50 % distinct" and "unique per row" rules apply from this many non-missing values on (a 4-row toy
#: table has mostly distinct values without any of them being an identifier).
MIN_ROWS_FOR_RATIO = 20

_DISTINCT_SHARE = 0.5
_MOSTLY = 0.5  # a numeric column with fewer values than this share of rows is "mostly missing"
_DATE_SHARE = 0.95
_ID_NAME = re.compile(r"(?:^|[\s_\-.])(?:id|ids|key|uuid|guid|nr|no|number|code)$|^id(?:[\s_\-.]|$)", re.I)

# (format, what); tried in order, the best parse rate wins; ties keep the earlier format.
_DATE_FORMATS: tuple[tuple[str, str], ...] = (
    ("%Y-%m-%d", "date"),
    ("%Y-%m-%d %H:%M:%S", "date and time"),
    ("%Y-%m-%d %H:%M", "date and time"),
    ("%Y-%m-%dT%H:%M:%S", "date and time"),
    ("%Y-%m-%dT%H:%M", "date and time"),
    ("ISO8601", "date and time"),
    ("%d.%m.%Y", "date"),
    ("%d.%m.%y", "date"),
    ("%d.%m.%Y %H:%M", "date and time"),
    ("%d.%m.%Y %H:%M:%S", "date and time"),
    ("%m/%d/%Y", "date"),
    ("%d/%m/%Y", "date"),
    ("%m/%d/%y", "date"),
    ("%d/%m/%y", "date"),
    ("%Y/%m/%d", "date"),
    ("%m/%d/%Y %H:%M", "date and time"),
    ("%d/%m/%Y %H:%M", "date and time"),
    ("%Y-%m", "date"),
    ("%d %b %Y", "date"),
    ("%d %B %Y", "date"),
    ("%b %d, %Y", "date"),
    ("%B %d, %Y", "date"),
    ("%b %Y", "date"),
    ("%B %Y", "date"),
    ("%H:%M", "time of day"),
    ("%H:%M:%S", "time of day"),
)
_DATE_CHARS = re.compile(r"^[\w\s:./,+-]+$")


@dataclass(frozen=True)
class DateFormat:
    """A detected date/time format: the ``strptime`` format (or ``ISO8601``) and what it holds."""

    format: str
    what: str  # "date", "date and time" or "time of day"
    share: float  # share of distinct non-missing values that parse

    @property
    def granularities(self) -> tuple[str, ...]:
        """The coarsenings that make sense for this format."""
        return ("hour",) if self.what == "time of day" else ("month", "year")


def _to_datetime(values: pd.Series, fmt: str) -> pd.Series:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pd.to_datetime(values, format=fmt, errors="coerce")


#: The "format" of a column whose dates are written in several of the formats with a full year.
MIXED = "mixed"
#: The formats a mixed column may combine: a full year or a month's name (no two-digit years, no times of
#: day alone, which versions like 1.2.3 or times like 12:30 would meet).
_MIXED_FORMATS = tuple(f for f, what in _DATE_FORMATS if what != "time of day" and "%y" not in f)


def _to_datetime_mixed(values: pd.Series) -> pd.Series:
    """Each value parsed by the first of :data:`_MIXED_FORMATS` that reads it (missing where none does)."""
    stamps = pd.Series(pd.NaT, index=values.index, dtype="datetime64[ns]")
    for fmt in _MIXED_FORMATS:
        todo = stamps.isna()
        if not todo.any():
            break
        stamps[todo] = _to_datetime(values[todo], fmt).astype("datetime64[ns]")
    return stamps


def detect_date(col: pd.Series) -> DateFormat | None:
    """The date/time format of a text column when at least 95 % of its distinct values parse, else None;
    :data:`MIXED` when no one format reads that many but the full-year formats together do (audit: a column
    of dates written three ways was released as categories)."""
    if pd.api.types.is_numeric_dtype(col) or pd.api.types.is_bool_dtype(col):
        return None
    values = pd.Series(pd.unique(col.dropna()))
    if values.empty:
        return None
    values = values.astype(str)
    if len(values) > 500:
        values = values.sample(500, random_state=0)
    if not (values.str.contains(r"\d", regex=True).mean() >= _DATE_SHARE):
        return None
    if not values.str.fullmatch(_DATE_CHARS).all():
        return None
    best: DateFormat | None = None
    for fmt, what in _DATE_FORMATS:
        share = float(_to_datetime(values, fmt).notna().mean())
        if share >= _DATE_SHARE and (best is None or share > best.share):
            best = DateFormat(fmt, what, share)
            if share == 1.0:
                break
    if best is None and (share := float(_to_datetime_mixed(values).notna().mean())) >= _DATE_SHARE:
        best = DateFormat(MIXED, "date", share)
    return best


def date_labels(col: pd.Series, fmt: DateFormat, granularity: str) -> pd.Series:
    """Coarsen a date/time column to sortable labels: ``2019`` (year), ``2019-03`` (month), ``13:00`` (hour).

    Values that do not parse become missing (they get the ``missing`` level like any other gap).
    """
    if granularity not in fmt.granularities:
        raise DataError(
            f"a {fmt.what} column can be included by {' or '.join(fmt.granularities)}, not {granularity!r}"
        )
    text = col.astype("str").where(col.notna())
    stamps = _to_datetime_mixed(text) if fmt.format == MIXED else _to_datetime(text, fmt.format)
    pattern = {"year": "%Y", "month": "%Y-%m", "hour": "%H:00"}[granularity]
    labels = stamps.dt.strftime(pattern)
    return labels.where(stamps.notna())


def _is_integral(values: pd.Series) -> bool:
    arr = values.to_numpy(dtype=float)
    return bool(np.all(np.isfinite(arr)) and np.all(np.mod(arr, 1.0) == 0))


def check_column_names(df: pd.DataFrame) -> None:
    """Refuse column names that are not text or that occur twice: schemas, recipes and reports name the
    columns by text, and ``df[name]`` of a repeated name is a table, not a column."""
    other = [c for c in df.columns if not isinstance(c, str)]
    if other:
        raise DataError(
            f"column names must be text, got {other[:5]!r}{' ...' if len(other) > 5 else ''}; rename the "
            "columns first, e.g. df.columns = df.columns.astype(str)"
        )
    repeated = sorted(set(df.columns[df.columns.duplicated()]))
    if repeated:
        raise DataError(
            f"column names must be unique: {repeated} occur more than once; rename or drop the copies"
        )


def exclusion_reason(col: pd.Series, name: str) -> str | None:
    """Why a column is excluded by default, or None when it is an ordinary attribute.

    Rules, in order: no values; one value (constant); numbers missing in more than half of the rows (each
    such row would be left out); a date or time; free text (values of 3+ words or 30+
    characters on average, when distinct values are more than half, more than 30, or the column is mostly
    empty); identifier-like (text with > 50 % distinct values; whole numbers unique per row whose name says
    id/key/nr/code or that form a dense or sorted run).
    """
    values = col.dropna()
    n = len(values)
    if n == 0:
        return "empty: the column has no values"
    n_distinct = int(values.nunique())
    if n_distinct == 1:
        value = values.iloc[0]  # a numpy scalar's repr is code ("np.int64(5)"); its Python value reads "5"
        value = value.item() if isinstance(value, np.generic) else value
        return f"constant: every row has the same value ({value!r}), so it carries no information"
    if pd.api.types.is_numeric_dtype(values):
        if n < _MOSTLY * len(col):
            return (
                f"mostly missing: {len(col) - n:,} of {len(col):,} values are missing, and a row without a "
                "number is left out; include it only if losing those rows is fine"
            )
        if n >= MIN_ROWS_FOR_RATIO and n_distinct == n and _is_integral(values):
            arr = values.to_numpy(dtype=float)
            dense = arr.max() - arr.min() + 1 <= 2 * n
            sorted_run = bool(np.all(np.diff(arr) > 0) or np.all(np.diff(arr) < 0))
            if _ID_NAME.search(name) or dense or sorted_run:
                return f"identifier-like: a different whole number in each of the {n:,} rows (a row key)"
        return None
    fmt = detect_date(values)
    if fmt is not None:
        return (
            f"{fmt.what} ({_describe_format(fmt)}): exact dates and times identify people; include it as "
            f"ordinal {' or '.join(fmt.granularities)} if needed"
        )
    counts = values.astype(str).value_counts()
    distinct = pd.Series(counts.index, dtype="str")
    weights = counts.to_numpy(dtype=float)
    share = n_distinct / n
    words = float(np.average(distinct.str.count(r"\s+").to_numpy(dtype=float) + 1.0, weights=weights))
    chars = float(np.average(distinct.str.len().to_numpy(dtype=float), weights=weights))
    mostly_empty = n < 0.5 * len(col)
    if (words >= 3 or chars >= 30) and (share > _DISTINCT_SHARE or n_distinct > 30 or mostly_empty):
        return (
            f"free text: {n_distinct:,} distinct values, {words:.1f} words on average; free text can name "
            "people and is not a category"
        )
    if n >= MIN_ROWS_FOR_RATIO and share > _DISTINCT_SHARE:
        return (
            f"identifier-like: {n_distinct:,} distinct values in {n:,} rows ({share:.0%} distinct; "
            "more than 50 %)"
        )
    return None


def _describe_format(fmt: DateFormat) -> str:
    if fmt.format == "ISO8601":
        return "ISO 8601"
    if fmt.format == MIXED:
        return "written in several formats"
    return (
        fmt.format.replace("%Y", "yyyy")
        .replace("%y", "yy")
        .replace("%m", "mm")
        .replace("%d", "dd")
        .replace("%H", "hh")
        .replace("%M", "mm")
        .replace("%S", "ss")
        .replace("%b", "Mon")
        .replace("%B", "Month")
    )
