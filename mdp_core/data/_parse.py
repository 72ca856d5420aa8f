"""Reading real-world text tables: encodings, separators, quoted headers, missing markers, number formats.

Private helpers of :mod:`mdp_core.data.io` (DESIGN.md "Data-prep guard rails"). Every function is pure and
works on the raw text or on string columns; decisions that change values are returned as notes so that the
loader can state them.
"""

from __future__ import annotations

import csv
import re
from collections import Counter
from collections.abc import Iterable

import numpy as np
import pandas as pd

from mdp_core.errors import DataError

__all__ = [
    "MAX_CELLS",
    "MAX_COLUMNS",
    "MISSING_TOKENS",
    "check_width",
    "clean_headers",
    "decode_text",
    "fill_short_header",
    "number_conventions",
    "parse_numbers",
    "preamble_length",
    "short_header",
    "sniff_separator",
    "strip_unit",
    "text_lines",
    "unquote_values",
    "zero_padded_codes",
]

#: Cell values read as missing (after stripping spaces), in every column.
MISSING_TOKENS: frozenset[str] = frozenset(
    {
        "", "NA", "N/A", "n/a", "na", "NaN", "nan", "NAN", "null", "NULL", "Null", "None", "none", "<NA>",
        "#N/A", "#NA", "#N/A N/A", "-NaN", "-nan", "?", ".", "-", "--", "–", "—", "missing", "Missing",
    }
)  # fmt: skip

#: Columns a table may have, and cells (columns x rows read, after sampling): a 2,000 x 5,000 file took
#: 795 MB and 79 s to read, and memory grows with the cells (security audit).
MAX_COLUMNS = 1_000
MAX_CELLS = 10_000_000


def check_width(header: str, sep: str, rows: int, name: str) -> str:
    """``header``, unless the table has more than :data:`MAX_COLUMNS` columns or, with ``rows`` rows read,
    more than :data:`MAX_CELLS` cells: refused before it is parsed."""
    columns = len(next(csv.reader([header], delimiter=sep), []))
    if columns > MAX_COLUMNS or columns * rows > MAX_CELLS:
        raise DataError(
            f"{name} has {columns:,} columns and {rows:,} rows to read: more than the "
            f"{MAX_COLUMNS:,} columns or {MAX_CELLS:,} cells handled here. Keep the columns you want to "
            "release (and fewer rows if needed) and upload that file."
        )
    return header


_SEPARATORS = (",", ";", "\t", "|")
_SEP_NAMES = {",": "comma", ";": "semicolon", "\t": "tab", "|": "pipe"}

# Magic numbers of files people upload by mistake, with what to do instead.
_MAGIC = (
    (b"PK\x03\x04", "a ZIP archive or Excel workbook (.xlsx); save the sheet as CSV (UTF-8) and upload that"),
    (b"\xd0\xcf\x11\xe0", "an old Excel workbook (.xls); save the sheet as CSV (UTF-8) and upload that"),
    (b"%PDF", "a PDF document; export the table as CSV and upload that"),
    (b"\x89PNG", "a PNG image; upload the table itself as CSV"),
    (b"\xff\xd8\xff", "a JPEG image; upload the table itself as CSV"),
    (b"PAR1", "a Parquet file; write it as CSV (e.g. pandas.read_parquet(...).to_csv(...)) and upload that"),
)

# Number formats. EN: optional ',' thousands groups, '.' decimals, exponent. EU: optional '.' (or space)
# thousands groups, ',' decimals. A thousands group never starts with 0 ("0.125" is a decimal).
_EN = re.compile(r"[+-]?(?:\d+|[1-9]\d{0,2}(?:,\d{3})+)?(?:\.\d+)?(?:[eE][+-]?\d+)?")
_EU = re.compile(r"[+-]?(?:\d+|[1-9]\d{0,2}(?:\.\d{3})+)?(?:,\d+)?")
_SPACE_CHARS = "[ \u00a0\u202f']"
_SPACED = re.compile(r"[+-]?[1-9]\d{0,2}(?:" + _SPACE_CHARS + r"\d{3})+(?:[.,]\d+)?")

