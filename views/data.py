"""Data & dependencies: preview, schema editor, NMI heatmap, dependency graph and groups."""

import zlib

import pandas as pd
import streamlit as st

import mdp_core as core
from ui import data as view
from ui.data import (
    RELEASE_NOTE,
    base_schema,
    current_encoded,
    current_nmi,
    current_schema,
    date_granularities,
    inferred_schema,
)
from ui.dependency import (
    GRAPH_CAPTION,
    dephdp_groups_caption,
    graph_figure,
    nmi_heatmap,
    sparse_pairs_warning,
    table_height,
)
from ui.markdown import md
from ui.state import get_state

MIN_ROWS_PER_CELL = 5.0  # below it a pair's plug-in MI is biased upward (see core.sparse_pairs)

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
for note in state.notes:
    st.caption(md(note))

# --- excluded columns (guard rails) ---------------------------------------------------------------------
st.subheader("Excluded columns")
base = base_schema()
shown = inferred_schema()
auto = base.excluded_reasons
if shown.excluded:
    st.dataframe(
        pd.DataFrame({"column": [c for c, _ in shown.excluded], "reason": [r for _, r in shown.excluded]}),
        hide_index=True,
        width="stretch",
        column_config={"reason": st.column_config.TextColumn(width="large")},
    )
else:
    st.caption("No column is excluded.")
st.caption(RELEASE_NOTE)
inc_col, exc_col = st.columns(2)
include = inc_col.multiselect(
    "Re-include (at your own risk: identifiers and exact dates single people out)",
    list(auto),
    default=[c for c in state.include if c in auto],
    key=f"data_include_{state.dataset_key}",
    help="Dates come back as ordinal month or year; other columns with the kind read from their values "
    "(a whole-number identifier as numeric, text as nominal): change it in the Attributes table below.",
)
chosen: dict[str, str | None] = {}
for col in include:
    ways = date_granularities(auto[col])
    chosen[col] = (
        inc_col.radio(f"{md(col)} as", ways, horizontal=True, key=f"data_date_{state.dataset_key}_{col}")
        if ways
        else None
    )
exclude = exc_col.multiselect(
    "Exclude more columns (e.g. quasi-identifiers you must not release)",
    [str(c) for c in frame.columns if str(c) not in auto],
    default=[c for c in state.exclude if c not in auto],
    key=f"data_exclude_{state.dataset_key}",
)
if chosen != state.include or exclude != state.exclude:
    state.include, state.exclude = chosen, exclude
    st.rerun()

# --- schema editor ------------------------------------------------------------------------------------
st.subheader("Attributes")
schema = current_schema()
encoded = current_encoded()
if schema is None or encoded is None:
    st.error(md(state.encode_error or "The table could not be encoded."))
    st.stop()
# blank where no range is declared, and for kinds that are not binned
spans = {
    c: state.ranges.get(c, (None, None)) if schema.kind(c) == "numeric" else (None, None)
    for c in schema.columns
}
editor = pd.DataFrame(
    {
        "attribute": list(schema.columns),
        "kind": [schema.kind(c) for c in schema.columns],
        "bins": pd.array(  # blank where bins do nothing (binary, ordinal, nominal)
            [
                state.bins.get(c, state.default_bins) if schema.kind(c) == "numeric" else None
                for c in schema.columns
            ],
            dtype="Int64",
        ),
        "public min": pd.array([spans[c][0] for c in schema.columns], dtype="Float64"),
        "public max": pd.array([spans[c][1] for c in schema.columns], dtype="Float64"),
        "public categories": [
            ", ".join(state.categories.get(c, ())) if schema.kind(c) != "numeric" else None
            for c in schema.columns
        ],
        "levels": [encoded.domain_sizes[c] for c in schema.columns],
        "missing": [int(frame[c].isna().sum()) for c in schema.columns],
    }
)
st.caption(
    "Override a kind or the bin count of a numeric attribute, or declare a public range or public "
    "categories; distances follow the kind (nominal/binary: mismatch, ordinal: rank gap, numeric: gap "
    "between bin centres)."
)
edited = st.data_editor(
    editor,
    key=f"data_schema_{state.dataset_key}_{zlib.crc32(repr(schema.columns).encode()):08x}",  # rows -> editor
    hide_index=True,
    width="stretch",
    disabled=["attribute", "levels", "missing"],
    placeholder="—",  # the blank bins of binary, ordinal and nominal attributes
    column_config={
        "kind": st.column_config.SelectboxColumn(
            "kind", options=["numeric", "ordinal", "nominal", "binary"], required=True
        ),
        "bins": st.column_config.NumberColumn(
            "bins",
            min_value=2,
            max_value=64,
            step=1,
            help="Equal-width bins for numeric attributes (blank for the other kinds: they are not binned)",
        ),
        "public min": st.column_config.NumberColumn("public min", help=view.PUBLIC_RANGE_HELP),
        "public max": st.column_config.NumberColumn("public max", help=view.PUBLIC_RANGE_HELP),
        "public categories": st.column_config.TextColumn(
            "public categories", help=view.PUBLIC_CATEGORIES_HELP
        ),
        "levels": st.column_config.NumberColumn(
            "levels",
            format="%,d",
            help="Values the attribute can be released as, the size of its domain for the mechanisms: a "
            "numeric attribute can have fewer levels than bins (a bin no record falls in is dropped), "
            "except with a public range, whose bins are all kept; public categories add 'other'",
        ),
        "missing": st.column_config.NumberColumn("missing", format="%,d"),
    },
)
inferred = inferred_schema()
new_overrides = {r.attribute: r.kind for r in edited.itertuples() if r.kind != inferred.kind(r.attribute)}
new_bins: dict[str, int] = {}
for r in edited.itertuples():
    if r.kind == "numeric" and pd.notna(r.bins):
        if int(r.bins) != state.default_bins:
            new_bins[r.attribute] = int(r.bins)
    elif r.attribute in state.bins:  # blank while not numeric: the count comes back with the kind
        new_bins[r.attribute] = state.bins[r.attribute]
