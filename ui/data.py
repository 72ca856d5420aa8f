"""Cached access to the loaded dataset, its schema (with the guard-rail exclusions), encoding and NMI."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

import mdp_core as core
from mdp_core.data.public import checked_categories, checked_ranges
from ui.markdown import md
from ui.state import AppState, get_state

__all__ = [
    "HASH_FUNCS",
    "RELEASE_NOTE",
    "base_schema",
    "current_encoded",
    "current_frame",
    "current_nmi",
    "current_schema",
    "date_granularities",
    "encoding_choices",
    "ensure_loaded",
    "guard_text",
    "inferred_schema",
    "level_labels",
    "load_sample",
    "load_upload",
    "select_sample",
    "select_upload",
    "target_options",
]

#: Pass as ``st.cache_data(hash_funcs=HASH_FUNCS)`` to key a cache on an Encoded table by its fingerprint.
HASH_FUNCS = {core.Encoded: lambda enc: enc.fingerprint}

#: What exclusion means downstream, in words (shown beside the excluded columns).
RELEASE_NOTE = (
    "Excluded columns are not encoded: no mechanism, privatised table, download or report on any page can "
    "contain them."
)


@st.cache_data(show_spinner="Loading dataset…", max_entries=8)
def _sample_report(name: str, seed: int) -> tuple[pd.DataFrame, core.LoadReport]:
    return core.load_dataset_report(name, seed=seed)


@st.cache_data(show_spinner="Reading upload…", max_entries=4)
def _upload_report(raw: bytes, name: str, seed: int) -> tuple[pd.DataFrame, core.LoadReport]:
    buffer = io.BytesIO(raw)
    buffer.name = name
    return core.load_dataset_report(buffer, seed=seed)


def load_sample(name: str, seed: int) -> tuple[pd.DataFrame, tuple[str, ...]]:
    """An embedded sample and the notes of its load (cached)."""
    df, report = _sample_report(name, seed)
    return df, report.notes


def load_upload(raw: bytes, name: str, seed: int) -> tuple[pd.DataFrame, tuple[str, ...]]:
    """An uploaded file and the notes of its load (cached); raises DataError on bad input."""
    df, report = _upload_report(raw, name, seed)
    return df, report.notes


def ensure_loaded(state: AppState) -> None:
    """Load the default sample on first use."""
    if state.frame is None:
        df, report = _sample_report(state.dataset, state.seed)
        key = f"sample:{state.dataset}:{state.seed}"
        state.set_table(
            state.dataset, key, df, report.notes, target=report.target, source_rows=_source_rows(report)
        )


def select_sample(state: AppState, name: str) -> None:
    key = f"sample:{name}:{state.seed}"
    if key != state.dataset_key:
        df, report = _sample_report(name, state.seed)
        state.set_table(name, key, df, report.notes, target=report.target, source_rows=_source_rows(report))


def select_upload(state: AppState, raw: bytes, name: str) -> None:
    """Load an upload (no target: the user picks one); on bad input keep the previous table and say why."""
    key = f"upload:{hashlib.sha1(raw).hexdigest()}:{state.seed}"
    if key == state.dataset_key:
        return
    try:
        df, report = _upload_report(raw, name, state.seed)
    except core.DataError as exc:
        state.error = f"Could not load {name}: {exc}"
        return
    state.set_table(
        name,
        key,
        df,
        report.notes,
        target=None,
        source_rows=_source_rows(report),
        convention=(report.separator, report.decimal),
    )


def _source_rows(report: core.LoadReport) -> int | None:
    return report.original_rows if report.sampled else None


def level_labels(values: object) -> list[str]:
    """An attribute's levels as a person reads them: numbers to the fewest significant digits (3 or more)
    that keep distinct levels distinct, never in exponent form or with float noise (bin centre
    ``7.581250000000001`` is ``7.58``, ``32.0`` is ``32``, ``104667.1875`` is ``105000``); NaN is
    ``missing``; text as it is."""
    items = list(values)  # type: ignore[call-overload]
    numeric = [
        isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) for v in items
    ]
    finite = {float(v) for v, n in zip(items, numeric, strict=True) if n and np.isfinite(float(v))}
    digits = 3
    while digits < 17:
        shown = {np.format_float_positional(v, precision=digits, fractional=False, trim="-") for v in finite}
        if len(shown) == len(finite):
            break
        digits += 1

    def one(v: object, is_number: bool) -> str:
        if not is_number:
            return str(v)
        x = float(v)  # type: ignore[arg-type]
        if np.isnan(x):
            return "missing"
        if not np.isfinite(x):
            return str(x)
        return np.format_float_positional(x, precision=digits, fractional=False, trim="-")

    return [one(v, n) for v, n in zip(items, numeric, strict=True)]


def current_frame() -> pd.DataFrame | None:
    return get_state().frame


@st.cache_data(max_entries=16)
def _schema(
    key: str,
    _frame: pd.DataFrame,
    include: tuple[tuple[str, str | None], ...],
    exclude: tuple[str, ...],
) -> core.Schema:
    return core.infer_schema(_frame, include=dict(include), exclude=exclude)


def base_schema() -> core.Schema | None:
    """The schema with the default exclusions only (no user choices): what the guard rails exclude."""
    state = get_state()
    if state.frame is None:
        return None
    return _schema(state.dataset_key, state.frame, (), ())


def inferred_schema() -> core.Schema | None:
    """The schema inferred from the current table with the user's inclusions, exclusions and target,
    before kind overrides. A target that is excluded is dropped (the user picks another)."""
    state = get_state()
    if state.frame is None:
        return None
    names = {str(c) for c in state.frame.columns}
    include = tuple((c, g) for c, g in state.include.items() if c in names)
    exclude = tuple(c for c in state.exclude if c in names)
    try:
        schema = _schema(state.dataset_key, state.frame, include, exclude)
    except core.DataError as exc:  # e.g. a stale choice; fall back to the defaults and say why
        state.encode_error = str(exc)
        schema = _schema(state.dataset_key, state.frame, (), ())
    return schema.with_target(state.target if state.target in schema.columns else None)


def current_schema() -> core.Schema | None:
    """The inferred schema with the user's kind overrides applied (overrides of excluded columns ignored)."""
    inferred = inferred_schema()
    if inferred is None:
        return None
    overrides = {c: k for c, k in get_state().kind_overrides.items() if c in inferred.columns}
    return inferred.with_kinds(overrides)


