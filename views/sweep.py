"""Sweep & frontier: many configurations x methods x repetitions on Dask, the privacy-utility frontier."""

from __future__ import annotations

import streamlit as st

import mdp_core as core
from ui import jobs, sweep
from ui.data import current_encoded, guard_text
from ui.markdown import md
from ui.state import get_state
from ui.widgets import formula_note, log_grid

st.title("Sweep & frontier")
st.caption(
    "Run DepHDP and the four baselines over a grid of budgets and thresholds, privatise the held-out 37.5 % "
    "of the records several times each, and see where the privacy-utility frontier lies and how sure we are."
)

encoded = current_encoded()
state = get_state()
if encoded is None:
    st.info(guard_text("Load a dataset in the sidebar first (an embedded sample or your own CSV)."))
    st.stop()

has_target = encoded.schema.target is not None
task_options = [t for t in core.TASKS if has_target or t != "prediction"]
if st.session_state.get("_sweep_task_options") != task_options or "sweep_tasks" not in st.session_state:
    # another table: keep the chosen tasks it offers, else its default (a stale "prediction" emptied the box)
    kept = [t for t in st.session_state.get("sweep_tasks", []) if t in task_options]
    st.session_state["sweep_tasks"] = kept or [task_options[0]]
    st.session_state["_sweep_task_options"] = task_options
c1, c2, c3 = st.columns(3)
with c1:
    tasks = st.multiselect(
        "Tasks",
        task_options,
        key="sweep_tasks",
        help="What the released table is for (its utility is measured on that task): "
        + "; ".join(f"{k}: {v}" for k, v in core.TASKS.items() if k in task_options),
    )
    if not has_target:
        st.caption("Prediction needs a target column (sidebar).")
    methods = st.multiselect(
        "Methods", list(core.METHODS_EVALUATED), default=list(core.METHODS_EVALUATED), key="sweep_methods"
    )
with c2:
    lo, hi = st.select_slider(
        "Budget range ε", options=log_grid(0.05, 50.0), value=(0.5, 10.0), key="sweep_eps_range"
    )
    n_eps = st.slider("Budgets in the range (log-spaced)", 2, 16, 5, key="sweep_n_eps")
    reps = st.slider("Repetitions per point", 2, 50, 5, key="sweep_reps")
with c3:
    tau_group = st.multiselect(
        "Grouping thresholds τ_group", [0.05, 0.1, 0.2, 0.3], default=[0.1], key="sweep_tau_group"
    )
    tau_dpn = st.multiselect("DPN thresholds τ_dpn", [0.1, 0.2, 0.3, 0.5], default=[0.2], key="sweep_tau_dpn")
    kind = st.radio("Engine", list(sweep.ENGINES), format_func=sweep.ENGINES.get, key="sweep_engine")

if not (tasks and methods and tau_group and tau_dpn):
    st.info("Choose at least one task, method, τ_group and τ_dpn.")
    st.stop()
try:
    spec = core.SweepSpec(
        dataset=state.dataset,
        task=tasks,
        eps=sweep.eps_values(float(lo), float(hi), int(n_eps)),
        tau_group=tau_group,
        tau_dpn=tau_dpn,
        methods=methods,
        repetitions=int(reps),
        seed=state.seed,
        target=encoded.schema.target,
        **sweep.encoding_fields(encoded.schema),  # so that the downloaded spec rebuilds this table
        code=sweep.CODE_VERSION,  # the code the numbers come from: the store key and the CLI's check
    )
except (core.DataError, TypeError) as exc:
    st.error(f"Invalid sweep: {md(exc)}")
    st.stop()

if kind == "dask":
    sweep.prestart()  # the cluster starts while the user chooses; the first run does not wait for it
_, where, workers = sweep.engine(kind)
seconds = sweep.estimate_seconds(spec, len(encoded.codes), len(encoded.columns), workers)
st.markdown(sweep.size_text(spec, seconds))
st.caption(
    f"Engine: {where}. The sweep runs in the background: this page stays usable, and it can be stopped."
)

results = sweep.stored(spec, encoded)
if results is None:
    key = sweep.sweep_key(spec, encoded)
    jobs.start_button(
        key,
        lambda: sweep.request_run(spec, encoded, kind),
        label="Run sweep",
        button_key="sweep_run",
        name="The sweep",
        stop_label="Stop the sweep",
        stop_key="sweep_stop",
        wait=sweep.WAIT_SECONDS,
        primary=True,
    )
    if not jobs.running(key):
        st.info("Press **Run sweep** to compute the frontier.")
    st.stop()

fr = sweep.frontier_of(results)
st.caption(
    f"{len(results):,} rows in {results.attrs.get('seconds', 0.0):.1f} s on {results.attrs.get('engine')}."
)
p1, p2, p3 = st.columns(3)
task = p1.selectbox("Task shown", list(spec.tasks), key="sweep_show_task")
tg = p2.selectbox("τ_group shown", list(spec.tau_group), key="sweep_show_tau_group")
td = p3.selectbox("τ_dpn shown", list(spec.tau_dpn), key="sweep_show_tau_dpn")
chance = sweep.chance_level(results, task)
st.plotly_chart(sweep.frontier_figure(fr, task, tg, td, chance), key="sweep_frontier")
if note := sweep.chance_note(fr, task, tg, td, chance):
    st.caption(note)
st.subheader("Pareto set")
st.caption("No other point reaches at least this utility with a budget at most this large.")
st.dataframe(
    sweep.pareto_table(fr, task),
    hide_index=True,
    key="sweep_pareto",
    column_config={c: st.column_config.NumberColumn(format="%.3f") for c in ("utility", "CI low", "CI high")},
)

d1, d2, d3 = st.columns(3)
d1.download_button(
    "Results (CSV)", results.to_csv(index=False).encode(), "sweep_results.csv", "text/csv", key="sweep_dl_csv"
)
formula_note(results, d1)
d2.download_button(
    "Results (Parquet)", sweep.parquet_bytes(results), "sweep_results.parquet", key="sweep_dl_parquet"
)
d3.download_button(
    "Sweep spec (JSON)",
    spec.to_json(indent=2).encode(),
    "sweep_spec.json",
    "application/json",
    key="sweep_dl_spec",
)
note, changed = sweep.code_note(spec.code or sweep.CODE_VERSION)
if changed:  # the spec cannot name the loaded code so that the CLI runs it: say so beside the download
    st.warning(note)
else:
    d3.caption(note)
