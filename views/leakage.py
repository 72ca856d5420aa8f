"""Correlated leakage: how much releasing one attribute leaks about another, and budgets that bound it."""

from __future__ import annotations

import streamlit as st

import ui.leakage as leak
from ui import jobs
from ui.data import current_encoded, guard_text
from ui.markdown import md
from ui.state import get_state
from ui.widgets import eps_slider

st.title("Correlated leakage")
st.caption(
    "Releasing an attribute with ε-LDP also leaks about every attribute correlated with it "
    "(the Dependency Triad estimates how much). Pick a pair, move ε, then calibrate per-attribute budgets."
)

encoded = current_encoded()
if encoded is None or len(encoded.columns) < 2:
    st.info(guard_text("Load a table with at least two attributes in the sidebar first.", need=2))
    st.stop()

columns = list(encoded.columns)
left, right = st.columns(2)
target = left.selectbox("Target (protected) attribute", columns, key="leak_target")
others = [c for c in columns if c != target]
other = right.selectbox("Released attribute", others, key="leak_other")
eps = eps_slider("Privacy budget ε of the released attribute", key="leak_eps", default=1.0, lo=0.01, hi=20.0)

mode = st.radio(
    "Prior uncertainty",
    leak.UNCERTAINTY_MODES,
    horizontal=True,
    key="leak_unc",
    format_func={
        "none": "none",
        "relative": "relative error e",
        "groups": "across groups",
        "bootstrap": "bootstrap",
    }.get,
    help="How far the real conditional distribution may be from the one in this table: not at all, a "
    "relative error e on every probability, the spread across the levels of a third attribute, or across "
    "bootstrap resamples (Jayawardana et al., Dependency Triad, Sec. V-D).",
)
e, groups = 0.1, None
if mode == "relative":
    e = st.slider("Relative error e (Δ = e·P)", 0.0, 0.5, 0.1, 0.01, key="leak_e")
elif mode == "groups":
    candidates = [c for c in columns if c not in (target, other) and encoded.domain_sizes[c] <= 50]
    if not candidates:
        st.info("No third attribute with at most 50 levels to group by.")
        st.stop()
    groups = st.selectbox("Group by (one source per level)", candidates, key="leak_groups")

too_large = leak.pair_too_large(encoded, target, other, mode, groups)
if too_large:
    st.warning(too_large)
else:
    curves = leak.pair_curves(encoded, target, other, mode, e, groups, get_state().seed)

    col_a, col_b = st.columns([2, 3])
    col_a.plotly_chart(leak.conditional_figure(curves.cond, encoded, target, other), key="leak_cond_fig")
    col_b.plotly_chart(leak.cpl_figure(curves, eps), key="leak_cpl_fig")
    if note := leak.coincidence_note(curves):
        col_b.caption(note)

    triad = curves.triad_unc if curves.triad_unc is not None else curves.triad
    st.subheader("Dependency Triad" + (" (with uncertainty)" if curves.triad_unc is not None else ""))
    for col, (symbol, value, meaning) in zip(st.columns(3), leak.triad_meanings(triad), strict=True):
        col.metric(symbol, leak.parameter_text(value))
        col.caption(meaning)
    at_eps = leak.point_values(curves, eps)
    st.info(leak.odds_sentence(eps, at_eps["exact"], target, other, at_eps.get("dt_unc")))
    st.caption(
        f"At ε = {eps:g}: CPL* = {at_eps['exact']:.3f}, DT = {at_eps['dt']:.3f}, "
        f"(α, γ, δ) = {at_eps['agd']:.3f}"
        + (f", DT with uncertainty = {at_eps['dt_unc']:.3f}" if "dt_unc" in at_eps else "")
        + " (nats)"
    )
    st.caption(
        "(α, γ, δ): the Dependency Triad before its calibration, with the lower level γ (ln of the largest "
        "inverse ratio P(o|t′)/P(o|t)) in place of the calibrated β; its curve lies at or above DT's."
    )

st.header("All pairs")
method = st.radio(
    "Leakage model",
    ("dt", "exact"),
    horizontal=True,
    key="leak_method",
    format_func={"dt": "Dependency Triad (instant)", "exact": "Exact CPL*"}.get,
)
model = leak.stored_model(encoded, method)
if model is None and (too_wide := leak.pairs_too_large(encoded)):
    st.warning(too_wide)
elif model is None:
    st.caption(
        f"Leakage for all {len(columns) * (len(columns) - 1):,} ordered pairs takes seconds, or minutes on "
        "tables with hundreds of attributes; it is computed once per table and method, in the background, "
        "then every ε is instant."
    )
    jobs.start_button(
        leak.model_key(encoded, method),
        lambda: leak.request_model(encoded, method),
        label="Compute leakage for every pair",
        button_key="leak_pairs_go",
        name="Pairwise leakage",
        stop_label="Stop the pairwise leakage",
        stop_key="leak_pairs_stop",
        wait=leak.WAIT_SECONDS,
    )
if model is not None:
    fig, table = leak.leakage_figure(model, eps)
    col_h, col_t = st.columns([3, 1])
    col_h.plotly_chart(fig, key="leak_pairs_fig")
    col_t.dataframe(table, hide_index=True, key="leak_tpl_table", column_config=leak.column_config(table))

st.header("Budget calibration")
eps_bar = st.number_input(
    "Target total leakage ε̄ per attribute",
    min_value=0.05,
    max_value=50.0,
    value=3.0,
    step=0.5,
    key="leak_eps_bar",
)
floor = st.radio(
    "Every attribute gets",
    list(leak.CALIBRATION_FLOORS),
    format_func=leak.CALIBRATION_FLOORS.get,
    key="leak_cal_floor",
    help=leak.CALIBRATION_FLOOR_HELP,
)
if model is None:
    st.caption("Compute the leakage for every pair first: the budgets depend on all of them.")
else:
    cal = leak.stored_calibration(encoded, method, float(eps_bar), floor)
    if cal is None:
        jobs.start_button(
            leak.calibration_key(encoded, method, float(eps_bar), floor),
            lambda: leak.request_calibration(encoded, method, float(eps_bar), floor),
            label="Calibrate budgets",
            button_key="leak_cal_go",
            name="Calibrating budgets",
            stop_label="Stop calibrating",
            stop_key="leak_cal_stop",
            wait=leak.WAIT_SECONDS,
        )
    if cal is not None:
        if not cal.success:
            st.error(md(cal.message))
        st.plotly_chart(leak.calibration_figure(cal), key="leak_cal_fig")
        cal_table = leak.calibration_table(cal)
        st.dataframe(
            cal_table, hide_index=True, key="leak_cal_table", column_config=leak.column_config(cal_table)
        )
        st.caption(leak.calibration_caption(cal))
