"""The one encoding recipe the app, a release scenario and a sweep spec share (:func:`encode_table`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import pandas as pd

from mdp_core.errors import DataError

from .encoding import Encoded, Schema, discretize, infer_schema

__all__ = ["encode_table"]


def encode_table(
    df: pd.DataFrame,
    *,
    target: str | None = None,
    include: Mapping[str, str | None] | Iterable[tuple[str, str | None]] = (),
    exclude: Iterable[str] = (),
    kinds: Mapping[str, str] | Iterable[tuple[str, str]] = (),
    bins: Mapping[str, int] | Iterable[tuple[str, int]] = (),
    default_bins: int = 8,
    ranges: Mapping[str, tuple[float, float]] | Iterable[tuple[str, float, float]] = (),
    categories: Mapping[str, Iterable[str]] | Iterable[tuple[str, Iterable[str]]] = (),
    strict: bool = False,
) -> Encoded:
    """The table encoded as a user's Data-page choices say: the one recipe the app, a release scenario and
    a sweep spec share, so that each reproduces the others' encoding.

    Parameters
    ----------
    df : DataFrame
        The loaded table.
    target : str, optional
        Target column (must not be excluded).
    include : mapping column -> kind or None
        Columns re-included despite their default exclusion (see :func:`infer_schema`).
    exclude : iterable of str
        Columns left out. Columns the guard rails exclude anyway keep their own reason.
    kinds : mapping column -> kind
        Kind overrides; those of columns that are not encoded are ignored (as on the Data page).
    bins : mapping column -> int
        Bin counts of numeric columns; the others get ``default_bins``.
    ranges : mapping column -> (lo, hi), or (column, lo, hi) triples
        Declared public ranges of numeric columns (:func:`discretize`); those of columns that are not
        encoded as numeric are ignored (as on the Data page).
    categories : mapping column -> labels, or (column, labels) pairs
        Declared public categories of the other columns; those of numeric or not encoded columns are
        ignored.
    strict : bool
        Refuse instead a range or categories declared for a column that is not in the table, not encoded,
        or of the other kind (a scenario or a sweep spec: a typo must not drop a protection silently).
    """
    include = dict(include)
    exclude = [str(c) for c in exclude]
    both = sorted(set(include) & set(exclude))
    if both:
        raise DataError(f"column(s) {both} are both included and excluded")
    schema = infer_schema(df, target=target, include=include, exclude=exclude)
    overrides = {str(c): str(k) for c, k in dict(kinds).items() if c in schema.columns}
    schema = schema.with_kinds(overrides)
    per_col = dict(bins)
    spans = dict(ranges) if isinstance(ranges, Mapping) else {c: (lo, hi) for c, lo, hi in ranges}
    numeric = {c for c, k in schema.kinds if k == "numeric"}
    lists = dict(categories.items() if isinstance(categories, Mapping) else categories)
    if strict:
        _check_declared(schema, spans, lists)
    return discretize(
        df,
        schema,
        bins={c: per_col.get(c, default_bins) for c in schema.columns},
        ranges={c: span for c, span in spans.items() if c in numeric},
        categories={c: labels for c, labels in lists.items() if c in schema.columns and c not in numeric},
    )


def _check_declared(schema: Schema, ranges: Mapping[str, object], categories: Mapping[str, object]) -> None:
    for col in ranges:
        if col not in schema.columns or schema.kind(col) != "numeric":
            what = f"encoded as {schema.kind(col)}" if col in schema.columns else "not an encoded column"
            raise DataError(
                f"a public range is declared for {col!r}, which is {what}: set its kind to numeric, or "
                "declare public categories for it"
            )
    for col in categories:
        if col not in schema.columns or schema.kind(col) == "numeric":
            what = "numeric" if col in schema.columns else "not an encoded column"
            raise DataError(
                f"public categories are declared for {col!r}, which is {what}: declare a public range "
                "for a numeric column"
            )
