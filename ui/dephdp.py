"""DepHDP page glue: cached runs, config JSON round trip, texts (tables and figures: ui.dephdp_display)."""

from __future__ import annotations

import dataclasses
import json
import math
from concurrent.futures import Future
from dataclasses import replace

import numpy as np
import pandas as pd
import streamlit as st

import mdp_core as core
from mdp_core import (
    DepHDPConfig,
    DepHDPProfiles,
    DepHDPResult,
    Progress,
    dephdp_profiles,
    run_dephdp,
)
from mdp_core._text import listed
from ui.data import HASH_FUNCS
from ui.jobs import builder
from ui.markdown import md
from ui.state import get_state
from ui.store import store

__all__ = [
    "BASELINE_LEGEND",
    "COMPARISON_EPS",
    "DEGENERATE_CAVEAT",
    "EVAL_EPS",
    "EVAL_WAIT_SECONDS",
    "FLOOR_LABELS",
    "FLOOR_OPTIONS",
    "HELP",
    "PROFILES_WAIT_SECONDS",
    "P_OPTIONS",
    "Degeneracy",
    "apply_config",
    "base_config",
    "comparison",
    "composition_text",
    "config_from_json",
    "config_to_json",
    "degeneracy",
    "degeneracy_message",
    "evaluation_key",
    "fit_test_split",
    "floor_label",
    "floor_value",
    "grouping_caption",
    "large_attributes_note",
    "largest_floor",
    "majority_of",
    "page_notes",
    "privatized_codes",
    "privatized_csv",
    "privatized_test",
    "profiles_key",
    "profiles_pending_text",
    "ready_evaluation",
    "ready_profiles",
    "release_utility",
    "request_evaluation",
    "request_profiles",
    "result_for",
    "store",
    "suggested_floor",
    "surrogate_metrics",
    "surrogate_note",
    "utility_text",
    "widget_key",
]

P_OPTIONS = ["1", "1.5", "2", "3", "4", "inf"]
#: Per-group budget floors offered by the page (0: none).
FLOOR_OPTIONS = [0.0, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0]
#: Their labels: the widget takes raw strings (AppTest and the browser send the shown label).
FLOOR_LABELS = ["none" if v == 0 else f"{v:g}" for v in FLOOR_OPTIONS]


def floor_label(value: float) -> str:
    """The label of the offered floor nearest to ``value``."""
    return FLOOR_LABELS[min(range(len(FLOOR_OPTIONS)), key=lambda i: abs(FLOOR_OPTIONS[i] - value))]


def floor_value(label: str) -> float:
    """The floor behind a label of :data:`FLOOR_LABELS`."""
    return FLOOR_OPTIONS[FLOOR_LABELS.index(label)]


#: Tooltips of the page's labels and captions: where the paper's references (seed 000) go, out of the
#: labels themselves.
HELP = {
    "tau_dim": "Largest group, in joint values, that may get the LP-optimal mechanism (OPT); larger groups "
    "get distance-based noise (DPN). OPT mechanisms are computed only up to a fixed group size (48 joint "
    "values by default): above it τ_dim acts as that size, and a note under the groups says so.",
    "lower_bound": "No split of ε over these groups' loss-budget curves reaches a surrogate loss below this "
    "(the Lagrangian dual on their shifted lower convex envelopes: the DepHDP paper, Proposition 2).",
    "gap": "(DepHDP surrogate loss − lower bound) / lower bound: the allocation's surrogate loss is at most "
    "this much above the best possible one (RelErr in the DepHDP paper). It says nothing about the release's "
    "utility, which is measured on held-out records.",
    "alc_rmp": "A baseline: budgets allocated by the surrogate, the exponential mechanism with Bayesian "
    "remapping in every group (the legend of the baselines is under the comparison below).",
    "composition": "The DepHDP paper, Theorem 1: budgets of groups released under an ℓ_p record metric "
    "compose in the dual norm q, 1/p + 1/q = 1.",
    "curves": "The envelopes bracket the chosen mechanism's curve (greatest convex minorant below, least "
    "convex majorant above, each shifted one grid step: the DepHDP paper, App. B); the allocation and its "
    "lower bound are computed on them.",
}
#: What the baselines' names mean (shown once, under the comparison's heading). SPL splits eps uniformly in
#: the composition norm on the budget grid (mdp_core.dephdp._allocate.uniform_on_grid), ALC optimises the
#: split on the surrogate; DPN is the exponential mechanism, RMP the exponential mechanism with Bayesian
#: remapping (mdp_core.dephdp.pipeline).
BASELINE_LEGEND = (
    "Baselines use one kind of mechanism in every group. SPL: the budget split equally between groups "
    "(on the profiles' budget grid); ALC: budgets allocated by the surrogate. DPN: distance-based noise "
    "(the exponential mechanism); "
    "RMP: the same with Bayesian remapping of its outputs. DepHDP chooses per group between distance-based "
    "noise and the LP-optimal mechanism (OPT), and allocates by the surrogate."
)
#: Said right above the privatised CSV when the release is degenerate (the download stays, for inspection).
DEGENERATE_CAVEAT = "Degenerate release: for inspection only, not for publication."

