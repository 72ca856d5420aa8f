"""mDP Lab: entry point. Page navigation, the shared sidebar (dataset, target, seed) and session defaults."""

from __future__ import annotations

import streamlit as st

import mdp_core as core
from ui.data import ensure_loaded, select_sample, select_upload
from ui.state import get_state

UPLOAD = "Upload CSV/TSV…"
SAMPLE_LABELS = {
    "heart": "Heart disease (303 × 14)",
    "adult": "Adult census (48,842 × 15)",
    "wine": "Wine quality (6,497 × 13)",
    UPLOAD: UPLOAD,
}

PAGES = [
    st.Page("views/home.py", title="Overview", icon="🏠", default=True),
    st.Page("views/data.py", title="Data & dependencies", icon="🕸️", url_path="data"),
    st.Page(
        "views/mechanisms.py", title="Mechanism playground", icon="🎛️", url_path="mechanisms"
    ),
    st.Page(
        "views/dephdp.py",
        title="Mechanism selection (DepHDP)",
        icon="🌳",
        url_path="dephdp",
    ),
    st.Page("views/leakage.py", title="Correlated leakage", icon="💧", url_path="leakage"),
    st.Page("views/geo.py", title="Geo mechanisms", icon="🗺️", url_path="geo"),
    st.Page(
        "views/noise.py", title="Noise shape", icon="📈", url_path="noise-shape"
    ),
]


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
            st.error(state.error)
        columns = [str(c) for c in state.frame.columns] if state.frame is not None else []
        if columns:
            options_t = ["(none)", *columns]
            index = options_t.index(state.target) if state.target in columns else 0
            target = st.selectbox(
                "Target column",
                options_t,
                index=index,
                key=f"side_target_{state.dataset_key}",
                help="The attribute a prediction task predicts.",
            )
            state.target = None if target == "(none)" else target
            st.caption(f"Loaded **{state.dataset}**: {len(state.frame):,} rows × {len(columns)} columns")
        for note in state.notes:
            st.caption(note)


st.set_page_config(page_title="mDP Lab", page_icon="🔒", layout="wide")
navigation = st.navigation(PAGES)
sidebar()
navigation.run()
