"""Noise-shape page glue: cached calls into :mod:`mdp_core.noise` and the plotly figures (seed 003)."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import replace
from typing import NamedTuple

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

import mdp_core as core
from mdp_core._figures import log_axis
from mdp_core._validation import Progress
from ui.jobs import builder
from ui.store import store as result_store

__all__ = [
    "GRID_SIZES",
    "SECOND_MOMENT_LABEL",
    "VECTOR_COLUMNS",
    "VECTOR_SEARCH_SECONDS",
    "VectorQuery",
    "band_note",
    "cached_choice",
    "cached_curve",
    "fig_densities",
    "fig_heatmap",
    "fig_scale_curves",
    "heatmap_key",
    "odds_sentence",
    "p_label",
    "parse_vector",
    "request_heatmap",
    "request_vector_choice",
    "stored_heatmap",
    "stored_vector_choice",
    "vector_choice",
    "vector_key",
    "vector_sentence",
    "vector_table",
    "verdict",
]

#: The second moment's label wherever the page shows its value (query units: those of the released answer).
SECOND_MOMENT_LABEL = "E|Z|² (query units²)"
#: Heatmap grid options: label -> (number of delta values, number of eps values).
#: The paper's 50 x 100 grid does not state its ranges: on this page's (delta 1e-8 to 0.1) the share of cells
#: with large gains differs from its counts (noise audit: 449 cells over 5 % against the paper's 1036).
GRID_SIZES = {"20 × 40 (quick)": (20, 40), "50 × 100 (fine, the paper's size)": (50, 100)}
#: How the vector table shows its numbers: 4 significant digits (a 13-digit E|Z_i|² was printed in full),
#: with units; a shape without a certified scale has blank cells (``placeholder="—"`` on the table).
VECTOR_COLUMNS = {
    "scale b": st.column_config.NumberColumn(
        "scale b", format="%.4g", help="Noise scale per coordinate, in the query's units"
    ),
    "E|Z_i|² per coordinate": st.column_config.NumberColumn(
        "E|Z_i|² per coordinate", format="%.4g", help="Variance added to each coordinate, in query units²"
    ),
    "method": st.column_config.TextColumn("method", width="large"),
}
_CLASSICAL = {
    1.0: ("Laplace (p = 1)", "#1f77b4"),
    2.0: ("Gaussian (p = 2)", "#2ca02c"),
    np.inf: ("uniform (p = ∞)", "#9467bd"),
}
_SELECTED = "#d62728"


def _classical_name(p: float) -> str:
    """The classical shape p = 1, 2 or inf in words: Laplace, Gaussian or uniform."""
    return {1.0: "Laplace", 2.0: "Gaussian"}.get(p, "uniform")


def odds_sentence(eps: float, delta: float) -> str:
    """The budget in plain words: what (eps, delta)-DP bounds, and what delta is not (noise audit: the page
    called it a failure probability, but at eps 1, delta 0.01 the privacy loss of the selected shape exceeds
    eps with probability 0.27, of Laplace 0.505)."""
    return (
        f"In plain words: for any one record, every set of answers is at most e^ε = {np.exp(eps):.3g} times "
        f"as likely with the record as without it, plus δ = {delta:g} (ε = {eps:g}). δ is an additive slack "
        "on those probabilities, not the chance that the odds move by more than e^ε: depending on the "
        "shape, that chance can be far larger than δ (for Laplace noise it is about one half)."
    )


def p_label(p: float) -> str:
    """``'1.065'``, ``'2'`` or ``'∞'``."""
    return "∞" if np.isinf(p) else f"{p:.4g}"


@st.cache_data(show_spinner=False, max_entries=64)
def cached_choice(
    eps: float, delta: float, sensitivity: float, p_max: float, criterion: str, m: float, t: float
) -> core.ShapeChoice:
    """:func:`mdp_core.select_shape` (m and t are used only by their criterion)."""
    return core.select_shape(
        eps,
        delta,
        sensitivity,
        p_max=p_max,
        criterion=criterion,
        m=m if criterion == "moment" else None,
        t=t if criterion == "tolerance" else None,
    )


@st.cache_data(show_spinner=False, max_entries=64)
def cached_curve(eps: float, delta: float, sensitivity: float, p_max: float) -> pd.DataFrame:
    """``b(p)`` and ``E|Z|^2`` on ``p = 1 .. p_max`` (step 0.02) and ``p = inf`` (last row)."""
    ps = np.append(np.round(np.arange(1.0, p_max + 1e-9, 0.02), 6), np.inf)
    scales = core.ggm_scale_curve(ps, eps, delta, sensitivity)
    moments = [core.ggm_second_moment(p, b) for p, b in zip(ps, scales, strict=True)]
    return pd.DataFrame({"p": ps, "scale": scales, "second_moment": moments})


def heatmap_key(n_delta: int, n_eps: int, p_max: float) -> tuple:
    """Store and job key of the heatmap of a grid and largest shape (any sensitivity)."""
    return ("noise-heatmap", int(n_delta), int(n_eps), float(p_max))


def _at_sensitivity(unit: core.ShapeHeatmap, sensitivity: float) -> core.ShapeHeatmap:
    """The heatmap at ``sensitivity`` from the one at 1: every scale is ``sensitivity / h`` with ``h`` free of
    it, so each shape's E|Z|^2 scales by ``sensitivity**2`` and the best shape and the gain do not change
    (the walk of stop 53 saw 10-16 s reruns when only the sensitivity changed)."""
    return replace(unit, second_moment=unit.second_moment * sensitivity**2)


def stored_heatmap(n_delta: int, n_eps: int, sensitivity: float, p_max: float) -> core.ShapeHeatmap | None:
    """The heatmap if it was computed before in this process (for any sensitivity; no work), else None."""
    unit = result_store().get(heatmap_key(n_delta, n_eps, p_max))
    return None if unit is None else _at_sensitivity(unit, sensitivity)


def request_heatmap(n_delta: int, n_eps: int, p_max: float) -> Future[core.ShapeHeatmap]:
    """The heatmap at sensitivity 1 (:func:`stored_heatmap` rescales it), computed on the builder's long-job
    threads: the page polls :func:`heatmap_key`'s job and can stop it between two shapes."""
    return builder().request(
        heatmap_key(n_delta, n_eps, p_max),
        lambda progress: _unit_heatmap(n_delta, n_eps, p_max, progress),
        slow=True,
    )


