"""Mechanism playground: EM, EM + remapping and the LP optimum on one attribute or group (seed 000)."""

from __future__ import annotations

import math

import streamlit as st

from ui import jobs
from ui import mechanisms as mech
from ui.data import current_encoded, guard_text, level_labels
from ui.markdown import md
from ui.widgets import eps_slider

st.title("Mechanism playground")
st.caption(
    "Three ε-mDP channels for the same attributes: the exponential mechanism (distance-based noise), the "
    "same noise followed by Bayesian remapping, and the LP-optimal mechanism for the chosen task loss. "
    "Every channel shown is verified: its worst log-ratio excess over ε·d must be ≤ 10⁻⁹. The loss–budget "
    "curves are the losses of the same constructions at every ε of their grid (private by construction), "
    "not each checked again."
)

encoded = current_encoded()
if encoded is None:
    st.info(guard_text("Load a dataset first (sidebar), then come back to compare mechanisms."))
    st.stop()

columns = list(encoded.columns)
sizes = encoded.domain_sizes
default = next((c for c in columns if sizes[c] >= 4), columns[0])
if st.session_state.get("_mech_attrs_table") != encoded.fingerprint or "mech_attrs" not in st.session_state:
    st.session_state["mech_attrs"] = [default]  # another table: its default (the old choice is not in it)
    st.session_state["_mech_attrs_table"] = encoded.fingerprint
c1, c2, c3 = st.columns([2, 1, 2])
with c1:
    chosen = st.multiselect(
        "Attributes (one, or a group perturbed jointly)",
        columns,
        max_selections=3,
        key="mech_attrs",
        format_func=lambda c: f"{c} ({sizes[c]} values)",
    )
with c2:
    p = st.select_slider(
        "Metric exponent p",
        options=[1.0, 2.0, math.inf],
        value=2.0,
        key="mech_p",
        help="How the distances of several attributes combine: p = 1 adds them, p = 2 is Euclidean, "
        "p = ∞ takes the largest.",
    )
with c3:
    eps = eps_slider("Privacy budget ε", key="mech_eps", default=2.0, lo=0.1, hi=20.0)
if not chosen:
    st.info("Choose at least one attribute.")
    st.stop()
n = math.prod(sizes[c] for c in chosen)
if n > mech.MAX_DOMAIN:
    st.warning(
        f"The joint domain has {n:,} values ({' × '.join(str(sizes[c]) for c in chosen)}); the playground "
        f"shows up to {mech.MAX_DOMAIN}: drop an attribute, or choose ones with fewer values (or fewer bins "
        "on the Data page)."
    )
    st.stop()

task = st.radio("Task loss", list(mech.TASKS), format_func=mech.TASKS.get, horizontal=True, key="mech_task")
threshold = 0
if task == "threshold":
    levels = level_labels(encoded.levels[chosen[0]])
    threshold = st.selectbox(
        f"Threshold t on {md(chosen[0])} (the query asks: is the value above t?)",
        options=list(range(max(len(levels) - 1, 1))),
        index=max(len(levels) - 2, 0) // 2,
        format_func=lambda i: levels[i],
        key="mech_threshold",
    )

selection = mech.Selection(encoded, tuple(chosen), p, task, int(threshold))
domain = mech.domain_of(encoded, chosen, p)
c3.caption(mech.budget_note(domain, eps))
play = mech.ready_playground(selection, eps, with_opt=True) or mech.playground(
    selection, eps, with_opt=n <= mech.AUTO_OPT
)
if "OPT" not in play.losses and mech.AUTO_OPT < n <= mech.MAX_OPT:
    jobs.start_button(
        mech.opt_key(selection, eps),
        lambda: mech.request_opt(selection, eps),
        label=f"Solve the LP optimum for these {n} joint values (at most {mech.OPT_SECONDS:.0f} s)",
        button_key="mech_solve_opt",
        name="Solving the LP optimum",
        stop_label="Stop the LP",
        stop_key="mech_opt_stop",
        wait=mech.OPT_WAIT_SECONDS,
    )

metric_cols = st.columns(3)
for col, name in zip(metric_cols, ["EM", "EM+remap", "OPT"], strict=True):
    if name in play.losses:
        col.metric(f"{name} expected loss", mech.loss_text(play.losses[name]))
        col.caption(mech.verified_text(play.violations[name]))
    else:
        col.metric(f"{name} expected loss", "—")
        col.caption(play.opt_message)
st.info(mech.verdict(play))
if "OPT" in play.losses:
    lp_text, lp_details = mech.lp_caption(play)
    st.caption(lp_text, help=lp_details)

st.subheader("The channels: P(released value | true value)")
if len(chosen) > 1:
    st.caption(f"A joint value is written {md(' · '.join(chosen))}.")
st.plotly_chart(mech.fig_heatmaps(play, domain.labels), key="mech_heatmaps")

st.subheader("Expected loss versus ε")
if st.toggle("Compute loss–budget curves", value=n <= mech.AUTO_CURVES, key="mech_curves"):
    grid = tuple(float(e) for e in mech.curve_grid(eps))
    curves = mech.ready_curves(selection, grid)
    if curves is None and n <= mech.AUTO_CURVES:  # a small domain: a few seconds at most, in this run
        bar = st.progress(0.0, text="Solving along the ε grid…")
        curves = mech.curves(selection, grid, progress=lambda f, m: bar.progress(min(f, 1.0), text=md(m)))
        bar.empty()
    elif curves is None:
        jobs.start_button(
            mech.curves_key(selection, grid),
            lambda: mech.request_curves(selection, grid),
            label=f"Solve along the ε grid ({len(grid)} budgets)",
            button_key="mech_curves_go",
            name="Solving along the ε grid",
            stop_label="Stop the ε-grid solve",
            stop_key="mech_curves_stop",
            wait=mech.OPT_WAIT_SECONDS,
        )
    if curves is not None:
        st.plotly_chart(mech.fig_curves(grid, curves, eps), key="mech_curve_chart")
        if gaps := mech.missing_points(grid, curves):
            st.caption(gaps)
