"""Decide & release page glue: the current scenario, cached "which eps" answers and release outcomes,
the scenario store of the session, and the figures.

Heavy work (a sweep, a release) runs in plain functions with a progress callback and is kept in one
process-wide store keyed by small hashable tuples (never inside ``st.cache_data``, so a progress bar is
never replayed); a second session asking the same question waits for the first instead of recomputing.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import replace
from typing import Any, NamedTuple

import pandas as pd
import streamlit as st

import mdp_core as core
from mdp_core import release as rel
from mdp_core._text import listed, share
from mdp_core._validation import part
from mdp_core.release.posterior import whole_record_note
from ui.data import encoding_choices
from ui.dephdp import FLOOR_LABELS, FLOOR_OPTIONS, floor_value, largest_floor
from ui.jobs import builder
from ui.markdown import md
from ui.release_pair import INFORMATIVE, information_shares
from ui.state import AppState
from ui.store import store

__all__ = [
    "CONFIG_OPTIONS",
    "CONSTANT_COLUMNS_HINT",
    "FLOOR_HELP",
    "FLOOR_LABELS",
    "JOB_WAIT_SECONDS",
    "RECORDS_CHOICES",
    "RECORDS_HELP",
    "RECORD_METRIC_HELP",
    "RELEASE_CHOICES",
    "RELEASE_CHOICE_HELP",
    "SWEEP_CLIENT",
    "TUNING_ONLY",
    "WHICH_EPS",
    "WHICH_REPETITIONS",
    "NameChoice",
    "TargetInput",
    "choice_radio",
    "compare_styled",
    "comparison_key",
    "csv_convention",
    "current_scenario",
    "decision_key",
    "decision_metrics",
    "floor_fits",
    "floor_hint",
    "floor_value",
    "information_caption",
    "means_text",
    "outcome_key",
    "page_settings",
    "posterior_frame",
    "privatised_csv",
    "record_budget_text",
    "record_eps",
    "report_html",
    "request_comparison",
    "request_decision",
    "request_outcome",
    "same_settings",
    "saved_scenarios",
    "scenario_name",
    "scenario_title",
    "settings_title",
    "store",
    "suggested_name",
    "target_input",
    "utility_caption",
]

#: Engine of the "which eps" sweep: None = Dask (DASK_SCHEDULER_ADDRESS or the embedded LocalCluster);
#: tests set False (in-process).
SWEEP_CLIENT: Any = None
#: Budgets, repetitions and extra DepHDPConfig fields of the page's sweeps and releases (tests shrink them).
WHICH_EPS: tuple[float, ...] = rel.WHICH_EPS_GRID
WHICH_REPETITIONS = 5
CONFIG_OPTIONS: dict[str, Any] = {}
_SCENARIOS_KEY = "rel_saved_scenarios"
#: The run that starts a job (which eps, a release, a comparison) shows its progress this long (seconds).
JOB_WAIT_SECONDS = 2.0
#: Held-out repetitions of a scenario's utility (release outcome).
OUTCOME_REPETITIONS = 10
#: What the page offers to release the features with (:data:`mdp_core.release.RELEASE_METHODS`).
RELEASE_CHOICES = {
    "DepHDP": "DepHDP: best for the task",
    "ALC+DPN": "EM on every group: no column collapsed to one value",
}
#: Which records the release holds (:data:`mdp_core.release.RELEASE_ROWS`).
RECORDS_CHOICES = {
    "all": "every record (the channels are tuned on 62.5 % of them)",
    "held_out": "only the 37.5 % held out (channels and released values chosen without them)",
}
RECORDS_HELP = (
    "The channels (groups, budgets, remapping) are tuned on a random 62.5 % of the records, and that "
    "tuning is computed from the raw values: it is not private. Releasing every record is what most "
    "releases do, but for the records that tuned the channels the bound covers the randomisation, not what "
    "the choice of channels reveals. Releasing only the held-out records (the ones the utility is measured "
    "on) releases only records whose channels were chosen without them, at the cost of the other 62.5 %; "
    "their released values (bin centres, categories) then come from the tuning records alone, and a value "
    "outside them is released as the nearest one. Releasing every record takes those values from every "
    "record, the released ones included, unless they are declared public on the Data page (ranges and "
    "categories): the audit record's scope names the columns whose values are not."
)
#: Said under a held-out release's "Which ε?" answer.
TUNING_ONLY = (
    " Swept on the records that tune the channels only: the held-out records this release publishes are not "
    "looked at (apart from the Data page's choice of columns, made on the whole table)."
)
RELEASE_CHOICE_HELP = (
    "DepHDP picks, per group, the channel with the least loss for the task: the LP optimum or EM with "
    "Bayesian remapping. Both may release one value for a column the task barely uses, whatever the true "
    "value (a constant column: private, but it carries nothing). EM on every group (the ALC+DPN baseline: "
    "the same groups and budget allocation, the exponential mechanism without remapping) releases a noisy "
    "copy of every value instead, at a higher task loss: compare the utility of both below. A noisy copy "
    "says something about the true value only where its group's budget allows: a group at the grid's "
    "smallest budget releases values that say almost nothing (nearly random, or one value where the "
    "channel remaps; the release check names such groups). With many "
    "columns and a small ε, most columns keep almost nothing with either choice: after a release, the "
    "information chart shows how much each column keeps (under 1 % counts as nothing), and a larger ε, or "
    "fewer columns, is what helps."
)
#: The budget floor's help on the page.
FLOOR_HELP = (
    "Every group of columns gets at least this budget (the first point of the ε grid at or above it), so "
    "none is left at the grid's smallest budget, where values say almost nothing; DepHDP splits the "
    "rest as before. It does not make a column informative by itself: on heart at ε = 4 a floor of 0.5 "
    "left DepHDP's median column at under 1 % of its information (the chart after a release shows each "
    "column). The composition rule caps it: K groups at the floor need ‖(floor, …, floor)‖_q ≤ ε, so a "
    "floor too high for ε is refused with the largest one allowed, and “Which ε?” leaves out the budgets "
    "too small for it."
)

#: The record metric's help on the page (its options 1 / 2 / inf).
RECORD_METRIC_HELP = (
    "How a record's budget is shared between its columns. Two records are as far apart as the ℓ_p norm "
    "of their columns' distances (each at most 1), and the groups' budgets ε_k must keep ‖(ε_1, …, ε_K)‖_q "
    "≤ ε, q the conjugate of p (1/p + 1/q = 1). p = 1: distances add up, so every group may use the whole "
    "ε, but a record that differs in several columns is protected less. p = inf: a record that differs in "
    "every column is as protected as one that differs in one, and the groups' budgets must add up to ε. "
    "p = 2 (the default) lies in between: the squares of the groups' budgets add up to at most ε². The same "
    "rule adds a released target's own channel: at ε = 1 and p = 2 a record's whole budget is "
    "‖(ε, ε)‖_2 = √(1² + 1²) = 1.41 (the box below the target toggle); at p = 1 it stays 1, at p = inf it "
    "is 2."
)


def floor_fits(result: core.DepHDPResult, floor: float) -> bool:
    """Whether the composition rule allows ``floor`` (snapped up to the ε grid, as the allocation does) for
    every group of ``result`` at its eps."""
    try:
        core.floor_offset(replace(result.config, min_group_eps=floor), len(result.groups))
    except core.DataError:  # InfeasibleFloorError, or above the grid's top
        return False
    return True


def floor_hint(outcome: rel.ScenarioOutcome) -> str:
    """Said when groups got the grid's smallest budget: the largest offered floor that fits."""
    result = outcome.result
    fits = [v for v in FLOOR_OPTIONS if v > 0 and floor_fits(result, v)]
    k, eps = len(result.groups), result.config.eps
    if not fits:
        most = math.floor(largest_floor(result) * 1000) / 1000  # rounded down: a stated limit must hold
        return (
            f"At ε = {eps:g} the composition rule leaves at most {most:g} per group for {k} groups on the "
            "profiles' budget grid: no floor the page offers fits; raise ε to give every group a budget."
        )
    return (
        f"To give every group some budget, set “Budget floor per group” above: at ε = {eps:g} with {k} "
        f"groups the largest the page offers that fits is {fits[-1]:g}. The task's utility then falls, and "
        "a column gains information only where its group's budget is large enough: the chart below shows "
        "what each column keeps."
    )