COMPARISON_EPS = (0.5, 1.0, 2.0, 5.0, 10.0)


@st.cache_resource(max_entries=8, hash_funcs=HASH_FUNCS, show_spinner=False)
def fit_test_split(encoded: core.Encoded, seed: int) -> tuple[core.Encoded, core.Encoded]:
    """The 62.5 / 37.5 fitting / test split of 000 Sec. IV-A (seeded)."""
    return core.split_encoded(encoded, 0.625, np.random.default_rng(seed))


def widget_key(name: str) -> str:
    """Key of a settings widget: ``dep_<name>``, with the generation appended once a configuration was
    loaded or a fix applied (fresh widgets then start from ``AppState.dephdp_config``)."""
    gen = get_state().dephdp_generation
    return f"dep_{name}" if gen == 0 else f"dep_{name}_{gen}"


def base_config() -> DepHDPConfig:
    """The settings the widgets start from: the last loaded / suggested configuration, else defaults."""
    return get_state().dephdp_config or DepHDPConfig()


def apply_config(config: DepHDPConfig) -> None:
    """Show ``config`` in the page's widgets from the next draw on (loaded file, suggested fix)."""
    state = get_state()
    state.dephdp_config = config
    state.dephdp_generation += 1


def profiles_key(fit: core.Encoded, config: DepHDPConfig) -> tuple:
    """Store (and job) key of stage 1 for these settings (its eps is not part of it)."""
    return ("dep.profiles", fit.fingerprint, config.profile_settings())


def ready_profiles(fit: core.Encoded, config: DepHDPConfig) -> DepHDPProfiles | None:
    """Stage 1 for these settings if it was computed before (in any session), else None."""
    return store().get(profiles_key(fit, config))


#: Seconds the run that starts stage 1 shows its progress before it leaves the job to the background
#: (heart: 1-3 s, so it lands in that run; Adult: 10-30 s).
PROFILES_WAIT_SECONDS = 5.0


def request_profiles(fit: core.Encoded, config: DepHDPConfig) -> Future[DepHDPProfiles]:
    """Queue (or find) stage 1 (groups, loss matrices, profiles incl. OPT LPs, surrogate), the slow part,
    on the background builder (a random walk measured 10-30 s on Adult beside a second walker)."""
    return builder().request(
        profiles_key(fit, config),
        lambda progress: dephdp_profiles(fit, config, cache=store(), progress=progress),
        slow=True,
    )


def result_for(fit: core.Encoded, config: DepHDPConfig, stage: DepHDPProfiles) -> DepHDPResult:
    """Stage 2 (selection, allocation, baselines, composition) on stored profiles: well under a second."""
    return store().get_or_compute(
        ("dep.result", fit.fingerprint, config),
        lambda: run_dephdp(fit, config, cache=store(), profiles=stage),
    )