def target_options() -> list[str]:
    """Columns a user may pick as the target: the included ones."""
    schema = inferred_schema()
    return [] if schema is None else list(schema.columns)


def date_granularities(reason: str) -> tuple[str, ...]:
    """How an excluded date/time column can be re-included, read from its exclusion reason."""
    if reason.startswith("time of day"):
        return ("hour",)
    if reason.startswith("date"):
        return ("month", "year")
    return ()


def encoding_choices(schema: core.Schema) -> dict[str, Any]:
    """The Data page's choices behind ``schema``'s encoding, as a scenario or a sweep spec records them
    (:func:`mdp_core.encode_table` rebuilds the same table from them)."""
    state = get_state()
    frame = state.frame if state.frame is not None else pd.DataFrame()
    return {
        "include": tuple(sorted((c, g) for c, g in state.include.items() if c in schema.columns)),
        "exclude": tuple(str(c) for c in frame.columns if c not in schema.columns),
        "kind_overrides": tuple(
            sorted((c, k) for c, k in state.kind_overrides.items() if c in schema.columns)
        ),
        "bins": tuple(sorted((c, int(b)) for c, b in state.bins.items() if c in schema.columns)),
        "ranges": tuple(
            sorted((c, lo, hi) for c, (lo, hi) in state.ranges.items() if _is_numeric(schema, c))
        ),
        "categories": tuple(
            sorted((c, labels) for c, labels in state.categories.items() if _is_levelled(schema, c))
        ),
    }


def _is_numeric(schema: core.Schema, column: str) -> bool:
    return column in schema.columns and schema.kind(column) == "numeric"


def _is_levelled(schema: core.Schema, column: str) -> bool:
    return column in schema.columns and schema.kind(column) != "numeric"


#: The Data page's help on an attribute's public categories.
PUBLIC_CATEGORIES_HELP = (
    "The categories known without looking at the records (every code of a form, in order for an ordinal "
    "attribute), separated by commas: they are then the released values whatever the records, with one "
    "more, 'other', for any value not listed and for a missing one (ranked after the last for an ordinal "
    "attribute; a binary attribute becomes three-valued). Numbers match by value (2, 2.0 and 02 are one). "
    "Without them, the released values are the categories that occur, and one record with a rare category "
    "adds it (not private)."
)
#: The Data page's help on a numeric attribute's public range.
PUBLIC_RANGE_HELP = (
    "A range known without looking at the records (age 0-120, a score's scale): the bins then cut it, "
    "whatever the records, and a value beyond it is set to its nearer end. Without one, the bins cut the "
    "column's own minimum and maximum, which one record with an extreme value can move (not private). "
    "Set both ends, or neither."
)


def public_ranges(
    edited: pd.DataFrame, current: dict[str, tuple[float, float]]
) -> tuple[dict[str, tuple[float, float]], list[str]]:
    """The public ranges the schema editor's rows declare, and a sentence per row that cannot be used.

    A numeric row with both ends, lo < hi, declares (lo, hi); a row with neither declares none. A row of
    another kind keeps the range it had (it comes back with the numeric kind), as its bin count does."""
    ranges: dict[str, tuple[float, float]] = {}
    problems = []
    columns = ["attribute", "kind", "public min", "public max"]
    for attribute, kind, lo, hi in edited[columns].itertuples(index=False):
        if kind != "numeric":
            if attribute in current:
                ranges[attribute] = current[attribute]
            continue
        if pd.isna(lo) and pd.isna(hi):
            continue
        if pd.isna(lo) or pd.isna(hi) or not _accepted(checked_ranges, attribute, kind, (lo, hi)):
            problems.append(
                f"The public range of {attribute!r} needs both ends, finite, the minimum below the maximum: "
                "it is not used until then."
            )
            continue
        ranges[attribute] = (float(lo), float(hi))
    return ranges, problems