#: Said under a DepHDP release with constant columns.
CONSTANT_COLUMNS_HINT = (
    "Constant columns are what DepHDP's task-optimal channels release for columns the task barely uses. "
    "To release a noisy copy of every value instead, choose “EM on every group” under “Release by” above "
    "and compare the utility; such a copy carries information only where its group's budget is large "
    "enough (see the help of “Release by”)."
)


def information_caption(outcome: rel.ScenarioOutcome) -> str:
    """How to read the information figure, and how many columns keep almost nothing (under 1 %)."""
    kept = information_shares(outcome)
    empty = [str(a) for a, v in kept.items() if v < INFORMATIVE]
    said = (
        f"{len(empty)} of the {len(kept)} feature columns keep less than 1 % ({md(listed(empty))}). "
        if empty
        else f"Every feature column keeps at least 1 % (the least: {md(kept.idxmin())}, {kept.min():.0%}). "
    )
    return (
        f"{said}0 %: the released column says nothing about the true value (one constant value, or values "
        "close to random); 100 %: it determines it. Measured exactly on this table for each column's channel "
        "(mutual information between the true and the released value over the column's entropy)."
    )


class TargetInput(NamedTuple):
    """How the page asks for the "which eps" target of a task (its metric's direction and scale)."""

    relative_offered: bool
    label: str
    max_value: float | None
    default: float
    help: str
    why_absolute: str