def _unit_heatmap(n_delta: int, n_eps: int, p_max: float, progress: Progress) -> core.ShapeHeatmap:
    eps = np.geomspace(0.1, 10.0, n_eps)
    delta = np.geomspace(1e-8, 0.1, n_delta)
    return core.shape_heatmap(eps, delta, 1.0, p_max=p_max, progress=progress, time_limit=HEATMAP_TIME_LIMIT)


#: Seconds the (eps, delta) heatmap may take before the page says so (stop 53, alone: the 20 x 40 grid
#: about 1.3 s, 50 x 100 about 5.6 s at the default largest shape 10, twice that at 20).
HEATMAP_TIME_LIMIT = 45.0
#: The run that starts the heatmap shows its progress this long (seconds); the quick grid lands in it.
HEATMAP_WAIT_SECONDS = 3.0

#: Seconds the vector query's shape search may take on the page (about 2-8 s at the defaults).
VECTOR_SEARCH_SECONDS = 30.0


class VectorQuery(NamedTuple):
    """A vector query: budget, coordinate-wise sensitivities, the largest finite shape, Monte Carlo seed."""

    eps: float
    delta: float
    alpha: float
    sensitivity: tuple[float, ...]
    p_max: float
    seed: int


def vector_key(query: VectorQuery) -> tuple:
    """Job and store key of a vector query's shape search (:func:`request_vector_choice`)."""
    return ("noise-vector-choice", *query)


def request_vector_choice(query: VectorQuery) -> Future[core.VectorShapeChoice | str]:
    """:func:`vector_choice` on the builder's long-job threads: the page polls :func:`vector_key`'s job
    and can stop it between two Monte Carlo batches."""
    return builder().request(vector_key(query), lambda progress: vector_choice(query, progress), slow=True)


def stored_vector_choice(query: VectorQuery) -> core.VectorShapeChoice | str | None:
    """The search's result (or why none) if it ran before for this query, else None."""
    return result_store().get(vector_key(query))


