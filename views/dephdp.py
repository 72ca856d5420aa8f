"""Mechanism selection (DepHDP): which attribute groups get distance-based noise, which an optimised LP
mechanism, and how the global budget is split (seed 000)."""

from __future__ import annotations

import hashlib
import math
from dataclasses import replace

import streamlit as st

import mdp_core as core
from ui import dephdp as view
from ui import dephdp_display as display
from ui import jobs
from ui.data import current_encoded, guard_text
from ui.markdown import md
from ui.state import get_state
from ui.widgets import eps_slider, formula_note

st.title("Mechanism selection (DepHDP)")
encoded = current_encoded()
if encoded is None:
    st.info(guard_text("Load a dataset in the sidebar (or on the Data page) to configure DepHDP."))
    st.stop()
state = get_state()

with st.expander("Load a saved configuration (JSON)"):
    upload = st.file_uploader("Configuration file", type=["json"], key="dep_config_upload")
    if upload is not None:
        digest = hashlib.sha1(upload.getvalue()).hexdigest()
        if st.session_state.get("dep_config_applied") != digest:
            try:
                loaded = view.config_from_json(upload.getvalue())
            except core.DataError as exc:
                st.error(f"Could not load {md(upload.name)}: {md(exc)}")
            else:
                view.apply_config(loaded)
                st.session_state["dep_config_applied"] = digest  # the page's own marker, not a widget
                st.success(f"Loaded {md(upload.name)}.")

base = view.base_config()
tasks = list(core.TASKS)
if encoded.schema.target is None:
    tasks.remove("prediction")
left, right = st.columns(2)
task = left.selectbox(
    "Task",
    tasks,
    index=tasks.index(base.task) if base.task in tasks else 0,
    format_func=core.TASKS.get,
    key=view.widget_key("task"),
)
score = right.radio(
    "Adequacy score",
    ["radial", "mse"],
    index=["radial", "mse"].index(base.score),
    horizontal=True,
    key=view.widget_key("score"),
    format_func={"radial": "radial-fit", "mse": "MSE-likeness"}.get,
)
c1, c2, c3 = st.columns(3)
tau_group = c1.slider(
    "τ_group (NMI edge)", 0.0, 0.5, min(base.tau_group, 0.5), 0.01, key=view.widget_key("tau_group")
)
tau_dim = c2.slider(
    "τ_dim (largest OPT domain)",
    1,
    300,
    min(int(base.tau_dim), 300),
    key=view.widget_key("tau_dim"),
    help=view.HELP["tau_dim"],
)
tau_dpn = c3.slider(
    "τ_dpn (adequacy threshold)", 0.0, 1.0, base.tau_dpn, 0.01, key=view.widget_key("tau_dpn")
)
c4, c5, c6 = st.columns(3)
with c4:
    eps = eps_slider("Global privacy budget ε", key=view.widget_key("eps"), default=base.eps, lo=0.1, hi=20.0)
    st.caption(core.budget_sentence(eps))
p_default = "inf" if math.isinf(base.p) else min(view.P_OPTIONS[:-1], key=lambda v: abs(float(v) - base.p))
p_text = c5.select_slider("Record metric ℓ_p", view.P_OPTIONS, value=p_default, key=view.widget_key("p"))
floor = c6.select_slider(
    "Budget floor per group",
    view.FLOOR_LABELS,
    value=view.floor_label(base.min_group_eps),
    key=view.widget_key("floor"),
    help="Every group gets at least this budget (the next grid point at or above it), so no group is "
    "released as near-uniform noise. Must satisfy ‖floor‖_q ≤ ε.",
)
config = replace(
    base,
    eps=eps,
    p=float(p_text),
    tau_group=tau_group,
    tau_dim=tau_dim,
    tau_dpn=tau_dpn,
    task=task,
    score=score,
    min_group_eps=view.floor_value(floor),
    seed=state.seed,
)

try:
    fit, test = view.fit_test_split(encoded, state.seed)
except core.DataError as exc:  # e.g. a 2-row upload: too few rows to hold some out
    st.error(f"DepHDP cannot run on this table: {md(exc)}.")
    st.stop()
stage = view.ready_profiles(fit, config)
if stage is None:
    pkey = view.profiles_key(fit, config)
    if not jobs.running(pkey):
        st.info(view.profiles_pending_text(config))
    if (large := view.large_attributes_note(encoded)) is not None:
        st.warning(large)
    jobs.start_button(
        pkey,
        lambda: view.request_profiles(fit, config),
        label="Compute group profiles",
        button_key="dep_compute",
        name="Computing the group profiles",
        stop_label="Stop computing the profiles",
        stop_key="dep_profiles_stop",
        wait=view.PROFILES_WAIT_SECONDS,
        primary=True,
    )
    st.stop()
try:
    result = view.result_for(fit, config, stage)
except core.DataError as exc:
    st.error(md(exc))
    st.stop()
st.caption(view.grouping_caption(result, fit, encoded))
for note in view.page_notes(result):
    st.caption(note)

