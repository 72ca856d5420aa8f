"""Loading tables with guard rails: embedded samples, paths, uploads (CSV/TSV, optionally gzipped).

Real files (DESIGN.md "Data-prep guard rails") come in UTF-8, UTF-8 with BOM, Windows-1252 or Latin-1;
separated by commas, semicolons, tabs or pipes; with quoted header names, decimal commas, thousands
separators and many spellings of "missing". :func:`load_dataset_report` reads all of them into a typed table
and states every decision it took in :attr:`LoadReport.notes`. It never guesses a target: only an embedded
sample has one (its documented target, :attr:`LoadReport.target`).
"""

from __future__ import annotations

import gzip
import io
import os
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np
import pandas as pd

from mdp_core._text import listed
from mdp_core.errors import DataError

from ._parse import (
    MISSING_TOKENS,
    NUMERIC_SHARE,
    check_width,
    clean_headers,
    decode_text,
    fill_short_header,
    number_conventions,
    parse_numbers,
    preamble_length,
    separator_name,
    short_header,
    sniff_separator,
    strip_unit,
    text_lines,
    unquote_values,
    zero_padded_codes,
)

__all__ = [
    "DATA_DIR",
    "INTERACTIVE_ROW_LIMIT",
    "MAX_FILE_BYTES",
    "SAMPLE_TARGETS",
    "LoadReport",
    "list_datasets",
    "load_dataset",
    "load_dataset_report",
]


DATA_DIR = Path(__file__).resolve().parents[2] / "data"


_SAMPLES = {"heart": "heart.csv", "adult": "adult.csv.gz", "wine": "wine_quality.csv"}

#: The documented target of each embedded sample (data/README.md): heart's disease status, adult's income
#: label, wine's sensory quality. Uploads have none until the user picks one.
SAMPLE_TARGETS = {"heart": "target", "adult": "income", "wine": "quality"}


MAX_FILE_BYTES = 200 * 1024 * 1024  # 200 MB, as in .streamlit/config.toml


_ENCODING_NAMES = {
    "cp1252": "Windows-1252 (Latin-1)",
    "latin-1": "Latin-1",
    "utf-16": "UTF-16",
}

#: Larger tables are replaced by a stated uniform random sample of this many rows.
INTERACTIVE_ROW_LIMIT = 60_000


def list_datasets() -> list[str]:
    """Names of the embedded sample datasets (``heart``, ``adult``, ``wine``)."""
    return list(_SAMPLES)


@dataclass(frozen=True)
class LoadReport:
    """What :func:`load_dataset_report` did besides reading.

    Attributes
    ----------
    source : str
        File or sample name.
    original_rows : int
        Data rows in the file (before sampling; blank lines not counted).
    sampled : bool
        True when the table was replaced by a uniform sample of ``INTERACTIVE_ROW_LIMIT`` rows.
    notes : tuple of str
        Every decision stated in words (encoding, separator, number format, unquoted headers, dropped
        empty rows or columns, values read as missing, sampling).
    target : str or None
        The documented target of an embedded sample; None for files (the user picks one).
    encoding : str
        Text encoding used (``utf-8``, ``utf-8-sig``, ``utf-16``, ``cp1252`` or ``latin-1``).
    separator : str
        Field separator used.
    decimal : str
        Decimal mark of the numbers: ``","`` when a column was read with decimal commas, else ``"."`` (so
        a release can be written as the file was).
    """

    source: str
    original_rows: int
    sampled: bool
    notes: tuple[str, ...] = ()
    target: str | None = None
    encoding: str = "utf-8"
    separator: str = ","
    decimal: str = "."


def load_dataset(source: str | os.PathLike[str] | IO[bytes], *, seed: int = 0) -> pd.DataFrame:
    """Load an embedded sample (by name), a CSV/TSV path, or a binary file-like (optionally gzipped).

    Raises
    ------
    DataError
        With a message a person can act on: empty, not text (binary, Excel, PDF), one column, fewer than
        2 rows, duplicate or blank column names, rows with too many fields, or a file over 200 MB.
    """
    return load_dataset_report(source, seed=seed)[0]


