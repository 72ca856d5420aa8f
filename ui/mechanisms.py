"""Mechanism playground: domains and task losses from the loaded data, cached solves, plotly figures."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

import mdp_core as core
from ui.data import HASH_FUNCS

__all__ = [
    "MAX_DOMAIN",
    "MAX_OPT",
    "METHOD_COLORS",
    "TASKS",
    "Domain",
    "Playground",
    "cached_curves",
    "cached_playground",
    "curve_grid",
    "domain_of",
    "fig_curves",
    "fig_heatmaps",
    "task_loss",
    "verdict",
]

#: Task losses offered by the page (key -> label).
TASKS = {
    "squared": "Squared distance d(x, y)²",
    "mismatch": "0/1 mismatch 1[x ≠ y]",
    "threshold": "Threshold query: is the value above t?",
}
#: Largest joint domain the page builds; largest domain the page sends to the LP.
MAX_DOMAIN = 400
MAX_OPT = 100
METHOD_COLORS = {"EM": "#636efa", "EM+remap": "#00cc96", "OPT": "#ef553b"}


@dataclass(frozen=True)
class Domain:
    """Joint domain of the chosen attributes: labels, metric, empirical prior, per-record joint codes."""

    labels: tuple[str, ...]
    dist: np.ndarray
    prior: np.ndarray
    first_codes: np.ndarray  # code of the first attribute for every joint value (threshold query)


@dataclass(frozen=True)
class Playground:
    """The three channels at one eps with their expected losses and verified violations."""

    matrices: dict[str, np.ndarray]
    losses: dict[str, float]
    violations: dict[str, float]
    opt_message: str
    opt_seconds: float


def domain_of(encoded: core.Encoded, columns: Sequence[str], p: float) -> Domain:
    """Joint domain (C order) of ``columns`` with the l_p product metric and the empirical prior."""
    cols = list(columns)
    sizes = [encoded.domain_sizes[c] for c in cols]
    dist = core.product_distance([encoded.components[c] for c in cols], p)
    joint = core.joint_codes(encoded.codes[cols].to_numpy(), sizes)
    prior = np.bincount(joint, minlength=dist.shape[0]).astype(float)
    prior /= prior.sum()
    grids = np.unravel_index(np.arange(dist.shape[0]), sizes)
    labels = tuple(
        " · ".join(str(encoded.levels[c][g[i]]) for c, g in zip(cols, grids, strict=True))
        for i in range(dist.shape[0])
    )
    return Domain(labels=labels, dist=dist, prior=prior, first_codes=np.asarray(grids[0]))


def task_loss(domain: Domain, task: str, threshold: int = 0) -> np.ndarray:
    """Loss matrix ``loss[x, y]`` for a task key of :data:`TASKS` (threshold: first attribute's code > t)."""
    n = domain.dist.shape[0]
    if task == "squared":
        return domain.dist**2
    if task == "mismatch":
        return 1.0 - np.eye(n)
    if task == "threshold":
        above = domain.first_codes > threshold
        return (above[:, None] != above[None, :]).astype(float)
    raise core.DataError(f"task must be one of {list(TASKS)}, got {task!r}")


@st.cache_data(max_entries=32, show_spinner="Solving the three mechanisms…", hash_funcs=HASH_FUNCS)
def cached_playground(
    encoded: core.Encoded, columns: tuple[str, ...], p: float, task: str, threshold: int, eps: float
) -> Playground:
    domain = domain_of(encoded, columns, p)
    loss = task_loss(domain, task, threshold)
    em = core.exponential_mechanism(domain.dist, eps)
    matrices = {"EM": em, "EM+remap": core.bayesian_remap(em, domain.prior, loss)}
    message, seconds = "", 0.0
    if domain.dist.shape[0] <= MAX_OPT:
        res = core.optimal_mechanism(domain.prior, loss, domain.dist, eps, time_limit=60.0)
        message, seconds = res.message, res.seconds
        if res.success:
            matrices["OPT"] = res.matrix
    else:
        message = (
            f"OPT is offered up to {MAX_OPT} joint values here (this domain has {domain.dist.shape[0]})."
        )
    losses = {k: core.expected_loss(P, domain.prior, loss) for k, P in matrices.items()}
    violations = {k: core.mdp_violation(P, domain.dist, eps) for k, P in matrices.items()}
    return Playground(matrices, losses, violations, message, seconds)


def curve_grid(eps: float, points: int = 13) -> np.ndarray:
    """Log grid around the chosen eps (a factor 10 either way), including eps itself."""
    grid = np.geomspace(eps / 10, eps * 10, points)
    return np.unique(np.append(grid, eps))


@st.cache_data(max_entries=16, show_spinner=False, hash_funcs=HASH_FUNCS)
def cached_curves(
    encoded: core.Encoded,
    columns: tuple[str, ...],
    p: float,
    task: str,
    threshold: int,
    grid: tuple[float, ...],
    _progress: Callable[[float, str], None] | None = None,
) -> dict[str, np.ndarray]:
    domain = domain_of(encoded, columns, p)
    loss = task_loss(domain, task, threshold)
    methods = core.METHODS if domain.dist.shape[0] <= MAX_OPT else ("EM", "EM+remap")
    return core.loss_budget_curves(
        domain.prior, loss, domain.dist, np.asarray(grid), methods=methods, progress=_progress
    )


def verdict(play: Playground) -> str:
    """One sentence: does the optimised mechanism pay off against distance-based noise here?"""
    if "OPT" not in play.losses:
        return "Only distance-based noise is shown: " + play.opt_message
    best_dpn = min(play.losses["EM"], play.losses["EM+remap"])
    opt = play.losses["OPT"]
    if best_dpn <= 0:
        return "Every mechanism is loss-free at this budget."
    gain = 1 - opt / best_dpn
    if gain >= 0.05:
        return (
            f"OPT beats the best distance-based channel by {100 * gain:.1f} %: tailoring the channel to "
            "this task loss and this prior pays off."
        )
    return (
        f"OPT is only {100 * gain:.1f} % better than distance-based noise (with remapping): the loss follows "
        "the distance closely, so the cheap mechanism is good enough."
    )


def fig_heatmaps(play: Playground, labels: Sequence[str]) -> go.Figure:
    """The channels side by side: rows = true value, columns = released value, colour = probability."""
    names = list(play.matrices)
    fig = make_subplots(
        rows=1,
        cols=len(names),
        subplot_titles=[f"{k}: loss {play.losses[k]:.4g}" for k in names],
        horizontal_spacing=0.04,
    )
    text = list(labels)
    for i, name in enumerate(names, start=1):
        fig.add_trace(
            go.Heatmap(
                z=play.matrices[name],
                x=text,
                y=text,
                coloraxis="coloraxis",
                name=name,
                hovertemplate="true %{y}<br>released %{x}<br>P = %{z:.4f}<extra>" + name + "</extra>",
            ),
            row=1,
            col=i,
        )
        fig.update_yaxes(autorange="reversed", showticklabels=i == 1, row=1, col=i)
        fig.update_xaxes(title_text="released value", row=1, col=i)
    fig.update_yaxes(title_text="true value", row=1, col=1)
    fig.update_layout(
        coloraxis={"colorscale": "Viridis", "colorbar": {"title": "P"}},
        height=420,
        margin={"t": 50, "b": 40, "l": 40, "r": 20},
    )
    return fig


def fig_curves(grid: Sequence[float], curves: dict[str, np.ndarray], eps: float) -> go.Figure:
    """Expected loss versus eps (log x axis) per method, with the chosen eps marked."""
    fig = go.Figure()
    for name, values in curves.items():
        fig.add_trace(
            go.Scatter(
                x=list(grid),
                y=list(values),
                mode="lines+markers",
                name=name,
                line={"color": METHOD_COLORS.get(name)},
            )
        )
    finite = np.concatenate([np.asarray(v, dtype=float) for v in curves.values()])
    finite = finite[np.isfinite(finite)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    fig.add_trace(
        go.Scatter(
            x=[eps, eps],
            y=[lo, hi],
            mode="lines",
            name=f"current ε = {eps:g}",
            line={"dash": "dash", "color": "grey"},
        )
    )
    fig.update_xaxes(type="log", title_text="privacy budget ε")
    fig.update_yaxes(title_text="expected loss")
    fig.update_layout(height=380, margin={"t": 30, "b": 40, "l": 40, "r": 20}, legend={"orientation": "h"})
    return fig
