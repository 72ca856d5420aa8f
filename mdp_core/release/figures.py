"""The report's figures (plotly): dependency graph, budget split, utility against non-private, the "which
eps" frontier, leakage per attribute and what each released column keeps. Shared by the HTML report
(:mod:`mdp_core.release.report`) and the pages."""

from __future__ import annotations

from typing import Any

import numpy as np

from mdp_core._figures import labelled_vline, log_axis
from mdp_core.data import nmi_matrix

from .audit import mechanism_name
from .decide import Decision
from .outcome import ScenarioOutcome

__all__ = ["METHOD_COLORS", "frontier_figure", "information_figure", "report_figures"]

#: One colour per method (DepHDP and the four baselines), shared by the report and the pages.
METHOD_COLORS = {
    "DepHDP": "#d62728",
    "SPL+DPN": "#9ecae1",
    "SPL+RMP": "#3182bd",
    "ALC+DPN": "#a1d99b",
    "ALC+RMP": "#31a354",
}


def _dependency_figure(o: ScenarioOutcome) -> Any:
    import plotly.graph_objects as go

    attrs = list(o.result.mechanism.attributes)
    nmi = nmi_matrix(o.encoded.codes[attrs])
    n = len(attrs)
    angle = 2 * np.pi * np.arange(n) / max(n, 1)
    x, y = np.cos(angle), np.sin(angle)
    tau = float(o.result.config.tau_group)
    group_of = {a: k for k, g in enumerate(o.result.mechanism.groups) for a in g}
    fig = go.Figure()
    for i in range(n):
        for j in range(i + 1, n):
            w = float(nmi.iloc[i, j])
            if w > tau:
                fig.add_trace(
                    go.Scatter(
                        x=[x[i], x[j]],
                        y=[y[i], y[j]],
                        mode="lines",
                        hoverinfo="text",
                        text=f"{attrs[i]} – {attrs[j]}: NMI {w:.2f}",
                        line={"width": 1 + 8 * w, "color": "#888"},
                        showlegend=False,
                    )
                )
    fig.add_trace(
        go.Scatter(
            x=x,
            y=y,
            mode="markers+text",
            text=attrs,
            textposition="top center",
            marker={"size": 16, "color": [group_of[a] for a in attrs], "colorscale": "Turbo"},
            hovertext=[f"{a}: group {group_of[a] + 1}" for a in attrs],
            hoverinfo="text",
            showlegend=False,
        )
    )
    fig.update_layout(
        title=f"Dependencies (edges: NMI > τ_group = {tau:g}; colour: group)",
        xaxis={"visible": False},
        yaxis={"visible": False, "scaleanchor": "x"},
        height=480,
    )
    return fig


def _budget_figure(o: ScenarioOutcome) -> Any:
    import plotly.graph_objects as go

    mech = o.result.mechanism
    names = [" + ".join(g) for g in mech.groups]
    kinds = [mechanism_name(k) for k in mech.kinds]
    labels = [f"{e:.3g} ({k})" for e, k in zip(mech.eps, kinds, strict=True)]
    fig = go.Figure(
        go.Bar(
            x=names,
            y=list(mech.eps),
            marker_color=["#d62728" if k == "OPT" else "#1f77b4" for k in kinds],
            text=labels,
            # above the bar: inside, a bar of a small budget (0.00634 on a log axis) squeezed its label
            # into an unreadable sliver; the hover repeats it
            textposition="outside",
            cliponaxis=False,
            customdata=labels,
            hovertemplate="%{x}: ε_k %{customdata}<extra></extra>",
        )
    )
    fig.add_hline(y=float(o.result.eps_grid[0]), line_dash="dot", annotation_text="grid minimum")
    fig.update_layout(
        title="Budget per group ε_k (red: OPT, the LP optimum; blue: DPN, distance-based noise)",
        yaxis_type="log",
        yaxis_title="ε_k",
        height=420,
    )
    return fig


def _utility_figure(o: ScenarioOutcome) -> Any:
    import plotly.graph_objects as go

    u = o.utility
    fig = go.Figure(
        go.Bar(
            x=["non-private", f"{o.result.method} ε = {o.result.config.eps:g}"],
            y=[u["reference"], u["mean"]],
            error_y={
                "type": "data",
                "array": [0.0, u["hi"] - u["mean"]],
                "arrayminus": [0.0, u["mean"] - u["lo"]],
            },
            marker_color=["#999", "#d62728"],
        )
    )
    title = f"{u['metric']} on the held-out split (mean, 95 % band over {u['repetitions']} runs)"
    fig.update_layout(title=title, yaxis_title=u["metric"], height=380)
    return fig