def load_dataset_report(
    source: str | os.PathLike[str] | IO[bytes], *, seed: int = 0
) -> tuple[pd.DataFrame, LoadReport]:
    """Like :func:`load_dataset`, also returning a :class:`LoadReport` (sampling, parsing notes, target).

    Steps: gunzip; refuse binaries (Excel, PDF, images, NUL bytes) with what to do instead; decode (UTF-8 /
    BOM / UTF-16 / Windows-1252 / Latin-1); take the separator from Excel's ``sep=`` line or sniff it; skip
    title and comment lines above the header, but keep a ``#items,...`` header above data and a header one
    field shorter than its rows (R's ``write.table`` row names become a column ``row names``; an empty last
    field of every data row, a trailing separator, is dropped); sample ``INTERACTIVE_ROW_LIMIT`` rows
    uniformly (seeded, original order kept) when the file has more, before parsing when that is exact (about
    2 s for 1,000,000 rows); unquote header names; read the ``MISSING_TOKENS`` as missing; drop empty rows
    and empty unnamed columns; strip unit signs (``%``, currency) of number columns; read numbers in the
    English (``1,234.5``) or European (``1.234,5``) convention: a column's own values decide when they can,
    else the file's majority, else the separator (``;`` means European); a note names the columns where the
    file decided that a separator groups thousands (``1.234`` read as 1234). Every step that changed
    something is a note.
    """
    raw, name, sample = _read_bytes(source)
    raw = _gunzip(raw, name)
    if not raw.strip():
        raise DataError(f"{name} is empty; upload a CSV or TSV file with a header row")
    text, encoding = decode_text(raw, name)
    if not text.strip():
        raise DataError(f"{name} is empty; upload a CSV or TSV file with a header row")
    notes: list[str] = []
    if encoding.startswith("utf-8 "):
        broken = text.count("\ufffd")
        notes.append(f"{name} is UTF-8 except for {broken:,} invalid byte(s), shown as \ufffd.")
    elif encoding not in ("utf-8", "utf-8-sig"):
        notes.append(f"{name} is not UTF-8; read it as {_ENCODING_NAMES.get(encoding, encoding)}.")
    lines = text_lines(text)
    hint = lines[0].strip().strip('"') if lines else ""
    skip = 0
    if len(hint) == 5 and hint.lower().startswith("sep="):  # Excel's "sep=;" line
        sep, skip = hint[4], 1
    else:
        sep = sniff_separator(lines[:60])
    if sep != ",":
        notes.append(f"Fields are separated by {separator_name(sep)}s.")
    title = preamble_length(lines[skip:], sep)
    short = short_header(lines[skip:], sep, at=title)
    if title:
        first = next((ln.strip() for ln in lines[skip : skip + title] if ln.strip()), "")
        notes.append(f"Skipped {title} line(s) above the header (starting {first[:60]!r}).")
    rows = min(len(lines) - skip - title - 1, INTERACTIVE_ROW_LIMIT)
    header = check_width(lines[skip + title].strip() if skip + title < len(lines) else "", sep, rows, name)
    if header.startswith("#"):
        notes.append(f"Read {header[:60]!r} as the header, not as a comment: the line below it is data.")
    if skip + title or short:
        lines = lines[skip + title :]
        if short:  # an empty name where the header lacks one, named or dropped by fill_short_header
            lines[0] = sep + lines[0] if short == "row names" else lines[0] + sep
        text = "\n".join(lines) + "\n"
    text, original, sampled = _sample_lines(text, lines, name, seed)
    df, short_notes = fill_short_header(_read_table(text, sep, name), short, sep)
    notes += short_notes
    df, header_notes = _header(df, name)
    notes += header_notes
    df, clean_notes = _clean_cells(df, name)
    notes += clean_notes
    if not sampled:
        original = len(df)
    if len(df) > INTERACTIVE_ROW_LIMIT:  # a file whose quoted fields span lines is sampled after parsing
        df = df.sample(n=INTERACTIVE_ROW_LIMIT, random_state=seed).sort_index().reset_index(drop=True)
        sampled = True
    if sampled:
        notes.append(
            f"{name} has {original:,} rows; using a uniform random sample of {INTERACTIVE_ROW_LIMIT:,} "
            f"rows (seed {seed}) to stay interactive."
        )
    df, type_notes, decimal = _type_columns(df, sep)
    notes += type_notes
    report = LoadReport(
        source=name,
        original_rows=original,
        sampled=sampled,
        notes=tuple(notes),
        target=SAMPLE_TARGETS.get(sample) if sample else None,
        encoding=encoding,
        separator=sep,
        decimal=decimal,
    )
    return df, report