#: Default absolute targets of the lower-is-better metrics (their scales differ).
_DISTANCE_DEFAULTS = {"mean_distance": 0.5, "marginal_tv": 0.1, "entropy_change_bits": 0.1}


def target_input(task: str) -> TargetInput:
    """The target input for ``task``: a share of non-private (or an absolute value) for an accuracy, an
    absolute upper limit for a distance, which has no non-private reference."""
    metric, unit, higher = core.UTILITY_METRICS[task]
    name = metric.replace("_", " ")
    if higher:
        return TargetInput(True, f"{name} at least", 1.0, 0.75, f"{name}: {unit}", "")
    return TargetInput(
        False,
        f"{name} at most",
        None,
        _DISTANCE_DEFAULTS.get(metric, 0.1),
        f"{name}: {unit}; lower is better",
        f"The {task} task is judged by the {name} ({unit}): lower is better, and there is no non-private "
        "value to take a share of, so the target is an upper limit.",
    )


def choice_radio(where: Any, label: str, choices: dict[str, str], key: str, help_text: str) -> str:
    """A horizontal radio over ``choices`` (value -> label) in ``where`` (``st`` or a column)."""
    options = list(choices)
    return where.radio(label, options, format_func=choices.get, horizontal=True, key=key, help=help_text)


def scenario_title(
    eps: float,
    task: str,
    method: str,
    floor: float = 0.0,
    *,
    p: float = 2.0,
    include_target: bool = True,
    rows: str = "all",
) -> str:
    """The scenario name the page suggests for these settings: eps and the task, then only what differs
    from the page's defaults (the method, the budget floor, the record metric, a target kept back, held-out
    records only)."""
    parts = [f"ε = {eps:g}", task]
    if method != "DepHDP":
        parts.append(method)
    if floor > 0:
        parts.append(f"floor {floor:g}")
    if p != 2.0:
        parts.append(f"ℓ_{_p_text(p)}")
    if not include_target:
        parts.append("target not released")
    if rows == "held_out":
        parts.append("held-out records")
    return ", ".join(parts)