def frontier_figure(d: Decision) -> Any:
    """Utility vs eps per method (mean and 95 % CI), the non-private line, the target and the answer."""
    import plotly.graph_objects as go

    fr = d.frontier
    fig = go.Figure()
    for method, part in fr.groupby("method", sort=False):
        part = part.sort_values("eps")
        fig.add_trace(
            go.Scatter(
                x=part["eps"],
                y=part["utility_mean"],
                mode="lines+markers",
                name=str(method),
                line={"color": METHOD_COLORS.get(str(method), "#555")},
                error_y={
                    "type": "data",
                    "array": part["utility_ci_hi"] - part["utility_mean"],
                    "arrayminus": part["utility_mean"] - part["utility_ci_lo"],
                },
            )
        )
    fig.add_hline(y=d.reference, line_dash="dot", annotation_text="non-private")
    fig.add_hline(y=d.target_value, line_dash="dash", line_color="#2a7", annotation_text="target")
    if d.majority is not None:  # an accuracy at or below it says nothing
        fig.add_hline(y=d.majority, line_dash="dot", line_color="#999", annotation_text="majority label")
    # (labelled_vline: add_vline's own label takes log10 x on this log axis and stretched it to 10^eps)
    if d.uninformative:  # met, but by a target the majority label meets too: no answer to draw in green
        text = f"ε = {d.choice.eps:.3g}: target ≤ majority label"
        labelled_vline(fig, d.choice.eps, text, log=True, line={"dash": "dot", "color": "#999"})
    elif d.choice.met:
        labelled_vline(fig, d.choice.eps, f"ε = {d.choice.eps:.3g}", log=True, line={"color": "#2a7"})
    fig.update_layout(
        title=f"Frontier: {d.metric} vs ε (mean and 95 % CI)",
        xaxis={"title": "ε", **log_axis(float(fr["eps"].min()), float(fr["eps"].max()))},
        yaxis_title=d.metric,
        height=440,
    )
    return fig


def _leakage_figure(o: ScenarioOutcome) -> Any:
    import plotly.graph_objects as go

    lk = o.leakage
    fig = go.Figure(
        go.Bar(
            x=lk["attribute"],
            y=lk["leakage_nats"],
            customdata=lk["odds_factor"],
            hovertemplate="%{x}: %{y:.3f} nats (odds × %{customdata:.3g})<extra></extra>",
        )
    )
    fig.update_layout(
        title="Leakage bound per attribute (own channel + correlated attributes), nats",
        yaxis_title="nats",
        height=380,
    )
    return fig


def information_figure(o: ScenarioOutcome) -> Any:
    """Per released column, the share of its information the release keeps (:func:`information_kept`)."""
    import plotly.graph_objects as go

    lk = o.leakage
    fig = go.Figure(
        go.Bar(
            x=lk["attribute"].tolist(),
            y=(100.0 * lk["information_kept"]).tolist(),  # plain numbers in the figure's JSON, not base64
            customdata=np.column_stack([lk["group"], lk["eps_group"]]),
            hovertemplate="%{x}: keeps %{y:.1f} % (group %{customdata[0]}, ε %{customdata[1]:.3g})"
            "<extra></extra>",
            marker_color="#1f77b4",
        )
    )
    fig.update_layout(
        title="What the release keeps of each column: I(true; released) / H(true), %",
        yaxis={"title": "% of the column's information", "range": [0, 100]},
        height=380,
    )
    return fig


def report_figures(outcome: ScenarioOutcome, decision: Decision | None = None) -> dict[str, Any]:
    """The report's plotly figures by name (also used by the page)."""
    figs = {
        "dependencies": _dependency_figure(outcome),
        "budget": _budget_figure(outcome),
        "utility": _utility_figure(outcome),
        "leakage": _leakage_figure(outcome),
        "information": information_figure(outcome),
    }
    if decision is not None:
        figs["frontier"] = frontier_figure(decision)
    return figs