#: Share of a column's values that must read as numbers before the rest are treated as missing.
NUMERIC_SHARE = 0.95


def decode_text(raw: bytes, name: str) -> tuple[str, str]:
    """Decode file bytes: UTF-8 (with or without BOM), UTF-16 with BOM, else Windows-1252, else Latin-1.

    Returns
    -------
    (text, encoding) : tuple of str
        The decoded text and the name of the encoding that was used. A file that is UTF-8 but for a few
        broken bytes (at least 10 valid non-ASCII characters per broken one) is read as UTF-8 with U+FFFD
        in their place.
    """
    for magic, what in _MAGIC:
        if raw.startswith(magic):
            raise DataError(f"{name} is {what}")
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return raw.decode("utf-16"), "utf-16"
        except UnicodeDecodeError as exc:
            raise DataError(f"{name} claims UTF-16 but cannot be decoded: {exc}") from exc
    if b"\x00" in raw[:65536]:
        raise DataError(f"{name} is not a text file; upload a CSV or TSV file (optionally .gz)")
    if raw.startswith(b"\xef\xbb\xbf"):
        return raw[3:].decode("utf-8", errors="replace"), "utf-8-sig"
    try:
        return raw.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    text = raw.decode("utf-8", errors="replace")
    bad = text.count("\ufffd")
    good = len(text) - len(text.encode("ascii", errors="ignore")) - bad  # valid non-ASCII characters
    if good >= 10 * bad:  # mostly UTF-8 with a few broken bytes (e.g. files pasted together)
        return text, "utf-8 (with invalid bytes replaced)"
    try:
        return raw.decode("cp1252"), "cp1252"
    except UnicodeDecodeError:
        return raw.decode("latin-1"), "latin-1"


def sniff_separator(lines: list[str]) -> str:
    """The field separator of a table from its first lines (header first).

    Each candidate (``, ; tab |``) splits the lines with the CSV rules (quotes respected); the winner gives
    the same number (> 1) of fields on most lines, and the most fields among those.
    """
    best, best_score = ",", (-1.0, 0)
    sample = [ln for ln in lines if ln.strip()][:50]
    for sep in _SEPARATORS:
        try:
            counts = [len(row) for row in csv.reader(sample, delimiter=sep)]
        except csv.Error:
            continue
        if not counts:
            continue
        mode, freq = Counter(counts).most_common(1)[0]
        if mode < 2:
            continue
        score = (freq / len(counts), mode)
        if score > best_score:
            best, best_score = sep, score
    return best


def _table_rows(lines: list[str], sep: str) -> tuple[list[str], list[list[str]], int]:
    """The first 61 lines, their fields, and the table's width (the most common number of fields)."""
    head = lines[:61]
    rows = list(csv.reader(head, delimiter=sep))
    widths = [len(r) for r, ln in zip(rows, head, strict=False) if ln.strip()]
    return head, rows, Counter(widths).most_common(1)[0][0] if widths else 0


def _is_number(text: str) -> bool:
    """Whether a stripped field reads as a number in either convention (``12``, ``1,234.5``, ``1.234,5``)."""
    return any(c.isdigit() for c in text) and bool(
        _EN.fullmatch(text) or _EU.fullmatch(text) or _SPACED.fullmatch(text)
    )


def _header_like(row: list[str], body: list[list[str]]) -> bool:
    """Whether ``row`` reads as column names above the rows ``body`` rather than as one more data row.

    Over the columns whose ``body`` values are all numbers, a header holds mostly text and a data row mostly
    numbers. Without such a column, a header is text that recurs nowhere in its column (data values of a
    category do).
    """
    votes = []
    for c, field in enumerate(f.strip() for f in row):
        column = [r[c].strip() for r in body if c < len(r) and r[c].strip() not in MISSING_TOKENS]
        if field not in MISSING_TOKENS and column and all(_is_number(v) for v in column):
            votes.append(not _is_number(field))
    if votes:
        return sum(votes) > len(votes) / 2
    fields = [(c, f.strip()) for c, f in enumerate(row) if f.strip() not in MISSING_TOKENS]
    return all(not _is_number(f) for _, f in fields) and not any(
        c < len(r) and r[c].strip() == f for c, f in fields for r in body
    )