def settings_title(scenario: rel.Scenario) -> str:
    """:func:`scenario_title` of a scenario's settings (a table without a target releases none: not said)."""
    c = scenario.config
    return scenario_title(
        c.eps,
        c.task,
        scenario.method,
        c.min_group_eps,
        p=c.p,
        include_target=scenario.include_target or scenario.target is None,
        rows=scenario.release_rows,
    )


def current_scenario(
    state: AppState,
    schema: core.Schema,
    *,
    name: str,
    eps: float,
    task: str,
    p: float,
    include_target: bool,
    target_eps: float | None,
    target: rel.UtilityTarget,
    method: str = "DepHDP",
    floor: float = 0.0,
) -> rel.Scenario:
    """The session's settings as a frozen :class:`~mdp_core.release.Scenario` (``floor``: the per-group
    budget floor, ``min_group_eps``)."""
    frame = _loaded(state)
    config = core.DepHDPConfig(
        eps=eps, task=task, p=p, seed=state.seed, min_group_eps=floor, **CONFIG_OPTIONS
    )
    return rel.Scenario(
        name=name,
        dataset=state.dataset,
        config=config,
        fingerprint=_fingerprint(state.dataset_key, frame),
        target=state.target,
        seed=state.seed,
        **encoding_choices(schema),
        include_target=include_target and state.target is not None,
        target_eps=target_eps,
        utility_target=target,
        method=method,
    )


_PREFIXES = {
    "data_": "data",
    "mech_": "mechanisms",
    "dep_": "dephdp",
    "leak_": "leakage",
    "geo_": "geo",
    "ggm_": "noise",
    "noise_": "noise",
    "sweep_": "sweep",
    "rel_": "release",
}


def page_settings() -> tuple[tuple[str, str], ...]:
    """Every JSON-able widget value of every page still in the session, grouped by page (key prefix)."""
    import json

    pages: dict[str, dict[str, Any]] = {}
    for key, value in st.session_state.items():
        page = next((pg for pre, pg in _PREFIXES.items() if str(key).startswith(pre)), None)
        if page is None or key in (_SCENARIOS_KEY, "rel_compare_pick"):
            continue
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError):
            continue
        pages.setdefault(page, {})[str(key)] = value
    return tuple(sorted((pg, json.dumps(v, sort_keys=True)) for pg, v in pages.items()))


@st.cache_data(max_entries=16, show_spinner=False)
def _fingerprint(key: str, _frame: pd.DataFrame) -> str:
    return rel.dataset_fingerprint(_frame)


def decision_key(state: AppState, scenario: rel.Scenario) -> tuple:
    """Everything :func:`_which` reads: the table as encoded (its bins, kinds and exclusions too) and the
    sweep's settings, but not the budget or the release's own options, which "which eps" does not use."""
    c = scenario.config
    return (
        "which",
        state.dataset_key,
        scenario.fingerprint,
        scenario.target,
        scenario.exclude,
        scenario.include,
        scenario.kind_overrides,
        scenario.bins,
        scenario.ranges,
        scenario.categories,
        c.task,
        c.p,
        scenario.seed,
        scenario.utility_target,
        scenario.method,
        scenario.release_rows,
        rel.sweep_options(c),
    )


def request_decision(state: AppState, encoded: core.Encoded, scenario: rel.Scenario) -> Future[rel.Decision]:
    """The "which eps" answer (a sweep of DepHDP and the four baselines) for this scenario, computed on the
    builder's long-job threads and kept under :func:`decision_key` (the page polls it and can stop it)."""
    frame = _loaded(state) if scenario.release_rows == "held_out" else None

    def answer(progress: core.Progress) -> rel.Decision:
        # a held-out release: the tuning records alone, encoded on the job's thread, not the page's
        table = encoded if frame is None else rel.tuning_table(scenario, frame)
        return _which(table, scenario, progress)

    return builder().request(decision_key(state, scenario), answer, slow=True)