new_ranges, range_problems = view.public_ranges(edited, state.ranges)
new_lists, list_problems = view.public_categories(edited, state.categories)
for problem in (*range_problems, *list_problems):
    st.warning(md(problem))
new_overrides |= view.declared_kinds(edited, new_ranges, new_lists)  # no record may change a declared kind
new_choices = (new_overrides, new_bins, new_ranges, new_lists)
if new_choices != (state.kind_overrides, state.bins, state.ranges, state.categories):
    state.kind_overrides, state.bins, state.ranges, state.categories = new_choices
    st.rerun()
messages = list(encoded.warnings)
if encoded.dropped_rows:  # the first message says how many rows are left out and why
    st.warning(md(messages.pop(0)))
for message in messages:
    st.info(md(message))

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

# levels some record takes (the empty bins of a public range make no contingency cells)
taken = {c: int(encoded.codes[c].nunique()) for c in encoded.columns}
sparse = core.sparse_pairs(nmi, taken, len(encoded.codes), min_per_cell=MIN_ROWS_PER_CELL)
if len(sparse):
    numeric = [c for c in schema.columns if schema.kind(c) == "numeric"]
    st.warning(
        sparse_pairs_warning(sparse, taken, numeric, len(encoded.codes), min_per_cell=MIN_ROWS_PER_CELL)
    )

left, right = st.columns(2)
left.plotly_chart(nmi_heatmap(nmi), key="data_heatmap")
right.plotly_chart(graph_figure(graph, groups, encoded.domain_sizes, seed=state.seed), key="data_graph")
right.caption(GRAPH_CAPTION)

st.markdown(f"**{len(groups)} groups** at τ_group = {tau:.2f}")
st.caption(
    dephdp_groups_caption(
        nmi,
        tau,
        len(groups),
        encoded.domain_sizes,
        target=schema.target,
        max_group_domain=core.DepHDPConfig().max_group_domain,
    )
)
joint = [core.group_domain_size(g, encoded.domain_sizes) for g in groups]
exact = max(joint, default=0) < 2**53  # a browser's number shows it exactly; larger ones as text
st.dataframe(
    pd.DataFrame(
        {
            "group": [f"G{k + 1}" for k in range(len(groups))],
            "attributes": [", ".join(g) for g in groups],
            "joint domain": joint if exact else [f"{size:,}" for size in joint],
        }
    ),
    hide_index=True,
    width="stretch",
    column_config={
        "attributes": st.column_config.TextColumn(width="large"),
        "joint domain": st.column_config.NumberColumn("joint domain", format="%,d")
        if exact
        else st.column_config.TextColumn("joint domain"),
    },
)
st.markdown("**Attribute pairs by NMI**")
pairs = core.nmi_pairs(nmi).rename(columns={"a": "attribute 1", "b": "attribute 2"})
st.dataframe(
    pairs,
    hide_index=True,
    width="stretch",
    height=table_height(len(pairs)),
    column_config={"nmi": st.column_config.ProgressColumn("NMI", min_value=0, max_value=1, format="%.3f")},
)