def _read_bytes(source: str | os.PathLike[str] | IO[bytes]) -> tuple[bytes, str, str | None]:
    sample = None
    if isinstance(source, str) and source in _SAMPLES:
        sample, source = source, DATA_DIR / _SAMPLES[source]
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.is_file():
            raise DataError(f"no such file or sample: {str(source)!r} (samples: {', '.join(_SAMPLES)})")
        if path.stat().st_size > MAX_FILE_BYTES:
            raise DataError(f"{path.name} is larger than 200 MB; upload a sample or fewer columns")
        return path.read_bytes(), (sample or path.name), sample
    if not hasattr(source, "read"):
        raise TypeError(f"source must be a sample name, a path or a binary file-like, got {type(source)}")
    name = str(getattr(source, "name", "uploaded file"))
    raw = source.read(MAX_FILE_BYTES + 1)
    if isinstance(raw, str):
        raw = raw.encode()
    if len(raw) > MAX_FILE_BYTES:
        raise DataError(f"{name} is larger than 200 MB; upload a sample or fewer columns")
    return raw, name, None


def _gunzip(raw: bytes, name: str) -> bytes:
    if raw[:2] != b"\x1f\x8b":
        return raw
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(raw)) as fh:
            out = fh.read(MAX_FILE_BYTES + 1)
    except (OSError, EOFError) as exc:
        raise DataError(f"{name} looks gzipped but cannot be decompressed: {exc}") from exc
    if len(out) > MAX_FILE_BYTES:
        raise DataError(f"{name} is larger than 200 MB uncompressed; upload a sample")
    return out


def _sample_lines(text: str, lines: list[str], name: str, seed: int) -> tuple[str, int, bool]:
    """Sample data lines before parsing when that is exact (no quoted field spans two lines): fast."""
    body = lines[1:]
    if "" in body:  # blank lines are not rows (whitespace-only lines become empty rows, dropped later)
        body = [ln for ln in body if ln]
    n = len(body)
    if n <= INTERACTIVE_ROW_LIMIT:
        return text, n, False
    if '"' in text and any(ln.count('"') % 2 for ln in lines):
        return text, n, False  # parse everything, sample the frame
    keep = np.sort(np.random.default_rng(seed).choice(n, size=INTERACTIVE_ROW_LIMIT, replace=False))
    return "\n".join([lines[0], *(body[i] for i in keep)]) + "\n", n, True


def _read_table(text: str, sep: str, name: str) -> pd.DataFrame:
    try:
        return pd.read_csv(
            io.StringIO(text),
            sep=sep,
            header=None,
            dtype=str,
            keep_default_na=False,
            na_filter=False,
            skip_blank_lines=True,
            skipinitialspace=True,
        )
    except pd.errors.EmptyDataError as exc:
        raise DataError(f"{name} is empty; upload a CSV or TSV file with a header row") from exc
    except (pd.errors.ParserError, ValueError) as exc:
        raise DataError(
            f"{name} could not be read as a table ({_parser_message(exc)}); every row needs as many "
            f"{separator_name(sep)}-separated fields as the header, and text with a {separator_name(sep)} "
            "must be in double quotes"
        ) from exc


def _parser_message(exc: Exception) -> str:
    """pandas' parser message without its "Error tokenizing data. C error:" prefix, on one line."""
    return " ".join(str(exc).split()).removeprefix("Error tokenizing data. C error: ")