def vector_choice(query: VectorQuery, progress: Progress = None) -> core.VectorShapeChoice | str:
    """The vector query's shape with the least error per coordinate (:func:`core.select_shape_vector`),
    or why no shape could be certified."""
    try:
        return core.select_shape_vector(
            query.eps, query.delta, list(query.sensitivity), p_max=query.p_max, alpha=query.alpha,
            seed=query.seed, time_limit=VECTOR_SEARCH_SECONDS, progress=progress,
        )  # fmt: skip
    except core.DataError as exc:
        return str(exc)


def _vector_row(eps: float, p: float, outcome: core.VectorScale | str, best: bool) -> dict[str, object]:
    shape = p_label(p) + (" (least error)" if best else "")
    if isinstance(outcome, str):
        return {
            "shape p": shape,
            "scale b": float("nan"),
            "E|Z_i|² per coordinate": float("nan"),
            "method": f"not certified: {outcome}",
            "privacy (ε, δ + α)": "",
        }
    method = "exact" if outcome.exact else f"Monte Carlo ({outcome.n_samples:,} samples)"
    return {
        "shape p": shape,
        "scale b": outcome.scale,
        "E|Z_i|² per coordinate": core.ggm_second_moment(p, outcome.scale),
        "method": method,
        "privacy (ε, δ + α)": f"({eps:g}, {outcome.total_delta:.3g})",
    }


def vector_table(choice: core.VectorShapeChoice, eps: float) -> pd.DataFrame:
    """The classical shapes and the search's best, each with its certified scale (or why none)."""
    shapes = sorted({1.0, 2.0, float(np.inf), choice.p})
    return pd.DataFrame([_vector_row(eps, p, choice.scale_of(p), p == choice.p) for p in shapes])


def vector_sentence(choice: core.VectorShapeChoice) -> str:
    """The search's answer in words."""
    classical = _classical_name(choice.classical_p)
    searched = f"searched over {len(choice.scales)} shapes from 1 to ∞"
    if choice.p == choice.classical_p or not np.isfinite(choice.improvement):
        return f"For this vector query {classical} noise has the least error per coordinate ({searched})."
    return (
        f"For this vector query p = {p_label(choice.p)} has the least error per coordinate: "
        f"E|Z_i|² = {choice.second_moment:.4g}, {100 * choice.improvement:.1f} % below {classical} noise, "
        f"the best classical shape ({choice.classical_second_moment:.4g}; {searched})."
    )


def parse_vector(text: str) -> tuple[float, ...]:
    """``"1, 2"`` -> ``(1.0, 2.0)``; raises :class:`mdp_core.DataError` with a readable message."""
    try:
        values = tuple(float(v) for v in text.replace(";", ",").split(",") if v.strip())
    except ValueError as exc:
        raise core.DataError("the sensitivity vector must be numbers separated by commas") from exc
    if not values or any(v < 0 or not np.isfinite(v) for v in values) or not any(v > 0 for v in values):
        raise core.DataError("the sensitivity vector needs non-negative numbers, at least one positive")
    return values


def _finite(curve: pd.DataFrame) -> pd.DataFrame:
    return curve[np.isfinite(curve["p"])]


#: p = inf is drawn as a labelled line on a panel of :func:`fig_scale_curves` when its value lies within this
#: factor of the finite shapes' range; further out it would squash their curve, so a note says "off scale".
_OFF_SCALE = 3.0


def _uniform_level(fig: go.Figure, col: int, value: float, finite: np.ndarray, *, log: bool) -> list[float]:
    """Mark p = inf on panel ``col``: a dotted line labelled beside it, or an "off scale" note in the panel's
    top (bottom) corner when it lies far above (below) the finite curve. Returns the data range to show.

    Annotations on a log axis take log10 coordinates (plotly.py #2580): ``add_hline``'s own label landed at
    10^value, off the panel, which left the line unlabelled."""
    lo, hi = float(np.min(finite)), float(np.max(finite))
    color = _CLASSICAL[np.inf][1]
    axis = "" if col == 1 else str(col)  # plotly names the first axes "x" and "y", not "x1"
    if lo / _OFF_SCALE <= value <= hi * _OFF_SCALE:
        fig.add_hline(y=value, line_dash="dot", line_color=color, row=1, col=col)
        fig.add_annotation(
            x=0.0,
            xref=f"x{axis} domain",
            xanchor="left",
            y=float(np.log10(value)) if log else value,
            yref=f"y{axis}",
            yanchor="bottom",
            text=f"p = ∞ (uniform): {value:.3g}",
            showarrow=False,
            font={"color": color},
        )
        return [min(lo, value), max(hi, value)]
    above = value > hi
    fig.add_annotation(
        x=1.0,
        xref=f"x{axis} domain",
        xanchor="right",
        y=1.0 if above else 0.0,
        yref=f"y{axis} domain",
        yanchor="top" if above else "bottom",
        text=f"p = ∞ (uniform): {value:.3g}, off scale {'↑' if above else '↓'}",
        showarrow=False,
        font={"color": color},
    )
    return [lo, hi]


