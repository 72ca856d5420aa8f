"""Cached access to the loaded dataset, its schema, encoding and dependency structure."""

from __future__ import annotations

import hashlib

import pandas as pd
import streamlit as st

import mdp_core as core
from ui.state import AppState, get_state

__all__ = [
    "HASH_FUNCS",
    "current_encoded",
    "current_frame",
    "current_nmi",
    "current_schema",
    "ensure_loaded",
    "inferred_schema",
    "load_sample",
    "load_upload",
    "select_sample",
    "select_upload",
]

#: Pass as ``st.cache_data(hash_funcs=HASH_FUNCS)`` to key a cache on an Encoded table by its fingerprint.
HASH_FUNCS = {core.Encoded: lambda enc: enc.fingerprint}


@st.cache_data(show_spinner="Loading dataset…", max_entries=8)
def load_sample(name: str, seed: int) -> tuple[pd.DataFrame, tuple[str, ...]]:
    df, report = core.load_dataset_report(name, seed=seed)
    return df, report.notes


@st.cache_data(show_spinner="Reading upload…", max_entries=4)
def load_upload(raw: bytes, name: str, seed: int) -> tuple[pd.DataFrame, tuple[str, ...]]:
    import io

    buffer = io.BytesIO(raw)
    buffer.name = name
    df, report = core.load_dataset_report(buffer, seed=seed)
    return df, report.notes


def ensure_loaded(state: AppState) -> None:
    """Load the default sample on first use."""
    if state.frame is None:
        df, notes = load_sample(state.dataset, state.seed)
        state.set_table(state.dataset, f"sample:{state.dataset}:{state.seed}", df, notes)


def select_sample(state: AppState, name: str) -> None:
    key = f"sample:{name}:{state.seed}"
    if key != state.dataset_key:
        df, notes = load_sample(name, state.seed)
        state.set_table(name, key, df, notes)


def select_upload(state: AppState, raw: bytes, name: str) -> None:
    """Load an upload; on bad input keep the previous table and record the error."""
    key = f"upload:{hashlib.sha1(raw).hexdigest()}:{state.seed}"
    if key == state.dataset_key:
        return
    try:
        df, notes = load_upload(raw, name, state.seed)
    except core.DataError as exc:
        state.error = f"Could not load {name}: {exc}"
        return
    state.set_table(name, key, df, notes)


def current_frame() -> pd.DataFrame | None:
    return get_state().frame


def inferred_schema() -> core.Schema | None:
    """The schema inferred from the current table (cached), before user overrides."""
    state = get_state()
    if state.frame is None:
        return None
    return _schema(state.dataset_key, state.frame, state.target)


def current_schema() -> core.Schema | None:
    """The inferred schema with the user's kind overrides applied."""
    inferred = inferred_schema()
    return None if inferred is None else inferred.with_kinds(get_state().kind_overrides)


@st.cache_data(max_entries=16)
def _schema(key: str, _frame: pd.DataFrame, target: str | None) -> core.Schema:
    return core.infer_schema(_frame, target=target)


def current_encoded() -> core.Encoded | None:
    """The discretised current table, or None when nothing usable is loaded."""
    state = get_state()
    schema = current_schema()
    if schema is None or state.frame is None:
        return None
    bins = {c: state.bins.get(c, state.default_bins) for c in schema.columns}
    try:
        return _encode(state.dataset_key, state.frame, schema, tuple(sorted(bins.items())))
    except core.DataError as exc:
        state.error = str(exc)
        return None


@st.cache_resource(max_entries=16, show_spinner="Discretising…")
def _encode(
    key: str, _frame: pd.DataFrame, schema: core.Schema, bins: tuple[tuple[str, int], ...]
) -> core.Encoded:
    # cache_resource: the Encoded table is shared read-only, no copy per rerun.
    return core.discretize(_frame, schema, bins=dict(bins))


@st.cache_data(max_entries=16, hash_funcs=HASH_FUNCS)
def current_nmi_for(encoded: core.Encoded) -> pd.DataFrame:
    return core.nmi_matrix(encoded.codes)


def current_nmi() -> pd.DataFrame | None:
    enc = current_encoded()
    return None if enc is None else current_nmi_for(enc)