def _header(df: pd.DataFrame, name: str) -> tuple[pd.DataFrame, list[str]]:
    names, unquoted = clean_headers(df.iloc[0].tolist())
    body = df.iloc[1:].reset_index(drop=True)
    body.columns = range(body.shape[1])
    notes = []
    if unquoted:
        shown = ", ".join(unquoted[:5]) + (" ..." if len(unquoted) > 5 else "")
        notes.append(f"Quotes removed from header name(s) {shown}.")
    blank = [i for i, c in enumerate(names) if not c]
    empty_blank = [i for i in blank if _is_empty(body[i])]
    if empty_blank:
        body = body.drop(columns=empty_blank)
        names = [c for i, c in enumerate(names) if i not in empty_blank]
        notes.append(f"Dropped {len(empty_blank)} empty column(s) without a header (a trailing separator?).")
    if names and not names[0] and _is_row_number(body[body.columns[0]]):  # pandas' to_csv() writes its index
        body, names = body.drop(columns=body.columns[0]), names[1:]
        notes.append("Dropped the first column: it has no name and numbers the rows (a saved row index).")
    still_blank = [str(i + 1) for i, c in enumerate(names) if not c]
    if still_blank:
        raise DataError(
            f"{name}: column{'s' if len(still_blank) > 1 else ''} {', '.join(still_blank)} (counting from 1) "
            f"{'have' if len(still_blank) > 1 else 'has'} a blank name; give every column a header"
        )
    dups = sorted({c for c in names if names.count(c) > 1})
    if dups:
        raise DataError(f"{name}: duplicate column name(s) {dups}; make every header unique")
    body.columns = names
    if len(names) >= 2 and all(_looks_numeric(c) for c in names):
        raise DataError(
            f"{name}: the first row ({', '.join(names[:4])}{', ...' if len(names) > 4 else ''}) looks like "
            "data, not column names; add a header row with a name for every column"
        )
    if body.shape[1] < 2:
        raise DataError(
            f"{name} has {body.shape[1]} column; need at least 2 attributes separated by commas, "
            "semicolons, tabs or pipes"
        )
    return body, notes


def _looks_numeric(text: str) -> bool:
    return max(number_conventions(pd.Series([text], dtype="str"))) == 1.0


def _is_row_number(col: pd.Series) -> bool:
    """Whether ``col`` holds whole numbers >= 0 in increasing order (a row index; sampled rows skip some)."""
    text = col.astype(str).str.strip()
    if not text.str.fullmatch(r"\d{1,18}").all():
        return False
    numbers = text.astype(np.int64).to_numpy()
    return bool(np.all(np.diff(numbers) > 0))


def _is_empty(col: pd.Series) -> bool:
    return bool(col.isna().all() or col.astype(str).str.strip().isin(MISSING_TOKENS).all())


def _clean_cells(df: pd.DataFrame, name: str) -> tuple[pd.DataFrame, list[str]]:
    out, spelled = {}, {}
    for c in df.columns:
        s = df[c].astype("str").str.strip()
        token = s.isin(MISSING_TOKENS) & df[c].notna()
        out[c] = s.where(~token & df[c].notna())
        spelled[c] = s.where(token & (s != ""))  # a spelled-out token ("none", "?"), not a blank
    df = pd.DataFrame(out)
    empty_rows = df.isna().all(axis=1)
    notes = []
    if empty_rows.any():
        df = df.loc[~empty_rows].reset_index(drop=True)
        notes.append(f"Dropped {int(empty_rows.sum()):,} empty row(s).")
    read = [  # a token can be a real category ("none" as education): say what became missing
        f"{token!r} ({count:,} in {c})"
        for c, values in spelled.items()
        for token, count in values[~empty_rows.to_numpy()].value_counts().items()
    ]
    if read:
        shown = listed(read, 6)
        notes.append(
            f"Values read as missing: {shown}. If one of them is a real value, rename it in the file."
        )
    if len(df) < 2:
        raise DataError(f"{name} has {len(df)} data row(s); need at least 2 rows below the header")
    return df, notes


