"""DepHDP page glue: cached runs, config JSON round trip, and the plotly figures."""

from __future__ import annotations

import dataclasses
import json
import math
from concurrent.futures import Future
from dataclasses import replace

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

import mdp_core as core
from mdp_core import (
    BASELINES,
    DepHDPConfig,
    DepHDPProfiles,
    DepHDPResult,
    Progress,
    dephdp_profiles,
    run_dephdp,
)
from ui.data import HASH_FUNCS
from ui.jobs import builder
from ui.state import get_state
from ui.store import store

__all__ = [
    "ALLOCATION_BARS",
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
    "allocation_figure",
    "apply_config",
    "base_config",
    "comparison",
    "comparison_figure",
    "composition_text",
    "config_from_json",
    "config_to_json",
    "csv_download",
    "curves_figure",
    "degeneracy",
    "degeneracy_message",
    "evaluation_caption",
    "evaluation_column_config",
    "evaluation_key",
    "evaluation_table",
    "fit_test_split",
    "floor_label",
    "floor_value",
    "grouping_caption",
    "groups_column_config",
    "groups_table",
    "largest_floor",
    "log_ticks",
    "page_notes",
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
    "scatter_figure",
    "scatter_x_range",
    "store",
    "suggested_floor",
    "surrogate_metrics",
    "surrogate_note",
    "utility_text",
    "widget_key",
    "yardsticks_text",
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
    "(the Lagrangian dual on their shifted lower convex envelopes: seed 000, Proposition 2).",
    "gap": "(DepHDP surrogate loss − lower bound) / lower bound: the allocation's surrogate loss is at most "
    "this much above the best possible one (RelErr in seed 000). It says nothing about the release's "
    "utility, which is measured on held-out records.",
    "alc_rmp": "A baseline: budgets allocated by the surrogate, the exponential mechanism with Bayesian "
    "remapping in every group (the legend of the baselines is under the comparison below).",
    "composition": "Seed 000, Theorem 1: budgets of groups released under an ℓ_p record metric compose in "
    "the dual norm q, 1/p + 1/q = 1.",
    "curves": "The envelopes bracket the chosen mechanism's curve (greatest convex minorant below, least "
    "concave majorant above, each shifted one grid step: seed 000, App. B); the allocation and its lower "
    "bound are computed on them.",
}
#: What the baselines' names mean (shown once, under the comparison's heading). SPL splits eps uniformly in
#: the composition norm (eps / K^(1/q) per group), ALC optimises the split on the surrogate; DPN is the
#: exponential mechanism, RMP the exponential mechanism with Bayesian remapping (mdp_core.dephdp.pipeline).
BASELINE_LEGEND = (
    "Baselines use one kind of mechanism in every group. SPL: the budget split equally between groups; "
    "ALC: budgets allocated by the surrogate. DPN: distance-based noise (the exponential mechanism); "
    "RMP: the same with Bayesian remapping of its outputs. DepHDP chooses per group between distance-based "
    "noise and the LP-optimal mechanism (OPT), and allocates by the surrogate."
)
#: Said right above the privatised CSV when the release is degenerate (the download stays, for inspection).
DEGENERATE_CAVEAT = "Degenerate release: for inspection only, not for publication."

COMPARISON_EPS = (0.5, 1.0, 2.0, 5.0, 10.0)
_COLORS = {"OPT": "#d62728", "DPN": "#1f77b4"}
_METHOD_COLORS = core.METHOD_COLORS


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


def privatized_test(result: DepHDPResult, test: core.Encoded, seed: int) -> pd.DataFrame:
    """The test split privatised once by the composed DepHDP mechanism, decoded to labels / bin centres
    (released attributes only; the target is not released)."""
    key = ("dep.privatised", test.fingerprint, result.config, int(seed))  # result: a function of config
    return store().get_or_compute(
        key, lambda: test.decode(result.privatize(test.codes, np.random.default_rng(seed)))
    )


