"""Figures for the data & dependencies page."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pandas as pd
import plotly.graph_objects as go
from scipy.cluster.hierarchy import leaves_list, linkage, optimal_leaf_ordering
from scipy.spatial.distance import squareform

__all__ = ["dependency_order", "graph_figure", "nmi_heatmap"]

_PALETTE = [
    "#2f6fb0",
    "#e07b39",
    "#3a9d5d",
    "#c23b4e",
    "#8c62b8",
    "#8a6d3b",
    "#d16fb0",
    "#6b6b6b",
    "#b8b02f",
    "#2fb0a8",
]


def dependency_order(nmi: pd.DataFrame) -> list[str]:
    """Attribute order that puts dependent attributes next to each other (average linkage on 1 - NMI,
    optimal leaf ordering)."""
    names = list(nmi.columns)
    if len(names) < 3:
        return names
    dist = squareform(np.clip(1.0 - nmi.to_numpy(), 0.0, 1.0), checks=False)
    tree = optimal_leaf_ordering(linkage(dist, method="average"), dist)
    return [names[i] for i in leaves_list(tree)]


def nmi_heatmap(nmi: pd.DataFrame) -> go.Figure:
    """Off-diagonal NMI (the diagonal, always 1, is blank so that weak dependencies stay visible)."""
    order = dependency_order(nmi)
    values = nmi.loc[order, order].to_numpy().copy()
    np.fill_diagonal(values, np.nan)
    top = float(np.nanmax(values)) if len(order) > 1 else 1.0
    fig = go.Figure(
        go.Heatmap(
            z=values,
            x=order,
            y=order,
            zmin=0,
            zmax=max(top, 0.05),
            colorscale="Blues",
            hovertemplate="%{y} – %{x}: NMI %{z:.3f}<extra></extra>",
            colorbar={"title": "NMI"},
        )
    )
    fig.update_layout(
        height=520,
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        yaxis_autorange="reversed",
        title="Normalised mutual information (ordered by dependency)",
    )
    return fig


def graph_figure(
    graph: nx.Graph, groups: list[tuple[str, ...]], domain_sizes: dict[str, int], *, seed: int = 0
) -> go.Figure:
    """Dependency graph: node colour = group, edge width = NMI, hover shows sizes and weights."""
    pos = nx.spring_layout(graph, seed=seed, weight="weight", k=1.6 / max(np.sqrt(len(graph)), 1))
    fig = go.Figure()
    for a, b, w in graph.edges(data="weight"):
        (x0, y0), (x1, y1) = pos[a], pos[b]
        fig.add_trace(
            go.Scatter(
                x=[x0, x1],
                y=[y0, y1],
                mode="lines",
                hoverinfo="skip",
                showlegend=False,
                line={"width": 1 + 12 * w, "color": "rgba(90,90,90,0.45)"},
            )
        )
        fig.add_trace(
            go.Scatter(
                x=[(x0 + x1) / 2],
                y=[(y0 + y1) / 2],
                mode="markers",
                showlegend=False,
                marker={"size": 10, "opacity": 0},
                hovertemplate=f"{a} – {b}: NMI {w:.3f}<extra></extra>",
            )
        )
    for k, group in enumerate(groups):
        colour = _PALETTE[k % len(_PALETTE)]
        fig.add_trace(
            go.Scatter(
                x=[pos[a][0] for a in group],
                y=[pos[a][1] for a in group],
                mode="markers+text",
                text=list(group),
                textposition="top center",
                name=f"G{k + 1}",
                marker={
                    "size": [14 + 3 * np.log2(domain_sizes[a]) for a in group],
                    "color": colour,
                    "line": {"width": 1, "color": "white"},
                },
                hovertemplate=[
                    f"{a}<br>{domain_sizes[a]} levels<br>group G{k + 1}<extra></extra>" for a in group
                ],
            )
        )
    fig.update_layout(
        height=520,
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        title="Dependency graph",
        xaxis={"visible": False},
        yaxis={"visible": False},
        legend_title="group",
    )
    return fig