def comparison(fit: core.Encoded, config: DepHDPConfig, stage: DepHDPProfiles) -> pd.DataFrame:
    """Surrogate loss of DepHDP and baselines at :data:`COMPARISON_EPS` (independent of ``config.eps``).

    Raises DataError when the budget floor is infeasible at the smallest of these budgets."""
    base = replace(config, eps=1.0)

    def compute() -> pd.DataFrame:
        rows = []
        for eps in COMPARISON_EPS:
            try:
                res = result_for(fit, replace(base, eps=eps), stage)
            except core.DataError:  # a floor too high for this eps: no allocation exists there
                continue
            rows.append({"eps": eps, "method": "DepHDP", "loss": res.value})
            rows += [{"eps": eps, "method": n, "loss": b.value} for n, b in res.baselines.items()]
        return pd.DataFrame(rows, columns=["eps", "method", "loss"])

    return store().get_or_compute(("dep.compare", fit.fingerprint, base), compute)


EVAL_EPS = (1.0, 2.0, 5.0, 10.0)
#: Seconds the run that starts the evaluation waits for it (a short one is then shown at once).
EVAL_WAIT_SECONDS = 2.0


def evaluation_key(encoded: core.Encoded, config: DepHDPConfig, repetitions: int, seed: int) -> tuple:
    """Store (and job) key of the held-out evaluation: it runs every eps of :data:`EVAL_EPS`, so the
    page's own eps is not part of it."""
    return ("dep.eval", encoded.fingerprint, replace(config, eps=1.0), int(repetitions), int(seed))


def ready_evaluation(
    encoded: core.Encoded, config: DepHDPConfig, repetitions: int, seed: int
) -> pd.DataFrame | None:
    """The held-out evaluation table if it was computed before, else None."""
    return store().get(evaluation_key(encoded, config, repetitions, seed))


def request_evaluation(
    encoded: core.Encoded, config: DepHDPConfig, repetitions: int, seed: int
) -> Future[pd.DataFrame]:
    """Queue (or find) the held-out evaluation table (000 Sec. IV-A) at eps in :data:`EVAL_EPS` on the
    background builder: 40 s on Adult with 50 repetitions, so it must not hold the page's run (the page
    polls it, and can stop it). The fitting split is the page's (same seed): its profiles are reused."""

    def compute(progress: Progress) -> pd.DataFrame:
        return core.evaluate_dephdp(
            encoded,
            config,
            eps_values=EVAL_EPS,
            repetitions=repetitions,
            seed=seed,
            progress=progress,
            cache=store(),
        ).table

    return builder().request(evaluation_key(encoded, config, repetitions, seed), compute, slow=True)


def config_to_json(config: DepHDPConfig) -> str:
    data = dataclasses.asdict(config)
    data["p"] = "inf" if math.isinf(config.p) else config.p
    return json.dumps(data, indent=2)


def config_from_json(raw: bytes) -> DepHDPConfig:
    """Parse and validate an uploaded configuration; raises DataError with a readable message."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise core.DataError(f"not a JSON file: {exc}") from exc
    if not isinstance(data, dict):
        raise core.DataError("the configuration must be a JSON object")
    known = {f.name for f in dataclasses.fields(DepHDPConfig)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise core.DataError(f"unknown configuration keys {unknown}")
    if data.get("p") == "inf":
        data["p"] = math.inf
    try:
        return DepHDPConfig(**data)
    except TypeError as exc:
        raise core.DataError(f"bad value type: {exc}") from exc


def privatized_codes(result: DepHDPResult, test: core.Encoded) -> pd.DataFrame:
    """The test split privatised once by the composed DepHDP mechanism (codes), one draw per split and
    configuration from fresh entropy: a draw from the page's seed could be redone by anyone holding the
    configuration JSON, which records the seed (privacy audit, stop 63)."""
    key = ("dep.privatised", test.fingerprint, result.config)  # result: a function of config
    return store().get_or_compute(key, lambda: result.privatize(test.codes, np.random.default_rng()))


def privatized_test(result: DepHDPResult, test: core.Encoded) -> pd.DataFrame:
    """:func:`privatized_codes` decoded to labels / bin centres (released attributes only; the target is
    not released), in a random order: the file's own order can give values away (privacy audit, stop 63)."""

    def shuffled() -> pd.DataFrame:
        rows = test.decode(privatized_codes(result, test))
        return rows.sample(frac=1.0, random_state=np.random.default_rng(), ignore_index=True)

    return store().get_or_compute(("dep.privatised.shown", test.fingerprint, result.config), shuffled)


def privatized_csv(result: DepHDPResult, test: core.Encoded) -> bytes:
    """:func:`privatized_test` as CSV bytes."""
    return privatized_test(result, test).to_csv(index=False).encode()