def fig_scale_curves(curve: pd.DataFrame, choice: core.ShapeChoice) -> go.Figure:
    """``b(p)`` and ``E|Z|^2`` versus ``p``; the selection and ``p = 1, 2`` marked, ``p = inf`` as a labelled
    line (or an "off scale" note when it is far from the finite shapes); axes in query units."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("Feasible scale b(p)", "Second moment E|Z|²"))
    finite, uniform = _finite(curve), curve.iloc[-1]
    shown: dict[str, list[float]] = {}
    for col, key in ((1, "scale"), (2, "second_moment")):
        fig.add_trace(
            go.Scatter(
                x=finite["p"], y=finite[key], mode="lines", name=key, line={"color": "#444"}, showlegend=False
            ),
            row=1,
            col=col,
        )
        values = finite[key].to_numpy()
        values = values[np.isfinite(values) & (values > 0)]
        if values.size and np.isfinite(uniform[key]) and uniform[key] > 0:
            shown[key] = _uniform_level(fig, col, float(uniform[key]), values, log=col == 2)
        for p in (1.0, 2.0):
            row = finite.loc[np.isclose(finite["p"], p)]
            if not row.empty:
                fig.add_trace(
                    go.Scatter(
                        x=[p],
                        y=[float(row[key].iloc[0])],
                        mode="markers",
                        name=_CLASSICAL[p][0],
                        marker={"size": 10, "color": _CLASSICAL[p][1]},
                        showlegend=col == 1,
                    ),
                    row=1,
                    col=col,
                )
        if np.isfinite(choice.p):
            value = choice.scale if key == "scale" else choice.second_moment
            fig.add_trace(
                go.Scatter(
                    x=[choice.p],
                    y=[value],
                    mode="markers",
                    name=f"selected p = {p_label(choice.p)}",
                    marker={"size": 13, "symbol": "star", "color": _SELECTED},
                    showlegend=col == 1,
                ),
                row=1,
                col=col,
            )
    fig.update_xaxes(title_text="shape p")
    fig.update_yaxes(title_text="b (query units)", row=1, col=1)
    fig.update_yaxes(title_text=SECOND_MOMENT_LABEL, row=1, col=2)
    if "scale" in shown:
        fig.update_yaxes(range=[0.0, 1.08 * shown["scale"][1]], row=1, col=1)
    if "second_moment" in shown:
        lo, hi = shown["second_moment"]
        pad = 0.06 * max(np.log10(hi / lo), 0.5)
        fig.update_yaxes(
            **log_axis(lo, hi), range=[float(np.log10(lo)) - pad, float(np.log10(hi)) + pad], row=1, col=2
        )
    fig.update_layout(height=380, margin={"t": 40, "b": 40}, legend={"orientation": "h", "y": -0.25})
    return fig


def fig_densities(choice: core.ShapeChoice, eps: float, delta: float, sensitivity: float) -> go.Figure:
    """Selected density against Laplace, Gaussian and uniform, each at its own feasible scale."""
    shapes = {p: (*_CLASSICAL[p], core.ggm_scale(p, eps, delta, sensitivity)) for p in _CLASSICAL}
    widest = max(shapes[1.0][2], shapes[2.0][2], choice.scale if np.isfinite(choice.p) else 0.0)
    half = min(3.5 * widest, 1.2 * shapes[np.inf][2])
    z = np.linspace(-half, half, 801)
    fig = go.Figure()
    for p, (name, color, scale) in shapes.items():
        fig.add_trace(
            go.Scatter(
                x=z, y=core.ggm_pdf(z, p, scale), name=f"{name}, b = {scale:.3g}", line={"color": color}
            )
        )
    fig.add_trace(
        go.Scatter(
            x=z,
            y=core.ggm_pdf(z, choice.p, choice.scale),
            name=f"selected p = {p_label(choice.p)}, b = {choice.scale:.3g}",
            line={"color": _SELECTED, "width": 3},
        )
    )
    fig.update_layout(
        height=360,
        xaxis_title="noise z (query units)",
        yaxis_title="density",
        margin={"t": 20, "b": 40},
        legend={"orientation": "h", "y": -0.25},
    )
    return fig


def fig_heatmap(hm: core.ShapeHeatmap) -> go.Figure:
    """Selected shape and variance reduction over the ``(eps, delta)`` grid (log axes, decade labels).

    Both panels share one ε range (the grid's outer cell edges) and one δ range; each colour bar lies flat
    under its own panel, so neither is drawn over the other panel's axis, its title above it.
    """
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=("Selected shape p (blank: uniform)", "Variance reduction vs best classical (%)"),
        horizontal_spacing=0.12,
    )
    shown_p = np.where(np.isinf(hm.p), np.nan, hm.p)
    common = {"x": hm.eps, "y": hm.delta}
    bar = {"orientation": "h", "y": -0.3, "yanchor": "top", "len": 0.42, "thickness": 12}
    fig.add_trace(
        go.Heatmap(
            z=shown_p,
            colorscale="Viridis",
            colorbar={**bar, "x": 0.22, "title": {"text": "selected shape p", "side": "top"}},
            name="p",
            hovertemplate="ε = %{x:.3g}<br>δ = %{y:.2g}<br>p = %{z:.3g}<extra></extra>",
            **common,
        ),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Heatmap(
            z=100 * hm.improvement,
            colorscale="Reds",
            colorbar={**bar, "x": 0.78, "title": {"text": "variance reduction (%)", "side": "top"}},
            name="improvement",
            hovertemplate="ε = %{x:.3g}<br>δ = %{y:.2g}<br>%{z:.1f} % less variance<extra></extra>",
            **common,
        ),
        row=1,
        col=2,
    )
    fig.update_xaxes(
        title_text="ε", range=_cell_range(hm.eps), **log_axis(float(hm.eps.min()), float(hm.eps.max()))
    )
    fig.update_yaxes(
        title_text="δ", range=_cell_range(hm.delta), **log_axis(float(hm.delta.min()), float(hm.delta.max()))
    )
    fig.update_xaxes(matches="x", row=1, col=2)
    fig.update_yaxes(matches="y", row=1, col=2)
    fig.update_layout(height=500, margin={"t": 40, "b": 130})
    return fig


def _cell_range(centres: np.ndarray) -> list[float]:
    """A log axis' range (log10 units) from the first cell's outer edge to the last one's, for cells centred
    on the geometric grid ``centres``."""
    logs = np.log10(np.sort(np.asarray(centres, dtype=np.float64)))
    half = 0.5 * float(logs[1] - logs[0]) if logs.size > 1 else 0.5
    return [float(logs[0]) - half, float(logs[-1]) + half]


def band_note(hm: core.ShapeHeatmap) -> str:
    """Why the variance-reduction panel shows a pale band between two ridges along δ (it is not noise)."""
    step = float(hm.delta[1] / hm.delta[0]) if hm.delta.size > 1 else 1.0
    return (
        "The pale band between two red ridges is real, not numerical noise: along it the best shape is "
        "p ≈ 2, so Gaussian noise is already optimal and there is nothing to gain. Below it (smaller δ) the "
        "gain peaks where Laplace and Gaussian are equally good and a shape in between beats both; above "
        f"it, shapes beyond 2 take over. Each row of this grid is δ × {step:.2g}, so the band can be one "
        "row wide."
    )


def verdict(choice: core.ShapeChoice) -> str:
    """One sentence saying whether shape selection is worth it here."""
    gain = 100 * choice.improvement
    classical = _classical_name(choice.classical_p)
    if gain < 1:
        typical = (
            " This is typical for larger ε or very small δ, where Laplace wins."
            if choice.classical_p == 1
            else ""
        )
        return f"Shape selection gains {gain:.2f} % here: {classical} noise is already near-optimal.{typical}"
    if gain < 5:
        return (
            f"Shape selection gains a modest {gain:.1f} % over {classical} noise; "
            "worth it only when every bit of accuracy counts."
        )
    return (
        f"Shape selection is worth it: p = {p_label(choice.p)} cuts the loss by {gain:.1f} % against the "
        f"best classical choice ({classical}). Large gains concentrate at small ε and relatively large δ."
    )
