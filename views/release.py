"""Decide & release: which ε meets a utility target, what that budget means in words, the whole table
released with its audit record and report, and scenarios compared side by side."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import streamlit as st

import mdp_core as core
from mdp_core import release as rel
from ui import jobs
from ui import release as view
from ui import release_pair as pair
from ui.data import current_encoded, guard_text
from ui.dephdp import large_attributes_note
from ui.markdown import md
from ui.state import get_state
from ui.widgets import eps_slider, formula_note

st.title("Decide & release")
st.caption(
    "What is protected: every record is randomised locally, on its own, before release. Whoever receives "
    "it (an analyst, a partner, or an attacker who already knows everything else) learns only a bounded "
    "amount about any one record whose channels were chosen without it: release only the held-out records "
    "(below) for that to hold for every released record."
)
encoded = current_encoded()
state = get_state()
if encoded is None or state.frame is None:
    st.info(
        guard_text(
            "Load a dataset in the sidebar (or on the Data page) to decide on a budget and release it."
        )
    )
    st.stop()

tasks = list(core.TASKS)
if encoded.schema.target is None:
    tasks.remove("prediction")
    st.caption("No target column: pick one in the sidebar for the prediction task.")
c1, c2, c3 = st.columns([2, 1, 1])  # the task's names are long (a third of the width cut them off)
task = c1.selectbox("Task", tasks, format_func=core.TASKS.get, key="rel_task")
with c2:
    eps = eps_slider("Global privacy budget ε", key="rel_eps", default=1.0, lo=0.1, hi=20.0)
p_text = c3.select_slider(
    "Record metric ℓ_p", ["1", "2", "inf"], value="2", key="rel_p", help=view.RECORD_METRIC_HELP
)
p = math.inf if p_text == "inf" else float(p_text)
r1, r2 = st.columns([2, 1])
method = view.choice_radio(r1, "Release by", view.RELEASE_CHOICES, "rel_method", view.RELEASE_CHOICE_HELP)
floor = view.floor_value(
    r2.select_slider(
        "Budget floor per group", view.FLOOR_LABELS, value="none", key="rel_floor", help=view.FLOOR_HELP
    )
)
include_target = state.target is not None and st.toggle(  # no target, nothing to release
    "Release the target column too (a channel of its own)",
    value=True,
    key="rel_include_target",
    help="Randomised response for a nominal or binary target, the exponential mechanism for an ordinal or "
    "numeric one, on the target's own distance.",
)
if include_target:
    st.info(view.record_budget_text(eps, p))

# ------------------------------------------------------------------------------------------ plain words
st.subheader("What ε means")
left, right = st.columns([3, 2])
record_eps = view.record_eps(eps, p, include_target)  # the whole record's: the target's channel too
left.markdown(view.means_text(eps, record_eps))
left.caption(
    "Distance 1 is the largest change of one attribute (another category, or from a numeric column's "
    "lowest to its highest released value: the outer bin centres, half a bin inside its range); "
    "records that differ less are protected more. The same wording and units are used on every page."
)
right.dataframe(view.posterior_frame(record_eps), hide_index=True, key="rel_posterior")

# ------------------------------------------------------------------------------------------ which eps
st.subheader("Which ε?")
# first: which records are released decides which records "Which ε?" may look at, too
rows = view.choice_radio(st, "Records released", view.RECORDS_CHOICES, "rel_rows", view.RECORDS_HELP)
t1, t2 = st.columns(2)
target_input = view.target_input(task)
if target_input.relative_offered:
    kind_label = t1.radio(
        "Utility target", ["share of non-private", "absolute value"], horizontal=True, key="rel_target_kind"
    )
else:  # a distance has no non-private reference to take a share of
    kind_label = "absolute value"
    t1.markdown("**Utility target**: an absolute value")
    t1.caption(target_input.why_absolute)
if kind_label == "share of non-private":
    share = t2.slider("Keep at least this share of the non-private utility (%)", 50, 100, 95, key="rel_share")
    target = rel.UtilityTarget("relative", share / 100.0)
else:
    value = t2.number_input(
        target_input.label,
        min_value=0.0,
        max_value=target_input.max_value,
        value=target_input.default,
        step=0.01,
        key=f"rel_abs_{task}",  # each task's metric has its own scale
        help=target_input.help,
    )
    target = rel.UtilityTarget("absolute", float(value))
scenario = view.current_scenario(
    state,
    encoded.schema,
    name="current",
    eps=eps,
    task=task,
    p=p,
    include_target=include_target,
    target_eps=None,
    target=target,
    method=method,
    floor=floor,
)

scenario = replace(scenario, release_rows=rows)  # held-out: "Which ε?" sweeps the tuning records only
which_key = view.decision_key(state, scenario)
answer = view.store().get(which_key)
if answer is None:
    jobs.start_button(
        which_key,
        lambda: view.request_decision(state, encoded, scenario),
        label="Find the smallest ε",
        button_key="rel_which",
        name="Sweeping ε for DepHDP and the four baselines",
        stop_label="Stop the sweep",
        stop_key="rel_which_stop",
        wait=view.JOB_WAIT_SECONDS,
        primary=True,
    )
else:
    c = answer.choice
    # a target the majority label meets too is no answer: a warning that leads with that, never green
    (st.success if c.met and not answer.uninformative else st.warning)(answer.sentence)
    if include_target and c.met and not answer.uninformative:  # the answer's ε is the features' alone
        st.caption(view.means_text(c.eps, view.record_eps(c.eps, p, include_target)))
    for column, (label, shown, why) in zip(st.columns(3), view.decision_metrics(answer), strict=True):
        column.metric(label, shown, help=why or None)
    st.plotly_chart(rel.frontier_figure(answer), key="rel_frontier")
    answered = c.met and not answer.uninformative  # else the sentence above says what the ε is (not)
    how = f"{c.reason.replace('eps = ', 'ε = ')}. " if answered else ""
    tuning = view.TUNING_ONLY if scenario.release_rows == "held_out" else ""
    st.caption(f"{how}Answered in {answer.seconds:.1f} s (cached for this session's settings).{tuning}")

# ------------------------------------------------------------------------------------------ release
st.subheader("Release the whole table")
scenario = replace(scenario, name=view.settings_title(scenario))
release_key = view.outcome_key(state, scenario)
done = view.store().get(release_key)
if done is None:
    if (large := large_attributes_note(encoded)) is not None:
        st.warning(large)
    jobs.start_button(
        release_key,
        lambda: view.request_outcome(state, scenario),
        label="Prepare the release",
        button_key="rel_prepare",
        name="Preparing the release",
        stop_label="Stop preparing",
        stop_key="rel_prepare_stop",
        wait=view.JOB_WAIT_SECONDS,
    )
else:
    comp = done.audit["composition"]
    st.markdown(f"**Records released:** {md(done.audit['scope']['statement'])}")
    st.markdown(
        f"**Composition of the group budgets** (ℓ_{p_text} record metric, q = {comp['q']}): "
        f"{md(comp['statement'])}"
    )
    u = done.utility
    st.markdown(
        f"**Utility** ({u['metric']}, {u['test_rows']} held-out records): {u['mean']:.3f} "
        f"(95 % band {u['lo']:.3f}–{u['hi']:.3f}) against {u['reference']:.3f} without privacy"
        f"{rel.majority_clause(u)}."
    )
    st.caption(view.utility_caption(u, view.WHICH_REPETITIONS))
    for message in done.check.messages:
        st.warning(md(message))
    if not done.check.messages:
        st.success("No degenerate output found.")
    if done.check.constant_columns and method == "DepHDP":
        st.info(view.CONSTANT_COLUMNS_HINT)
    if done.check.min_budget_groups:
        st.info(view.floor_hint(done))
    st.plotly_chart(rel.information_figure(done), key="rel_information")
    st.caption(view.information_caption(done))
    st.dataframe(done.released.head(20), key="rel_preview")
    d1, d2, d3 = st.columns(3)
    csv_text, csv_note = view.privatised_csv(done.released, *view.csv_convention(state))
    d1.download_button(
        "Privatised table (CSV)", csv_text, "privatised.csv", "text/csv", key="rel_download_csv"
    )
    if csv_note:
        d1.caption(csv_note)
    formula_note(done.released, d1)
    d2.download_button(
        "Audit record (JSON)",
        json.dumps(done.audit, indent=2),
        "audit.json",
        "application/json",
        key="rel_download_audit",
    )
    d2.caption("For you, not for publication: it holds the table's fingerprint and statistics of its values.")
    d3.download_button(
        "Report (HTML)",
        view.report_html(state, scenario, done, answer),
        "report.html",
        "text/html",
        key="rel_download_report",
    )
    d3.caption(
        "For you, not for publication: it holds the table's fingerprint and statistics of the true values."
    )
    # the same settings released by the other method, on request: what each keeps, side by side
    other = pair.other_scenario(scenario)
    other_name = pair.METHOD_NAMES[other.method]
    st.markdown(f"**Beside it: the same settings released by {other_name}**")
    other_key = view.outcome_key(state, other)
    if (beside := view.store().get(other_key)) is None:
        jobs.start_button(
            other_key,
            lambda: view.request_outcome(state, other),
            label=f"Release by {other_name} too, to compare",
            button_key="rel_pair",
            name=f"Releasing by {other_name}",
            stop_label="Stop",
            stop_key="rel_pair_stop",
            wait=view.JOB_WAIT_SECONDS,
        )
    else:
        st.dataframe(pair.pair_frame(done, beside), hide_index=True, key="rel_pair_table")
        st.markdown(pair.pair_sentence(done, beside))

# ------------------------------------------------------------------------------------------ scenarios
st.subheader("Scenarios")
saved = view.saved_scenarios()
s1, s2 = st.columns([3, 1])
# never written by the page: the suggestion is its placeholder (see view.scenario_name)
suggestion = view.suggested_name(scenario, saved)
typed = s1.text_input("Scenario name", key="rel_scenario_name", placeholder=suggestion)
named = view.scenario_name(typed, scenario, saved)
name = named.name
s1.caption(named.note)
save_label = "Replace the saved scenario" if named.replaces else "Save current settings"
if s2.button(save_label, key="rel_save"):
    saved[name] = replace(scenario, name=name, pages=view.page_settings())
    picked = [n for n in st.session_state.get("rel_compare_pick", []) if n in saved and n != name]
    st.session_state["rel_compare_pick"] = [*picked, name][-4:]
    st.toast(f"Saved {md(name)}")
upload = st.file_uploader("Load scenarios (JSON)", type=["json"], key="rel_scenarios_upload")
if upload is not None:
    try:
        for item in rel.load_scenarios(upload.getvalue()):
            saved[item.name] = item
            picked = st.session_state.get("rel_compare_pick", [])
            if item.name not in picked:
                st.session_state["rel_compare_pick"] = [*picked, item.name][-4:]
    except core.DataError as exc:
        st.error(f"Could not load {md(upload.name)}: {md(exc)}")
if saved:
    st.download_button(
        "Download scenarios (JSON)",
        rel.save_scenarios(list(saved.values())),
        "scenarios.json",
        "application/json",
        key="rel_download_scenarios",
    )
    if "rel_compare_pick" not in st.session_state:
        st.session_state["rel_compare_pick"] = list(saved)[:4]
    st.session_state["rel_compare_pick"] = [n for n in st.session_state["rel_compare_pick"] if n in saved]
    chosen = st.multiselect("Compare (two to four)", list(saved), max_selections=4, key="rel_compare_pick")
    if len(chosen) >= 2:
        picked = [saved[n] for n in chosen]
        compare_key = view.comparison_key(state, picked, chosen)
        table = view.store().get(compare_key)
        if table is None:
            jobs.start_button(
                compare_key,
                lambda: view.request_comparison(state, picked, chosen),
                label="Compare",
                button_key="rel_compare",
                name="Comparing the scenarios",
                stop_label="Stop comparing",
                stop_key="rel_compare_stop",
                wait=view.JOB_WAIT_SECONDS,
            )
        else:
            st.dataframe(view.compare_styled(table), key="rel_compare_table")
            st.caption("Highlighted: settings and results that differ between the scenarios.")