def _names_like(fields: list[str]) -> bool:
    """Whether fields can be column names: none blank, none a number, no two alike."""
    names = [f.strip() for f in fields]
    return all(names) and not any(_is_number(n) for n in names) and len(set(names)) == len(names)


def _rows_below(head: list[str], rows: list[list[str]], i: int) -> list[int]:
    """Indices of the non-blank lines below line ``i``."""
    return [t for t in range(i + 1, len(rows)) if head[t].strip()]


def _short_kind(head: list[str], rows: list[list[str]], i: int, k: int) -> str | None:
    """``"trailing"`` or ``"row names"`` when line ``i`` is a header with one field fewer than the ``k`` of
    every line below it (see :func:`short_header`), else None."""
    below = _rows_below(head, rows, i)
    if len(rows[i]) != k - 1 or not below or not _names_like(rows[i]):
        return None
    data = [rows[t] for t in below]
    if any(len(r) != k for r in data) or _header_like(data[0], data[1:]):
        return None  # the line below is a header (line i is a title) or the lines below are ragged
    if all(not r[-1].strip() for r in data):
        return "trailing"
    firsts = [r[0].strip() for r in data]
    if not all(firsts) or len(set(firsts)) < len(firsts):
        return None
    quoted = all(head[t].lstrip().startswith('"') for t in below)  # write.table's default quote=TRUE
    counted = len(firsts) >= 3 and firsts == [str(n) for n in range(1, len(firsts) + 1)]  # its default
    # text names without quotes (quote=FALSE), under names without inner spaces (R's make.names; a title
    # line, "Population by county, 2019-2020", has words)
    named = not any(_is_number(f) for f in firsts) and not any(" " in f.strip() for f in rows[i])
    return "row names" if quoted or counted or named else None


def _hash_header(head: list[str], rows: list[list[str]], i: int, k: int) -> bool:
    """Whether the ``#`` line ``i`` is the header (``#items,store``; ``# of visits,clinic``): it has the
    table's ``k`` fields, reads as names, and the next non-blank line is data, not a (second) header."""
    below = _rows_below(head, rows, i)
    if k < 2 or len(rows[i]) != k or not below or not _names_like(rows[i]):
        return False
    if head[below[0]].lstrip().startswith("#"):
        return False
    body = [rows[t] for t in below[1:] if len(rows[t]) == k]
    return not _header_like(rows[below[0]], body)


def preamble_length(lines: list[str], sep: str) -> int:
    """Lines above the header to skip (at most 20): blank lines, ``#`` comments, and title lines with fewer
    fields than the table (``Table 1: Population by county, 2020`` in a census extract) when the first
    full-width line looks like a header (not all numbers).

    Two lines that look like a preamble are kept as the header: a ``#`` line with as many fields as the table
    above a data row (``#items,store,region``), and a line of names with one field fewer than every line
    below it when :func:`short_header` tells why (a trailing separator, R's row names).
    """
    head, rows, k = _table_rows(lines, sep)
    if not k:
        return 0

    def title(i: int, wide: bool) -> bool:
        if head[i].lstrip().startswith("#"):
            return not _hash_header(head, rows, i, k)
        filled = [f for f in rows[i] if f.strip()]
        return len(filled) <= 1 or (wide and len(rows[i]) < k and _short_kind(head, rows, i, k) is None)

    for wide in (True, False):
        i = 0
        while i < min(len(rows), 20) and title(i, wide):
            i += 1
        if i >= len(rows):
            return 0
        names = pd.Series([f.strip() for f in rows[i]], dtype="str")
        if not wide or not (number_conventions(names)[0] == 1.0 or number_conventions(names)[1] == 1.0):
            return i
    return 0


