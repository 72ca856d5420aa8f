"""Mechanism selection (DepHDP): which attribute groups get distance-based noise, which an optimised LP
mechanism, and how the global budget is split (seed 000)."""

from __future__ import annotations

import hashlib
import math

import streamlit as st

import mdp_core as core
from ui import dephdp as view
from ui.data import current_encoded
from ui.state import get_state
from ui.widgets import eps_slider, log_grid

st.title("Mechanism selection (DepHDP)")
encoded = current_encoded()
if encoded is None:
    st.info("Load a dataset in the sidebar (or on the Data page) to configure DepHDP.")
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
                st.error(f"Could not load {upload.name}: {exc}")
            else:
                st.session_state.update(
                    {
                        "dep_config_applied": digest,
                        "dep_task": loaded.task,
                        "dep_score": loaded.score,
                        "dep_tau_group": loaded.tau_group,
                        "dep_tau_dim": int(loaded.tau_dim),
                        "dep_tau_dpn": loaded.tau_dpn,
                        "dep_eps": min(log_grid(0.1, 20.0), key=lambda v: abs(math.log(v / loaded.eps))),
                        "dep_p": "inf"
                        if math.isinf(loaded.p)
                        else min(view.P_OPTIONS[:-1], key=lambda v: abs(float(v) - loaded.p)),
                    }
                )
                st.success(f"Loaded {upload.name}.")

tasks = list(core.TASKS)
if encoded.schema.target is None:
    tasks.remove("prediction")
left, right = st.columns(2)
task = left.selectbox("Task", tasks, format_func=core.TASKS.get, key="dep_task")
score = right.radio(
    "Adequacy score",
    ["radial", "mse"],
    horizontal=True,
    key="dep_score",
    format_func={"radial": "radial-fit", "mse": "MSE-likeness"}.get,
)
c1, c2, c3 = st.columns(3)
tau_group = c1.slider("τ_group (NMI edge)", 0.0, 0.5, 0.1, 0.01, key="dep_tau_group")
tau_dim = c2.slider("τ_dim (largest OPT domain)", 1, 300, 300, key="dep_tau_dim")
tau_dpn = c3.slider("τ_dpn (adequacy threshold)", 0.0, 1.0, 0.2, 0.01, key="dep_tau_dpn")
c4, c5 = st.columns(2)
with c4:
    eps = eps_slider("Global privacy budget ε", key="dep_eps", default=1.0, lo=0.1, hi=20.0)
p_text = c5.select_slider("Record metric ℓ_p", view.P_OPTIONS, value="2", key="dep_p")
config = core.DepHDPConfig(
    eps=eps,
    p=float(p_text),
    tau_group=tau_group,
    tau_dim=tau_dim,
    tau_dpn=tau_dpn,
    task=task,
    score=score,
    seed=state.seed,
)

fit, test = view.fit_test_split(encoded, state.seed)
bar = st.progress(0.0, text="Computing group loss profiles…")
try:
    result = view.result_for(fit, config, progress=lambda f, m: bar.progress(f, text=m))
except core.DataError as exc:
    bar.empty()
    st.error(str(exc))
    st.stop()
bar.empty()
for note in result.notes:
    st.caption(note)

st.subheader("Which groups need an optimised mechanism?")
st.plotly_chart(view.scatter_figure(result), key="dep_scatter")
st.dataframe(view.groups_table(result), hide_index=True, key="dep_groups")

st.subheader("Budget allocation")
m1, m2, m3, m4 = st.columns(4)
m1.metric("DepHDP surrogate loss", f"{result.value:.4f}")
m2.metric("Lower bound (Prop. 2)", f"{result.lower_bound:.4f}")
m3.metric("RelErr", f"{result.rel_err:.1%}")
m4.metric("ALC+RMP surrogate loss", f"{result.baselines['ALC+RMP'].value:.4f}")
st.plotly_chart(view.allocation_figure(result), key="dep_alloc")
names = [" + ".join(g) for g in result.groups]
k = st.selectbox(
    "Loss-budget curves of group", range(len(names)), format_func=names.__getitem__, key="dep_curve_group"
)
st.plotly_chart(view.curves_figure(result, k), key="dep_curves")

st.subheader("DepHDP vs homogeneous baselines (surrogate loss)")
st.plotly_chart(view.comparison_figure(view.comparison(fit, config)), key="dep_compare")
s1, s2, s3 = st.columns(3)
r2_heldout, r2_train, pairs = view.surrogate_metrics(result)
s1.metric("Surrogate held-out R²", r2_heldout)
s2.metric("Surrogate training R²", r2_train)
s3.metric("Calibration pairs", pairs)
if note := view.surrogate_note(result):
    st.caption(note)

if st.toggle("Evaluate on the held-out test split (ε ∈ {1, 2, 5, 10})", key="dep_evaluate"):
    reps = st.slider("Repetitions", 5, 50, 20, 5, key="dep_reps")
    ebar = st.progress(0.0, text="Privatising the test split…")
    table = view.evaluation(encoded, config, reps, state.seed, progress=lambda f, m: ebar.progress(f, text=m))
    ebar.empty()
    st.plotly_chart(view.comparison_figure(table), key="dep_eval_chart")
    st.dataframe(table.round(4), hide_index=True, key="dep_eval_table")

d1, d2 = st.columns(2)
d1.download_button(
    "Configuration (JSON)",
    view.config_to_json(config),
    "dephdp_config.json",
    "application/json",
    key="dep_download_config",
)
d2.download_button(
    "Privatised test split (CSV)",
    view.privatized_csv(result, test, state.seed),
    "privatised_test.csv",
    "text/csv",
    key="dep_download_csv",
)