def privatized_csv(result: DepHDPResult, test: core.Encoded, seed: int) -> bytes:
    """:func:`privatized_test` as CSV bytes."""
    return privatized_test(result, test, seed).to_csv(index=False).encode()


def release_utility(
    result: DepHDPResult, fit: core.Encoded, test: core.Encoded, seed: int
) -> core.TaskUtility:
    """Utility of the privatised test split (:func:`privatized_test`'s draw) in the task's own units."""

    def compute() -> core.TaskUtility:
        attrs = list(result.task.attributes)
        x = test.codes[attrs].to_numpy().astype(np.int64)
        y = result.privatize(test.codes, np.random.default_rng(seed)).to_numpy().astype(np.int64)
        labels = None
        if result.task.name == "prediction" and fit.schema.target is not None:
            labels = core.prediction_labels(fit, test.codes)
        return core.task_utility(result.task, x, y, encoded=test, labels=labels, p=result.config.p)

    return store().get_or_compute(("dep.utility", test.fingerprint, result.config, int(seed)), compute)


def utility_text(u: core.TaskUtility) -> tuple[str, str, str]:
    """Label, value and caption of the release's utility metric (value next to its non-private reference)."""
    label = f"Release: {u.metric.replace('_', ' ')}"
    if u.higher_is_better:
        share = f" ({u.relative:.0%} of non-private)" if math.isfinite(u.relative) else ""
        return label, f"{u.value:.3f}", f"{u.unit}; non-private {u.reference:.3f}{share}."
    return label, f"{u.value:.3g}", f"{u.unit}; non-private {u.reference:g} (lower is better)."


def surrogate_metrics(result: DepHDPResult) -> tuple[str, str, str]:
    """Held-out R², training R² and pair count as display strings ("exact" when no fit was needed)."""
    s = result.surrogate
    if s.pairs == 0:
        return "exact", "exact", "none needed"
    return f"{s.r2_heldout:.3f}", f"{s.r2_train:.3f}", f"{s.pairs:,}"