def release_utility(result: DepHDPResult, fit: core.Encoded, test: core.Encoded) -> core.TaskUtility:
    """Utility of the privatised test split (:func:`privatized_codes`'s draw) in the task's own units."""

    def compute() -> core.TaskUtility:
        attrs = list(result.task.attributes)
        x = test.codes[attrs].to_numpy().astype(np.int64)
        y = privatized_codes(result, test).to_numpy().astype(np.int64)
        labels = None
        if result.task.name == "prediction" and fit.schema.target is not None:
            labels = core.prediction_labels(fit, test.codes)
        return core.task_utility(result.task, x, y, encoded=test, labels=labels, p=result.config.p)

    return store().get_or_compute(("dep.utility", test.fingerprint, result.config), compute)


def majority_of(result: DepHDPResult, fit: core.Encoded, test: core.Encoded) -> float | None:
    """Prediction task: the test split's accuracy of always predicting the more frequent label."""
    if result.task.name != "prediction" or fit.schema.target is None:
        return None
    return core.majority_rate(core.prediction_labels(fit, test.codes))


def utility_text(u: core.TaskUtility, majority: float | None = None) -> tuple[str, str, str]:
    """Label, value and caption of the release's utility metric (value next to its non-private reference
    and, for an accuracy, to always predicting the more frequent label: ``majority``)."""
    label = f"Release: {u.metric.replace('_', ' ')}"
    if u.higher_is_better:
        share = f" ({u.relative:.0%} of non-private)" if math.isfinite(u.relative) else ""
        said = core.majority_clause({"mean": u.value, "majority": majority})  # the release page's words
        return label, f"{u.value:.3f}", f"{u.unit}; non-private {u.reference:.3f}{share}{said}."
    return label, f"{u.value:.3g}", f"{u.unit}; non-private {u.reference:g} (lower is better)."


def surrogate_metrics(result: DepHDPResult) -> tuple[str, str, str]:
    """Held-out R², training R² and pair count as display strings ("not fitted" when no fit was made)."""
    s = result.surrogate
    if s.pairs == 0:
        return "not fitted", "not fitted", "none needed"
    return f"{s.r2_heldout:.3f}", f"{s.r2_train:.3f}", f"{s.pairs:,}"


def surrogate_note(result: DepHDPResult) -> str:
    """A plain-language reading of the surrogate fit, shown next to its R² ("" when nothing to say).
    Every sentence is conditioned on the numbers it quotes."""
    s = result.surrogate
    if s.pairs == 0:
        return (
            "Entropy task: the surrogate adds up the groups' marginal-entropy changes (in the population "
            "limit; disjoint groups add up, so every β_k = 1 and no calibration pairs are fitted). It "
            "predicts only that part of the task loss: the held-out evaluation below also counts the "
            "change of the joint entropy and of the total correlation, so trust it over the surrogate."
        )
    zero = sum(b == 0.0 for b in s.betas)
    parts = []
    if s.r2_heldout < 0.5:
        parts.append(
            f"Low fit by nature of the task, not a fitting error: held-out R² = {s.r2_heldout:.2f}. This "
            "task's loss is not a sum of per-group losses (perturbing several groups shifts the same model "
            "score in opposite directions, which cancel), so a linear surrogate with weights β_k ≥ 0 "
            "explains little of it: trust the held-out evaluation below more than the surrogate losses."
        )
    if zero:
        parts.append(
            f"{zero} of {len(s.betas)} groups get β_k = 0: the surrogate says the task does not use them, so "
            "they count for nothing in the allocation and get only the budget the other groups leave (the "
            "groups table shows how much)."
        )
    return " ".join(parts)


def composition_text(result: DepHDPResult) -> str:
    """The composition rule of 000 Theorem 1 with this allocation's numbers (the reference goes in the
    caption's tooltip, ``HELP["composition"]``, not in the text)."""
    p = result.config.p
    q = core.dual_exponent(p)
    norm = core.budget_norm(result.eps_used, q)
    q_text = "∞" if math.isinf(q) else f"{q:g}"
    p_text = "∞" if math.isinf(p) else f"{p:g}"
    return (
        f"Composition of the group budgets: with the ℓ_{p_text} record metric they add up in the dual norm "
        f"q = {q_text}: ‖ε_k‖_{q_text} = {norm:.4g} ≤ ε = {result.config.eps:g} (their plain sum is "
        f"{float(np.sum(result.eps_used)):.4g}; the plain sum is the rule only for p = ∞)."
    )


