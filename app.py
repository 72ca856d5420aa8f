"""mDP Lab: entry point. Page navigation, the shared sidebar (dataset, target, seed) and session defaults."""

from __future__ import annotations

import streamlit as st

import mdp_core as core
from ui.data import (
    current_encoded,
    ensure_loaded,
    inferred_schema,
    select_sample,
    select_upload,
    target_options,
)
from ui.jobs import background_work
from ui.markdown import md
from ui.state import AppState, get_state

UPLOAD = "Upload CSV/TSV…"
SAMPLE_LABELS = {
    "heart": "Heart disease (303 × 14)",
    "adult": "Adult census (48,842 × 15)",
    "wine": "Wine quality (6,497 × 13)",
    UPLOAD: UPLOAD,
}

PAGES = [
    st.Page("views/home.py", title="Overview", icon=":material/home:", default=True),
    st.Page("views/data.py", title="Data & dependencies", icon=":material/hub:", url_path="data"),
    st.Page(
        "views/mechanisms.py", title="Mechanism playground", icon=":material/tune:", url_path="mechanisms"
    ),
    st.Page(
        "views/dephdp.py",
        title="Mechanism selection (DepHDP)",
        icon=":material/account_tree:",
        url_path="dephdp",
    ),
    st.Page("views/leakage.py", title="Correlated leakage", icon=":material/water_drop:", url_path="leakage"),
    st.Page("views/geo.py", title="Geo mechanisms", icon=":material/map:", url_path="geo"),
    st.Page("views/noise.py", title="Noise shape", icon=":material/show_chart:", url_path="noise-shape"),
    st.Page("views/release.py", title="Decide & release", icon=":material/balance:", url_path="release"),
    st.Page("views/sweep.py", title="Sweep & frontier", icon=":material/bar_chart:", url_path="sweep"),
]


def target_and_notes(state: AppState) -> None:
    """The target picker (no default for uploads: the user picks one) and what the load decided."""
    columns = target_options()
    options = ["(none)", *columns]
    index = options.index(state.target) if state.target in columns else 0
    target = st.selectbox(
        "Target column",
        options,
        index=index,
        key=f"side_target_{state.dataset_key}",
        help="The attribute a prediction task predicts. Never guessed for an uploaded file: pick it here.",
    )
    state.target = None if target == "(none)" else target
    if state.target is None:
        st.caption("No target: a prediction task needs one; pick the column it should predict.")
    st.caption(f"Loaded **{md(state.dataset)}**: {len(state.frame):,} rows × {state.frame.shape[1]} columns")
    for note in state.notes:
        st.caption(md(note))
    schema = inferred_schema()
    if schema is not None and schema.excluded:
        shown = "; ".join(
            f"**{md(c)}** ({md(r.split(': ', 1)[0])})" for c, r in schema.excluded
        )  # the kind, up to ': '
        st.info(f"Excluded, never released: {shown}. See *Data & dependencies* to re-include.")
    encoded = current_encoded()
    if encoded is None and state.encode_error:
        st.error(md(state.encode_error))
    if encoded is not None and encoded.dropped_rows:
        st.warning(md(encoded.warnings[0]))


def sidebar() -> None:
    state = get_state()
    ensure_loaded(state)
    with st.sidebar:
        st.header("Dataset")
        options = [*core.list_datasets(), UPLOAD]
        current = state.dataset if state.dataset in options else UPLOAD
        choice = st.selectbox(
            "Data", options, index=options.index(current), format_func=SAMPLE_LABELS.get, key="side_dataset"
        )
        seed = st.number_input(
            "Random seed",
            min_value=0,
            max_value=2**31 - 1,
            value=state.seed,
            step=1,
            key="side_seed",
            help="Seeds every random choice: sampling, splits, noise.",
        )
        state.seed = int(seed)
        if choice == UPLOAD:
            upload = st.file_uploader(
                "CSV or TSV (optionally .gz), header row first",
                type=["csv", "tsv", "txt", "gz"],
                key="side_upload",
            )
            if upload is not None:
                select_upload(state, upload.getvalue(), upload.name)
        else:
            select_sample(state, choice)
        if state.error:
            st.error(md(state.error))
        if state.frame is not None:
            target_and_notes(state)
        background_work()


st.set_page_config(page_title="mDP Lab", page_icon="🔒", layout="wide")
navigation = st.navigation(PAGES)
sidebar()
navigation.run()