def short_header(lines: list[str], sep: str, *, at: int = 0) -> str | None:
    """Why the header (line ``at``) has one field fewer than every line below it, or None.

    ``"trailing"``: the last field of every data row is empty (a separator at the end of the data rows
    only). ``"row names"``: the first field of every data row is a distinct row name, as R's
    ``write.table(df, sep=",")`` writes them (no header field for them): quoted (its default), text
    (``quote=FALSE``) under names without spaces, or ``1, 2, 3, ...`` unquoted (at least 3 rows); other
    unquoted numbers stay ambiguous. Decided on the first 60 lines below the header, which must not read as
    a header themselves. Any other short header is left to the parser, whose error says what to
    fix.
    """
    head, rows, k = _table_rows(lines, sep)
    return _short_kind(head, rows, at, k) if k and at < len(rows) else None


def fill_short_header(df: pd.DataFrame, kind: str | None, sep: str) -> tuple[pd.DataFrame, list[str]]:
    """Complete a header that :func:`short_header` found one field short and the loader padded with an empty
    name (row 0 of ``df``, read without header): drop the trailing field, or name the row names.

    A "trailing" field with a value further down keeps its blank name, which the loader then refuses.
    """
    if kind == "trailing":
        last = df.columns[-1]
        if df[last].iloc[1:].fillna("").astype(str).str.strip().eq("").all():
            note = (
                "Every data row ends with an empty field that the header has no name for (a "
                f"{separator_name(sep)} at the end of the data rows only); dropped that field."
            )
            return df.drop(columns=last), [note]
    elif kind == "row names":
        taken, label, n = {str(v).strip() for v in df.iloc[0, 1:]}, "row names", 1
        while label in taken:
            n += 1
            label = f"row names {n}"
        df.iloc[0, 0] = label
        note = (
            "The header has one name fewer than the data rows, whose first field names the row (as R's "
            f"write.table writes it): read those fields as a column named {label!r}."
        )
        return df, [note]
    return df, []


def separator_name(sep: str) -> str:
    """A word for a separator (for notes)."""
    return _SEP_NAMES.get(sep, repr(sep))


def clean_headers(names: Iterable[object]) -> tuple[list[str], list[str]]:
    """Strip spaces and one pair of surrounding quotes (``'popul'`` -> ``popul``) from header names.

    Returns the cleaned names and the names that were unquoted (for a note).
    """
    cleaned, unquoted = [], []
    for raw in names:
        text = "" if raw is None or (isinstance(raw, float) and np.isnan(raw)) else str(raw)
        text = text.strip().lstrip("\ufeff").strip()
        if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"`":
            unquoted.append(text)
            text = text[1:-1].strip()
        cleaned.append(text)
    return cleaned, unquoted


_ROW_END = re.compile(r"\r\n|\n|\r")


def text_lines(text: str) -> list[str]:
    """The file's lines, ended by \\r\\n, \\n or \\r only. ``str.splitlines`` also splits at \\x0b,
    \\x1c-\\x1e, \\x85 and U+2028/9, which cells carry (FileMaker's in-cell line breaks, text pasted from
    the web): a sampled table rebuilt from such lines shifted values into other columns (audit)."""
    return _ROW_END.split(text.removesuffix("\r\n").removesuffix("\n").removesuffix("\r"))


def unquote_values(col: pd.Series) -> pd.Series | None:
    """Strip single quotes when every value of a text column is wrapped in them (``'Male'``), else None."""
    values = col.dropna()
    if values.empty:
        return None
    text = values.astype(str)
    if bool((text.str.len() >= 2).all() and text.str.startswith("'").all() and text.str.endswith("'").all()):
        return col.where(col.isna(), col.astype(str).str.slice(1, -1).str.strip())
    return None


def zero_padded_codes(col: pd.Series) -> bool:
    """Whether a text column holds codes of a fixed number of digits, some with leading zeros (zip codes
    ``00100``, months ``01``-``12``): read as numbers they would lose the zeros, and the release would
    publish other codes (100 for 00100)."""
    if pd.api.types.is_numeric_dtype(col):
        return False
    values = _distinct_text(col).str.strip()
    if values.empty or not values.str.fullmatch(r"\d+").all():
        return False
    return (
        values.str.len().nunique() == 1
        and bool(values.str.len().iloc[0] >= 2)
        and values.str[0].eq("0").any()
    )


