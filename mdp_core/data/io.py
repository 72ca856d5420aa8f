"""Loading tables with clear errors: embedded samples, paths, uploads (CSV/TSV, optionally gzipped)."""

from __future__ import annotations

import gzip
import io
import os
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pandas as pd

from mdp_core.errors import DataError

__all__ = [
    "DATA_DIR",
    "INTERACTIVE_ROW_LIMIT",
    "MAX_FILE_BYTES",
    "LoadReport",
    "list_datasets",
    "load_dataset",
    "load_dataset_report",
]


DATA_DIR = Path(__file__).resolve().parents[2] / "data"


_SAMPLES = {"heart": "heart.csv", "adult": "adult.csv.gz", "wine": "wine_quality.csv"}


MAX_FILE_BYTES = 200 * 1024 * 1024  # 200 MB, as in .streamlit/config.toml


#: Larger tables are replaced by a stated uniform random sample of this many rows.
INTERACTIVE_ROW_LIMIT = 60_000


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