def _which(encoded: core.Encoded, scenario: rel.Scenario, progress: core.Progress) -> rel.Decision:
    return rel.which_eps(
        scenario.dataset,
        scenario.utility_target,
        encoded=encoded,
        task=scenario.config.task,
        p=scenario.config.p,
        seed=scenario.seed,
        eps=WHICH_EPS,
        repetitions=WHICH_REPETITIONS,
        options=rel.sweep_options(scenario.config),  # the page's settings and budget floor
        client=SWEEP_CLIENT,
        progress=progress,
        method=scenario.method,
    )


def outcome_key(state: AppState, scenario: rel.Scenario) -> tuple:
    return (
        "outcome",
        state.dataset_key,
        replace(scenario, name="_", utility_target=rel.UtilityTarget(), pages=()),
    )


def request_outcome(state: AppState, scenario: rel.Scenario) -> Future[rel.ScenarioOutcome]:
    """The release outcome of this scenario (configuration, utility, whole-table release, audit), computed on
    the builder's long-job threads and kept under :func:`outcome_key` (the page polls it and can stop it)."""
    frame = _loaded(state)
    return builder().request(
        outcome_key(state, scenario),
        lambda progress: _evaluated(scenario, frame, state.source_rows, progress),
        slow=True,
    )


def _loaded(state: AppState) -> pd.DataFrame:
    if state.frame is None:
        raise core.DataError("no table is loaded")
    return state.frame


def _evaluated(
    scenario: rel.Scenario, frame: pd.DataFrame, source_rows: int | None, progress: core.Progress
) -> rel.ScenarioOutcome:
    return rel.evaluate_scenario(
        scenario, frame, repetitions=OUTCOME_REPETITIONS, progress=progress, source_rows=source_rows
    )


def comparison_key(state: AppState, scenarios: Sequence[rel.Scenario], names: Sequence[str]) -> tuple:
    """Store and job key of the comparison table of ``scenarios`` (shown under ``names``)."""
    return ("compare", tuple(names), tuple(outcome_key(state, s) for s in scenarios))


def request_comparison(
    state: AppState, scenarios: Sequence[rel.Scenario], names: Sequence[str]
) -> Future[pd.DataFrame]:
    """The comparison table of ``scenarios`` (each one's release outcome, stored as by
    :func:`request_outcome`), computed on the builder's long-job threads: the page polls
    :func:`comparison_key`'s job and can stop it (4 scenarios on adult: 16 s in one page run before)."""
    frame, source_rows = _loaded(state), state.source_rows
    keys = [outcome_key(state, s) for s in scenarios]
    labels = list(names)

    def compute(progress: core.Progress) -> pd.DataFrame:
        outs = []
        for i, (key, scenario) in enumerate(zip(keys, scenarios, strict=True)):
            sub = part(progress, i / len(keys), (i + 1) / len(keys), f"scenario {labels[i]}: ")
            outs.append(
                store().get_or_compute(
                    key, lambda s=scenario, sub=sub: _evaluated(s, frame, source_rows, sub)
                )
            )
        return rel.compare_scenarios(outs).assign(scenario=labels)

    return builder().request(comparison_key(state, scenarios, labels), compute, slow=True)


def report_html(state: AppState, scenario: rel.Scenario, done: rel.ScenarioOutcome, answer: Any) -> str:
    """The HTML report of a prepared release (with the "which eps" answer when there is one), stored;
    titled by the settings in words (the outcome's own scenario name is the page's placeholder)."""
    key = ("report", outcome_key(state, scenario), None if answer is None else decision_key(state, scenario))
    title = f"{settings_title(scenario)} on {scenario.dataset}"
    return store().get_or_compute(key, lambda: rel.build_report(done, decision=answer, title=title))


