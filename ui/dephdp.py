"""DepHDP page glue: cached runs, config JSON round trip, and the plotly figures."""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import replace

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

import mdp_core as core
from mdp_core import BASELINES, DepHDPConfig, DepHDPResult, run_dephdp
from ui.data import HASH_FUNCS

__all__ = [
    "COMPARISON_EPS",
    "P_OPTIONS",
    "allocation_figure",
    "comparison",
    "comparison_figure",
    "config_from_json",
    "config_to_json",
    "curves_figure",
    "evaluation",
    "fit_test_split",
    "groups_table",
    "privatized_csv",
    "result_for",
    "scatter_figure",
    "scatter_x_range",
    "surrogate_metrics",
    "surrogate_note",
]

P_OPTIONS = ["1", "1.5", "2", "3", "4", "inf"]
COMPARISON_EPS = (0.5, 1.0, 2.0, 5.0, 10.0)
_COLORS = {"OPT": "#d62728", "DPN": "#1f77b4"}
_METHOD_COLORS = {
    "DepHDP": "#d62728",
    "SPL+DPN": "#9ecae1",
    "SPL+RMP": "#3182bd",
    "ALC+DPN": "#a1d99b",
    "ALC+RMP": "#31a354",
}


@st.cache_resource(max_entries=8, hash_funcs=HASH_FUNCS, show_spinner=False)
def fit_test_split(encoded: core.Encoded, seed: int) -> tuple[core.Encoded, core.Encoded]:
    """The 62.5 / 37.5 fitting / test split of 000 Sec. IV-A (seeded)."""
    return core.split_encoded(encoded, 0.625, np.random.default_rng(seed))


def result_for(encoded: core.Encoded, config: DepHDPConfig, progress: object = None) -> DepHDPResult:
    """``run_dephdp``; group profiles, groups and surrogate are cached inside the core by signature, so a
    change of eps, tau_dpn, tau_dim or the score only re-allocates (no Streamlit cache: the progress bar
    must not be replayed)."""
    return run_dephdp(encoded, config, progress=progress)  # type: ignore[arg-type]


def comparison(encoded: core.Encoded, config: DepHDPConfig) -> pd.DataFrame:
    """Surrogate loss of DepHDP and baselines at :data:`COMPARISON_EPS` (cached without ``config.eps``)."""
    return _comparison(encoded, replace(config, eps=1.0))


@st.cache_data(max_entries=32, hash_funcs=HASH_FUNCS, show_spinner=False)
def _comparison(encoded: core.Encoded, config: DepHDPConfig) -> pd.DataFrame:
    rows = []
    for eps in COMPARISON_EPS:
        res = result_for(encoded, replace(config, eps=eps))
        rows.append({"eps": eps, "method": "DepHDP", "loss": res.value})
        rows += [{"eps": eps, "method": n, "loss": b.value} for n, b in res.baselines.items()]
    return pd.DataFrame(rows)


@st.cache_data(max_entries=8, hash_funcs=HASH_FUNCS, show_spinner=False)
def evaluation(
    encoded: core.Encoded, config: DepHDPConfig, repetitions: int, seed: int, _progress: object = None
) -> pd.DataFrame:
    """Held-out evaluation table (000 Sec. IV-A) at eps in {1, 2, 5, 10}."""
    res = core.evaluate_dephdp(
        encoded, config, eps_values=(1, 2, 5, 10), repetitions=repetitions, seed=seed, progress=_progress
    )  # type: ignore[arg-type]
    return res.table


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


def privatized_csv(result: DepHDPResult, test: core.Encoded, seed: int) -> bytes:
    """The test split privatised once by the composed DepHDP mechanism, decoded to labels / bin centres."""
    codes = result.privatize(test.codes, np.random.default_rng(seed))
    return test.decode(codes).to_csv(index=False).encode()


def surrogate_metrics(result: DepHDPResult) -> tuple[str, str, str]:
    """Held-out R², training R² and pair count as display strings ("exact" when no fit was needed)."""
    s = result.surrogate
    if s.pairs == 0:
        return "exact", "exact", "none needed"
    return f"{s.r2_heldout:.3f}", f"{s.r2_train:.3f}", f"{s.pairs:,}"


def surrogate_note(result: DepHDPResult) -> str:
    """A plain-language reading of the surrogate fit, shown next to its R² ("" when nothing to say)."""
    s = result.surrogate
    if s.pairs == 0:
        return (
            "Entropy task: the marginal-entropy changes of disjoint groups add up, so the surrogate is exact "
            "(every β_k = 1) and needs no calibration pairs."
        )
    zero = sum(b == 0.0 for b in s.betas)
    if s.r2_heldout >= 0.5 and zero == 0:
        return ""
    return (
        f"Low fit by nature of the task, not a fitting error: held-out R² = {s.r2_heldout:.2f}, and "
        f"{zero} of {len(s.betas)} groups get β_k = 0. This task's loss is not a sum of per-group losses "
        "(perturbing several groups shifts the same model score in opposite directions, which cancel), so "
        "a linear surrogate with β_k ≥ 0 (000 Eq. 20) explains little of it. Groups with β_k = 0 count for "
        "nothing in the allocation and receive the smallest budget: trust the held-out evaluation below "
        "more than the surrogate losses."
    )


def groups_table(result: DepHDPResult) -> pd.DataFrame:
    return result.scores[["group", "domain_size", "radial_fit", "mse_likeness", "mechanism", "beta", "eps_k"]]


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
        xaxis_dtick="D2",
        yaxis_range=[-0.05, 1.05],
        height=380,
        margin={"t": 30},
    )
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


def allocation_figure(result: DepHDPResult) -> go.Figure:
    names = [" + ".join(g) for g in result.groups]
    fig = go.Figure(
        go.Bar(x=names, y=result.eps_used, name="DepHDP", marker_color=[_COLORS[m] for m in result.selection])
    )
    alc = result.baselines["ALC+RMP"]
    fig.add_trace(
        go.Scatter(x=names, y=alc.eps, mode="markers", name="ALC+RMP", marker={"symbol": "x", "size": 10})
    )
    fig.update_layout(yaxis_title="ε_k", height=340, margin={"t": 30})
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
    fig.add_trace(go.Scatter(x=grid, y=lo, name="lower envelope (GCM, shifted)", line={"dash": "dot"}))
    fig.add_trace(go.Scatter(x=grid, y=up, name="upper envelope (LCM, shifted)", line={"dash": "dash"}))
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
    return fig


def comparison_figure(table: pd.DataFrame) -> go.Figure:
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
    fig.update_layout(xaxis_title="global ε", yaxis_title="task loss", height=360, margin={"t": 30})
    return fig
