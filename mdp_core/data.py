"""Datasets: loading with clear errors, schema inference and discretisation.

A loaded table becomes an :class:`Encoded` table: integer codes ``0..m-1`` per attribute, the level labels
or bin centres behind the codes, and one component distance matrix per attribute (000 Sec. III-A):
nominal/binary ``1[a != b]``, ordinal ``|rank(a) - rank(b)| / (m - 1)``, numeric ``|u - v| / (hi - lo)`` on
bin centres. Every component distance lies in [0, 1].
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Literal, get_args

import numpy as np
import pandas as pd

from mdp_core.errors import DataError

__all__ = [
    "DATA_DIR",
    "INTERACTIVE_ROW_LIMIT",
    "MAX_FILE_BYTES",
    "Encoded",
    "Kind",
    "LoadReport",
    "Schema",
    "discretize",
    "infer_schema",
    "list_datasets",
    "load_dataset",
    "load_dataset_report",
]

Kind = Literal["numeric", "ordinal", "nominal", "binary"]
KINDS: tuple[str, ...] = get_args(Kind)

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
_SAMPLES = {"heart": "heart.csv", "adult": "adult.csv.gz", "wine": "wine_quality.csv"}
MAX_FILE_BYTES = 200 * 1024 * 1024  # 200 MB, as in .streamlit/config.toml
#: Larger tables are replaced by a stated uniform random sample of this many rows.
INTERACTIVE_ROW_LIMIT = 60_000
_ORDINAL_MAX_LEVELS = 12  # integer columns with at most this many values are read as ordinal


def list_datasets() -> list[str]:
    """Names of the embedded sample datasets (``heart``, ``adult``, ``wine``)."""
    return list(_SAMPLES)


@dataclass(frozen=True)
class LoadReport:
    """What :func:`load_dataset_report` did besides reading: sampling and dropped columns."""

    source: str
    original_rows: int
    sampled: bool
    notes: tuple[str, ...] = ()


def load_dataset(source: str | os.PathLike[str] | IO[bytes], *, seed: int = 0) -> pd.DataFrame:
    """Load an embedded sample (by name), a CSV/TSV path, or a binary file-like (optionally gzipped).

    Raises
    ------
    DataError
        With a message a person can act on: empty, not text, one column, fewer than 2 rows, duplicate or
        blank column names, a column with no values, or a file over 200 MB.
    """
    return load_dataset_report(source, seed=seed)[0]


def load_dataset_report(
    source: str | os.PathLike[str] | IO[bytes], *, seed: int = 0
) -> tuple[pd.DataFrame, LoadReport]:
    """Like :func:`load_dataset`, also returning a :class:`LoadReport` (sampling, notes)."""
    raw, name = _read_bytes(source)
    df = _parse_table(raw, name)
    _validate_table(df, name)
    original = len(df)
    sampled = original > INTERACTIVE_ROW_LIMIT
    notes: list[str] = []
    if sampled:
        df = df.sample(n=INTERACTIVE_ROW_LIMIT, random_state=seed).sort_index().reset_index(drop=True)
        notes.append(
            f"{name} has {original:,} rows; using a uniform random sample of {INTERACTIVE_ROW_LIMIT:,} "
            f"rows (seed {seed}) to stay interactive."
        )
    return df, LoadReport(source=name, original_rows=original, sampled=sampled, notes=tuple(notes))


def _read_bytes(source: str | os.PathLike[str] | IO[bytes]) -> tuple[bytes, str]:
    if isinstance(source, str) and source in _SAMPLES:
        source = DATA_DIR / _SAMPLES[source]
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.is_file():
            raise DataError(f"no such file or sample: {str(source)!r} (samples: {', '.join(_SAMPLES)})")
        if path.stat().st_size > MAX_FILE_BYTES:
            raise DataError(f"{path.name} is larger than 200 MB; upload a sample or fewer columns")
        return path.read_bytes(), path.name
    if not hasattr(source, "read"):
        raise TypeError(f"source must be a sample name, a path or a binary file-like, got {type(source)}")
    name = str(getattr(source, "name", "uploaded file"))
    raw = source.read(MAX_FILE_BYTES + 1)
    if isinstance(raw, str):
        raw = raw.encode()
    if len(raw) > MAX_FILE_BYTES:
        raise DataError(f"{name} is larger than 200 MB; upload a sample or fewer columns")
    return raw, name


def _parse_table(raw: bytes, name: str) -> pd.DataFrame:
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise DataError(f"{name} looks gzipped but cannot be decompressed: {exc}") from exc
        if len(raw) > MAX_FILE_BYTES:
            raise DataError(f"{name} is larger than 200 MB uncompressed; upload a sample")
    if not raw.strip():
        raise DataError(f"{name} is empty; upload a CSV or TSV file with a header row")
    if b"\x00" in raw[:65536]:
        raise DataError(f"{name} is not a text file; upload a CSV or TSV file (optionally .gz)")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")
    first = text.splitlines()[0]
    sep = max([",", "\t", ";"], key=first.count)
    try:
        df = pd.read_csv(io.StringIO(text), sep=sep, skipinitialspace=True, na_values=["?", ""])
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as exc:
        raise DataError(f"{name} could not be parsed as CSV/TSV: {exc}") from exc
    return df


def _validate_table(df: pd.DataFrame, name: str) -> None:
    names = [str(c) for c in df.columns]
    if df.shape[1] < 2:
        raise DataError(
            f"{name} has {df.shape[1]} column; need at least 2 attributes separated by commas, "
            "tabs or semicolons"
        )
    blank = [i + 1 for i, c in enumerate(names) if not c.strip() or c.startswith("Unnamed:")]
    if blank:
        raise DataError(f"{name}: column(s) {blank} have a blank name; give every column a header")
    dups = sorted({c.split(".")[0] for c in names if _is_mangled_duplicate(c, names)})
    if dups:
        raise DataError(f"{name}: duplicate column name(s) {dups}; make every header unique")
    if len(df) < 2:
        raise DataError(f"{name} has {len(df)} data row(s); need at least 2 rows below the header")
    empty = [c for c in df.columns if df[c].isna().all()]
    if empty:
        raise DataError(f"{name}: column(s) {empty} have no values; remove them or fill them in")


def _is_mangled_duplicate(col: str, names: list[str]) -> bool:
    # pandas renames a repeated header "a" to "a.1", "a.2", ...
    base, dot, suffix = col.rpartition(".")
    return bool(dot) and suffix.isdigit() and base in names


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
    from mdp_core.metrics import nominal_distance, numeric_distance, ordinal_distance

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