def decision_metrics(answer: rel.Decision) -> list[tuple[str, str, str]]:
    """The three big numbers under a "which eps" answer: (label, value, help). A target the majority label
    meets too gets no ε figure of its own: a bare "ε 0.25" read as the answer (wine, 95 % of non-private)."""
    c = answer.choice
    shown = f"{c.ci[0]:.3f} – {c.ci[1]:.3f}" if all(map(math.isfinite, c.ci)) else "none (under 2 draws)"
    ci = ("95 % CI", shown, "95 % confidence interval of that mean")
    if answer.uninformative:
        return [
            (
                "always the majority label",
                f"{answer.majority:.3f}",
                "Accuracy of always predicting the more frequent label on the held-out records, without "
                "any data released: a target at or below it says nothing about a release.",
            ),
            (
                f"{answer.metric} at ε = {c.eps:.3g}",
                f"{c.estimate:.3f}",
                "Mean over the repetitions at this ε. It meets the target, but so does the majority label: "
                "this ε is no answer.",
            ),
            ci,
        ]
    return [
        ("ε" if c.met else "largest ε tried", f"≤ {c.eps:.3g}" if c.grid_floor else f"{c.eps:.3g}", ""),
        (answer.metric, f"{c.estimate:.3f}", "Mean over the repetitions at this ε"),
        ci,
    ]


def utility_caption(utility: dict[str, Any], which_repetitions: int) -> str:
    """What the release's utility figure is: how many draws, what the band is, and why a single draw (the
    DepHDP page's release) or the "which eps" frontier can show another number for the same setting."""
    u = utility
    return (
        f"The {u['metric'].replace('_', ' ')} is the mean over {u['repetitions']} privatisations of the "
        f"{u['test_rows']} held-out records through the same channels; the band ({u['lo']:.3f}–"
        f"{u['hi']:.3f}, a 95 % prediction interval from those draws) is where about 95 % of single "
        "draws fall. One privatised draw, such as the DepHDP page's release, can land anywhere in it, and "
        "about one in 20 outside it. The “Which ε?” frontier is a sweep of its own: "
        f"{which_repetitions} draws per budget, and its band is the narrower 95 % confidence interval of "
        "their mean."
    )


def csv_convention(state: AppState) -> tuple[str, str]:
    """The loaded file's field separator and decimal mark (``","``, ``"."`` for the embedded samples)."""
    return state.csv_separator, state.csv_decimal


def privatised_csv(released: pd.DataFrame, separator: str = ",", decimal: str = ".") -> tuple[str, str]:
    """The privatised table as CSV text in the upload's convention, and what to say beside the download
    (``;`` and decimal commas: German-locale Excel read ``,`` and ``.`` as one text column)."""
    text = released.to_csv(index=False, sep=separator, decimal=decimal)
    if (separator, decimal) == (",", "."):
        return text, ""
    named = {",": "commas", ";": "semicolons", "\t": "tabs", "|": "pipes"}.get(separator, repr(separator))
    mark = "decimal commas" if decimal == "," else "decimal points"
    return text, f"The CSV is written as the upload was read: fields separated by {named}, {mark}."


def posterior_frame(eps: float, distance: float = 1.0) -> pd.DataFrame:
    """The small table: attacker's prior -> largest posterior after one release."""
    rows = rel.posterior_table(eps, distance)
    return pd.DataFrame(
        {
            "attacker's prior": [share(r["prior"]) for r in rows],
            "largest posterior": [share(r["posterior"]) for r in rows],
        }
    )


def _p_text(p: float) -> str:
    return "inf" if math.isinf(p) else f"{p:g}"


def record_eps(eps: float, p: float, include_target: bool) -> float:
    """A record's whole budget at most: ``eps``, or with the target's own channel at ``eps`` too,
    ``||(eps, eps)||_q`` (q the l_p metric's conjugate; :func:`record_budget_text`)."""
    return core.budget_norm([eps, eps], core.dual_exponent(p)) if include_target else eps


def means_text(eps: float, record: float) -> str:
    """The odds sentence for a record's whole budget ``record`` (at most: the features' budgets compose
    below ``eps``), after what raises it above ``eps`` (the report's words)."""
    return whole_record_note(eps, record, at_most=True) + rel.budget_sentence(record)


