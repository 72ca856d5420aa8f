"""Geo page's loss curve: expected travel error against eps, swept on the background builder (here or on
a Dask cluster) through the store of the page's own builds, and its figure."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from mdp_core._validation import Progress, report
from mdp_core.sweep import compare_over_eps
from ui import jobs, sweep
from ui.geo import (
    PAGE_LP_SECONDS,
    PAGE_SAMPLES,
    PAGE_VERIFY_WORK,
    GeoConfig,
    cached_problem,
    map_key,
    mechanism,
    mechanism_key,
    method_labels,
    request_mechanism,
    stored_mechanism,
)
from ui.jobs import builder
from ui.markdown import md
from ui.store import store

__all__ = [
    "CURVE_EPS",
    "curve_frame",
    "curve_key",
    "fig_loss_curve",
    "request_curve",
    "show_curve",
    "stored_curve",
]

#: eps grid of the loss curve (1/km).
CURVE_EPS = (0.25, 0.5, 1.0, 2.0, 4.0)
_COLOURS = {
    "tree": "#d62728",
    "tree_m": "#ff7f0e",
    "tree_o": "#8c564b",
    "em": "#1f77b4",
    "em_remap": "#2ca02c",
    "tree_cal": "#7f0000",
    "em_remap_cal": "#00441b",
    "lp_coarse": "#9467bd",
    "bilinear": "#17becf",
    "spanner": "#e377c2",
    "optimal": "#000000",
}


def curve_frame(
    config: GeoConfig, methods: list[str], progress: Progress = None, client: Any = False
) -> pd.DataFrame:
    """Expected travel error (km) of ``methods`` over ``CURVE_EPS`` (long format), built through the store.

    Each point is the core's verified one-method comparison (:func:`mechanism`), so points already shown
    on the map or in the table are reused, and the sweep's points serve the map later. With a Dask
    ``client`` (issue 13: the sweep engine) the missing points are built as parallel tasks by
    :func:`mdp_core.sweep.compare_over_eps`, with the page's own seed and samples (the same numbers).
    """
    missing = [(e, m) for e in CURVE_EPS for m in methods if stored_mechanism(config, e, m) is None]
    if missing and client is not False:
        built = compare_over_eps(
            cached_problem(config),
            sorted({e for e, _ in missing}),
            methods=sorted({m for _, m in missing}),
            verify_samples=PAGE_SAMPLES,
            verify_max_work=PAGE_VERIFY_WORK,
            seed=config.seed + 1,
            client=client,
            progress=progress,
        )
        for (e, m), comp in built.items():
            store()[mechanism_key(config, e, m)] = comp
    rows = []
    total = len(CURVE_EPS) * len(methods)
    for i, eps in enumerate(CURVE_EPS):
        for j, method in enumerate(methods):
            if progress is not None:
                progress((i * len(methods) + j) / total, f"ε = {eps:g}/km: {method_labels()[method]}")
            comp = mechanism(config, eps, method)
            rows.append({"eps": eps, "method": method, "utility_km": comp.utility_km[method]})
    return pd.DataFrame(rows)


def request_curve(
    config: GeoConfig, methods: list[str], client: Any = False, connect: Callable[[], Any] | None = None
) -> list[Future[Any]]:
    """Queue (or find) the loss curve on the background builder (the page never waits for it).

    In this process (``client=False``): one future per point. On a Dask ``client``: one future for the
    whole sweep, whose tasks run on the cluster (a page run would otherwise wait for all of them: a random
    walk found a rerun of over 60 s at depth 4); its progress is :meth:`Builder.progress` of
    :func:`curve_key`. ``client=None`` with ``connect``: the job gets the client from ``connect()`` first
    (starting a cluster takes 9-23 s: not in a page run).
    """
    if client is False:
        return [request_mechanism(config, eps, method) for eps in CURVE_EPS for method in methods]

    def sweep(progress: Progress) -> pd.DataFrame:
        on = client
        if on is None:
            if connect is None:
                raise ValueError("client=None needs connect")
            report(progress, 0.0, "starting the Dask engine")
            on = connect()
        return curve_frame(config, methods, progress=progress, client=on)

    return [builder().request(curve_key(config, methods), sweep, slow=True)]


def curve_key(config: GeoConfig, methods: list[str]) -> tuple[object, ...]:
    """Store and builder key of a loss curve swept on a Dask cluster."""
    return ("geo-curve", config, tuple(methods))


def stored_curve(config: GeoConfig, methods: list[str]) -> pd.DataFrame:
    """The loss curve's points already built (long format, ``CURVE_EPS`` order; missing points left out)."""
    rows = [
        {"eps": eps, "method": method, "utility_km": comp.utility_km[method]}
        for eps in CURVE_EPS
        for method in methods
        if (comp := stored_mechanism(config, eps, method)) is not None
    ]
    return pd.DataFrame(rows, columns=["eps", "method", "utility_km"])


