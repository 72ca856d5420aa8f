"""Geo mechanisms on a city map: tree-based extension vs EM, EM + remap and LP-A (seed 004)."""

from __future__ import annotations

import numpy as np
import streamlit as st

from mdp_core.errors import DataError
from ui import geo
from ui.state import get_state
from ui.widgets import eps_slider

st.title("Geo mechanisms on a city map")
st.caption(
    "A location mechanism is optimised on a coarse seed grid and extended level by level to a fine grid over "
    "the roads (tree-based extension), then compared with the exponential mechanism, EM + Bayesian "
    "remapping and an LP on the seed grid only. Utility: expected error in travel distance to task points "
    "(km). ε is per km: two places d km apart are e^(ε·d)-indistinguishable."
)

source = st.radio(
    "City",
    ["Embedded: central Helsinki", "Upload a map file", "Place name (online)"],
    horizontal=True,
    key="geo_source",
)
city = "default"
if source == "Upload a map file":
    upload = st.file_uploader("OpenStreetMap XML (.osm, .osm.bz2) or osmnx .graphml", key="geo_upload")
    if upload is None:
        st.info("Upload a map file, or pick the embedded city.")
        st.stop()
    city = geo.store_upload(upload.name, upload.getvalue())
elif source == "Place name (online)":
    city = st.text_input("Place (e.g. 'Kallio, Helsinki')", key="geo_place").strip()
    if not city:
        st.info("Type a district or small town; needs internet access to OpenStreetMap.")
        st.stop()

c1, c2, c3, c4 = st.columns([2, 2, 1, 1])
with c1:
    method = st.selectbox(
        "Mechanism shown", list(geo.METHOD_LABELS), format_func=geo.METHOD_LABELS.get, key="geo_method"
    )
with c2:
    eps = eps_slider("Privacy budget ε (1/km)", key="geo_eps", default=1.0, lo=0.1, hi=5.0)
with c3:
    seed_n = st.slider(
        "Seed cells", 4, 16, 12, key="geo_seed_n", help="Seed-grid cells along the longer side."
    )
with c4:
    depth = st.selectbox("Depth", [1, 2, 3, 4], index=1, key="geo_depth", help="2 × 2 refinements per level.")

config = geo.GeoConfig(city=city, seed_n=seed_n, depth=depth, seed=get_state().seed)
try:
    problem = geo.cached_problem(config)
except DataError as exc:
    st.error(str(exc))
    st.stop()

bar = st.progress(0.0, text="Building the mechanisms…")
comp = geo.cached_comparison(config, eps, progress=lambda f, m: bar.progress(f, text=m))
bar.empty()
mech = comp.mechanisms[method]

candidates = geo.candidate_points(problem)
clicked = st.session_state.get("geo_map")
if clicked:
    picked = clicked.get("selection", {}).get("objects", {}).get("geo_targets", [])
    target = int(picked[0]["target"]) if picked else None
    if target is not None and target != st.session_state.get("geo_last_click"):
        st.session_state["geo_last_click"] = target  # apply a click once, so the list still works after it
        if target in set(candidates.tolist()):
            st.session_state["geo_true"] = target
if st.session_state.get("geo_true") not in set(candidates.tolist()):
    st.session_state["geo_true"] = int(candidates[len(candidates) // 2])
xy = problem.targets_km
true_index = st.selectbox(
    "True location (or click a blue dot on the map)",
    candidates.tolist(),
    key="geo_true",
    format_func=lambda i: f"#{i}: {xy[i, 0]:.2f} km E, {xy[i, 1]:.2f} km N",
)
reports = geo.sample_reports(mech, true_index, 40, np.random.default_rng(get_state().seed))

st.pydeck_chart(
    geo.deck(problem, mech, true_index, reports, candidates),
    on_select="rerun",
    selection_mode="single-object",
    key="geo_map",
    height=520,
)
st.caption(
    f"{geo.METHOD_LABELS[method]} at ε = {eps:g}/km. Black: true location; red: output distribution; "
    f"orange: 40 sampled reports. {problem.grid.n_targets:,} target vertices, {len(problem.grid.outputs)} "
    f"outputs, seed spacing {problem.grid.h0 * 1000:.0f} m. {geo.ATTRIBUTION}"
)

st.subheader("Comparison")
st.dataframe(geo.comparison_table(comp), hide_index=True, width="stretch")
tree_info = comp.mechanisms["tree"].info
st.caption(
    f"Seed LP: {tree_info.get('message')}. Violation ratio: share of checked (x, x′, y) triples over the "
    "bound, on all nearest-neighbour pairs plus 50,000 random pairs; LP-A is not private on the fine grid."
)
st.download_button(
    "Download the shown mechanism (.npz)",
    geo.mechanism_npz(mech),
    file_name=f"geo_{method}.npz",
    key="geo_download",
)

if st.toggle("Loss against ε", key="geo_curve"):
    values = (0.25, 0.5, 1.0, 2.0, 4.0)
    with st.spinner("Sweeping ε…"):
        curve = geo.cached_curve(config, values)
    st.plotly_chart(geo.fig_loss_curve(curve), key="geo_curve_chart")