def record_budget_text(eps: float, p: float) -> str:
    """What releasing the target costs: its own channel at ``eps`` composes with the groups' budgets
    (``||eps_k||_q`` with q the l_p metric's conjugate), so a record's budget can exceed the slider's."""
    q = core.dual_exponent(p)
    total = record_eps(eps, p, True)
    if total <= eps * (1 + 1e-12):  # l_1 records: budgets compose by their maximum
        return (
            f"The target column gets its own channel at ε = {eps:g}; under the ℓ_1 record metric budgets "
            f"compose by their maximum, so a record's budget stays ε = {eps:g}."
        )
    return (
        f"The target column gets its own channel at ε = {eps:g}, so a record's whole budget is at most "
        f"‖(ε, ε)‖_{q:g} = {total:.3g}, not {eps:g}: the features' ε and the target's ε combined as the "
        f"ℓ_{_p_text(p)} record metric composes budgets (see “Record metric ℓ_p”; the release states the "
        f"exact figure). Turn this off to keep a record's budget at ε = {eps:g}."
    )


def same_settings(a: rel.Scenario, b: rel.Scenario) -> bool:
    """Whether two scenarios hold the same settings (their names and other pages' widgets aside)."""
    return replace(a, name="_", pages=()) == replace(b, name="_", pages=())


def suggested_name(scenario: rel.Scenario, saved: dict[str, rel.Scenario]) -> str:
    """The name the page suggests: :func:`settings_title`, numbered ("… (2)") where a saved scenario of
    that name holds other settings (a record metric or a target the title leaves out), so the suggestion
    never names, and a save under it never replaces, a scenario with other settings."""
    title = settings_title(scenario)
    for n in itertools.count(1):
        name = title if n == 1 else f"{title} ({n})"
        if name not in saved or same_settings(saved[name], scenario):
            return name
    raise AssertionError("unreachable")  # pragma: no cover - count() never ends


class NameChoice(NamedTuple):
    """The name a save stores the current settings under, and what the page says about it."""

    name: str
    replaces: bool  # a saved scenario of that name holds other settings: the save replaces it
    note: str


def scenario_name(typed: str | None, scenario: rel.Scenario, saved: dict[str, rel.Scenario]) -> NameChoice:
    """The scenario's name: what the user typed in the name box, else the suggestion (shown as the box's
    placeholder). The page never writes the box: a value it wrote came back from the browser stale when
    quick arrow presses cut runs short, froze the name and saved new settings under an old scenario's."""
    own = (typed or "").strip()
    if not own:
        name = suggested_name(scenario, saved)
        note = f"Saving stores these settings as “{md(name)}”: the name follows them until you type your own."
        if settings_title(scenario) != name:
            note += f" (“{md(settings_title(scenario))}” is saved with other settings.)"
        return NameChoice(name, False, note)
    if own in saved and not same_settings(saved[own], scenario):
        other = settings_title(saved[own])
        return NameChoice(
            own,
            True,
            f"A scenario named “{md(own)}” is saved already with other settings ({md(other)}): saving "
            "replaces it. Clear the box to save under the suggested name instead.",
        )
    same = " (saved already with these settings)" if own in saved else ""
    note = f"Saving stores these settings as “{md(own)}”{same}."
    return NameChoice(own, False, note)


def saved_scenarios() -> dict[str, rel.Scenario]:
    """The session's saved scenarios by name (insertion order)."""
    return st.session_state.setdefault(_SCENARIOS_KEY, {})


def compare_styled(table: pd.DataFrame) -> Any:
    """The comparison table transposed (one column per scenario), cells differing across scenarios marked."""
    t = table.set_index("scenario").T
    t = t.astype(object).map(lambda v: f"{v:.4g}" if isinstance(v, float) else str(v))
    differs = t.nunique(axis=1) > 1

    def mark(row: pd.Series) -> list[str]:
        return ["background-color: #fff4c2" if differs[row.name] else "" for _ in row]

    return t.style.apply(mark, axis=1)