released = view.privatized_test(result, test)
problem = view.degeneracy(result, released)
if message := view.degeneracy_message(problem):
    st.error(message)
    fix1, fix2 = st.columns(2)
    if problem.task_fix and fix1.button("Use the record-fidelity task", key="dep_fix_task"):
        view.apply_config(replace(config, task="record"))
        st.rerun()
    suggested = view.suggested_floor(result)
    if (
        problem.starved
        and suggested > config.min_group_eps
        and fix2.button(f"Set a budget floor of {suggested:g}", key="dep_fix_floor")
    ):
        view.apply_config(replace(config, min_group_eps=suggested))
        st.rerun()

st.subheader("Which groups need an optimised mechanism?")
st.plotly_chart(display.scatter_figure(result), key="dep_scatter")
st.dataframe(
    display.groups_table(result),
    hide_index=True,
    column_config=display.groups_column_config(),
    key="dep_groups",
)

st.subheader("Budget allocation")
m1, m2, m3, m4 = st.columns(4)
m1.metric("DepHDP surrogate loss", f"{result.value:.4f}")
m2.metric("Lower bound on the loss", f"{result.lower_bound:.4f}", help=view.HELP["lower_bound"])
gap = f"{result.rel_err:.1%}" if math.isfinite(result.rel_err) else "—"  # a bound of 0 gives no ratio
m3.metric("Gap to the lower bound", gap, help=view.HELP["gap"])
m4.metric("ALC+RMP surrogate loss", f"{result.baselines['ALC+RMP'].value:.4f}", help=view.HELP["alc_rmp"])
st.caption(view.composition_text(result), help=view.HELP["composition"])
released = view.release_utility(result, fit, test)
u_label, u_value, u_caption = view.utility_text(released, view.majority_of(result, fit, test))
st.metric(u_label, u_value, help="Measured on the privatised test split offered for download below.")
st.caption(
    f"Utility in the task's own units: {u_caption} One privatised draw of the {len(test.codes):,} held-out "
    "records (the one offered for download below): another draw gives another number, and Decide & "
    "release reports the mean over several draws with their band."
)
st.caption(display.yardsticks_text(len(test.codes)))
st.plotly_chart(display.allocation_figure(result), key="dep_alloc")
names = [" + ".join(g) for g in result.groups]
k = st.selectbox("Loss-budget curves of group", names, key="dep_curve_group")
st.plotly_chart(display.curves_figure(result, names.index(k)), key="dep_curves")
st.caption("Dotted and dashed: the envelopes the allocation works on.", help=view.HELP["curves"])

st.subheader("DepHDP vs homogeneous baselines (surrogate loss)")
st.caption(view.BASELINE_LEGEND)
compared = view.comparison(fit, config, stage)
st.plotly_chart(display.comparison_figure(compared), key="dep_compare")
if note := display.coinciding_note(compared):
    st.caption(note)
s1, s2, s3 = st.columns(3)
r2_heldout, r2_train, pairs = view.surrogate_metrics(result)
s1.metric("Surrogate held-out R²", r2_heldout)
s2.metric("Surrogate training R²", r2_train)
s3.metric("Calibration pairs", pairs)
if note := view.surrogate_note(result):
    st.caption(note)

d1, d2 = st.columns(2)
d1.download_button(
    "Configuration (JSON)",
    view.config_to_json(config),
    "dephdp_config.json",
    "application/json",
    key="dep_download_config",
)
csv_label, csv_name, caveat = display.csv_download(problem)
if caveat:
    d2.caption(f"**{caveat}**")
d2.download_button(
    csv_label,
    view.privatized_csv(result, test),
    csv_name,
    "text/csv",
    key="dep_download_csv",
    help=caveat or None,
)
formula_note(view.privatized_test(result, test), d2)

if st.toggle("Evaluate on the held-out test split (ε ∈ {1, 2, 5, 10})", key="dep_evaluate"):
    reps = st.slider("Repetitions", 5, 50, 20, 5, key="dep_reps")
    table = view.ready_evaluation(encoded, config, reps, state.seed)
    if table is None:
        ekey = view.evaluation_key(encoded, config, reps, state.seed)
        if not jobs.running(ekey):
            st.caption(
                f"Configures DepHDP and the four baselines at each ε on the fitting split and privatises the "
                f"{len(test.codes):,} test records {reps} times per method, in the background."
            )
        jobs.start_button(
            ekey,
            lambda: view.request_evaluation(encoded, config, reps, state.seed),
            label="Run the held-out evaluation",
            button_key="dep_run_eval",
            name="Running the held-out evaluation",
            stop_label="Stop the evaluation",
            stop_key="dep_eval_stop",
            wait=view.EVAL_WAIT_SECONDS,
            primary=True,
        )
    else:
        st.plotly_chart(
            display.comparison_figure(table, "Held-out task loss by global ε"), key="dep_eval_chart"
        )
        st.caption(display.evaluation_caption(reps, len(test.codes)))
        if note := display.coinciding_note(table):
            st.caption(note)
        st.dataframe(
            display.evaluation_table(table),
            hide_index=True,
            column_config=display.evaluation_column_config(),
            key="dep_eval_table",
        )
