"""Cached leakage computations and plotly figures for the correlated-leakage page (seed 001).

Everything that depends only on the table (conditionals, CPL* hulls, triads, the all-pairs model) is cached
by the table's fingerprint, so moving the eps slider only re-evaluates O(1) formulas and hull scans.
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

import mdp_core as core
from mdp_core._figures import labelled_vline, log_axis
from mdp_core._text import listed
from mdp_core._validation import Progress
from ui.data import HASH_FUNCS, level_labels
from ui.jobs import builder
from ui.markdown import md
from ui.store import store as result_store

__all__ = [
    "CALIBRATION_FLOORS",
    "CALIBRATION_FLOOR_HELP",
    "EPS_GRID",
    "PAIRS_LEVEL_LIMIT",
    "PAIR_WORK_LIMIT",
    "TPL_HEADER",
    "WAIT_SECONDS",
    "PairCurves",
    "calibration_caption",
    "calibration_figure",
    "calibration_key",
    "calibration_table",
    "coincidence_note",
    "column_config",
    "conditional_figure",
    "cpl_figure",
    "leakage_figure",
    "model_key",
    "odds_sentence",
    "pair_curves",
    "pair_too_large",
    "pairs_too_large",
    "pairwise_model",
    "parameter_text",
    "point_values",
    "request_calibration",
    "request_model",
    "stored_calibration",
    "stored_model",
    "triad_meanings",
]

#: Budgets at which the curves are drawn (log axis).
EPS_GRID = np.geomspace(0.01, 20.0, 120)
UNCERTAINTY_MODES = ("none", "relative", "groups", "bootstrap")
#: Largest (target levels)^2 x (released levels) the pair section computes in the page's run: the exact
#: CPL* compares every pair of target levels over the released values on the 120-budget grid. Measured
#: (2-core machine): 1000^2 x 8 in 0.9 s, 500^2 x 100 in 3.1 s, 200^2 x 2000 in 12 s; an identifier
#: re-included as nominal (20,000 levels) took minutes and the triad alone 42 s.
PAIR_WORK_LIMIT = 15_000_000


#: Most levels an attribute may have for the all-pairs model: every pair's triad holds a few (levels)^2
#: arrays (measured: 41 MB at 1,000 levels, 370 MB at 3,000; an identifier re-included as nominal, 20,000
#: levels, would need ~16 GB) and its exact CPL* takes ~9 s per pair at 3,000 levels.
PAIRS_LEVEL_LIMIT = 3000


def pairs_too_large(encoded: core.Encoded) -> str | None:
    """Why the all-pairs model is not offered (an attribute with too many levels), with the way out."""
    wide = {c: n for c, n in encoded.domain_sizes.items() if n > PAIRS_LEVEL_LIMIT}
    if not wide:
        return None
    named = ", ".join(f"{md(c)} ({n:,} levels)" for c, n in wide.items())
    return (
        "Leakage for every pair is not offered while an attribute has more than "
        f"{PAIRS_LEVEL_LIMIT:,} levels: {named}. Each pair compares every two of its levels (memory and time "
        "grow with levels²). Exclude it, or give it fewer levels on the *Data & dependencies* page (numeric "
        "kind with bins)."
    )


def pair_too_large(
    encoded: core.Encoded, target: str, other: str, mode: str = "none", groups: str | None = None
) -> str | None:
    """Why the pair's curves are not computed (too many levels), in words with the way out; else None.
    The uncertainty modes "groups" and "bootstrap" also compute CPL* once per source (level or resample)."""
    n_t, n_o = encoded.domain_sizes[target], encoded.domain_sizes[other]
    sources = {"bootstrap": 20, "groups": encoded.domain_sizes[groups] if groups else 0}.get(mode, 0)
    work = n_t * n_t * n_o * (1 + sources)
    if work <= PAIR_WORK_LIMIT:
        return None
    per_source = f" for each of {sources} sources" if sources else ""
    target, other = md(target), md(other)
    return (
        f"{target} has {n_t:,} levels and {other} {n_o:,}: the exact leakage compares every pair of "
        f"{target}'s levels over every released value ({n_t:,}² × {n_o:,} steps per budget{per_source}), "
        "too slow to redo on every change of this page (seconds to minutes). Pick attributes with fewer "
        "levels" + (" or another prior uncertainty" if sources else "") + ", or give a many-valued one fewer "
        "levels on the *Data & dependencies* page (numeric kind with bins; identifiers and free text are "
        "better left excluded)."
    )


@dataclass(frozen=True)
class PairCurves:
    """CPL versus eps for one (target, other) pair, on :data:`EPS_GRID` (nats)."""

    cond: np.ndarray
    exact: np.ndarray
    dt: np.ndarray
    agd: np.ndarray
    triad: core.DependencyTriad
    dt_unc: np.ndarray | None = None
    triad_unc: core.DependencyTriad | None = None
    band_lo: np.ndarray | None = None
    band_hi: np.ndarray | None = None
    note: str = ""


@st.cache_data(max_entries=64, hash_funcs=HASH_FUNCS, show_spinner=False)
def pair_curves(
    encoded: core.Encoded,
    target: str,
    other: str,
    mode: str = "none",
    e: float = 0.1,
    groups: str | None = None,
    seed: int = 0,
) -> PairCurves:
    """CPL*, DT, (alpha, gamma, delta) and, with ``mode`` != "none", DT under uncertainty."""
    codes = encoded.codes
    cond = core.conditional(codes, target, other)
    triad = core.dependency_triad(cond)
    base = {
        "exact": core.cpl_exact(cond, EPS_GRID),
        "dt": core.dt_cpl(triad, EPS_GRID),
        "agd": core.dt_cpl(triad, EPS_GRID, calibrated=False),
    }
    if mode == "none":
        return PairCurves(cond=cond, triad=triad, **base)
    if mode == "relative":
        unc = core.dependency_triad(cond, uncertainty=e)
        return PairCurves(
            cond=cond,
            triad=triad,
            triad_unc=unc,
            dt_unc=core.dt_cpl(unc, EPS_GRID),
            note=f"Δ = {e:.0%} · P",
            **base,
        )
    if mode == "groups":
        sources = core.source_conditionals(codes, target, other, groups=groups)
        note = f"range over the {len(sources)} levels of {groups}"
    else:
        sources = core.source_conditionals(codes, target, other, n_boot=20, rng=np.random.default_rng(seed))
        note = "range over 20 bootstrap resamples"
    nominal, delta = core.uncertainty_from_sources(sources, method="range")
    unc = core.dependency_triad(nominal, uncertainty=delta)
    band_lo, band_hi = core.cpl_source_band(sources, EPS_GRID)
    return PairCurves(
        cond=cond,
        triad=triad,
        triad_unc=unc,
        dt_unc=core.dt_cpl(unc, EPS_GRID),
        band_lo=band_lo,
        band_hi=band_hi,
        note=note,
        **base,
    )


def _model_key(encoded: core.Encoded, method: str, e: float) -> tuple:
    return ("leak-model", encoded.fingerprint, str(method), float(e))


def stored_model(encoded: core.Encoded, method: str, e: float = 0.0) -> core.PairwiseLeakage | None:
    """The all-pairs model if it was built before in this process (no work), else None."""
    return result_store().get(_model_key(encoded, method, e))


def pairwise_model(
    encoded: core.Encoded, method: str, e: float = 0.0, progress: Progress = None
) -> core.PairwiseLeakage:
    """All ordered pairs (exact hulls or triads), built once per table; evaluating at any eps is cheap.

    Kept in the app's one locked result store, computed outside any ``st.cache_*`` function: ``progress``
    (a page's progress bar) is called only when the model is actually built.
    """
    return result_store().get_or_compute(
        _model_key(encoded, method, e), lambda: _build_model(encoded, method, e, progress)
    )


def _build_model(encoded: core.Encoded, method: str, e: float, progress: Progress) -> core.PairwiseLeakage:
    return core.pairwise_leakage(
        encoded.codes,
        method=method,  # type: ignore[arg-type]
        uncertainty=e or None,
        progress=progress,
    )


#: Seconds a click waits for the all-pairs model or the calibration before the page polls it (heart: < 1 s).
WAIT_SECONDS = 3.0


def model_key(encoded: core.Encoded, method: str) -> tuple:
    """The key of :func:`request_model`'s job (and of its result in the store)."""
    return _model_key(encoded, method, 0.0)


def request_model(encoded: core.Encoded, method: str) -> Future[core.PairwiseLeakage]:
    """:func:`pairwise_model` on the builder's long-job threads (a 300-column upload held one page run for
    281 s): the page polls :func:`model_key`'s job and can stop it between two pairs."""
    return builder().request(
        model_key(encoded, method), lambda progress: _build_model(encoded, method, 0.0, progress), slow=True
    )


#: What the page offers as the least budget of every attribute (``floor`` of :func:`core.calibrate_budgets`).
CALIBRATION_FLOORS = {
    "uniform": "at least the uniform split, the total as large as possible",
    "common": "the same budget for every attribute, as large as possible",
    0.0: "the total as large as possible (attributes may be left out)",
}
CALIBRATION_FLOOR_HELP = (
    "Calibration makes the budgets as large as the target allows, by one of three rules. At least the "
    "uniform split (the default): every attribute keeps the correlation-agnostic budget ε̄ / (1 + m) and "
    "the total is raised where the correlations allow, often on a few attributes. The same budget for "
    "every attribute: the largest equal split, fair but with the smallest total. The total as large as "
    "possible: attributes whose release leaks much about others may get ε = 0, that is, are not released. "
    "The problem is not convex: the budgets are the better of two local searches, not a proven optimum."
)


def calibration_key(encoded: core.Encoded, method: str, eps_bar: float, floor: str | float) -> tuple:
    """The key of :func:`request_calibration`'s job and of its result in the store."""
    return ("leak-calibration", encoded.fingerprint, str(method), float(eps_bar), floor)


def request_calibration(
    encoded: core.Encoded, method: str, eps_bar: float, floor: str | float
) -> Future[core.BudgetCalibration]:
    """The calibration (on the table taken as the true distribution: no prior uncertainty) on the builder's
    long-job threads, stoppable at every step of its local searches."""

    def compute(progress: Progress) -> core.BudgetCalibration:
        model = pairwise_model(encoded, method, 0.0, progress=progress)
        return core.calibrate_budgets(model, eps_bar, floor=floor, progress=progress)  # type: ignore[arg-type]

    return builder().request(calibration_key(encoded, method, eps_bar, floor), compute, slow=True)


def stored_calibration(
    encoded: core.Encoded, method: str, eps_bar: float, floor: str | float
) -> core.BudgetCalibration | None:
    """The calibration if it was computed before for these settings, else None."""
    return result_store().get(calibration_key(encoded, method, eps_bar, floor))


def odds_sentence(eps: float, cpl: float, target: str, other: str, robust: float | None = None) -> str:
    """Budget and leakage in plain words (odds ratios an attacker can reach). ``robust``: the DT bound with
    the chosen prior uncertainty (nats); the exact CPL* holds for this table's distribution only."""
    target, other = md(target), md(other)
    text = (
        f"In plain words: releasing {other} with ε = {eps:g} moves an attacker's odds about {other} by at "
        f"most a factor e^ε = {np.exp(eps):.3g}; through the correlation it moves their odds about {target} "
        f"by at most e^CPL = {np.exp(cpl):.3g}"
    )
    if robust is None:
        return text + "."
    return (
        text + " if the real distribution is the one in this table. Allowing for the prior uncertainty "
        f"chosen above, by at most e^DT = {np.exp(max(robust, cpl)):.3g}."
    )


def triad_meanings(triad: core.DependencyTriad) -> list[tuple[str, float, str]]:
    """(symbol, value, one-line meaning) for the three DT parameters."""
    alpha = (
        "largest log-ratio P(o|t)/P(o|t′): the leakage limit at large ε"
        if triad.delta <= 0
        else "largest log-ratio P(o|t)/P(o|t′) where both are > 0; not a limit here: with δ > 0 the "
        "leakage keeps growing with ε"
    )
    return [
        ("α", triad.alpha, alpha),
        (
            "β",
            triad.beta,
            f"calibrated lower level: sets the small-ε slope φ = {triad.phi:.3g} (governs small ε)",
        ),
        ("δ", triad.delta, "sparsity: mass where the other row is zero (leakage grows like ε)"),
    ]


# -------------------------------------------------------------------------------------------- figures
def _level_axis(labels: list[str], title: str, *, max_ticks: int = 12, **extra: object) -> dict[str, object]:
    """A numeric axis over level positions 0..m-1 with at most ``max_ticks`` evenly spread, unique labels
    (a category axis would merge equal labels and print every one of 64 levels on top of each other)."""
    m = len(labels)
    step = max(1, int(np.ceil(m / max_ticks)))
    ticks = list(range(0, m, step))
    return {
        "title": title,
        "tickmode": "array",
        "tickvals": ticks,
        "ticktext": [labels[i][:18] for i in ticks],
        "range": [-0.5, m - 0.5],
        "showgrid": False,
        "zeroline": False,
        **extra,
    }


def conditional_figure(cond: np.ndarray, encoded: core.Encoded, target: str, other: str) -> go.Figure:
    """Heatmap of P(other | target): rows = target levels, readable tick labels at any number of levels.
    ``cond`` is :func:`mdp_core.conditional`'s: rows of the target levels some record takes, columns of the
    other attribute's levels up to the highest one taken (empty bins of a public range have none)."""
    taken = np.unique(encoded.codes[target].to_numpy())
    xl = level_labels(encoded.levels[other])[: cond.shape[1]]
    yl = [level_labels(encoded.levels[target])[k] for k in taken]
    text = (
        np.array([[f"{target} = {y}<br>{other} = {x}" for x in xl] for y in yl])
        if cond.size <= 40_000
        else None
    )
    fig = go.Figure(
        go.Heatmap(
            z=cond,
            x=np.arange(len(xl)),
            y=np.arange(len(yl)),
            text=text,
            colorscale="Blues",
            zmin=0.0,
            zmax=1.0,
            colorbar={"title": "P", "thickness": 12},
            hovertemplate=("%{text}" if text is not None else "%{y}, %{x}")
            + "<br>P = %{z:.3f}<extra></extra>",
        )
    )
    fig.update_layout(
        title=f"P({other} | {target})",
        xaxis=_level_axis(xl, other, tickangle=-45 if max(map(len, xl), default=0) > 4 else 0),
        yaxis=_level_axis(yl, target, autorange="reversed"),
        height=380,
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
    )
    return fig


#: Curves closer than this share of the y axis everywhere are drawn on top of each other (line widths).
_COINCIDE = 0.005


def coincidence_note(curves: PairCurves) -> str:
    """A sentence naming the curves of :func:`cpl_figure` that lie on top of each other at every ε shown
    (so a legend entry with no visible line is explained), or "" when every curve is visible on its own."""
    named = {
        "ε": EPS_GRID,
        "CPL* (exact)": curves.exact,
        "DT (α, β, δ)": curves.dt,
        "(α, γ, δ) uncalibrated": curves.agd,
    }
    top = max(float(np.max(curves.dt_unc if curves.dt_unc is not None else curves.agd)), 1e-3)
    groups: list[list[str]] = []
    gap = 0.0
    for name, values in named.items():
        for group in groups:
            if (d := float(np.max(np.abs(named[group[0]] - values)))) <= _COINCIDE * top:
                group.append(name)
                gap = max(gap, d)
                break
        else:
            groups.append([name])
    same = [", ".join(g[:-1]) + " and " + g[-1] for g in groups if len(g) > 1]
    if not same:
        return ""
    how = (
        "coincide at every ε shown"
        if gap <= 1e-9 * top
        else f"differ by at most {gap:.2g} nats at every ε shown (under {_COINCIDE:.1%} of the axis)"
    )
    return (
        "For this pair "
        + "; ".join(same)
        + f" {how}: their lines lie on top of each other (each keeps its own dash style)."
    )


def parameter_text(value: float) -> str:
    """A triad parameter with 4 significant digits; a rounding residue below 1e-9 (a slack added on the
    conservative side, e.g. beta of an independent pair) reads 0."""
    return "0" if abs(value) < 1e-9 else f"{value:.4g}"


def cpl_figure(curves: PairCurves, eps: float) -> go.Figure:
    """CPL versus eps on a log axis: CPL*, DT, (alpha, gamma, delta), DT with uncertainty (+ band).

    The x axis is the drawn grid exactly; CPL* is drawn first (thick, solid), DT dashed and the uncalibrated
    (alpha, gamma, delta) dotted with open markers over it, so curves that coincide all stay visible.
    """
    fig = go.Figure()
    x = EPS_GRID.tolist()  # plain lists keep the figure spec readable JSON
    if curves.band_lo is not None and curves.band_hi is not None:
        fig.add_trace(
            go.Scatter(
                x=x,
                y=curves.band_hi.tolist(),
                mode="lines",
                line={"width": 0},
                showlegend=False,
                hoverinfo="skip",
            )
        )
        fig.add_trace(
            go.Scatter(
                x=x,
                y=curves.band_lo.tolist(),
                mode="lines",
                line={"width": 0},
                fill="tonexty",
                fillcolor="rgba(255,127,14,0.2)",
                name="CPL* across sources",
            )
        )
    fig.add_trace(
        go.Scatter(
            x=x, y=x, mode="lines", name="ε (no worse than this)", line={"color": "lightgray", "dash": "dot"}
        )
    )
    fig.add_trace(
        go.Scatter(
            x=x,
            y=curves.exact.tolist(),
            mode="lines",
            name="CPL* (exact)",
            line={"color": "black", "width": 4},
        )
    )
    fig.add_trace(
        go.Scatter(
            x=x,
            y=curves.dt.tolist(),
            mode="lines",
            name="DT (α, β, δ)",
            line={"color": "#1f77b4", "dash": "dash", "width": 2.5},
        )
    )
    fig.add_trace(
        go.Scatter(
            x=x,
            y=curves.agd.tolist(),
            mode="lines+markers",
            name="(α, γ, δ) uncalibrated",
            line={"color": "#7f7f7f", "dash": "dot", "width": 2},
            marker={"symbol": "circle-open", "size": 7, "maxdisplayed": 14},
        )
    )
    if curves.dt_unc is not None:
        fig.add_trace(
            go.Scatter(
                x=x,
                y=curves.dt_unc.tolist(),
                mode="lines",
                name=f"DT with uncertainty ({curves.note})",
                line={"color": "#ff7f0e"},
            )
        )
    lo, hi = float(EPS_GRID[0]), float(EPS_GRID[-1])
    right_half = np.log10(eps) > 0.5 * (np.log10(lo) + np.log10(hi))  # the label beside its line, inward
    labelled_vline(
        fig,
        eps,
        f"ε = {eps:g}",
        log=True,
        xanchor="right" if right_half else "left",
        yanchor="top",
        xshift=-4 if right_half else 4,
        font={"color": "red"},
        line={"color": "red", "width": 1},
    )
    top = float(np.max(curves.dt_unc if curves.dt_unc is not None else curves.agd))
    fig.update_layout(
        title="Leakage about the target when the other attribute is released with ε-LDP",
        xaxis={
            "title": "ε of the released attribute",
            **log_axis(lo, hi),
            "range": [float(np.log10(lo)), float(np.log10(hi))],
        },
        yaxis={"title": "CPL (nats)", "range": [0, 1.05 * max(top, 1e-3)], "automargin": True},
        height=420,
        legend={"orientation": "h", "y": -0.25},
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
    )
    return fig


def leakage_figure(model: core.PairwiseLeakage, eps: float) -> tuple[go.Figure, pd.DataFrame]:
    """Heatmap of CPL_{j -> k}(eps) for all pairs, targets sorted by total leakage; and the TPL table."""
    frame = core.leakage_matrix(model, eps)
    tpl = pd.Series(core.total_leakage(model, eps), index=frame.columns, name="TPL")
    order = list(tpl.sort_values(ascending=False).index)
    frame = frame.loc[order, order]
    fig = go.Figure(
        go.Heatmap(
            z=frame.to_numpy(),
            x=order,
            y=order,
            colorscale="Reds",
            zmin=0.0,
            zmax=float(eps),
            colorbar={"title": "CPL (nats)"},
            hovertemplate="release %{y}<br>leaks about %{x}<br>CPL=%{z:.4f}<extra></extra>",
        )
    )
    fig.update_layout(
        title=f"CPL(released → target) at ε = {eps:g} (targets sorted by total leakage)",
        xaxis={"title": "target (leaks)", "type": "category"},
        yaxis={"title": "released attribute", "type": "category", "autorange": "reversed"},
        height=520,
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
    )
    table = pd.DataFrame({"attribute": order, TPL_HEADER: tpl.loc[order].to_numpy()})
    return fig, table


#: Readable headers of the leakage tables (values in nats, shown with 3 decimals by :func:`column_config`).
TPL_HEADER = "total leakage (nats)"
_CALIBRATION_HEADERS = {
    "eps": "calibrated ε (nats)",
    "TPL": "total leakage, calibrated (nats)",
    "uniform eps": "uniform ε (nats)",
    "uniform TPL": "total leakage, uniform (nats)",
}
_HELP = {
    TPL_HEADER: "TPL = ε + Σ CPL: the attribute's own budget plus what every other released attribute leaks "
    "about it through the correlations",
    "calibrated ε (nats)": "Budget of the attribute after calibration",
    "total leakage, calibrated (nats)": "TPL with the calibrated budgets: at most the target ε̄",
    "uniform ε (nats)": "The same budget for every attribute, ε̄ / (1 + m) with m the largest number of "
    "attributes correlated with any one: safe whatever the pairwise correlations",
    "total leakage, uniform (nats)": "TPL with the uniform budgets",
}


def calibration_caption(cal: core.BudgetCalibration) -> str:
    """The calibration in words: the totals, the attributes left out, and what the target bounds (pairwise
    leakage on this table, not what attributes reveal jointly)."""
    n = len(cal.columns)
    left_out = [c for c, e in zip(cal.columns, cal.eps, strict=True) if e <= 0]
    out = (
        f" {len(left_out)} of {n} get ε = 0 and are not released: {md(listed(left_out))}." if left_out else ""
    )
    return (
        f"Total Σε = {cal.total:.3f} nats over {n} attributes, against {n * cal.uniform_eps:.3f} for the "
        f"uniform split.{out} In plain words: with these budgets the leakage about any one attribute (its "
        "own release plus what each other released attribute reveals about it through their pairwise "
        f"dependence) is at most ε̄ = {cal.eps_bar:g} nats, so that evidence moves an attacker's odds about "
        f"it by at most e^ε̄ = {np.exp(cal.eps_bar):.3g}. The leakages are added pair by pair (the paper's "
        "building block): what several attributes reveal together is not bounded (an attribute determined "
        "by two others jointly, but independent of each alone, is not counted). Computed on this table taken "
        "as the true distribution, with no prior uncertainty."
    )


def calibration_table(cal: core.BudgetCalibration) -> pd.DataFrame:
    """:meth:`BudgetCalibration.table` with readable headers (values unchanged, in nats)."""
    return cal.table().rename(columns=_CALIBRATION_HEADERS)


def column_config(table: pd.DataFrame) -> dict[str, object]:
    """Streamlit column settings: every number with 3 decimals, each header with its meaning as help."""
    return {
        name: st.column_config.NumberColumn(name, format="%.3f", help=_HELP.get(name))
        for name in table.columns
        if pd.api.types.is_float_dtype(table[name])
    }


def calibration_figure(cal: core.BudgetCalibration) -> go.Figure:
    """Calibrated budgets next to the uniform split, with the total leakage each attribute then suffers."""
    names = list(cal.columns)
    fig = go.Figure()
    fig.add_trace(go.Bar(x=names, y=cal.eps, name="calibrated ε", marker_color="#2ca02c"))
    fig.add_trace(
        go.Bar(
            x=names, y=np.full(len(names), cal.uniform_eps), name="uniform split ε", marker_color="#aaaaaa"
        )
    )
    fig.add_trace(
        go.Scatter(
            x=names,
            y=cal.tpl,
            mode="markers",
            name="TPL (calibrated)",
            marker={"symbol": "diamond", "size": 10, "color": "#d62728"},
        )
    )
    fig.add_trace(
        go.Scatter(
            x=names,
            y=cal.uniform_tpl,
            mode="markers",
            name="TPL (uniform)",
            marker={"symbol": "circle-open", "size": 10, "color": "#555555"},
        )
    )
    fig.add_hline(
        y=cal.eps_bar, line={"dash": "dash", "color": "#d62728"}, annotation_text=f"ε̄ = {cal.eps_bar:g}"
    )
    fig.update_layout(
        barmode="group",
        title=f"Budgets: Σε = {cal.total:.3g} calibrated vs {cal.uniform_eps * len(names):.3g} uniform",
        yaxis={"title": "nats"},
        height=420,
        legend={"orientation": "h", "y": -0.3},
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
    )
    return fig


def point_values(curves: PairCurves, eps: float) -> dict[str, float]:
    """The curves' values at one eps (exact CPL* from the cached conditional; DT in O(1))."""
    out = {
        "exact": float(core.cpl_exact(curves.cond, eps)),
        "dt": float(core.dt_cpl(curves.triad, eps)),
        "agd": float(core.dt_cpl(curves.triad, eps, calibrated=False)),
    }
    if curves.triad_unc is not None:
        out["dt_unc"] = float(core.dt_cpl(curves.triad_unc, eps))
    return out
