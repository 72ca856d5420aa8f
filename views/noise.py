"""Noise shape: which generalized Gaussian noise is most accurate at a given (ε, δ) (seed 003)."""

from __future__ import annotations

import numpy as np
import streamlit as st

import mdp_core as core
from ui import jobs, noise
from ui.markdown import md
from ui.widgets import eps_slider

st.title("Noise shape: Laplace, Gaussian, or in between?")
st.caption(
    "Additive noise with density ∝ exp(−(|z|/b)^p): p = 1 is Laplace, p = 2 Gaussian, p = ∞ uniform. "
    "For every shape the scale b(p) is the smallest that keeps the release (ε, δ)-differentially private; "
    "the page picks the shape with the least error."
)

left, mid, right = st.columns(3)
with left:
    eps = eps_slider("Privacy budget ε", key="ggm_eps", default=1.0, lo=0.1, hi=10.0)
with mid:
    delta_options = [
        1e-12,
        1e-10,
        1e-8,
        1e-6,
        1e-5,
        1e-4,
        1e-3,
        0.002,
        0.005,
        0.01,
        0.02,
        0.05,
        0.1,
        0.2,
        0.5,
    ]
    delta = float(st.select_slider("δ (additive slack)", options=delta_options, value=0.01, key="ggm_delta"))
with right:
    sensitivity = st.number_input(
        "Sensitivity Δ",
        min_value=1e-6,
        value=3.0,
        step=0.5,
        key="ggm_sens",
        help="The most one person's record can change the query's answer, in the query's units "
        "(a count: 1; a sum of values in [0, 100]: 100). Scales and errors below are in the same units.",
    )

with st.expander("Selection options"):
    c1, c2, c3 = st.columns(3)
    criterion = c1.radio(
        "Minimise",
        ["second_moment", "moment", "tolerance"],
        format_func={
            "second_moment": "variance E|Z|²",
            "moment": "m-th absolute moment",
            "tolerance": "P(|Z| > t) (miss a tolerance)",
        }.get,
        key="ggm_criterion",
    )
    m = c2.number_input(
        "moment order m",
        min_value=0.1,
        value=1.0,
        step=0.5,
        key="ggm_m",
        disabled=criterion != "moment",
        help="Used by 'm-th absolute moment' only",
    )
    t = c2.number_input(
        "tolerance t",
        min_value=1e-6,
        value=float(sensitivity),
        key="ggm_t",
        disabled=criterion != "tolerance",
        help="Used by 'P(|Z| > t)' only, in the query's units",
    )
    p_max = c3.slider("largest finite shape", 2.0, 20.0, 10.0, 0.5, key="ggm_pmax")

choice = noise.cached_choice(eps, delta, float(sensitivity), p_max, criterion, float(m), float(t))
curve = noise.cached_curve(eps, delta, float(sensitivity), p_max)

cols = st.columns(4)
cols[0].metric("Selected shape p", noise.p_label(choice.p))
cols[1].metric("Scale b", f"{choice.scale:.4g}", help="Scale of the selected noise, in the query's units")
cols[2].metric(
    noise.SECOND_MOMENT_LABEL,
    f"{choice.second_moment:.4g}",
    help="Variance of the added noise, in the query's units squared",
)
cols[3].metric(
    "Improvement",
    f"{100 * choice.improvement:.2f} %",
    help=f"Loss reduction against the best classical shape, p = {noise.p_label(choice.classical_p)}",
)
st.info(noise.verdict(choice))
st.caption(noise.odds_sentence(eps, delta))

st.subheader("Scale and variance across shapes")
st.plotly_chart(noise.fig_scale_curves(curve, choice), key="ggm_curves")
st.subheader("Noise densities at their own feasible scales")
st.plotly_chart(noise.fig_densities(choice, eps, delta, float(sensitivity)), key="ggm_densities")

