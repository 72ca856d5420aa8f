"""Schema inference and discretisation.

A loaded table becomes an :class:`Encoded` table: integer codes ``0..m-1`` per attribute, the level labels
or bin centres behind the codes, and one component distance matrix per attribute (000 Sec. III-A):
nominal/binary ``1[a != b]``, ordinal ``|rank(a) - rank(b)| / (m - 1)``, numeric ``|u - v| / (hi - lo)`` on
bin centres. Every component distance lies in [0, 1].
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal, get_args

import numpy as np
import pandas as pd

from mdp_core.errors import DataError
from mdp_core.metrics import nominal_distance, numeric_distance, ordinal_distance

from .guards import DATE_GRANULARITIES, check_column_names, date_labels, detect_date, exclusion_reason
from .public import (
    categorised_column,
    checked_categories,
    checked_ranges,
    crowded_ranges,
    cut_bins,
    outside_sentence,
    ranged_column,
)

__all__ = ["MISSING_LEVEL", "Encoded", "Kind", "Schema", "discretize", "infer_schema"]


Kind = Literal["numeric", "ordinal", "nominal", "binary"]


KINDS: tuple[str, ...] = get_args(Kind)


_ORDINAL_MAX_LEVELS = 12  # integer columns with at most this many values are read as ordinal

#: The level that stands for a missing value of a nominal, binary or ordinal attribute (after the highest
#: level of an ordinal one). Numeric attributes have none: their incomplete rows are dropped, with a warning.
MISSING_LEVEL = "missing"

#: Reason given for a column the user excluded.
EXCLUDED_BY_USER = "excluded by you"


@dataclass(frozen=True)
class Schema:
    """Kind of every released attribute, in column order, the optional target, and the excluded columns.

    Frozen and hashable, so it can be part of a cache key. ``kinds`` is a tuple of (column, kind) of the
    attributes that are encoded (and so can be privatised, exported, released); ``excluded`` is a tuple of
    (column, reason) of the columns that are not: :func:`discretize` never reads them, so nothing
    downstream can see them. ``dates`` lists (column, granularity) of date/time columns included as
    ordinal year / month / hour labels.
    """

    kinds: tuple[tuple[str, Kind], ...]
    target: str | None = None
    excluded: tuple[tuple[str, str], ...] = ()
    dates: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        for col, kind in self.kinds:
            if kind not in KINDS:
                raise DataError(f"kind of {col!r} must be one of {KINDS}, got {kind!r}")
        both = set(self.columns) & set(self.excluded_reasons)
        if both:
            raise DataError(f"column(s) {sorted(both)} cannot be both included and excluded")
        for col, granularity in self.dates:
            if col not in self.columns or granularity not in DATE_GRANULARITIES:
                raise DataError(f"date column {col!r} must be included, by one of {DATE_GRANULARITIES}")
        if self.target is not None and self.target not in self.columns:
            reason = self.excluded_reasons.get(self.target)
            if reason:
                raise DataError(
                    f"target {self.target!r} is excluded ({reason}); include it or pick another target"
                )
            raise DataError(f"target {self.target!r} is not a column")

    @property
    def columns(self) -> tuple[str, ...]:
        """The included (encoded, releasable) columns."""
        return tuple(c for c, _ in self.kinds)

    @property
    def excluded_reasons(self) -> dict[str, str]:
        """Excluded column -> the reason, in column order."""
        return dict(self.excluded)

    @property
    def date_granularity(self) -> dict[str, str]:
        """Included date/time column -> ``year`` / ``month`` / ``hour``."""
        return dict(self.dates)

    def kind(self, column: str) -> Kind:
        return dict(self.kinds)[column]

    def with_kinds(self, overrides: dict[str, str]) -> Schema:
        """A copy with some kinds overridden (user edits)."""
        excluded = sorted(set(overrides) & set(self.excluded_reasons))
        if excluded:
            raise DataError(f"column(s) {excluded} are excluded; include them before setting a kind")
        unknown = set(overrides) - set(self.columns)
        if unknown:
            raise DataError(f"overrides name unknown columns {sorted(unknown)}")
        kinds = tuple((c, overrides.get(c, k)) for c, k in self.kinds)
        return Schema(kinds=kinds, target=self.target, excluded=self.excluded, dates=self.dates)  # type: ignore[arg-type]

    def with_target(self, target: str | None) -> Schema:
        """A copy with another target (None: no target)."""
        return Schema(kinds=self.kinds, target=target, excluded=self.excluded, dates=self.dates)

    def released(self, df: pd.DataFrame) -> pd.DataFrame:
        """The part of ``df`` that may be privatised and released: the included columns only."""
        return df[list(self.columns)]


def infer_schema(
    df: pd.DataFrame,
    *,
    target: str | None = None,
    include: Mapping[str, str | None] | Iterable[str] = (),
    exclude: Iterable[str] = (),
) -> Schema:
    """Guess each column's kind and exclude the columns that must not be released as they are.

    Kinds: two distinct values: binary. Numbers: ordinal when integer-valued with at most 12 levels, else
    numeric. Anything else: nominal. Excluded by default, with the reason (DESIGN.md "Data-prep guard
    rails", :func:`mdp_core.data.guards.exclusion_reason`): identifier-like, free text, dates/times,
    constant and empty columns.

    Parameters
    ----------
    df : DataFrame
        The table (see :func:`load_dataset`).
    target : str, optional
        The target column; it must not be excluded. Never guessed.
    include : mapping or iterable of str
        Columns to re-include despite their default exclusion: column -> kind (None: the inferred kind) or,
        for a date/time column, -> ``"month"`` / ``"year"`` (``"hour"`` for a time of day; None: the
        first of these). A date column is then an ordinal attribute of labels ``2019-03`` / ``2019``.
    exclude : iterable of str
        Further columns the user excludes (reason: "excluded by you", or the guard rails' own reason for a
        column they exclude anyway).
    """
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"df must be a pandas DataFrame, got {type(df).__name__}")
    check_column_names(df)
    names = [str(c) for c in df.columns]
    include = dict(include) if isinstance(include, Mapping) else dict.fromkeys(include)
    exclude = list(exclude)
    unknown = sorted((set(include) | set(exclude)) - set(names))
    if unknown:
        raise DataError(f"include/exclude name unknown columns {unknown}")
    if target is not None and target not in names:
        raise DataError(f"target {target!r} is not a column of the table")
    kinds: list[tuple[str, Kind]] = []
    excluded: list[tuple[str, str]] = []
    dates: list[tuple[str, str]] = []
    for name, col in zip(names, df.columns, strict=True):
        values = df[col]
        if name in exclude:  # one the guard rails exclude anyway keeps their reason (a scenario lists both)
            excluded.append((name, exclusion_reason(values, name) or EXCLUDED_BY_USER))
            continue
        reason = exclusion_reason(values, name)
        if reason is None or name in include:
            fmt = detect_date(values.dropna()) if reason is not None else None
            if fmt is not None and reason is not None and reason.startswith(fmt.what):
                granularity = include[name] or fmt.granularities[0]
                if granularity not in fmt.granularities:
                    raise DataError(
                        f"{name!r} is a {fmt.what} column: include it by "
                        f"{' or '.join(fmt.granularities)}, not {granularity!r}"
                    )
                dates.append((name, granularity))
                kinds.append((name, "ordinal"))
                continue
            wanted = include.get(name)
            if wanted is not None and wanted not in KINDS:
                raise DataError(f"kind of {name!r} must be one of {KINDS}, got {wanted!r}")
            kind: Kind = wanted or _infer_kind(values)
            kinds.append((name, kind))
        else:
            excluded.append((name, reason))
    return Schema(kinds=tuple(kinds), target=target, excluded=tuple(excluded), dates=tuple(dates))


def _infer_kind(col: pd.Series) -> Kind:
    values = col.dropna()
    n_unique = values.nunique()
    if n_unique <= 2:
        return "binary"
    if pd.api.types.is_numeric_dtype(values):
        integral = bool(np.all(np.mod(values.to_numpy(dtype=float), 1.0) == 0))
        return "ordinal" if integral and n_unique <= _ORDINAL_MAX_LEVELS else "numeric"
    return "nominal"


@dataclass(frozen=True, eq=False)
class Encoded:
    """A discretised table.

    Attributes
    ----------
    codes : DataFrame
        int64 codes ``0..m_j-1`` per included attribute (rows with a missing numeric value are dropped).
        Excluded columns (``schema.excluded``) are not here: nothing downstream can privatise or release
        them.
    levels : dict[str, ndarray]
        Level labels (nominal, binary, ordinal: sorted) or bin centres (numeric), indexed by code. A
        missing value is one more level, last: the label ``MISSING_LEVEL`` among text labels, NaN among
        number labels (so decoded and released columns stay numeric).
    components : dict[str, ndarray]
        ``m_j x m_j`` component distance matrix per attribute, values in [0, 1].
    schema : Schema
        The kinds used.
    bins : dict[str, int]
        Bins requested for numeric attributes.
    dropped_rows : int
        Rows removed because a numeric attribute was missing (see :attr:`warnings`).
    missing : tuple of (str, int)
        Missing values per included attribute (only attributes with any), counted in the input table.
    input_rows : int
        Rows of the input table.
    ranges, categories : dict
        Declared public ranges (lo, hi) of numeric attributes and public categories of the others
        (:mod:`mdp_core.data.public`): their levels depend on no record.
    outside_public : tuple of (str, int)
        Values outside their column's public domain (set to the range's nearer end, or released as
        ``other``), only columns with any.
    """

    codes: pd.DataFrame
    levels: dict[str, np.ndarray]
    components: dict[str, np.ndarray]
    schema: Schema
    bins: dict[str, int] = field(default_factory=dict)
    dropped_rows: int = 0
    missing: tuple[tuple[str, int], ...] = ()
    input_rows: int = 0
    ranges: dict[str, tuple[float, float]] = field(default_factory=dict)
    categories: dict[str, tuple[str, ...]] = field(default_factory=dict)
    outside_public: tuple[tuple[str, int], ...] = ()
    fingerprint: str = ""
    """Content hash of codes, schema and levels: a cheap cache key (``hash_funcs``) for the whole table."""

    def __post_init__(self) -> None:
        if not self.fingerprint:
            object.__setattr__(self, "fingerprint", _fingerprint(self.codes, self.schema, self.levels))

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(self.codes.columns)

    @property
    def domain_sizes(self) -> dict[str, int]:
        return {c: len(self.levels[c]) for c in self.codes.columns}

    @property
    def warnings(self) -> tuple[str, ...]:
        """What the encoding did to missing values, in words (empty when nothing was missing)."""
        out = []
        numeric = [(c, n) for c, n in self.missing if self.schema.kind(c) == "numeric"]
        levelled = [  # a column with public categories sends a missing value to 'other', counted there
            (c, n) for c, n in self.missing if self.schema.kind(c) != "numeric" and c not in self.categories
        ]
        if self.dropped_rows:
            cols = ", ".join(f"{c!r} ({n:,} missing)" for c, n in numeric)
            out.append(
                f"{self.dropped_rows:,} of {self.input_rows:,} rows are left out because a numeric attribute "
                f"is missing: {cols}. To keep them, exclude these columns or set their kind to ordinal or "
                f"nominal (a '{MISSING_LEVEL}' level)."
            )
        out += crowded_ranges(self.ranges, self.codes, self.bins)
        out += outside_sentence(self.outside_public, self.ranges, self.levels)
        if levelled:
            cols = ", ".join(f"{c!r} ({n:,})" for c, n in levelled)
            out.append(f"Missing values kept as a '{MISSING_LEVEL}' level: {cols}.")
            ordinal = [c for c, _ in levelled if self.schema.kind(c) == "ordinal"]
            if ordinal:  # privacy audit: where it sits on the scale changes every distance
                out.append(
                    f"In ordinal columns ({', '.join(repr(c) for c in ordinal)}) '{MISSING_LEVEL}' is ranked "
                    "one step above the highest level: with m other levels, neighbouring levels are then "
                    "1/m apart instead of 1/(m - 1)."
                )
        return tuple(out)

    def decode(self, codes: pd.DataFrame) -> pd.DataFrame:
        """Map integer codes back to labels / bin centres."""
        return pd.DataFrame({c: self.levels[c][codes[c].to_numpy()] for c in codes.columns})


def _fingerprint(codes: pd.DataFrame, schema: Schema, levels: dict[str, np.ndarray]) -> str:
    digest = hashlib.sha1(np.ascontiguousarray(codes.to_numpy(dtype=np.int64)).tobytes())
    digest.update(repr((schema, [(c, [str(v) for v in levels[c]]) for c in codes.columns])).encode())
    return digest.hexdigest()


def discretize(
    df: pd.DataFrame,
    schema: Schema,
    *,
    bins: int | dict[str, int] = 8,
    ranges: Mapping[str, tuple[float, float]] | None = None,
    categories: Mapping[str, Iterable[object]] | None = None,
) -> Encoded:
    """Encode every schema column as integer codes with its component distance matrix.

    Numeric columns with more distinct values than their bin count are cut into equal-width bins over
    [min, max] and represented by the bin centres; otherwise every distinct value is a level. Only the
    schema's included columns are read (excluded ones never reach the encoding). Missing values: a
    nominal / binary / ordinal attribute gets a ``MISSING_LEVEL`` level (last); a row with a missing
    numeric value is left out and counted in ``dropped_rows`` (see :attr:`Encoded.warnings`). Included
    date/time columns become their year / month / hour labels.

    Parameters
    ----------
    df : DataFrame
        The table; must contain every schema column.
    schema : Schema
        Kinds per column (see :func:`infer_schema`).
    bins : int or dict
        Bin count for numeric columns (>= 2), globally or per column (missing columns get 8).
    ranges : mapping column -> (lo, hi), optional
        Public ranges of numeric columns (e.g. age 0-120, known without looking at the data): the bins cut
        [lo, hi] whatever the data, every bin is a level (none is dropped for being empty), and a value
        beyond the range is set to its nearer end (counted in :attr:`Encoded.outside_public`). Without
        one, a column's bins cut its own [min, max], which depends on the records.
    categories : mapping column -> labels, optional
        Public categories of nominal, binary or ordinal columns (:mod:`mdp_core.data.public`).
    """
    if not isinstance(schema, Schema):
        raise TypeError("schema must be a Schema (see infer_schema)")
    if not schema.columns:
        reasons = "; ".join(f"{c}: {r.split(':')[0]}" for c, r in schema.excluded) or "none"
        raise DataError(
            f"no attribute is left to encode: every column is excluded ({reasons}); re-include a column"
        )
    check_column_names(df)
    absent = [c for c in schema.columns if c not in df.columns]
    if absent:
        raise DataError(f"schema columns {absent} are not in the table")
    per_col = {c: (bins.get(c, 8) if isinstance(bins, dict) else bins) for c in schema.columns}
    for c, b in per_col.items():
        if not isinstance(b, (int, np.integer)) or b < 2:
            raise DataError(f"bins for {c!r} must be an integer >= 2, got {b!r}")
    spans = checked_ranges(ranges or {}, dict(schema.kinds))
    lists = checked_categories(categories or {}, dict(schema.kinds))
    table = pd.DataFrame({c: _column_values(df, c, schema) for c in schema.columns}, index=df.index)
    numeric = [c for c, k in schema.kinds if k == "numeric"]
    for c in numeric:
        number = pd.to_numeric(table[c], errors="coerce")
        if (number.isna() & table[c].notna()).any():
            raise DataError(f"column {c!r} is not numeric; set its kind to nominal or ordinal")
        infinite = int(np.isinf(number.to_numpy(dtype=float, na_value=np.nan)).sum())
        if infinite:
            raise DataError(f"column {c!r} has {infinite:,} infinite value(s); replace them or exclude it")
        table[c] = number
    missing = tuple((str(c), int(n)) for c, n in table.isna().sum().items() if n > 0)
    complete = table[numeric].notna().all(axis=1).to_numpy()
    if int(complete.sum()) < 2:
        gaps = ", ".join(f"{c!r} ({n:,} missing)" for c, n in missing if c in numeric)
        raise DataError(
            f"fewer than 2 rows remain after leaving out rows with a missing numeric value ({gaps}); "
            "exclude these columns or set their kind to ordinal or nominal"
        )
    table = table.loc[complete]
    codes: dict[str, np.ndarray] = {}
    levels: dict[str, np.ndarray] = {}
    components: dict[str, np.ndarray] = {}
    outside = []
    for col, kind in schema.kinds:
        if col in spans:
            column = ranged_column(table[col].to_numpy(dtype=float), int(per_col[col]), spans[col])
        elif col in lists:
            column = categorised_column(table[col], kind, lists[col])
        else:
            column = (*_encode_column(table[col], kind, int(per_col[col])), 0)
        codes[col], levels[col], components[col], moved = column
        outside += [(str(col), moved)] if moved else []
    return Encoded(
        codes=pd.DataFrame(codes, columns=list(schema.columns)).reset_index(drop=True),
        levels=levels,
        components=components,
        schema=schema,
        bins={c: int(b) for c, b in per_col.items() if schema.kind(c) == "numeric"},
        dropped_rows=int((~complete).sum()),
        missing=missing,
        input_rows=len(df),
        ranges=spans,
        categories=lists,
        outside_public=tuple(outside),
    )


def _column_values(df: pd.DataFrame, column: str, schema: Schema) -> pd.Series:
    """The values to encode: date/time columns as year / month / hour labels, others as they are."""
    granularity = schema.date_granularity.get(column)
    if granularity is None:
        return df[column]
    fmt = detect_date(df[column].dropna())
    if fmt is None:
        raise DataError(f"column {column!r} is not a date or time; include it as an ordinary attribute")
    return date_labels(df[column], fmt, granularity)


def _encode_column(values: pd.Series, kind: Kind, bins: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:

    if kind == "numeric":
        x = pd.to_numeric(values, errors="coerce")
        if x.isna().any():
            raise DataError(f"column {values.name!r} is not numeric; set its kind to nominal or ordinal")
        x = x.to_numpy(dtype=float)
        uniq = np.unique(x)
        if len(uniq) <= bins:
            centres, code = uniq, np.searchsorted(uniq, x)
        else:
            code, centres = cut_bins(x, uniq[0], uniq[-1], bins)
            used = np.unique(code)  # drop empty bins so every level occurs
            centres, code = centres[used], np.searchsorted(used, code)
        return code.astype(np.int64), centres, numeric_distance(centres)
    labels: list = _sorted_levels(values.dropna())
    code = pd.Categorical(values, categories=labels).codes.astype(np.int64)
    if (code < 0).any():  # missing: one more level, after the highest
        code = np.where(code < 0, len(labels), code)
        labels = [*labels, _missing_label(labels)]
    dist = ordinal_distance(len(labels)) if kind == "ordinal" else nominal_distance(len(labels))
    return code, np.asarray(labels, dtype=object), dist


def _missing_label(levels: list) -> object:
    """``MISSING_LEVEL`` among text levels; NaN among numbers, so decoded values stay numeric."""
    if levels and all(isinstance(v, (int, float, np.integer, np.floating)) for v in levels):
        return np.nan
    return MISSING_LEVEL if MISSING_LEVEL not in levels else f"({MISSING_LEVEL})"


def _sorted_levels(values: pd.Series) -> list:
    uniq = pd.unique(values)
    try:
        return sorted(uniq)
    except TypeError:
        return sorted(uniq, key=str)