@dataclasses.dataclass(frozen=True)
class Degeneracy:
    """What makes a release (nearly) useless: groups at the grid's minimum budget, constant columns and
    few distinct rows in the privatised test split; with the budgets and task that explain them."""

    starved: tuple[str, ...]
    starved_zero_beta: tuple[str, ...]
    constant_columns: tuple[str, ...]
    columns: int
    distinct_rows: int
    rows: int
    grid_min: float
    constant_budgets: tuple[float, ...] = ()  # the budget of each constant column's group
    task: str = ""

    @property
    def degenerate(self) -> bool:
        return bool(self.starved or self.constant_columns)

    @property
    def task_fix(self) -> bool:
        """Whether another task helps: it leaves groups at the minimum because it does not use them."""
        return bool(self.starved_zero_beta) and self.task != "record"


def degeneracy(result: DepHDPResult, released: pd.DataFrame) -> Degeneracy:
    """Check the allocation and one privatised table for degenerate output."""
    names = [" + ".join(g) for g in result.groups]
    starved = tuple(names[k] for k in result.starved)
    zero = tuple(names[k] for k in result.starved if result.surrogate.betas[k] == 0.0)
    constant = tuple(c for c in released.columns if released[c].nunique(dropna=False) <= 1)
    budget = {a: float(e) for g, e in zip(result.groups, result.eps_used, strict=True) for a in g}
    distinct = len(released.drop_duplicates()) if len(released) else 0
    return Degeneracy(
        starved,
        zero,
        constant,
        released.shape[1],
        distinct,
        len(released),
        float(result.eps_grid[0]),
        tuple(budget[c] for c in constant),
        result.config.task,
    )


def largest_floor(result: DepHDPResult) -> float:
    """The largest per-group floor that works at this eps (:func:`mdp_core.largest_floor`)."""
    return core.largest_floor(result.eps_grid, len(result.groups), result.config.eps, result.config.p)


def degeneracy_message(d: Degeneracy) -> str:
    """Why the release is degenerate, in numbers, and what helps ("" when it is not). Only fixes that
    address the cause found are offered. Audit: the page advised the record-fidelity task and a floor for
    constant columns, and after both heart at eps 1 still released 12 of 13 columns constant."""
    if not d.degenerate:
        return ""
    parts = ["**This release is degenerate: do not publish it as is.**"]
    helps = []
    if d.starved:
        why = (
            f" {len(d.starved_zero_beta)} of them have β_k = 0: the surrogate of this task does not use "
            "them, so the allocation gives them only what the other groups leave."
            if d.starved_zero_beta
            else ""
        )
        parts.append(
            f"{len(d.starved)} group(s) sit at the grid's minimum budget ε_k = {d.grid_min:g}, where their "
            "released values say almost nothing about the records (nearly random, or one value where the "
            f"channel remaps): {md(listed(d.starved))}.{why}"
        )
        if d.task_fix:
            helps.append("a task that uses these attributes (record fidelity counts every attribute)")
        helps.append("a per-group budget floor")
    if d.constant_columns:
        low, high = min(d.constant_budgets), max(d.constant_budgets)
        budgets = f"{low:.3g}" if high <= low * 1.001 else f"{low:.3g}-{high:.3g}"
        parts.append(
            f"In the privatised test split {len(d.constant_columns)} of {d.columns} columns are constant "
            f"({md(listed(d.constant_columns))}) and only {d.distinct_rows} of {d.rows} rows are distinct. "
            f"Their groups' budgets are ε_k = {budgets}: at so small a budget a report is nearly random, and "
            "the channel with the least expected loss releases the most likely value for every record."
        )
        helps += [
            "a larger ε",
            "fewer released columns (exclude some on the Data page: the rest share the budget)",
            "on Decide & release, “EM on every group” (a noisy copy of every value, at a higher task loss)",
        ]
    parts.append(
        f"What helps: {'; '.join(helps)}. The surrogate losses and the gap to their lower bound below "
        "measure the task's loss only, so they can look good while the release says little."
    )
    return " ".join(parts)