st.subheader("Where does shape selection pay off?")
grid_label = st.selectbox("Grid (δ × ε)", list(noise.GRID_SIZES), key="ggm_grid")
HEATMAP_JOB = "The (ε, δ) heatmap"  # its name in the sidebar's list of background work
heat = None
if st.toggle("Compute the (ε, δ) heatmap", key="ggm_heatmap"):
    n_delta, n_eps = noise.GRID_SIZES[grid_label]
    heat = noise.stored_heatmap(n_delta, n_eps, float(sensitivity), p_max)
    heat_key = noise.heatmap_key(n_delta, n_eps, p_max)
    error = None if heat is not None else jobs.failure(heat_key)
    if heat is None and jobs.running(heat_key):
        jobs.poll(heat_key, "Stop the heatmap", "ggm_heat_stop", text=lambda m: f"Selecting shapes: {m}")
    elif heat is None and error is None:  # the toggle is the start: in the background
        jobs.remember(heat_key, HEATMAP_JOB)
        job = noise.request_heatmap(n_delta, n_eps, p_max)
        jobs.follow(heat_key, job, "Selecting shapes", noise.HEATMAP_WAIT_SECONDS)
    elif heat is None:
        if isinstance(error, jobs.BuildStoppedError):
            st.info("The heatmap was stopped; compute it again to finish it.")
        else:
            st.warning(f"{md(error)} (the quick grid takes about a third of the time).")
        if st.button("Compute the heatmap again", key="ggm_heat_go"):
            jobs.remember(heat_key, HEATMAP_JOB)
            jobs.follow(heat_key, noise.request_heatmap(n_delta, n_eps, p_max), "Selecting shapes", 0.5)
if heat is not None:
    st.plotly_chart(noise.fig_heatmap(heat), key="ggm_heat_fig")
    share = float(np.mean(heat.improvement > 0.05))
    st.caption(
        f"{100 * share:.0f} % of the grid gains more than 5 %; largest gain "
        f"{100 * float(np.max(heat.improvement)):.1f} %. Small ε with large δ favours larger shapes, "
        "large ε or tiny δ favours Laplace."
    )
    st.caption(noise.band_note(heat))

st.subheader("Vector query")
vector_text = st.text_input(
    "Coordinate-wise sensitivity vector",
    value="1, 2",
    key="ggm_vector",
    help="One entry per released coordinate; the scale is certified by Monte Carlo.",
)
alpha = st.select_slider("Monte Carlo failure α", options=[1e-4, 1e-3, 1e-2], value=1e-3, key="ggm_alpha")
try:
    vector = noise.parse_vector(vector_text)
except core.DataError as exc:
    if st.button("Find the shape with the least error", key="ggm_vector_go"):
        st.error(md(exc))
    vector = None
if vector is not None:
    query = noise.VectorQuery(eps, delta, alpha, vector, float(p_max), seed=0)
    found = noise.stored_vector_choice(query)
    if found is None:
        st.caption(
            "Press the button to find the shape with the least error per coordinate: every shape from 1 to "
            "the largest finite one, and ∞, certified (Monte Carlo, seconds, in the background)."
        )
        jobs.start_button(
            noise.vector_key(query),
            lambda: noise.request_vector_choice(query),
            label="Find the shape with the least error",
            button_key="ggm_vector_go",
            name="Certifying scales",
            stop_label="Stop certifying",
            stop_key="ggm_vector_stop",
            wait=noise.HEATMAP_WAIT_SECONDS,
        )
    elif isinstance(found, str):
        st.warning(f"No shape could be certified at these settings: {md(found)}")
    else:
        st.info(noise.vector_sentence(found))
        table = noise.vector_table(found, eps)
        st.dataframe(
            table,
            hide_index=True,
            key="ggm_vector_table",
            column_config=noise.VECTOR_COLUMNS,
            placeholder="—",
        )
        failed = table["method"].str.startswith("not certified")
        if failed.any():
            st.warning(
                "Some shapes have no certified scale at these settings (see the table): "
                + md("; ".join(table.loc[failed, "method"].str.removeprefix("not certified: ")))
            )
        st.caption(
            "p = 2 and p = ∞ are exact (α plays no part). Every other scale is private for (ε, δ) with "
            "probability 1 − α over the Monte Carlo draws, so that mechanism is (ε, δ + α)-DP; a scale is "
            "shown only after its certificate passed. The certified scales carry about 1 % of Monte Carlo "
            "noise, so shapes whose errors differ by less are equally good."
        )
