"""How the DepHDP page shows a result: its tables (readable headers, display formats) and plotly figures."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

import mdp_core as core
from mdp_core import BASELINES, DepHDPResult
from mdp_core._figures import labelled_vline, log_axis
from mdp_core._text import listed
from ui.dephdp import DEGENERATE_CAVEAT, Degeneracy

__all__ = [
    "ALLOCATION_BARS",
    "allocation_figure",
    "coinciding_note",
    "comparison_figure",
    "csv_download",
    "curves_figure",
    "evaluation_caption",
    "evaluation_column_config",
    "evaluation_table",
    "groups_column_config",
    "groups_table",
    "scatter_figure",
    "scatter_x_range",
    "yardsticks_text",
]

_COLORS = {"OPT": "#d62728", "DPN": "#1f77b4"}
_METHOD_COLORS = core.METHOD_COLORS


def groups_table(result: DepHDPResult) -> pd.DataFrame:
    """One row per group under readable headers, numbers exact (the page formats them for display with
    :func:`groups_column_config`; the table's own CSV export keeps every digit)."""
    return result.scores[list(core.SCORE_HEADERS)].rename(columns=core.SCORE_HEADERS)


def groups_column_config() -> dict[str, object]:
    """Display formats and tooltips of :func:`groups_table`: scores in [0, 1] to 3 decimals (so a score of
    3e-11 reads 0.000), weights and budgets to 3 significant figures."""
    num = st.column_config.NumberColumn
    return {
        "group": st.column_config.TextColumn(help="Attributes released together, by one mechanism."),
        "joint values": num(format="%d", help="Joint values |X_k| of the group's attributes."),
        "radial fit": num(
            format="%.3f",
            help="0-1: how well distance-based noise suits the group's loss (the DepHDP paper, Eq. 25-29).",
        ),
        "MSE-likeness": num(
            format="%.3f",
            help="0-1: how close the group's loss is to a squared error (the DepHDP paper, Eq. 25-29).",
        ),
        "mechanism": st.column_config.TextColumn(
            help="DPN: distance-based noise (exponential mechanism, remapped where it helps); OPT: the "
            "LP-optimal mechanism for this group's loss."
        ),
        "weight β": num(
            format="%.3g",
            help="The group's weight in the surrogate of the task loss (the DepHDP paper, Eq. 20); 0: the "
            "task does not use the group.",
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
    labelled_vline(fig, tau_dim, f"τ_dim = {tau_dim}", log=True, line={"dash": "dash"})
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
    fig.update_xaxes(**log_axis(max(lo, 1.0), hi))
    return fig


def scatter_x_range(largest_domain: int, tau_dim: float) -> list[float]:
    """log10 x-range of the Fig. 1 scatter: from just below 1 to a bit beyond the largest group domain and
    tau_dim (plotly takes log-axis ranges in log10 units)."""
    hi = max(float(largest_domain), float(tau_dim), 2.0)
    return [math.log10(0.8), math.log10(hi * 1.6)]


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
    fig.update_yaxes(**log_axis(lo / 1.5, hi * 1.5))
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
    fig.add_trace(go.Scatter(x=grid, y=up, name="upper convex envelope", line={"dash": "dash"}))
    eps_k = float(result.eps_used[k])
    labelled_vline(fig, eps_k, f"ε_k = {eps_k:.3g}", log=True, line={"color": "black"})
    fig.update_layout(
        xaxis_type="log",
        xaxis_title="group budget ε_k",
        yaxis_title="expected marginal-entropy change (nats)"
        if result.task.population == "entropy"
        else "expected group loss L_k",
        height=380,
        margin={"t": 30},
    )
    fig.update_xaxes(**log_axis(float(grid[0]), float(grid[-1])))
    return fig


def _loss_column(table: pd.DataFrame) -> str:
    """The loss a comparison table holds: the surrogate's (``loss``) or the held-out mean (``mean``)."""
    return "loss" if "loss" in table else "mean"


def coinciding_note(table: pd.DataFrame) -> str:
    """Which baselines have DepHDP's numbers at every eps shown ("" when none): their lines lie on top of
    each other."""
    column = _loss_column(table)
    ours = table[table.method == "DepHDP"].set_index("eps")[column]
    same = []
    for method in BASELINES:
        theirs = table[table.method == method].set_index("eps")[column]
        if len(ours) and theirs.index.equals(ours.index) and np.allclose(theirs, ours, rtol=1e-9, atol=0.0):
            same.append(method)
    if not same:
        return ""
    return (
        f"DepHDP and {listed(same)} have the same numbers at every ε shown (DepHDP chose the same budgets "
        "and mechanisms): DepHDP's dotted line with open diamonds lies on top of theirs."
    )


def comparison_figure(table: pd.DataFrame, title: str = "") -> go.Figure:
    """Loss against the global eps per method: the surrogate's (column ``loss``) or the held-out
    evaluation's (``mean``, error bars ± 1.96 ``sd``). DepHDP is drawn last, so a baseline with the same
    numbers cannot hide it (audit: on adult its line lay under ALC+RMP's), and listed first."""
    fig = go.Figure()
    for rank, method in enumerate((*BASELINES, "DepHDP")):
        sub = table[table.method == method]
        y = sub[_loss_column(sub)]
        err = None if "sd" not in sub else {"type": "data", "array": 1.96 * sub["sd"]}
        ours = method == "DepHDP"
        fig.add_trace(
            go.Scatter(
                x=sub.eps,
                y=y,
                name=method,
                mode="lines+markers",
                error_y=err,
                legendrank=1 if ours else 2 + rank,
                marker={"symbol": "diamond-open" if ours else "circle", "size": 11 if ours else 6},
                line={
                    "color": _METHOD_COLORS[method],
                    "width": 3 if ours else 2,
                    "dash": "dot" if ours else None,
                },
            )
        )
    fig.update_layout(
        xaxis_title="global ε", yaxis_title="task loss", height=360, margin={"t": 40 if title else 30}
    )
    if title:
        fig.update_layout(title={"text": title, "font": {"size": 14}})
    if len(table):
        fig.update_xaxes(**log_axis(float(table.eps.min()), float(table.eps.max())))
    return fig