def _type_columns(df: pd.DataFrame, sep: str) -> tuple[pd.DataFrame, list[str], str]:
    """Unquote quoted text columns and turn number columns into numbers (see load_dataset_report); also
    the decimal mark read (``","`` when any column had decimal commas)."""
    notes: list[str] = []
    unquoted = []
    for c in df.columns:
        fixed = unquote_values(df[c])
        if fixed is not None:
            df[c] = fixed
            unquoted.append(c)
    if unquoted:
        notes.append(f"Single quotes removed around the values of {', '.join(unquoted)}.")
    shares = {c: number_conventions(df[c]) for c in df.columns}
    for c in [c for c, share in shares.items() if max(share) < NUMERIC_SHARE]:
        stripped = strip_unit(df[c])
        if stripped is not None and max(number_conventions(stripped[0])) >= NUMERIC_SHARE:
            df[c] = stripped[0]
            shares[c] = number_conventions(df[c])
            notes.append(f"{c}: the unit sign {stripped[1]!r} was removed to read the values as numbers.")
    codes = [c for c, share in shares.items() if max(share) >= NUMERIC_SHARE and zero_padded_codes(df[c])]
    if codes:
        notes.append(f"Kept as text, codes with leading zeros (00100 is not 100): {', '.join(codes)}.")
    numeric = {c: s for c, s in shares.items() if max(s) >= NUMERIC_SHARE and c not in codes}
    en_votes = sum(en >= NUMERIC_SHARE > eu for en, eu in numeric.values())
    eu_votes = sum(eu >= NUMERIC_SHARE > en for en, eu in numeric.values())
    prefer_comma = eu_votes > en_votes or (eu_votes == en_votes and sep == ";")
    comma_cols, grouped = [], []
    for c, (en, eu) in numeric.items():
        comma = (eu >= NUMERIC_SHARE) if en < NUMERIC_SHARE else (prefer_comma and eu >= NUMERIC_SHARE)
        before = df[c]
        values, bad = parse_numbers(before, comma_decimal=comma)
        df[c] = values
        if comma and before.dropna().str.contains(",", regex=False).any():
            comma_cols.append(c)
        if min(en, eu) >= NUMERIC_SHARE:  # both conventions read the column: the file decided
            grouped += _thousands_example(c, before, values, "." if comma else ",")
        if bad:
            count = int(before.isin(bad).sum())
            examples = ", ".join(repr(b) for b in bad[:3])
            notes.append(f"{c}: {count:,} value(s) are not numbers ({examples}) and count as missing.")
    if comma_cols:
        notes.append(f"Read as numbers with a decimal comma: {', '.join(comma_cols)}.")
    if grouped:
        notes.append(_thousands_note(grouped, prefer_comma, eu_votes != en_votes, sep))
    return df, notes, "," if comma_cols else "."


def _thousands_example(name: str, before: pd.Series, values: pd.Series, mark: str) -> list[str]:
    """``["amt (1.234 read as 1234)"]`` when a value of the column has ``mark`` read as a thousands
    separator (it has a digit group after it), else nothing."""
    hit = before.astype("str").str.contains(mark, regex=False, na=False) & values.notna()
    if not hit.any():
        return []
    first = int(np.argmax(hit.to_numpy()))
    return [f"{name} ({str(before.iloc[first]).strip()} read as {values.iloc[first]:.15g})"]


def _thousands_note(grouped: list[str], comma: bool, voted: bool, sep: str) -> str:
    """Say which columns had a separator read as thousands although the values also read as decimals
    (``1.234`` is 1234 in the European convention, 1.234 in the English one), and what decided."""
    mark, other = (".", "a decimal point") if comma else (",", "a decimal comma")
    if voted:
        why = "as in the file's other number columns"
    elif comma:
        why = f"as the {separator_name(sep)} separator suggests"
    else:
        why = "the default unless fields are separated by semicolons"
    convention = "European" if comma else "English"
    return (
        f"Read '{mark}' as a thousands separator ({convention} convention, {why}) in "
        f"{listed(grouped, 6)}; these values would also read with '{mark}' as {other}."
    )