def surrogate_note(result: DepHDPResult) -> str:
    """A plain-language reading of the surrogate fit, shown next to its R² ("" when nothing to say).
    Every sentence is conditioned on the numbers it quotes."""
    s = result.surrogate
    if s.pairs == 0:
        return (
            "Entropy task: the marginal-entropy changes of disjoint groups add up, so the surrogate is exact "
            "(every β_k = 1) and needs no calibration pairs."
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
            "they count for nothing in the allocation and receive the smallest budget."
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
    few distinct rows in the privatised test split."""

    starved: tuple[str, ...]
    starved_zero_beta: tuple[str, ...]
    constant_columns: tuple[str, ...]
    columns: int
    distinct_rows: int
    rows: int
    grid_min: float

    @property
    def degenerate(self) -> bool:
        return bool(self.starved or self.constant_columns)


def degeneracy(result: DepHDPResult, released: pd.DataFrame) -> Degeneracy:
    """Check the allocation and one privatised table for degenerate output."""
    names = [" + ".join(g) for g in result.groups]
    starved = tuple(names[k] for k in result.starved)
    zero = tuple(names[k] for k in result.starved if result.surrogate.betas[k] == 0.0)
    constant = tuple(c for c in released.columns if released[c].nunique(dropna=False) <= 1)
    distinct = len(released.drop_duplicates()) if len(released) else 0
    return Degeneracy(
        starved, zero, constant, released.shape[1], distinct, len(released), float(result.eps_grid[0])
    )


def largest_floor(result: DepHDPResult) -> float:
    """The largest per-group floor that the composition rule allows at this eps (eps / K^(1/q))."""
    q = core.dual_exponent(result.config.p)
    K = len(result.groups)
    return float(result.config.eps / (K ** (1 / q)) if np.isfinite(q) else result.config.eps)


def degeneracy_message(d: Degeneracy) -> str:
    """Why the release is degenerate, in numbers, and what to do about it ("" when it is not)."""
    if not d.degenerate:
        return ""
    parts = ["**This release is degenerate: do not publish it as is.**"]
    if d.starved:
        why = (
            f" {len(d.starved_zero_beta)} of them have β_k = 0: the surrogate of this task does not use "
            "them, so the allocation gives them nothing."
            if d.starved_zero_beta
            else ""
        )
        parts.append(
            f"{len(d.starved)} group(s) sit at the grid's minimum budget ε_k = {d.grid_min:g}, where their "
            f"values are released almost uniformly at random: {', '.join(d.starved)}.{why}"
        )
    if d.constant_columns:
        parts.append(
            f"In the privatised test split {len(d.constant_columns)} of {d.columns} columns are constant "
            f"({', '.join(d.constant_columns)}) and only {d.distinct_rows} of {d.rows} rows are distinct."
        )
    parts.append(
        "Fix: choose a task that keeps these attributes (record fidelity counts every attribute), or set a "
        "per-group budget floor. The surrogate losses and the gap to their lower bound below measure the "
        "task's loss only, so they can look good while groups are starved."
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
    return (
        f"{k} groups: the NMI graph at τ_group = {result.config.tau_group:g} on the {released} released "
        f"attributes{f' (the target {target!r} is not released)' if target else ''} of the fitting split "
        f"({len(fit.codes):,} of {len(encoded.codes):,} rows) {split} The Data page groups every column of "
        "the whole table, so its count can differ."
    )


#: Beginnings of the core's notes that the page says in its own words (:func:`grouping_caption`, the
#: tau_dim note of :func:`page_notes`); every other note (an LP that kept EM + remap) is shown as it is.
_RESTATED_NOTES = ("tau_dim capped at", "The NMI graph at tau_group")


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
    return notes + [n for n in result.notes if not n.startswith(_RESTATED_NOTES)]


def suggested_floor(result: DepHDPResult) -> float:
    """A round floor from :data:`FLOOR_OPTIONS` at most half the largest feasible one (0 when none fits)."""
    return max((v for v in FLOOR_OPTIONS if 0 < v <= largest_floor(result) / 2), default=0.0)


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


def log_ticks(lo: float, hi: float) -> dict:
    """Tick values and labels for a log axis: decades only, plus 2 and 5 when the range spans <= 2 decades
    (no "2 3 4 ... 9" clutter)."""
    d0, d1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    mant = (1.0, 2.0, 5.0) if d1 - d0 <= 2 else (1.0,)
    vals = [m * 10.0**d for d in range(d0, d1 + 1) for m in mant if lo <= m * 10.0**d <= hi]
    return {"tickmode": "array", "tickvals": vals, "ticktext": [f"{v:g}" for v in vals]}


#: The groups table's columns: score-frame key -> header shown (and exported) by the page.
_GROUP_COLUMNS = {
    "group": "group",
    "domain_size": "joint values",
    "radial_fit": "radial fit",
    "mse_likeness": "MSE-likeness",
    "mechanism": "mechanism",
    "beta": "weight β",
    "eps_k": "budget ε_k",
}


def groups_table(result: DepHDPResult) -> pd.DataFrame:
    """One row per group under readable headers, numbers exact (the page formats them for display with
    :func:`groups_column_config`; the table's own CSV export keeps every digit)."""
    return result.scores[list(_GROUP_COLUMNS)].rename(columns=_GROUP_COLUMNS)


def groups_column_config() -> dict[str, object]:
    """Display formats and tooltips of :func:`groups_table`: scores in [0, 1] to 3 decimals (so a score of
    3e-11 reads 0.000), weights and budgets to 3 significant figures."""
    num = st.column_config.NumberColumn
    return {
        "group": st.column_config.TextColumn(help="Attributes released together, by one mechanism."),
        "joint values": num(format="%d", help="Joint values |X_k| of the group's attributes."),
        "radial fit": num(
            format="%.3f",
            help="0-1: how well distance-based noise suits the group's loss (seed 000 Eq. 25-29).",
        ),
        "MSE-likeness": num(
            format="%.3f", help="0-1: how close the group's loss is to a squared error (seed 000 Eq. 25-29)."
        ),
        "mechanism": st.column_config.TextColumn(
            help="DPN: distance-based noise (exponential mechanism, remapped where it helps); OPT: the "
            "LP-optimal mechanism for this group's loss."
        ),
        "weight β": num(
            format="%.3g",
            help="The group's weight in the surrogate of the task loss (seed 000 Eq. 20); 0: the task does "
            "not use the group.",
        ),
        "budget ε_k": num(format="%.3g", help="The group's privacy budget (a point of the ε grid)."),
    }


#: The held-out evaluation's columns: table key -> header shown (and exported) by the page.
_EVAL_COLUMNS = {
    "eps": "ε",
    "method": "method",
    "mean": "task loss (mean)",
    "sd": "task loss (sd)",
    "lo": "mean − 1.96 sd",
    "hi": "mean + 1.96 sd",
    "surrogate": "surrogate loss",
    "marginal_tv": "marginal TV distance",
    "entropy_change": "marginal entropy change (nats)",
    "total_correlation_change": "total correlation change (nats)",
}


def evaluation_table(table: pd.DataFrame) -> pd.DataFrame:
    """The held-out evaluation under readable headers, numbers exact (display formats:
    :func:`evaluation_column_config`)."""
    return table[[c for c in _EVAL_COLUMNS if c in table]].rename(columns=_EVAL_COLUMNS)


def evaluation_column_config() -> dict[str, object]:
    """ε as given, every other number to 3 significant figures, with what each column measures."""
    num = st.column_config.NumberColumn
    sig = "%.3g"
    return {
        "ε": num(format="%g", help="Global privacy budget the methods were configured for."),
        "task loss (mean)": num(
            format=sig, help="Task loss on the privatised test records, mean over the draws."
        ),
        "task loss (sd)": num(format=sig, help="Standard deviation of the task loss over the draws."),
        "mean − 1.96 sd": num(format=sig, help="Lower end of the error bar in the chart."),
        "mean + 1.96 sd": num(format=sig, help="Upper end of the error bar in the chart."),
        "surrogate loss": num(format=sig, help="The loss the surrogate model predicted for this allocation."),
        "marginal TV distance": num(
            format=sig,
            help="Total-variation distance between true and privatised one-attribute distributions, "
            "averaged over attributes (0: identical, 1: disjoint).",
        ),
        "marginal entropy change (nats)": num(
            format=sig, help="Mean absolute change of the attributes' entropies."
        ),
        "total correlation change (nats)": num(
            format=sig, help="Absolute change of the dependence between attributes (total correlation)."
        ),
    }


def evaluation_caption(repetitions: int, test_rows: int) -> str:
    """What the evaluation chart's points and error bars are (:func:`mdp_core.evaluate_dephdp`)."""
    return (
        f"Each point: the task loss of the {test_rows:,} held-out test records privatised by that method, "
        f"mean over {repetitions} independent draws. Error bars: ± 1.96 standard deviations of the loss "
        "across the draws, the spread of a single release (not a confidence interval of the mean, which is "
        f"√{repetitions} times narrower)."
    )


def yardsticks_text(test_rows: int) -> str:
    """Why a near-zero gap to the lower bound can sit next to a large loss of utility."""
    return (
        "Two different yardsticks: the surrogate loss, its lower bound and the gap compare this allocation "
        "with the best one under the surrogate's own model of the task loss (fitted on the fitting split); "
        f"the release's utility is measured on the {test_rows:,} held-out test records, privatised once."
    )


def csv_download(problem: Degeneracy) -> tuple[str, str, str]:
    """Label, file name and caveat ("" when none) of the privatised-CSV download. A degenerate release stays
    downloadable for inspection (it is as private as any other), labelled so in the button, the file name
    and a caption above it."""
    if problem.degenerate:
        return (
            "Privatised test split (CSV, for inspection only)",
            "privatised_test_DEGENERATE_inspection_only.csv",
            DEGENERATE_CAVEAT,
        )
    return "Privatised test split (CSV)", "privatised_test.csv", ""


def scatter_figure(result: DepHDPResult) -> go.Figure:
    """000 Fig. 1: domain size vs adequacy score, both thresholds, points coloured by mechanism."""
    cfg = result.config
    score_col = "radial_fit" if cfg.score == "radial" else "mse_likeness"
    df = result.scores
    fig = go.Figure()
    for mech in ("OPT", "DPN"):
        sub = df[df.mechanism == mech]
        fig.add_trace(
            go.Scatter(
                x=sub.domain_size,
                y=sub[score_col],
                mode="markers",
                name=mech,
                text=sub.group,
                marker={"size": 12, "color": _COLORS[mech]},
                hovertemplate="%{text}<br>|X| = %{x}<br>score = %{y:.3f}<extra>" + mech + "</extra>",
            )
        )
    tau_dim = min(cfg.tau_dim, cfg.opt_max_domain)
    _vline(fig, tau_dim, f"τ_dim = {tau_dim}", log=True, line_dash="dash")
    fig.add_hline(y=cfg.tau_dpn, line_dash="dot", annotation_text=f"τ_dpn = {cfg.tau_dpn:g}")
    fig.update_layout(
        xaxis_title="joint domain size |X_k|",
        yaxis_title=score_col.replace("_", "-"),
        xaxis_type="log",
        xaxis_range=scatter_x_range(int(df.domain_size.max()), tau_dim),
        yaxis_range=[-0.05, 1.05],
        height=380,
        margin={"t": 30},
    )
    lo, hi = (10**v for v in scatter_x_range(int(df.domain_size.max()), tau_dim))
    fig.update_xaxes(**log_ticks(max(lo, 1.0), hi))
    return fig


def scatter_x_range(largest_domain: int, tau_dim: float) -> list[float]:
    """log10 x-range of the Fig. 1 scatter: from just below 1 to a bit beyond the largest group domain and
    tau_dim (plotly takes log-axis ranges in log10 units)."""
    hi = max(float(largest_domain), float(tau_dim), 2.0)
    return [math.log10(0.8), math.log10(hi * 1.6)]


def _vline(fig: go.Figure, x: float, text: str, *, log: bool, **line: object) -> None:
    """A vertical line with a label at the top. Shapes take data coordinates, but annotations on a log axis
    take log10 units (an annotation at x = 48 would stretch the axis to 1e48), hence the explicit label."""
    fig.add_vline(x=x, **line)
    fig.add_annotation(
        x=math.log10(x) if log else x,
        y=1.0,
        yref="paper",
        text=text,
        showarrow=False,
        xanchor="left",
        yanchor="bottom",
    )


#: Legend names of the allocation chart's bars, by the group's mechanism (the bar colours of _COLORS).
ALLOCATION_BARS = {
    "OPT": "DepHDP, LP-optimal mechanism (OPT)",
    "DPN": "DepHDP, distance-based noise (DPN)",
}


def allocation_figure(result: DepHDPResult) -> go.Figure:
    """DepHDP's budget per group (bars, one legend entry per mechanism colour) and ALC+RMP's (crosses), on
    a log axis so the grid's minimum budget (0.005 by default) still shows as a bar."""
    names = [" + ".join(g) for g in result.groups]
    eps = np.asarray(result.eps_used, dtype=float)
    fig = go.Figure()
    for mech, label in ALLOCATION_BARS.items():
        ks = [k for k, m in enumerate(result.selection) if m == mech]
        if ks:
            fig.add_trace(
                go.Bar(
                    x=[names[k] for k in ks],
                    y=eps[ks],
                    name=label,
                    marker_color=_COLORS[mech],
                    hovertemplate="%{x}<br>ε_k = %{y:.3g}<extra>" + mech + "</extra>",
                )
            )
    alc = np.asarray(result.baselines["ALC+RMP"].eps, dtype=float)
    fig.add_trace(
        go.Scatter(
            x=names,
            y=alc,
            mode="markers",
            name="ALC+RMP baseline",
            marker={"symbol": "x", "size": 10, "color": "black"},
            hovertemplate="%{x}<br>ε_k = %{y:.3g}<extra>ALC+RMP</extra>",
        )
    )
    lo = float(min(eps.min(), alc.min(), result.eps_grid[0]))
    hi = float(max(eps.max(), alc.max()))
    fig.update_layout(
        yaxis_title="group budget ε_k (log scale)",
        yaxis_type="log",
        yaxis_range=[math.log10(lo / 1.5), math.log10(hi * 1.5)],
        xaxis={"categoryorder": "array", "categoryarray": names},
        barmode="overlay",
        legend={"orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom"},
        height=380,
        margin={"t": 50},
    )
    fig.update_yaxes(**log_ticks(lo / 1.5, hi * 1.5))
    return fig


def curves_figure(result: DepHDPResult, k: int) -> go.Figure:
    """Loss-budget profiles of group k with the shifted envelopes of the chosen kind and eps_k marked."""
    pr = result.profiles[k]
    grid = result.eps_grid
    fig = go.Figure()
    for kind, label in (("DPN", "EM (DPN)"), ("RMP", "EM + remap"), ("OPT", "OPT (LP)")):
        if kind in pr.curves:
            fig.add_trace(
                go.Scatter(x=grid, y=pr.curves[kind], name=label, mode="lines+markers", marker={"size": 4})
            )
    kind = "OPT" if result.selection[k] == "OPT" else "CAL"
    lo, up = pr.envelopes[kind]
    fig.add_trace(go.Scatter(x=grid, y=lo, name="lower convex envelope", line={"dash": "dot"}))
    fig.add_trace(go.Scatter(x=grid, y=up, name="upper concave envelope", line={"dash": "dash"}))
    eps_k = float(result.eps_used[k])
    _vline(fig, eps_k, f"ε_k = {eps_k:.3g}", log=True, line_color="black")
    fig.update_layout(
        xaxis_type="log",
        xaxis_title="group budget ε_k",
        yaxis_title="expected marginal-entropy change (nats)"
        if result.task.population == "entropy"
        else "expected group loss L_k",
        height=380,
        margin={"t": 30},
    )
    fig.update_xaxes(**log_ticks(float(grid[0]), float(grid[-1])))
    return fig


def comparison_figure(table: pd.DataFrame, title: str = "") -> go.Figure:
    """Loss against the global eps per method: the surrogate's (column ``loss``) or the held-out
    evaluation's (``mean``, error bars ± 1.96 ``sd``)."""
    fig = go.Figure()
    for method in ("DepHDP", *BASELINES):
        sub = table[table.method == method]
        y = sub["loss"] if "loss" in sub else sub["mean"]
        err = None if "sd" not in sub else {"type": "data", "array": 1.96 * sub["sd"]}
        fig.add_trace(
            go.Scatter(
                x=sub.eps,
                y=y,
                name=method,
                mode="lines+markers",
                error_y=err,
                line={"color": _METHOD_COLORS[method], "width": 3 if method == "DepHDP" else 2},
            )
        )
    fig.update_layout(
        xaxis_title="global ε", yaxis_title="task loss", height=360, margin={"t": 40 if title else 30}
    )
    if title:
        fig.update_layout(title={"text": title, "font": {"size": 14}})
    if len(table):
        fig.update_xaxes(type="log", **log_ticks(float(table.eps.min()), float(table.eps.max())))
    return fig