def fig_loss_curve(curve: pd.DataFrame) -> go.Figure:
    """Expected travel error (km) against eps (1/km, log axis with round ticks), one line per method."""
    fig = go.Figure()
    labels = method_labels()
    for key, part in curve.groupby("method", sort=False):
        fig.add_scatter(
            x=part["eps"],
            y=part["utility_km"],
            mode="lines+markers",
            name=labels.get(str(key), str(key)),
            line={"color": _COLOURS.get(str(key), "#333333")},
        )
    ticks = list(CURVE_EPS)
    fig.update_layout(
        xaxis={"title": "ε (1/km)", "type": "log", "tickvals": ticks, "ticktext": [f"{t:g}" for t in ticks]},
        yaxis={"title": "expected travel error (km)"},
        height=380,
        # the legend above the plot: below it, Plotly drew the x axis title over its entries (audit)
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0.0},
    )
    return fig


def show_curve(config: GeoConfig, shown: list[str], left: Callable[[], float]) -> None:
    """The loss curve behind its toggle: the engine's choice, the points built in the background (here, one
    job per point, or one sweep on a Dask cluster; the page waits up to ``left()`` s, then polls) and the
    figure of the private methods among ``shown`` (the reference LPs are not swept: one LP per eps)."""
    mk = map_key(config.city)
    key = f"geo_curve_{mk}"
    if not st.toggle(
        "Loss against ε (one build per method and ε)", value=bool(st.session_state.get(key, False)), key=key
    ):
        return
    engines = {label: kind for kind, label in sweep.ENGINES.items()}  # shown labels as options (AppTest)
    label = st.radio(
        "Run the ε sweep",
        list(engines),
        index=list(engines.values()).index("serial"),
        horizontal=True,
        key=f"geo_curve_engine_{mk}",
    )
    kind = engines[label]
    client, where, _ = sweep.engine(kind)  # not started here: the sweep's job starts it (9-23 s)
    st.caption(f"Engine: {where}.")
    curve_slot = st.empty()
    private = [m for m in shown if m not in ("lp_coarse", *PAGE_LP_SECONDS)]
    # on the background builder, like the table (the points here, or one sweep on the cluster): a page
    # run never waits for the sweep
    points = request_curve(
        config, private, client=False if kind == "serial" else client, connect=sweep.engine_getter()
    )
    jobs.wait(points, left())
    built = sum(p.done() for p in points)
    if built < len(points):

        @st.fragment(run_every=jobs.POLL_SECONDS)
        def poll_curve() -> None:
            now = sum(p.done() for p in points)
            if kind == "serial":
                st.progress(now / len(points), text=f"Sweeping ε: {now} of {len(points)} points built")
            else:
                fraction, message = builder().progress(curve_key(config, private))
                st.progress(fraction, text=f"Sweeping ε on the cluster: {md(message)}")
            if now > built:  # more points: redraw the curve with them
                st.rerun()

        with curve_slot.container():
            poll_curve()
    failed = [p.exception() for p in points if p.done() and p.exception() is not None]
    if failed and kind != "serial":
        st.warning(
            f"The sweep on the cluster failed ({md(failed[0])}); the curve shows the points built before. "
            f"Choose “{sweep.ENGINES['serial']}” to build the rest here."
        )
    elif failed:
        st.warning(f"{len(failed)} point(s) of the curve could not be built; the curve leaves them out.")
    st.plotly_chart(fig_loss_curve(stored_curve(config, private)), key="geo_curve_chart")