def public_categories(
    edited: pd.DataFrame, current: dict[str, tuple[str, ...]]
) -> tuple[dict[str, tuple[str, ...]], list[str]]:
    """The public categories the schema editor's rows declare (comma-separated labels), and a sentence per
    row that cannot be used. A numeric row keeps the list it had (it comes back with its kind)."""
    lists: dict[str, tuple[str, ...]] = {}
    problems = []
    for attribute, kind, text in edited[["attribute", "kind", "public categories"]].itertuples(index=False):
        if kind == "numeric":
            if attribute in current:
                lists[attribute] = current[attribute]
            continue
        if pd.isna(text) or not str(text).strip():
            continue
        labels = tuple(label.strip() for label in str(text).split(","))
        if not _accepted(checked_categories, attribute, kind, labels):
            problems.append(
                f"The public categories of {attribute!r} need distinct labels separated by commas: "
                "they are not used until then."
            )
            continue
        lists[attribute] = labels
    return lists, problems


def _accepted(check: Callable[..., object], attribute: str, kind: str, declared: object) -> bool:
    """Whether the core's own check takes this declaration (as :func:`mdp_core.discretize` will)."""
    try:
        check({attribute: declared}, {attribute: kind})
    except core.DataError:
        return False
    return True


def declared_kinds(
    edited: pd.DataFrame, ranges: dict[str, tuple[float, float]], lists: dict[str, tuple[str, ...]]
) -> dict[str, str]:
    """The kinds of the rows whose domain is declared, to record as overrides: a kind inferred from the
    records (an integer column with up to 12 values reads as ordinal) would let one record change the kind,
    and with it the distances, of a column declared public (privacy audit, stop 63)."""
    return {
        attribute: kind
        for attribute, kind in edited[["attribute", "kind"]].itertuples(index=False)
        if (kind == "numeric" and attribute in ranges) or (kind != "numeric" and attribute in lists)
    }


def current_encoded() -> core.Encoded | None:
    """The discretised current table, or None when nothing usable is loaded."""
    state = get_state()
    schema = current_schema()
    if schema is None or state.frame is None:
        return None
    bins = {c: state.bins.get(c, state.default_bins) for c in schema.columns}
    declared = encoding_choices(schema)  # the public domains a scenario or a sweep spec records too
    try:
        encoded = _encode(
            state.dataset_key,
            state.frame,
            schema,
            tuple(sorted(bins.items())),
            declared["ranges"],
            declared["categories"],
        )
    except core.DataError as exc:
        state.encode_error = f"The table cannot be encoded: {exc}"
        return None
    state.encode_error = None
    return encoded


@st.cache_resource(max_entries=16, show_spinner="Discretising…")
def _encode(
    key: str,
    _frame: pd.DataFrame,
    schema: core.Schema,
    bins: tuple[tuple[str, int], ...],
    ranges: tuple[tuple[str, float, float], ...] = (),
    categories: tuple[tuple[str, tuple[str, ...]], ...] = (),
) -> core.Encoded:
    # cache_resource: the Encoded table is shared read-only, no copy per rerun.
    spans = {c: (lo, hi) for c, lo, hi in ranges}
    return core.discretize(_frame, schema, bins=dict(bins), ranges=spans, categories=dict(categories))


@st.cache_data(max_entries=16, hash_funcs=HASH_FUNCS)
def current_nmi_for(encoded: core.Encoded) -> pd.DataFrame:
    return core.nmi_matrix(encoded.codes)


def guard_text(missing: str, *, need: int = 1) -> str:
    """What a page's guard says when it has no usable table: ``missing`` when nothing is loaded; when a
    table is loaded but cannot be encoded (every column excluded, ...) or has fewer than ``need``
    attributes, why, and where to fix it (not "load a dataset": one is loaded)."""
    state = get_state()
    if state.frame is None:
        return missing
    fix = "Fix it on the *Data & dependencies* page, or load another table in the sidebar."
    encoded = current_encoded()
    if encoded is None:
        reason = (state.encode_error or "The table cannot be encoded.").rstrip(".")
        return f"**{md(state.dataset)}** is loaded, but this page cannot use it. {md(reason)}. {fix}"
    usable = len(encoded.columns)
    return (
        f"**{md(state.dataset)}** is loaded, but this page needs at least {need} attributes and only "
        f"{usable} {'is' if usable == 1 else 'are'} usable ({md(', '.join(encoded.columns))}). {fix}"
    )


def current_nmi() -> pd.DataFrame | None:
    enc = current_encoded()
    return None if enc is None else current_nmi_for(enc)