def _matches(values: pd.Series, pattern: re.Pattern[str]) -> pd.Series:
    """Vectorised full match of a pattern (values must contain a digit)."""
    return values.str.fullmatch(pattern.pattern) & values.str.contains(r"\d", regex=True)


def _distinct_text(col: pd.Series) -> pd.Series:
    return pd.Series(pd.unique(col.dropna()), dtype="str")


def number_conventions(col: pd.Series) -> tuple[float, float]:
    """Share of a string column's distinct non-missing values that read as numbers, in the English
    (``1,234.5``) and in the European (``1.234,5``) convention. Spaced thousands (``1 234,5``) fit both.
    Below ``NUMERIC_SHARE`` the result may be an upper bound (the share of values with a digit)."""
    if pd.api.types.is_numeric_dtype(col):
        return 1.0, 1.0
    values = _distinct_text(col)
    if values.empty:
        return 0.0, 0.0
    digits = float(values.str.contains(r"\d", regex=True).mean())
    if digits < NUMERIC_SHARE:  # mostly words: no number format fits more values than have a digit
        return digits, digits
    spaced = values.str.fullmatch(_SPACED.pattern)
    en = (spaced | _matches(values, _EN)).mean()
    eu = (spaced | _matches(values, _EU)).mean()
    return float(en), float(eu)


def parse_numbers(col: pd.Series, *, comma_decimal: bool) -> tuple[pd.Series, list[str]]:
    """Convert a string column to numbers in the given convention.

    Returns the numbers (``int64`` when every value is whole and none is missing, else ``float64``) and
    the distinct values that did not read as finite numbers (they become missing; the caller states how many).
    """
    if pd.api.types.is_numeric_dtype(col):
        return col, []
    uniques = _distinct_text(col)
    text = uniques
    if text.str.contains(_SPACE_CHARS, regex=True).any():
        text = text.str.replace(_SPACE_CHARS, "", regex=True)
    ok = _matches(text, _EU if comma_decimal else _EN).fillna(False).astype(bool)
    if comma_decimal:
        text = text.str.replace(".", "", regex=False).str.replace(",", ".", regex=False)
    else:
        text = text.str.replace(",", "", regex=False)
    values = pd.to_numeric(text.where(ok), errors="coerce").to_numpy(dtype=float)
    values = np.where(np.isinf(values), np.nan, values)  # past float64's range ('1e309'): nothing to bin
    bad = [str(v) for v in uniques[np.isnan(values)]]
    index = pd.Index(uniques).get_indexer(col.astype("str").where(col.notna()))
    out = np.where(index >= 0, values[np.maximum(index, 0)] if len(values) else np.nan, np.nan)
    series = pd.Series(out, index=col.index, name=col.name, dtype=float)
    if not series.isna().any() and np.all(np.mod(out, 1.0) == 0) and np.abs(out).max() < 2**53:
        series = series.astype(np.int64)
    return series, bad


#: Unit signs that may lead or trail a number (``12 %``, ``€ 1.234,50``, ``$1,234``).
UNIT_SIGNS = ("%", "€", "$", "£")


def strip_unit(col: pd.Series) -> tuple[pd.Series, str] | None:
    """Remove a unit sign that leads or trails (nearly) every value of a text column: (values, sign)."""
    if pd.api.types.is_numeric_dtype(col):
        return None
    values = _distinct_text(col)
    if values.empty or not values.str.contains("[%€$£]", regex=True).any():
        return None
    for sign in UNIT_SIGNS:
        marked = values.str.startswith(sign) | values.str.endswith(sign)
        if marked.mean() >= NUMERIC_SHARE:
            text = col.astype("str").str.strip().str.removeprefix(sign).str.removesuffix(sign).str.strip()
            return text.where(col.notna()), sign
    return None
