"""Mechanism playground: domains and task losses from the loaded data, cached solves, plotly figures."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

import mdp_core as core
from mdp_core._figures import log_axis
from mdp_core._validation import Progress
from ui.data import level_labels
from ui.jobs import builder
from ui.markdown import md
from ui.store import store

__all__ = [
    "AUTO_CURVES",
    "AUTO_OPT",
    "CONSTANT_TV",
    "MAX_DOMAIN",
    "MAX_OPT",
    "METHOD_COLORS",
    "OPT_SECONDS",
    "OPT_WAIT_SECONDS",
    "TASKS",
    "Domain",
    "Playground",
    "Selection",
    "budget_note",
    "constant_channels",
    "curve_grid",
    "curves",
    "curves_key",
    "domain_of",
    "fig_curves",
    "fig_heatmaps",
    "loss_text",
    "lp_caption",
    "missing_points",
    "opt_key",
    "playground",
    "ready_curves",
    "ready_playground",
    "request_curves",
    "request_opt",
    "task_loss",
    "verdict",
    "verified_text",
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
#: OPT is solved on every rerun up to this many joint values (measured <= 0.3 s on heart); above, on request.
AUTO_OPT = 24
#: Loss-budget curves (13 LPs) are on by default up to this many joint values.
AUTO_CURVES = 16
#: Time limit of one playground LP, and of all LPs of one loss-budget curve (seconds): a rerun stays < 60 s.
OPT_SECONDS = 40.0
#: The run that starts an LP job (on the background builder) shows its progress this long (seconds): most
#: playground LPs on heart take well under a second (stop 53: all 50 two-attribute cases at l_2, eps 2, in
#: <= 0.2 s) and land in that run; the slowest found (12.5 s) is polled, with a stop button.
OPT_WAIT_SECONDS = 2.0
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
    shown = [level_labels(encoded.levels[c]) for c in cols]
    labels = tuple(
        " · ".join(names[g[i]] for names, g in zip(shown, grids, strict=True)) for i in range(dist.shape[0])
    )
    return Domain(labels=labels, dist=dist, prior=prior, first_codes=np.asarray(grids[0]))


def budget_note(domain: Domain, eps: float) -> str:
    """What ε means for the chosen values, named: the closest and the farthest pair of distinct values with
    their distance and the largest odds factor e^(ε·d) between them. ("Two records 1 apart" read as one
    unit of the attribute; d is normalised to the span of each attribute's released values.)"""
    dist = domain.dist
    if dist.shape[0] < 2:
        return core.budget_sentence(eps)
    off = ~np.eye(dist.shape[0], dtype=bool)
    near = np.unravel_index(np.argmin(np.where(off, dist, np.inf)), dist.shape)
    far = np.unravel_index(np.argmax(np.where(off, dist, -np.inf)), dist.shape)

    def pair(ij: tuple[np.intp, ...]) -> tuple[str, float]:
        d = float(dist[ij])
        return f"{md(domain.labels[ij[0]])} and {md(domain.labels[ij[1]])} (d = {d:.3g})", d

    near_text, d_near = pair(near)
    far_text, d_far = pair(far)
    text = (
        f"Closest values {near_text}: whatever is released, an attacker's odds between them move by at most "
        f"a factor e^(ε·d) = {core.odds_factor(eps, d_near):,.3g}"
    )
    if d_far > d_near:
        text += f"; farthest, {far_text}: at most {core.odds_factor(eps, d_far):,.3g}"
    return text + (
        ". d is normalised per attribute: 1 is another category, or the distance between a numeric "
        "column's lowest and highest released value (its outer bin centres, which lie half a bin inside its "
        "range); values in one bin are released alike."
    )


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


class Selection(NamedTuple):
    """What the page poses: attributes of the loaded table, the metric exponent and the task loss."""

    encoded: core.Encoded
    columns: tuple[str, ...]
    p: float
    task: str
    threshold: int = 0

    def key(self) -> tuple:
        """The selection in a store key (the table by its fingerprint)."""
        return (self.encoded.fingerprint, self.columns, float(self.p), self.task, int(self.threshold))

    def domain_and_loss(self) -> tuple[Domain, np.ndarray]:
        domain = domain_of(self.encoded, self.columns, self.p)
        return domain, task_loss(domain, self.task, self.threshold)


def _play_key(sel: Selection, eps: float, with_opt: bool) -> tuple:
    return ("mech.play", *sel.key(), float(eps), with_opt)


def opt_key(sel: Selection, eps: float) -> tuple:
    """Store and job key of the channels with the LP optimum (:func:`request_opt`)."""
    return _play_key(sel, eps, True)


def ready_playground(sel: Selection, eps: float, with_opt: bool) -> Playground | None:
    """The channels computed before (any session), else None."""
    return store().get(_play_key(sel, eps, with_opt))


def _channels(sel: Selection, eps: float, with_opt: bool, progress: Progress = None) -> Playground:
    domain, loss = sel.domain_and_loss()
    em = core.exponential_mechanism(domain.dist, eps)
    matrices = {"EM": em, "EM+remap": core.bayesian_remap(em, domain.prior, loss)}
    n, message, seconds = domain.dist.shape[0], "", 0.0
    if n > MAX_OPT:
        message = f"OPT is offered up to {MAX_OPT} joint values here (this domain has {n})."
    elif not with_opt:
        message = f"OPT for {n} joint values is solved on request (the button above)."
    else:
        res = core.optimal_mechanism(
            domain.prior, loss, domain.dist, eps, time_limit=OPT_SECONDS, progress=progress
        )
        message, seconds = res.message, res.seconds
        if res.success:
            matrices["OPT"] = res.matrix
        else:
            message = f"The LP did not finish ({res.message}); showing distance-based channels only."
    losses = {k: core.expected_loss(P, domain.prior, loss) for k, P in matrices.items()}
    violations = {k: core.mdp_violation(P, domain.dist, eps) for k, P in matrices.items()}
    return Playground(matrices, losses, violations, message, seconds)


def playground(sel: Selection, eps: float, *, with_opt: bool) -> Playground:
    """EM, EM + remap and (``with_opt`` and at most :data:`MAX_OPT` joint values) the LP optimum at ``eps``,
    each verified, computed in this run. EM and remapping take milliseconds; the page solves the LP here
    only up to :data:`AUTO_OPT` values, above on request (:func:`request_opt`). Kept in the app's result
    store."""
    return store().get_or_compute(_play_key(sel, eps, with_opt), lambda: _channels(sel, eps, with_opt))


def request_opt(sel: Selection, eps: float) -> Future[Playground]:
    """The channels with the LP optimum (time limit :data:`OPT_SECONDS`), computed on the builder's long-job
    threads: the page polls :func:`opt_key`'s job and can stop it between two master solves."""
    return builder().request(
        opt_key(sel, eps), lambda progress: _channels(sel, eps, True, progress), slow=True
    )


def curve_grid(eps: float, points: int = 13) -> np.ndarray:
    """Log grid around the chosen eps (a factor 10 either way), including eps itself."""
    grid = np.geomspace(eps / 10, eps * 10, points)
    return np.unique(np.append(grid[~np.isclose(grid, eps)], eps))  # eps once (geomspace's is 1.9999…)


def curves_key(sel: Selection, grid: tuple[float, ...]) -> tuple:
    """Store and job key of the loss-budget curves (:func:`curves`, :func:`request_curves`)."""
    return ("mech.curves", *sel.key(), tuple(grid))


def ready_curves(sel: Selection, grid: tuple[float, ...]) -> dict[str, np.ndarray] | None:
    """Loss-budget curves computed before (any session), else None."""
    return store().get(curves_key(sel, grid))


def _curve_values(
    sel: Selection, grid: tuple[float, ...], progress: Progress = None
) -> dict[str, np.ndarray]:
    domain, loss = sel.domain_and_loss()
    methods = core.METHODS if domain.dist.shape[0] <= MAX_OPT else ("EM", "EM+remap")
    return core.loss_budget_curves(
        domain.prior,
        loss,
        domain.dist,
        np.asarray(grid),
        methods=methods,
        progress=progress,
        time_limit=OPT_SECONDS,
    )


def curves(
    sel: Selection, grid: tuple[float, ...], progress: Callable[[float, str], None] | None = None
) -> dict[str, np.ndarray]:
    """Expected loss along ``grid`` for EM, EM + remap and (domains up to :data:`MAX_OPT`) the LP optimum,
    computed in this run (the page does so up to :data:`AUTO_CURVES` joint values; above, on request with
    :func:`request_curves`).

    A plain function: the progress callback may drive a bar drawn by the page; the result is kept in the
    app's locked result store (never in ``st.cache_data``, which would replay the bar on a cache hit)."""
    return store().get_or_compute(curves_key(sel, grid), lambda: _curve_values(sel, grid, progress))


def request_curves(sel: Selection, grid: tuple[float, ...]) -> Future[dict[str, np.ndarray]]:
    """The curves of :func:`curves` (all LPs within :data:`OPT_SECONDS`), computed on the builder's long-job
    threads: the page polls :func:`curves_key`'s job and can stop it between two master solves."""
    return builder().request(
        curves_key(sel, grid), lambda progress: _curve_values(sel, grid, progress), slow=True
    )


def loss_text(loss: float) -> str:
    """An expected loss with four significant digits, trailing zeros kept (0.1220 beside 0.04691)."""
    return f"{loss:#.4g}"


def lp_caption(play: Playground) -> tuple[str, str]:
    """The LP's result in plain words (Optimal, or how near) with its time, and the solver's details."""
    head = play.opt_message.split(" (", 1)[0]
    took = "< 0.01 s" if play.opt_seconds < 0.005 else f"{play.opt_seconds:.2f} s"
    return f"LP optimum: {head}, solved in {took}.", play.opt_message


def missing_points(grid: Sequence[float], curves: dict[str, np.ndarray]) -> str:
    """Which budgets of a curve have no point (an LP out of its time), in words; empty when none."""
    gaps = {
        name: [g for g, v in zip(grid, values, strict=True) if not np.isfinite(v)]
        for name, values in curves.items()
    }
    said = [f"{name} at ε = {', '.join(f'{g:.3g}' for g in at)}" for name, at in gaps.items() if at]
    return f"Not solved in the time limit, so left out: {'; '.join(said)}." if said else ""


def verified_text(violation: float) -> str:
    """The verification result in words: never a negative "violation"."""
    if violation <= core.VIOLATION_TOL:
        return "verified ε-mDP: every probability ratio stays within e^(ε·d)"
    return f"NOT verified: a ratio exceeds e^(ε·d) by {violation:.2e} in log terms"


#: Largest total-variation distance between two rows of a channel that still counts as one release for
#: every true value (a channel that ignores its input).
CONSTANT_TV = 1e-6


def constant_channels(play: Playground) -> list[str]:
    """The channels whose released value does not depend on the true value (all rows equal): at a small
    eps remapping and the LP optimum may release the prior's best guess for every record."""
    return [
        name for name, P in play.matrices.items() if 0.5 * np.abs(P - P[0]).sum(axis=1).max() <= CONSTANT_TV
    ]


def verdict(play: Playground) -> str:
    """One sentence: does the optimised mechanism pay off against distance-based noise here? First, in
    plain words, which channels release the same value whatever the true value."""
    constant = [n for n in constant_channels(play) if n != "EM"]  # EM's rows differ at every eps > 0
    said = ""
    if constant:
        said = (
            f"At this ε, {' and '.join(constant)} {'release' if len(constant) > 1 else 'releases'} the same "
            "value whatever the true value (the best guess from the prior alone): it says nothing about a "
            "record, and its loss is that of guessing. Raise ε for an informative release. "
        )
    if "OPT" in constant:
        return said.rstrip()
    return said + _comparison(play)


def _comparison(play: Playground) -> str:
    if "OPT" not in play.losses:
        return "Only distance-based noise is shown. " + play.opt_message
    best_dpn = min(play.losses["EM"], play.losses["EM+remap"])
    opt = play.losses["OPT"]
    if best_dpn <= 0:
        return "Every mechanism is loss-free at this budget."
    gain = 1 - opt / best_dpn
    if gain < -1e-6:  # an optimum above a feasible channel: the LP was not solved (audit: eps 20, nominal)
        return (
            f"The LP did not reach its optimum at this budget (OPT's loss is {-100 * gain:.3g} % above "
            "distance-based noise with remapping, a feasible channel): use EM + remap here. "
            + play.opt_message
        )
    if gain >= 0.05:
        return (
            f"OPT beats the best distance-based channel by {100 * gain:.1f} %: tailoring the channel to "
            "this task loss and this prior pays off."
        )
    if gain < 0.0005:  # below what "0.1 %" can show (the LP solves to a tolerance, so ties may read < 0)
        return (
            "OPT is no better than distance-based noise with remapping here: the cheap mechanism is already "
            "optimal for this task loss and prior."
        )
    return (
        f"OPT is only {100 * gain:.1f} % better than distance-based noise (with remapping): the loss follows "
        "the distance closely, so the cheap mechanism is good enough."
    )


def _ticks(labels: Sequence[str], most: int = 12) -> dict:
    """At most ``most`` evenly spaced, shortened tick labels on an index axis."""
    n = len(labels)
    step = max(1, math.ceil(n / most))
    idx = list(range(0, n, step))
    short = [lab if len(lab) <= 18 else lab[:17] + "…" for lab in (labels[i] for i in idx)]
    return {"tickmode": "array", "tickvals": idx, "ticktext": short}


def fig_heatmaps(play: Playground, labels: Sequence[str]) -> go.Figure:
    """The channels side by side: rows = true value, columns = released value, colour = probability.

    Axes are value indices labelled with at most 12 level names (joint values: levels joined by " · "); the
    hover shows the full labels. One colour bar, kept beside the last panel."""
    names = list(play.matrices)
    fig = make_subplots(
        rows=1,
        cols=len(names),
        subplot_titles=[f"{k}: loss {play.losses[k]:.4g}" for k in names],
        horizontal_spacing=0.04,
    )
    text = list(labels)
    n = len(text)
    hover = [[f"true {text[i]}<br>released {text[j]}" for j in range(n)] for i in range(n)]
    for i, name in enumerate(names, start=1):
        fig.add_trace(
            go.Heatmap(
                z=play.matrices[name],
                x=list(range(n)),
                y=list(range(n)),
                text=hover,
                coloraxis="coloraxis",
                name=name,
                hovertemplate="%{text}<br>P = %{z:.4f}<extra>" + name + "</extra>",
            ),
            row=1,
            col=i,
        )
        fig.update_yaxes(autorange="reversed", showticklabels=i == 1, row=1, col=i, **_ticks(text))
        fig.update_xaxes(title_text="released value", row=1, col=i, tickangle=-45, **_ticks(text, 8))
    fig.update_yaxes(title_text="true value", row=1, col=1)
    fig.update_layout(
        coloraxis={
            "colorscale": "Viridis",
            "colorbar": {"title": "P", "len": 0.8, "y": 0.5, "yanchor": "middle", "thickness": 14},
        },
        height=460,
        margin={"t": 50, "b": 110, "l": 110, "r": 40},
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
    fig.update_xaxes(title_text="privacy budget ε", **log_axis(min(grid), max(grid)))
    fig.update_yaxes(title_text="expected loss")
    fig.update_layout(
        height=400,
        margin={"t": 60, "b": 50, "l": 50, "r": 20},
        legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0},
    )
    return fig
