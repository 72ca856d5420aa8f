"""Data & dependencies: preview, schema editor, NMI heatmap, dependency graph and groups."""

import pandas as pd
import streamlit as st

import mdp_core as core
from ui.data import current_encoded, current_nmi, current_schema, inferred_schema
from ui.dependency import graph_figure, nmi_heatmap
from ui.state import get_state

st.title("Data & dependencies")
state = get_state()
if state.frame is None:
    st.info("Pick a dataset in the sidebar (an embedded sample or your own CSV/TSV).")
    st.stop()

frame = state.frame
c1, c2, c3 = st.columns(3)
c1.metric("Rows", f"{len(frame):,}")
c2.metric("Columns", frame.shape[1])
c3.metric("Missing values", f"{int(frame.isna().sum().sum()):,}")
with st.expander("Preview (first 200 rows)"):
    st.dataframe(frame.head(200), width="stretch")

# --- schema editor ------------------------------------------------------------------------------------
st.subheader("Attributes")
schema = current_schema()
encoded = current_encoded()
if schema is None or encoded is None:
    st.error(state.error or "The table could not be encoded.")
    st.stop()
editor = pd.DataFrame(
    {
        "attribute": list(schema.columns),
        "kind": [schema.kind(c) for c in schema.columns],
        "bins": [state.bins.get(c, state.default_bins) for c in schema.columns],
        "levels": [encoded.domain_sizes[c] for c in schema.columns],
        "missing": [int(frame[c].isna().sum()) for c in schema.columns],
    }
)
st.caption(
    "Override a kind or the bin count of a numeric attribute; distances follow the kind "
    "(nominal/binary: mismatch, ordinal: rank gap, numeric: gap between bin centres)."
)
edited = st.data_editor(
    editor,
    key=f"data_schema_{state.dataset_key}",
    hide_index=True,
    width="stretch",
    disabled=["attribute", "levels", "missing"],
    column_config={
        "kind": st.column_config.SelectboxColumn(
            "kind", options=["numeric", "ordinal", "nominal", "binary"], required=True
        ),
        "bins": st.column_config.NumberColumn(
            "bins", min_value=2, max_value=64, step=1, help="Equal-width bins for numeric attributes"
        ),
    },
)
inferred = inferred_schema()
new_overrides = {r.attribute: r.kind for r in edited.itertuples() if r.kind != inferred.kind(r.attribute)}
new_bins = {r.attribute: int(r.bins) for r in edited.itertuples() if int(r.bins) != state.default_bins}
if new_overrides != state.kind_overrides or new_bins != state.bins:
    state.kind_overrides, state.bins = new_overrides, new_bins
    st.rerun()
if encoded.dropped_rows:
    st.caption(f"{encoded.dropped_rows:,} rows with missing values are left out of the encoding.")

# --- dependencies --------------------------------------------------------------------------------------
st.subheader("Dependencies")
nmi = current_nmi()
tau = st.slider("τ_group: link attributes whose NMI exceeds", 0.0, 1.0, 0.1, 0.01, key="data_tau")
cap = st.toggle(
    "Cap a group's joint domain",
    key="data_cap",
    help="A group whose joint domain exceeds the cap is split by dropping its weakest edge "
    "(smallest NMI) and recomputing components, until every part fits.",
)
max_domain = st.number_input("Largest joint domain", 2, 10**9, 300, key="data_max_domain") if cap else None
groups = core.dependency_groups(nmi, tau, domain_sizes=encoded.domain_sizes, max_domain=max_domain)
graph = core.dependency_graph(nmi, tau)

sparse = core.sparse_pairs(nmi, encoded.domain_sizes, len(encoded.codes))
if len(sparse):
    st.warning(
        f"{len(sparse)} attribute pairs have fewer than 5 rows per contingency cell: their estimated "
        f"MI is biased upward (by up to {sparse['mi_bias'].max():.3f} nats), so the graph may show "
        "spurious dependencies. Use fewer bins or more rows."
    )

left, right = st.columns(2)
left.plotly_chart(nmi_heatmap(nmi), key="data_heatmap")
right.plotly_chart(graph_figure(graph, groups, encoded.domain_sizes, seed=state.seed), key="data_graph")

st.markdown(f"**{len(groups)} groups** at τ_group = {tau:.2f}")
st.dataframe(
    pd.DataFrame(
        {
            "group": [f"G{k + 1}" for k in range(len(groups))],
            "attributes": [", ".join(g) for g in groups],
            "joint domain": [core.group_domain_size(g, encoded.domain_sizes) for g in groups],
        }
    ),
    hide_index=True,
    width="stretch",
    column_config={"attributes": st.column_config.TextColumn(width="large")},
)
st.markdown("**Attribute pairs by NMI**")
st.dataframe(
    core.nmi_pairs(nmi),
    hide_index=True,
    width="stretch",
    height=300,
    column_config={"nmi": st.column_config.ProgressColumn("NMI", min_value=0, max_value=1, format="%.3f")},
)