def grouping_caption(result: DepHDPResult, fit: core.Encoded, encoded: core.Encoded) -> str:
    """How the groups arose (NMI components, then the split of large ones) and why their count can differ
    from the Data page's at the same tau_group. It replaces the core's grouping note (:func:`page_notes`),
    so the split is said once."""
    target = fit.schema.target
    released = len(result.mechanism.attributes)
    cap = result.config.max_group_domain
    k, comps = len(result.groups), result.components
    if comps and comps < k:
        split = (
            f"has {comps} connected components; those with more than {cap:,} joint values were split "
            f"(weakest edge first), giving {k} groups."
        )
    else:
        split = f"gives {k} groups (none over the cap of {cap:,} joint values, so none was split)."
    kept_back = f" (the target {md(repr(target))} is not released)" if target else ""
    return (
        f"{k} groups: the NMI graph at τ_group = {result.config.tau_group:g} on the {released} released "
        f"attributes{kept_back} of the fitting split "
        f"({len(fit.codes):,} of {len(encoded.codes):,} rows) {split} The Data page groups every column of "
        "the whole table, so its count can differ."
    )


#: Kinds of the core's notes that the page says in its own words (:func:`grouping_caption`, the tau_dim
#: note of :func:`page_notes`); every other note (an LP that kept EM + remap) is shown as it is.
_RESTATED_NOTES = frozenset({"tau_dim_cap", "grouping"})


def page_notes(result: DepHDPResult) -> list[str]:
    """The result's notes for the page: the tau_dim cap in the slider's own words (τ_dim), the grouping
    note left to :func:`grouping_caption`, the rest as the core wrote them."""
    cfg = result.config
    notes = []
    if cfg.tau_dim > cfg.opt_max_domain:
        notes.append(
            f"τ_dim is set to {cfg.tau_dim:g} but acts as {cfg.opt_max_domain}: LP-optimal (OPT) mechanisms "
            f"are computed only for groups of at most {cfg.opt_max_domain} joint values, so larger groups "
            "always get distance-based noise (DPN)."
        )
    return notes + [md(n) for n in result.notes if n.kind not in _RESTATED_NOTES]  # core text: plain


def suggested_floor(result: DepHDPResult) -> float:
    """A round floor from :data:`FLOOR_OPTIONS` at most half the largest feasible one (0 when none fits)."""
    return max((v for v in FLOOR_OPTIONS if 0 < v <= largest_floor(result) / 2), default=0.0)


#: Values of one attribute from which DepHDP's profiles take long enough to say so before they start.
LARGE_ATTRIBUTE = 1_000


def large_attributes_note(encoded: core.Encoded) -> str | None:
    """A warning before the profiles start when an attribute has thousands of values (None otherwise)."""
    large = {
        a: n for a, n in encoded.domain_sizes.items() if n > LARGE_ATTRIBUTE and a != encoded.schema.target
    }
    if not large:
        return None
    named = ", ".join(f"{md(a)} ({n:,} values)" for a, n in sorted(large.items(), key=lambda kv: -kv[1]))
    return (
        f"Large attributes: {named}. DepHDP's profiles of an attribute grow with the cube of its values "
        "(its loss matrix, and one remapping per budget): 5,000 values take about 4 minutes on 2 cores. "
        "Merge rare values or exclude the column on the Data page to go faster; meanwhile the bar moves "
        "and the stop button works."
    )


def profiles_pending_text(config: DepHDPConfig) -> str:
    """What the "Compute group profiles" button computes, and why it is behind a button."""
    return (
        "The group profiles for these settings (data, target, task, τ_group, ℓ_p, seed) are not computed "
        "yet: NMI groups, each group's loss matrix and adequacy scores, loss-budget curves of EM and EM + "
        f"remapping and, for groups of up to {config.opt_max_domain} joint values, the LP optimum along the "
        "ε grid. This takes seconds on heart and can take minutes on larger tables. Afterwards ε, τ_dpn, "
        "τ_dim, the score and the budget floor change the result instantly, and coming back to these "
        "settings is instant."
    )
