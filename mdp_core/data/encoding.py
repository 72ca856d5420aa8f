"""Schema inference and discretisation.

A loaded table becomes an :class:`Encoded` table: integer codes ``0..m-1`` per attribute, the level labels
or bin centres behind the codes, and one component distance matrix per attribute (000 Sec. III-A):
nominal/binary ``1[a != b]``, ordinal ``|rank(a) - rank(b)| / (m - 1)``, numeric ``|u - v| / (hi - lo)`` on
bin centres. Every component distance lies in [0, 1].
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Literal, get_args

import numpy as np
import pandas as pd

from mdp_core.errors import DataError
from mdp_core.metrics import nominal_distance, numeric_distance, ordinal_distance

__all__ = ["Encoded", "Kind", "Schema", "discretize", "infer_schema"]


Kind = Literal["numeric", "ordinal", "nominal", "binary"]


KINDS: tuple[str, ...] = get_args(Kind)


_ORDINAL_MAX_LEVELS = 12  # integer columns with at most this many values are read as ordinal


@dataclass(frozen=True)
class Schema:
    """Kind of every attribute, in column order, plus the optional target column.

    Frozen and hashable, so it can be part of a cache key. ``kinds`` is a tuple of (column, kind).
    """

    kinds: tuple[tuple[str, Kind], ...]
    target: str | None = None

    def __post_init__(self) -> None:
        for col, kind in self.kinds:
            if kind not in KINDS:
                raise DataError(f"kind of {col!r} must be one of {KINDS}, got {kind!r}")
        if self.target is not None and self.target not in self.columns:
            raise DataError(f"target {self.target!r} is not a column")

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(c for c, _ in self.kinds)

    def kind(self, column: str) -> Kind:
        return dict(self.kinds)[column]

    def with_kinds(self, overrides: dict[str, str]) -> Schema:
        """A copy with some kinds overridden (user edits)."""
        unknown = set(overrides) - set(self.columns)
        if unknown:
            raise DataError(f"overrides name unknown columns {sorted(unknown)}")
        kinds = tuple((c, overrides.get(c, k)) for c, k in self.kinds)
        return Schema(kinds=kinds, target=self.target)  # type: ignore[arg-type]


def infer_schema(df: pd.DataFrame, *, target: str | None = None) -> Schema:
    """Guess each column's kind.

    Two distinct values: binary. Numbers: ordinal when integer-valued with at most 12 levels, else numeric.
    Anything else: nominal.
    """
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"df must be a pandas DataFrame, got {type(df).__name__}")
    if target is not None and target not in df.columns:
        raise DataError(f"target {target!r} is not a column of the table")
    kinds: list[tuple[str, Kind]] = []
    for col in df.columns:
        values = df[col].dropna()
        n_unique = values.nunique()
        kind: Kind
        if n_unique <= 2:
            kind = "binary"
        elif pd.api.types.is_numeric_dtype(values):
            integral = bool(np.all(np.mod(values.to_numpy(dtype=float), 1.0) == 0))
            kind = "ordinal" if integral and n_unique <= _ORDINAL_MAX_LEVELS else "numeric"
        else:
            kind = "nominal"
        kinds.append((str(col), kind))
    return Schema(kinds=tuple(kinds), target=target)


@dataclass(frozen=True, eq=False)
class Encoded:
    """A discretised table.

    Attributes
    ----------
    codes : DataFrame
        int64 codes ``0..m_j-1`` per attribute (rows with missing values are dropped).
    levels : dict[str, ndarray]
        Level labels (nominal, binary, ordinal: sorted) or bin centres (numeric), indexed by code.
    components : dict[str, ndarray]
        ``m_j x m_j`` component distance matrix per attribute, values in [0, 1].
    schema : Schema
        The kinds used.
    bins : dict[str, int]
        Bins requested for numeric attributes.
    dropped_rows : int
        Rows removed because they had a missing value.
    """

    codes: pd.DataFrame
    levels: dict[str, np.ndarray]
    components: dict[str, np.ndarray]
    schema: Schema
    bins: dict[str, int] = field(default_factory=dict)
    dropped_rows: int = 0
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

    def decode(self, codes: pd.DataFrame) -> pd.DataFrame:
        """Map integer codes back to labels / bin centres."""
        return pd.DataFrame({c: self.levels[c][codes[c].to_numpy()] for c in codes.columns})


def _fingerprint(codes: pd.DataFrame, schema: Schema, levels: dict[str, np.ndarray]) -> str:
    digest = hashlib.sha1(np.ascontiguousarray(codes.to_numpy(dtype=np.int64)).tobytes())
    digest.update(repr((schema, [(c, [str(v) for v in levels[c]]) for c in codes.columns])).encode())
    return digest.hexdigest()


def discretize(df: pd.DataFrame, schema: Schema, *, bins: int | dict[str, int] = 8) -> Encoded:
    """Encode every schema column as integer codes with its component distance matrix.

    Numeric columns with more distinct values than their bin count are cut into equal-width bins over
    [min, max] and represented by the bin centres; otherwise every distinct value is a level.

    Parameters
    ----------
    df : DataFrame
        The table; must contain every schema column.
    schema : Schema
        Kinds per column (see :func:`infer_schema`).
    bins : int or dict
        Bin count for numeric columns (>= 2), globally or per column (missing columns get 8).
    """
    if not isinstance(schema, Schema):
        raise TypeError("schema must be a Schema (see infer_schema)")
    missing = [c for c in schema.columns if c not in df.columns]
    if missing:
        raise DataError(f"schema columns {missing} are not in the table")
    per_col = {c: (bins.get(c, 8) if isinstance(bins, dict) else bins) for c in schema.columns}
    for c, b in per_col.items():
        if not isinstance(b, (int, np.integer)) or b < 2:
            raise DataError(f"bins for {c!r} must be an integer >= 2, got {b!r}")
    table = df[list(schema.columns)]
    complete = table.notna().all(axis=1).to_numpy()
    table = table.loc[complete]
    if len(table) < 2:
        raise DataError("fewer than 2 rows remain after dropping rows with missing values")
    codes: dict[str, np.ndarray] = {}
    levels: dict[str, np.ndarray] = {}
    components: dict[str, np.ndarray] = {}
    for col, kind in schema.kinds:
        codes[col], levels[col], components[col] = _encode_column(table[col], kind, int(per_col[col]))
    return Encoded(
        codes=pd.DataFrame(codes).reset_index(drop=True),
        levels=levels,
        components=components,
        schema=schema,
        bins={c: int(b) for c, b in per_col.items() if schema.kind(c) == "numeric"},
        dropped_rows=int((~complete).sum()),
    )


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
            edges = np.linspace(uniq[0], uniq[-1], bins + 1)
            code = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, bins - 1)
            centres = (edges[:-1] + edges[1:]) / 2
            used = np.unique(code)  # drop empty bins so every level occurs
            centres, code = centres[used], np.searchsorted(used, code)
        return code.astype(np.int64), centres, numeric_distance(centres)
    uniq = _sorted_levels(values)
    code = pd.Categorical(values, categories=uniq).codes.astype(np.int64)
    dist = ordinal_distance(len(uniq)) if kind == "ordinal" else nominal_distance(len(uniq))
    return code, np.asarray(uniq, dtype=object), dist


def _sorted_levels(values: pd.Series) -> list:
    uniq = pd.unique(values)
    try:
        return sorted(uniq)
    except TypeError:
        return sorted(uniq, key=str)
