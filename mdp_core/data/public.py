"""Public domains: levels declared without looking at the records (DESIGN.md "Release scope").

Without them the released values of a column come from its records: the bins of a numeric column cut its
own minimum and maximum, and a nominal or ordinal column's levels are the categories that occur, so one
record with an extreme value or a rare category changes what every record can be released as. A declared
domain depends on no record:

* a numeric column's **public range** (lo, hi): equal-width bins of [lo, hi], every bin a level (empty ones
  too), a value beyond the range set to its nearer end;
* a nominal, binary or ordinal column's **public categories**: the declared labels, in the declared order
  (an ordinal column's ranks), plus one :data:`OTHER_LEVEL` that takes every value not declared and every
  missing value (ranked after the last label, as an undeclared column's ``missing`` level is).

Values set to the nearer end or released as ``other`` are counted per column (``Encoded.outside_public``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from mdp_core.errors import DataError
from mdp_core.metrics import nominal_distance, numeric_distance, ordinal_distance

__all__ = [
    "OTHER_LEVEL",
    "categorised_column",
    "checked_categories",
    "checked_ranges",
    "crowded_ranges",
    "cut_bins",
    "is_label_list",
    "is_span",
    "outside_sentence",
    "ranged_column",
]

#: The level that takes a value outside a column's public categories (and a missing value).
OTHER_LEVEL = "other"

Column = tuple[np.ndarray, np.ndarray, np.ndarray, int]


def is_span(value: object) -> bool:
    """Whether ``value`` reads as a public range: [lo, hi], two finite numbers (not booleans), lo < hi (the
    shape a scenario file or a sweep spec must give; :func:`checked_ranges` checks it against the table)."""
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        return False
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        return False
    return math.isfinite(value[0]) and math.isfinite(value[1]) and value[0] < value[1]


def is_label_list(value: object) -> bool:
    """Whether ``value`` reads as public categories: a non-empty list of label texts."""
    return isinstance(value, (list, tuple)) and bool(value) and all(isinstance(v, str) for v in value)


def checked_ranges(
    ranges: Mapping[str, tuple[float, float]], kinds: Mapping[str, str]
) -> dict[str, tuple[float, float]]:
    """Public ranges as (lo, hi) floats, each of a numeric column of ``kinds``, finite, lo < hi."""
    spans = {}
    for col, span in ranges.items():
        if kinds.get(col) != "numeric":
            raise DataError(f"a public range is for a numeric attribute; {col!r} is not one")
        lo, hi = (float(v) for v in span)
        if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi and np.isfinite(hi - lo)):
            raise DataError(f"the public range of {col!r} must be two finite numbers lo < hi, got {span!r}")
        spans[str(col)] = (lo, hi)
    return spans


def checked_categories(
    categories: Mapping[str, Iterable[object]], kinds: Mapping[str, str]
) -> dict[str, tuple[str, ...]]:
    """Public categories as distinct, non-empty label texts, each list of a column that is not numeric."""
    lists = {}
    for col, labels in categories.items():
        if kinds.get(col) not in ("nominal", "binary", "ordinal"):
            raise DataError(
                f"public categories are for a nominal, binary or ordinal attribute; {col!r} is not one"
            )
        texts = tuple(str(v).strip() for v in labels)
        keys = [_text(v) for v in labels]
        if not texts or any(not t for t in keys) or len(set(keys)) != len(keys):
            raise DataError(
                f"the public categories of {col!r} must be distinct non-empty labels (numbers compared by "
                f"value: 01 and 1 are one label), got {labels!r}"
            )
        lists[str(col)] = texts
    return lists


def cut_bins(x: np.ndarray, lo: float, hi: float, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """The bin of each value among ``bins`` equal-width bins of [lo, hi] (values beyond go to the outer
    bins, the right edge to the last) and every bin's centre: the one cut the encoding, a public range and
    a held-out row share, so that equal values land in equal bins."""
    edges = np.linspace(lo, hi, bins + 1)
    cell = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, bins - 1)
    return cell.astype(np.int64), (edges[:-1] + edges[1:]) / 2


def ranged_column(x: np.ndarray, bins: int, span: tuple[float, float]) -> Column:
    """Codes, levels (bin centres), component distances and the count of values beyond the range."""
    code, centres = cut_bins(x, span[0], span[1], bins)
    beyond = int(np.count_nonzero((x < span[0]) | (x > span[1])))
    return code, centres, numeric_distance(centres), beyond


def categorised_column(values: pd.Series, kind: str, declared: tuple[str, ...]) -> Column:
    """Codes, levels (the declared labels and :data:`OTHER_LEVEL`), component distances (an ordinal
    column ranks the labels in the declared order, ``other`` last) and the count of values released as
    ``other`` (those not declared and missing ones). A value matches a label by its text."""
    other = OTHER_LEVEL
    while other in declared:  # a declared "other" keeps its name; the extra level takes another
        other = f"({other})"
    labels = [*declared, other]
    index = {_text(label): i for i, label in enumerate(declared)}
    # each distinct text's key once (texts, not values: True and 1 are equal values but other labels)
    inverse, texts = pd.factorize(values.astype(str), use_na_sentinel=False)
    code = np.array([index.get(_text(t), len(declared)) for t in texts], dtype=np.int64)[inverse]
    code[values.isna().to_numpy()] = len(declared)  # a missing value is 'other'
    moved = int(np.count_nonzero(code == len(declared)))
    dist = ordinal_distance(len(labels)) if kind == "ordinal" else nominal_distance(len(labels))
    return code, np.asarray(labels, dtype=object), dist, moved


def _text(value: object) -> str:
    """The key a value or a label is matched by: its text, stripped, with numbers compared by value (how a
    file is read, 2, 2.0 or "02", must not decide whether a value matches the label "2"); a missing value
    is "" (no label matches it)."""
    if value is None or (not isinstance(value, (str, bytes)) and pd.isna(value)):
        return ""
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    text = str(value).strip()
    try:
        number = float(text)
    except ValueError:
        return text
    if not np.isfinite(number):
        return text
    return str(int(number)) if number.is_integer() else repr(number)


def crowded_ranges(
    ranges: Mapping[str, tuple[float, float]], codes: pd.DataFrame, bins: Mapping[str, int]
) -> list[str]:
    """A sentence when the records of a column with a public range fill a quarter of its bins or fewer (a
    range far wider than the data, or most values beyond it): the release then says little about them."""
    crowded = []
    for col in ranges:
        taken = int(codes[col].nunique())
        if taken <= max(1, bins[col] // 4):
            crowded.append(f"{col!r} ({taken} of {bins[col]})")
    if not crowded:
        return []
    return [
        "The records fill few bins of a declared public range, so its released values say little about them: "
        f"{', '.join(crowded)}. A narrower range, or more bins, keeps more."
    ]


def outside_sentence(
    outside: Iterable[tuple[str, int]],
    ranges: Mapping[str, tuple[float, float]],
    levels: Mapping[str, np.ndarray],
) -> list[str]:
    """A sentence counting, per column, the values outside its declared domain and what became of them."""

    def what(column: str) -> str:
        if column in ranges:
            lo, hi = ranges[column]
            return f"beyond {lo:g}..{hi:g}, set to the nearer end"
        return f"not among its categories, released as '{levels[column][-1]}'"

    cols = ", ".join(f"{c!r} ({n:,} {what(c)})" for c, n in outside)
    return [f"Values outside a declared public domain: {cols}."] if cols else []
