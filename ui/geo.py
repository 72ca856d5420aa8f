"""Geo page glue: cached maps / problems / mechanisms, widget state per map, the pydeck map and the legend.

Everything here is presentation or caching; the science is in :mod:`mdp_core.geo` (mechanisms, utility,
verification, export). The page (``views/geo.py``) is a short script over these helpers.

Widget state (issue 11, failure 5): every setting widget is keyed per map (``geo_<name>_<map key>``) and is
created with its default equal to its current value, so a browser that re-mounts a widget can only ever
show the value the content was computed with; a new map gets new widgets seeded from the last settings.
"""

from __future__ import annotations

import contextlib
import hashlib
import html
import json
import math
import tempfile
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pydeck as pdk
import streamlit as st
from scipy.spatial import cKDTree

import mdp_core.geo as cgeo
from mdp_core._validation import Progress, report
from mdp_core.errors import DataError
from mdp_core.geo import GeoComparison, GeoMechanism, GeoProblem, RoadNetwork, cosets
from mdp_core.sweep import compare_over_eps
from ui.jobs import POLL_SECONDS, Builder, BuildStoppedError, builder, poll, time_left, wait
from ui.store import store

__all__ = [
    "ATTRIBUTION",
    "BOUND_SECONDS",
    "BOUND_TIMES",
    "CUSTOM",
    "DEFAULT_LEVEL",
    "FINE_GRID_TARGETS",
    "LEVEL_RADIUS_KM",
    "MAP_HEIGHT",
    "NO_BASE_MAP",
    "OPTIMAL_MAX_TARGETS",
    "PAGE_FINE_SPANNER_SECONDS",
    "PAGE_LP_SECONDS",
    "PAGE_METHODS",
    "POLL_SECONDS",
    "SPANNER_MAX_TARGETS",
    "TABLE_COLUMNS",
    "UPLOAD_TYPES",
    "WAIT_SECONDS",
    "BuildStoppedError",
    "Builder",
    "GeoConfig",
    "GeoView",
    "best_bound",
    "bound_available",
    "bound_key",
    "bound_time_help",
    "builder",
    "cached_bound",
    "cached_network",
    "cached_problem",
    "candidates",
    "colour_scale",
    "comparison_table",
    "curve_frame",
    "curve_key",
    "deck",
    "eps_meaning",
    "fig_loss_curve",
    "geojson_bytes",
    "legend_html",
    "level_eps",
    "level_label",
    "map_key",
    "mechanism",
    "mechanism_key",
    "mechanism_npz",
    "method_labels",
    "nearest_target",
    "optimal_offered",
    "optimal_too_large",
    "optimum_search",
    "poll",
    "remember",
    "remembered",
    "request_bound",
    "request_curve",
    "request_mechanism",
    "sample_reports",
    "seconds_label",
    "stop_when_off",
    "store",
    "store_upload",
    "stored_curve",
    "stored_mechanism",
    "time_left",
    "verdict",
    "wait",
]

ATTRIBUTION = "Map data © OpenStreetMap contributors (ODbL)"
#: File types the uploader accepts (Streamlit checks the last suffix: .osm.pbf -> pbf, .osm.bz2 -> bz2).
UPLOAD_TYPES = ["pbf", "osm", "bz2", "graphml", "xml"]
#: Map height in pixels (issue 15: at least 640).
MAP_HEIGHT = 680
#: Width (px) assumed when fitting the view to the network's bounds (the wide layout is wider).
FIT_WIDTH = 900
#: Named privacy levels (DESIGN.md "Geo privacy levels"): odds move at most x2 within r km, eps = ln 2 / r.
LEVEL_RADIUS_KM = {"High": 2.0, "Medium": 0.5, "Low": 0.2}
CUSTOM = "Custom ε"
DEFAULT_LEVEL = "Medium"
#: Streamlit's deck.gl frontend (1.67) fills a missing/null ``mapStyle`` with a CARTO basemap from
#: basemaps.cartocdn.com; this sentinel value is the one it treats as "no base map" (checked in its bundle).
NO_BASE_MAP = "__MAP_STYLE__"
#: Candidate true locations offered per map (road nodes spread over the map; depth-independent).
MAX_CANDIDATES = 300
#: Verified random pairs per method on the page (the bench uses 200k).
PAGE_SAMPLES = 50_000
#: Time budget (s) of the lower bound on the page (behind a button, with a progress bar).
BOUND_SECONDS = 20.0
#: Times (s) a user can give the bound (on the background builder): more time takes larger cosets
#: (``mdp_core.geo.fitting_step``). The 15 km city at depth 4, eps 1.5 / km: 60 s certify
#: 0.91 km, 300 s (6 x 6 cosets) 0.93, 600 s (4 x 4) 0.95 (the spanner LP's mechanism: 0.99).
BOUND_TIMES = (BOUND_SECONDS, 60.0, 120.0, 300.0, 600.0)
#: Seconds of solver each reference mechanism gets on the page (the bench: 240 bilinear, 60 spanner). The
#: district's default (depth 2, medium eps) takes the bilinear lattice to level 2 in 31 s (0.3674 km;
#: level 0 alone, 20 s: 0.3699; PDLP's 16-gon LP in 10 s, before: 0.3756).
#: The exact optimum (one LP block, up to OPTIMAL_MAX_TARGETS targets), exact at depth 1 at the High /
#: Medium / Low levels in 11.2 / 13.8 / 26.0 s on the district (385 targets), 17.5 / 31.5 / 43.7 s on the
#: 15 km city (406; stop 51); past its time it is the certified bracket's mechanism, and the table says so.
PAGE_LP_SECONDS = {"bilinear": 30.0, "spanner": 20.0, "optimal": 120.0}
#: The spanner LP's seconds on maps of more than FINE_GRID_TARGETS targets, where 20 s of PDLP leave a
#: rough solution that the raise pays for: the 15 km city at depth 3, eps 1 / km, 2.278 km in 54 s in all
#: (worse than EM + remap) against 1.3547 km with 120 s (197 s in all; the bilinear lattice 1.3941).
PAGE_FINE_SPANNER_SECONDS = 120.0
#: Largest map (targets) the spanner LP takes.
SPANNER_MAX_TARGETS = cgeo.SPANNER_MAX_TARGETS
#: Maps above this many targets give the spanner LP :data:`PAGE_FINE_SPANNER_SECONDS`.
FINE_GRID_TARGETS = cgeo.FINE_GRID_TARGETS
#: Methods the page offers: the core's, then the reference LPs (opt-in: 20 s to 3 min per build).
PAGE_METHODS = (*cgeo.METHODS, "bilinear", "spanner", "optimal")
#: Largest map (targets) the exact optimum takes: one LP block (depth 1; depth 0 is not offered).
OPTIMAL_MAX_TARGETS = cgeo.OPTIMAL_MAX_TARGETS
#: Seconds a page run waits for a queued build before drawing a preview and polling: a build that takes
#: longer than this shows the roads and a progress bar first, so every run answers within a second
#: (issue 11: p95 <= 1 s per rerun; a depth change builds for 1.0-1.2 s on the district).
WAIT_SECONDS = 0.6
#: Sampled reports drawn from the shown row.
N_REPORTS = 40
#: eps grid of the loss curve (1/km).
CURVE_EPS = (0.25, 0.5, 1.0, 2.0, 4.0)
#: Sequential colour scale (low -> high), light yellow to dark red (ColorBrewer YlOrRd, 7 classes).
_SCALE = ("#ffffb2", "#fed976", "#feb24c", "#fd8d3c", "#fc4e2a", "#e31a1c", "#b10026")
_LABELS = {
    "tree": "Tree extension (MLaEt-A)",
    "tree_m": "Tree extension (MLaEt-M)",
    "tree_o": "Tree extension (MLaEt-O)",
    "em": "Exponential mechanism",
    "em_remap": "EM + Bayesian remap",
    "lp_coarse": "LP on seed grid (LP-A, not private)",
    "bilinear": "Bilinear lattice (ε-mDP everywhere)",
    "spanner": "Spanner LP (near-optimal)",
    "optimal": "Exact optimum (LP over every pair)",
}
_COLOURS = {
    "tree": "#d62728",
    "tree_m": "#ff7f0e",
    "tree_o": "#8c564b",
    "em": "#1f77b4",
    "em_remap": "#2ca02c",
    "lp_coarse": "#9467bd",
    "bilinear": "#17becf",
    "spanner": "#e377c2",
    "optimal": "#000000",
}


def method_labels() -> dict[str, str]:
    """Method key -> label, in the page's display order (``PAGE_METHODS``)."""
    return {key: _LABELS.get(key, key) for key in PAGE_METHODS}


# -------------------------------------------------------------------------------------------- privacy levels


def level_eps(level: str) -> float:
    """eps (1/km) of a named level: ``ln 2 / r`` (DESIGN.md "Geo privacy levels")."""
    return math.log(2.0) / LEVEL_RADIUS_KM[level]


def level_label(level: str) -> str:
    """Radio label of a named level, e.g. ``"High: odds ×2 at most within 2 km (ε = 0.35/km)"``."""
    r = LEVEL_RADIUS_KM[level]
    where = f"{r:g} km" if r >= 1 else f"{r * 1000:.0f} m"
    return f"{level}: odds ×2 at most within {where} (ε = {level_eps(level):.2f}/km)"


def _metres(km: float) -> str:
    return f"{km:.1f} km" if km >= 1 else f"{km * 1000:.0f} m"


def eps_meaning(eps: float, extent_km: tuple[float, float]) -> str:
    """What ``eps`` (1/km) means on a map of ``extent_km`` (width, height), in metres and odds.

    An eps-mDP report changes an attacker's odds between two places d km apart by at most ``e^(eps d)``:
    x2 at ``d = ln 2 / eps``, x10 at ``ln 10 / eps``, and ``e^(eps D)`` across the map's diagonal D.
    """
    diagonal = float(math.hypot(*extent_km))
    across = eps * diagonal
    odds = f"{math.exp(across):,.0f}" if across < 60 else f"e^{across:.0f}"
    said = (
        f"ε = {eps:.3g}/km on this {extent_km[0]:.1f} × {extent_km[1]:.1f} km map: from one report an "
        f"attacker's odds between two places move by at most ×2 if they are {_metres(math.log(2) / eps)} "
        f"apart, ×10 at {_metres(math.log(10) / eps)}, and ×{odds} between opposite corners "
        f"({diagonal:.1f} km)."
    )
    if across <= 2 * math.log(2):  # the whole map within two x2 steps: reports hardly depend on the place
        said += (
            " The whole map lies within this level's protected distance, so every location reports much the "
            "same few cells: the map is small for this level, not a leak."
        )
    return said


# -------------------------------------------------------------------------------------------- maps and state


@dataclass(frozen=True)
class GeoConfig:
    """Everything a cached problem depends on (hashable cache key)."""

    city: str = "default"
    seed_n: int = 12
    depth: int = 2
    n_tasks: int = 60
    prior: str = "uniform"
    seed: int = 0


def store_upload(name: str, data: bytes) -> tuple[str, str]:
    """Write an uploaded map to a temp file named by its checksum; return (path, map key).

    The path keeps the map's double suffix (``.osm.pbf``, ``.osm.bz2``) so the core loader knows the format.
    """
    digest = hashlib.sha256(data).hexdigest()[:16]
    lower = name.lower()
    suffix = next((s for s in (".osm.pbf", ".osm.bz2") if lower.endswith(s)), Path(lower).suffix)
    path = Path(tempfile.gettempdir()) / f"mdp_geo_{digest}{suffix}"
    if not path.exists():
        path.write_bytes(data)
    return str(path), digest[:10]


def map_key(city: str) -> str:
    """Short key of a map for widget keys: ``default`` or a hash of the path / place name."""
    if city == "default":
        return "default"
    return hashlib.sha256(city.encode()).hexdigest()[:10]


def remembered(key: str, name: str, default: Any, valid: Callable[[Any], bool] = lambda _: True) -> Any:
    """The value a widget ``key`` must be created with: its live value, else the last setting, else default.

    Passing this as the widget's default makes the widget's proto default equal its state, so a re-mounted
    widget can only show the value the page computes with. The last setting (``geo_last``) carries choices
    over to the widgets of a newly loaded map.
    """
    last = st.session_state.setdefault("geo_last", {})
    for value in (st.session_state.get(key), last.get(name)):
        if value is not None and valid(value):
            return value
    return default


def remember(**settings: Any) -> None:
    """Store the settings the page computed with (seed values for the next map's widgets)."""
    st.session_state.setdefault("geo_last", {}).update(settings)


@st.cache_resource(show_spinner=False, max_entries=4)
def cached_network(city: str) -> RoadNetwork:
    """The (immutable) road network of ``city`` ("default", a file path, or a place name)."""
    return cgeo.load_road_network(city)


@st.cache_resource(show_spinner=False, max_entries=8)
def cached_problem(config: GeoConfig) -> GeoProblem:
    """Grid, task points, prior and travel-loss matrix for ``config``."""
    return cgeo.build_problem(
        cached_network(config.city),
        seed_n=config.seed_n,
        depth=config.depth,
        n_tasks=config.n_tasks,
        prior=config.prior,
        rng=np.random.default_rng(config.seed),
    )


@st.cache_resource(show_spinner=False, max_entries=4)
def candidates(city: str) -> tuple[np.ndarray, list[str]]:
    """Candidate true locations of a map: road nodes spread evenly (one per cell of a ~17 x 17 binning).

    Returns positions (km, shape (k, 2)) and their labels, the first being the node nearest the map's
    centre. Independent of grid depth and seed cells, so the chosen location survives those changes.
    """
    net = cached_network(city)
    xy = net.xy_km
    side = max(net.extent_km) / math.sqrt(MAX_CANDIDATES) + 1e-9
    cell = np.floor(xy / side).astype(np.int64)
    centres = (cell + 0.5) * side
    gap = np.hypot(*(xy - centres).T)
    order = np.lexsort((gap, cell[:, 1], cell[:, 0]))
    first = np.ones(len(order), dtype=bool)
    first[1:] = np.any(np.diff(cell[order], axis=0) != 0, axis=1)
    chosen = xy[order[first]]
    middle = np.asarray(net.extent_km) / 2
    chosen = chosen[np.argsort(np.hypot(*(chosen - middle).T), kind="stable")]
    labels = [f"#{k}: {x:.2f} km E, {y:.2f} km N" for k, (x, y) in enumerate(chosen)]
    return chosen, labels


def nearest_target(problem: GeoProblem, point_km: np.ndarray) -> int:
    """Index of the target vertex nearest to ``point_km``."""
    return int(cKDTree(problem.targets_km).query(np.asarray(point_km, dtype=np.float64))[1])


# ------------------------------------------------------------------------------------------------ mechanisms


def mechanism(config: GeoConfig, eps: float, method: str, progress: Progress = None) -> GeoComparison:
    """One method built, scored and verified on ``config`` at ``eps`` (a one-method ``GeoComparison``).

    Cached per (map, seed cells, depth, tasks, prior, seed, eps, method): switching method or location
    re-colours the map from the store without recomputing.
    """
    return store().get_or_compute(
        mechanism_key(config, eps, method), lambda: _build(config, eps, method, progress)
    )


def page_lp_seconds(method: str, n_targets: int) -> float | None:
    """Seconds of solver a reference method gets on the page (None: not a reference LP)."""
    if method == "spanner" and n_targets > cgeo.FINE_GRID_TARGETS:
        return PAGE_FINE_SPANNER_SECONDS
    return PAGE_LP_SECONDS.get(method)


def _build(
    config: GeoConfig, eps: float, method: str, progress: Progress, prebuilt: GeoMechanism | None = None
) -> GeoComparison:
    """One method on ``config`` at ``eps``; the tree variants share one seed LP through the store.
    ``prebuilt``: the method's mechanism, built before (only scored and verified here)."""
    problem = cached_problem(config)
    seed = None
    if method in cgeo.TREE_VARIANTS:
        seed = store().get_or_compute(
            ("geo-seed", config, round(float(eps), 12)),
            lambda: cgeo.tree_seed(problem, eps, progress=progress),
        )
    comp = cgeo.compare_methods(
        problem,
        eps,
        methods=(method,),
        verify_samples=PAGE_SAMPLES,
        rng=np.random.default_rng(config.seed + 1),
        seed=seed,
        reference_seconds=page_lp_seconds(method, problem.grid.n_targets),
        prebuilt=None if prebuilt is None else {method: prebuilt},
        progress=progress,
    )
    if method in comp.failed:  # the page shows the reason where the map would be
        raise DataError(comp.failed[method])
    return comp


def mechanism_key(config: GeoConfig, eps: float, method: str) -> tuple[object, ...]:
    """Store key of one method's comparison."""
    return ("mech", config, round(float(eps), 12), method)


def stop_when_off(toggle_key: str, config: GeoConfig, eps: float, method: str, shown: str) -> None:
    """``on_change`` of a reference LP's toggle: turned off, its build for (config, eps) stops (at its next
    progress report) unless it is the mechanism ``shown`` on the map, so an LP nobody waits for does not
    hold a long job's thread for minutes."""
    if not st.session_state.get(toggle_key) and method != shown:
        builder().cancel(mechanism_key(config, eps, method))


def request_mechanism(config: GeoConfig, eps: float, method: str) -> Future[GeoComparison]:
    """Queue (or find) the build of one method; the future's result is a one-method ``GeoComparison``."""

    key, slow = mechanism_key(config, eps, method), method in PAGE_LP_SECONDS  # the reference LPs: long
    build = _optimal_row if method == "optimal" else _build
    return builder().request(key, lambda progress: build(config, eps, method, progress), slow=slow)


def _optimal_row(config: GeoConfig, eps: float, method: str, progress: Progress) -> GeoComparison:
    """The exact optimum's row, unless a bound that ran the same optimum left it in the store meanwhile."""
    with _optimum_claim(config, eps, progress):
        stored = stored_mechanism(config, eps, method)
        return stored if stored is not None else _build(config, eps, method, progress)


_claims: dict[tuple[object, ...], threading.Event] = {}
_claims_lock = threading.Lock()


@contextlib.contextmanager
def _optimum_claim(config: GeoConfig, eps: float, progress: Progress) -> Iterator[None]:
    """Hold the right to build the exact optimum of (config, eps): the optimum's row and a bound on one block
    both run it (20-90 s at depth 1), so one started while the other runs waits for it (reporting progress, so
    a stop reaches it) and then finds the optimum in the store instead of solving it again on shared cores."""
    key = mechanism_key(config, eps, "optimal")
    while True:
        with _claims_lock:
            held = _claims.get(key)
            if held is None:
                mine = _claims[key] = threading.Event()
                break
        while not held.wait(0.2):
            if progress is not None:
                progress(0.0, "waiting for the exact optimum that another build is solving")
    try:
        yield
    finally:
        with _claims_lock:
            del _claims[key]
        mine.set()


def stored_mechanism(config: GeoConfig, eps: float, method: str) -> GeoComparison | None:
    """The stored one-method comparison, or None when it has not been built yet."""
    return store().get(mechanism_key(config, eps, method))


def bound_available() -> bool:
    """Whether the core offers ``geo_lower_bound`` (DESIGN.md "Geo optimality and export")."""
    return hasattr(cgeo, "geo_lower_bound")


def bound_key(config: GeoConfig, eps: float, seconds: float = BOUND_SECONDS) -> tuple[object, ...]:
    """Store and builder key of the bound of (config, eps) computed within ``seconds``."""
    return ("bound", config, round(float(eps), 12), float(seconds))


def cached_bound(config: GeoConfig, eps: float) -> Any | None:
    """The tightest stored ``GeoBound`` for (config, eps) over the bound times, or None when none is."""
    stored = (store().get(bound_key(config, eps, seconds)) for seconds in BOUND_TIMES)
    return max((b for b in stored if b is not None), key=lambda b: b.value, default=None)


def request_bound(config: GeoConfig, eps: float, seconds: float) -> Future[Any]:
    """Queue (or find) ``mdp_core.geo.auto_lower_bound`` on ``config`` at ``eps`` within ``seconds`` on the
    background builder, so the page stays usable: the coset bound where the cosets get their time (more
    time, larger cosets, a tighter bound: ``fitting_step``), else ``geo_lower_bound``; on a grid of one block,
    and from ``OPTIMUM_SECONDS`` on within ``OPTIMUM_BLOCK_BYTES``, the exact optimum's row generation, exact
    when it closes in time, otherwise a certified bound."""
    key = bound_key(config, eps, seconds)
    return builder().request(key, lambda progress: _bound(config, eps, seconds, progress), slow=True)


def bound_time_help() -> str:
    """What more time buys the bound, from the core's thresholds (``mdp_core.geo.cosets``)."""
    return (
        "More time, a tighter bound: larger cosets on fine grids; the exact optimum, when it closes in the "
        f"time, on grids of up to {cosets.BLOCK_TARGETS:,} targets (depth 0 or 1) and, from "
        f"{seconds_label(cosets.OPTIMUM_SECONDS)} on, on larger grids whose LP blocks fit "
        f"{cosets.OPTIMUM_BLOCK_BYTES / 1e9:g} GB (depth 2). "
        "It runs in the background: the page stays usable, and the bound can be stopped."
    )


def seconds_label(seconds: float) -> str:
    """``20 s``, ``1 min``, ``10 min``: a bound's time as the page shows it."""
    return f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds:g} s"


def _bound(config: GeoConfig, eps: float, seconds: float, progress: Progress) -> Any:
    """``auto_lower_bound``; an optimum that it ran (one block; from ``OPTIMUM_SECONDS`` on depth 2) is
    verified like the page's other builds and kept as its "optimal" row (:func:`_kept_as_row`), for the table
    and the map. Where the row builds the optimum too, one solves it at a time (``_optimum_claim``)."""
    with _optimum_claim(config, eps, progress) if _row_builds_optimum(config) else contextlib.nullcontext():
        return _bound_once(config, eps, seconds, progress)


def _bound_once(config: GeoConfig, eps: float, seconds: float, progress: Progress) -> Any:
    key = mechanism_key(config, eps, "optimal")
    stored = store().get(key)
    if stored is not None and _certificate(stored.mechanisms["optimal"]).exact:
        return _certificate(stored.mechanisms["optimal"])  # nothing tighter to find
    found: list[GeoMechanism] = []
    bound = cgeo.auto_lower_bound(
        cached_problem(config), eps, time_limit=seconds, progress=progress, on_optimum=found.append
    )
    if found and _kept_as_row(config, eps, found[0]):  # (it runs the optimum once)
        with contextlib.suppress(DataError):  # a row the page cannot check is left out, never the bound
            store()[key] = _build(config, eps, "optimal", progress, prebuilt=found[0])
    return bound


def _kept_as_row(config: GeoConfig, eps: float, optimum: GeoMechanism) -> bool:
    """Whether an optimum that a bound ran becomes the page's "optimal" row: when exact (unless an exact one
    is kept); not closed in time, only on maps above the row's own limit, where nothing else would show it
    (the table then says how far above the optimum it may be)."""
    kept = stored_mechanism(config, eps, "optimal")
    if _certificate(optimum).exact:
        return kept is None or not _certificate(kept.mechanisms["optimal"]).exact
    return kept is None and not _row_builds_optimum(config)


def _certificate(mech: GeoMechanism) -> Any:
    """The ``GeoBound`` an LP mechanism carries (the exact optimum's: exact when its bracket closed)."""
    return mech.info["lower_bound"]


def optimal_offered(config: GeoConfig, eps: float) -> bool:
    """Whether the page offers the exact optimum on ``config`` at ``eps``: it builds it on one LP block, and
    shows it on larger maps where a bound of :data:`~mdp_core.geo.cosets.OPTIMUM_SECONDS` or more found it."""
    return _row_builds_optimum(config) or stored_mechanism(config, eps, "optimal") is not None


def _row_builds_optimum(config: GeoConfig) -> bool:
    """Whether the optimum's row builds it itself on this map (one LP block, ``OPTIMAL_MAX_TARGETS``)."""
    return cached_problem(config).grid.n_targets <= OPTIMAL_MAX_TARGETS


def optimal_too_large(problem: GeoProblem, reachable: bool) -> str:
    """Why the exact optimum is not offered on ``problem``, and what to pick instead (``reachable``: the
    longest bound would solve it here, :func:`optimum_search`)."""
    text = (
        f"The exact optimum is built on maps of up to {OPTIMAL_MAX_TARGETS:,} target vertices; this one "
        f"has {problem.grid.n_targets:,}. Pick depth 1 (or fewer seed cells) to see it, or the spanner LP, "
        f"which is near-optimal on maps of up to {SPANNER_MAX_TARGETS:,} targets."
    )
    if reachable:
        longest = seconds_label(max(BOUND_TIMES))
        text += f" Or let the {longest} lower bound find it: on this map it solves the exact optimum."
    return text


def optimum_search(config: GeoConfig, eps: float) -> str:
    """Where the page's longest bound stands in finding the exact optimum of (config, eps) that the page does
    not offer yet: ``"offer"`` (it would solve it and has not run), ``"running"``, ``"missed"`` (it ran and
    did not find it), or ``""`` (offered already, or no bound reaches it on this map)."""
    longest = max(BOUND_TIMES)
    if optimal_offered(config, eps) or not cosets.tries_optimum(cached_problem(config), longest):
        return ""
    job = builder().job(bound_key(config, eps, longest))
    if job is not None and not job.done():
        return "running"
    return "missed" if store().get(bound_key(config, eps, longest)) is not None else "offer"


def best_bound(bound: Any | None, comps: dict[str, GeoComparison]) -> Any | None:
    """The tightest of the page's bound (or none) and the certificates of the spanner LP and the exact
    optimum, when built."""
    certified = [comps[m].mechanisms[m] for m in ("spanner", "optimal") if m in comps]
    return cgeo.tighter_bound(bound, *certified)


def sample_reports(mech: GeoMechanism, true_index: int, count: int, seed: int) -> np.ndarray:
    """Output indices of ``count`` reports drawn from the row of ``true_index`` (seeded by seed and row)."""
    row = mech.matrix[true_index]
    rng = np.random.default_rng([seed, true_index])
    return rng.choice(len(row), size=count, p=row / row.sum())


# ---------------------------------------------------------------------------------------------------- tables


#: How the page shows the comparison table's columns (units, digits, what a ratio means).
TABLE_COLUMNS = {
    "expected travel error (km)": st.column_config.NumberColumn(format="%.3f"),
    "vs EM": st.column_config.NumberColumn(format="%.3f", help="Expected travel error / EM's"),
    "at most % better possible": st.column_config.NumberColumn(
        format="%.1f", help="Share of this method's error some ε-mDP mechanism may save: 1 − bound / error"
    ),
    "gap to bound": st.column_config.NumberColumn(
        format="%.3f", help="Error / bound − 1 (0.084: 8.4 % above the certified lower bound)"
    ),
    "construction (s)": st.column_config.NumberColumn(format="%.2f"),
    "violation ratio": st.column_config.NumberColumn(format="%.2g"),
    "private (checked)": st.column_config.TextColumn(width="medium"),
}


def comparison_table(comps: dict[str, GeoComparison], bound: Any | None = None) -> pd.DataFrame:
    """One row per method: travel error, vs EM, the bound's headroom and gap, seconds, privacy check.

    With a bound B (``GeoBound``): "at most X % better possible" is ``1 - B / U`` and the gap ``U / B - 1``
    (private rows only: the bound holds for eps-mDP mechanisms). A tree variant worse than EM + remap on the
    same map and eps gets a note saying so.
    """
    labels = method_labels()
    utility = {key: c.utility_km[key] for key, c in comps.items()}
    em = utility.get("em")
    rows = []
    for key in labels:
        if key not in comps:
            continue
        comp, u = comps[key], utility[key]
        row: dict[str, object] = {
            "method": labels[key],
            "expected travel error (km)": u,
            "vs EM": u / em if em else np.nan,
        }
        private = _private(comp, key)
        if bound is not None:
            value = float(bound.value)
            ok = private and u > 0 and value > 0
            row["at most % better possible"] = 100.0 * max(0.0, 1.0 - value / u) if ok else np.nan
            row["gap to bound"] = u / value - 1.0 if ok else np.nan
        row["construction (s)"] = comp.mechanisms[key].seconds
        row["violation ratio"] = comp.violation_ratio[key]
        row["private (checked)"] = "yes" if private else "NO"
        remap = utility.get("em_remap")
        if key.startswith("tree") and remap is not None and u > remap:
            row["note"] = f"worse than EM + remap by {100 * (u / remap - 1):.1f} %"
        if key == "optimal":  # out of time, it is not the optimum: say how close it is
            row["note"] = _optimum_note(comp.mechanisms[key], u)
        rows.append(row)
    table = pd.DataFrame(rows)
    if "note" in table:  # next to the numbers it qualifies, not past the table's right edge
        table["note"] = table["note"].fillna("")
        checks = ["private (checked)", "violation ratio", "construction (s)"]
        table = table[[c for c in table.columns if c not in checks] + checks]
    return table


def _private(comp: GeoComparison, method: str) -> bool:
    """Whether the comparison's check found ``method`` eps-mDP (the bound holds for those rows only)."""
    return comp.max_excess[method] <= 1e-9


def verdict(comps: dict[str, GeoComparison], bound: Any | None) -> str:
    """In plain words: the private method shown (other than the exact optimum) with the least expected travel
    error, and how far it is from the best possible ("" without a bound or a private method)."""
    labels = method_labels()
    private = {k: c.utility_km[k] for k, c in comps.items() if k != "optimal" and _private(c, k)}
    if not private or bound is None or bound.value <= 0:
        return ""
    best = min(private, key=lambda k: private[k])
    better = 100 * max(1 - bound.value / private[best], 0.0)  # the table's "at most % better possible"
    if bound.exact:
        how_far = f"the best possible, the exact optimum's {bound.value:.3f} km, is {better:.1f} % less"
    else:  # the optimum lies between the bound and the best method
        how_far = f"at most {better:.1f} % less is possible (no ε-mDP mechanism errs less than "
        how_far += f"{bound.value:.3f} km)"
    return (
        f"Of the private methods shown, **{labels[best]}** has the least expected travel error "
        f"({private[best]:.3f} km): {how_far}."
    )


def _optimum_note(optimum: GeoMechanism, utility: float) -> str:
    """Nothing when the optimum is exact, else how far above the optimum its mechanism may be."""
    certificate = _certificate(optimum)
    if certificate.exact:
        return ""
    if certificate.value <= 0:
        return "not closed in time: no certificate yet"
    return f"not closed in time: at most {100 * (utility / certificate.value - 1):.2f} % above the optimum"


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
        height=360,
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        legend={"orientation": "h"},
    )
    return fig


# --------------------------------------------------------------------------------------------------- exports


def mechanism_npz(mech: GeoMechanism, config: GeoConfig) -> bytes:
    """The mechanism as .npz bytes (core ``save_mechanism``: arrays, CRS, origin and metadata), cached."""
    key = ("npz", config, round(float(mech.eps), 12), mech.method)
    return store().get_or_compute(key, lambda: _npz(mech, config))


def _npz(mech: GeoMechanism, config: GeoConfig) -> bytes:
    problem = cached_problem(config)
    with tempfile.TemporaryDirectory() as folder:
        path = cgeo.save_mechanism(
            mech, Path(folder) / "mechanism.npz", network=problem.network, grid=problem.grid, seed=config.seed
        )
        return Path(path).read_bytes()


def geojson_bytes(mech: GeoMechanism, config: GeoConfig) -> bytes:
    """GeoJSON (WGS84 points of targets and outputs + metadata, core ``export_geojson``), cached."""

    def build() -> bytes:
        problem = cached_problem(config)
        doc = cgeo.export_geojson(mech, problem.network, grid=problem.grid, seed=config.seed)
        return json.dumps(doc, separators=(",", ":")).encode()

    return store().get_or_compute(("geojson", config, round(float(mech.eps), 12), mech.method), build)


# --------------------------------------------------------------------------------------------------- drawing


def colour_scale(values: np.ndarray, vmax: float, alpha: int = 170) -> np.ndarray:
    """RGBA (uint8, shape (n, 4)) of ``values`` on the sequential scale from 0 to ``vmax`` (linear)."""
    stops = np.array([[int(c[i : i + 2], 16) for i in (1, 3, 5)] for c in _SCALE], dtype=np.float64)
    t = np.clip(np.asarray(values, dtype=np.float64) / vmax if vmax > 0 else 0.0, 0.0, 1.0)
    pos = t * (len(stops) - 1)
    lo = np.minimum(np.floor(pos).astype(int), len(stops) - 2)
    frac = (pos - lo)[:, None]
    rgb = (1 - frac) * stops[lo] + frac * stops[lo + 1]
    out = np.empty((len(t), 4), dtype=np.uint8)
    out[:, :3] = np.round(rgb)
    out[:, 3] = alpha
    return out


def legend_html(title: str, vmax: float, unit: str, fmt: str = "{:.3g}") -> str:
    """A horizontal colour bar (inline CSS, no outside request) from 0 to ``vmax`` with five ticks."""
    gradient = ", ".join(_SCALE)
    ticks = "".join(
        f"<span>{html.escape(fmt.format(vmax * k / 4))}{html.escape(unit)}</span>" for k in range(5)
    )
    return (
        f"<div style='font-size:0.85rem'>{html.escape(title)}"
        f"<div style='height:14px;border:1px solid #888;background:linear-gradient(to right, {gradient})'>"
        "</div><div style='display:flex;justify-content:space-between'>"
        f"{ticks}</div></div>"
    )


def _squares(network: RoadNetwork, centres_km: np.ndarray, side_km: float) -> list[list[list[float]]]:
    """Lon/lat polygons of axis-aligned squares (side ``side_km``) centred at ``centres_km``."""
    half = side_km / 2
    corners = np.array([[-half, -half], [half, -half], [half, half], [-half, half]])
    pts = (centres_km[:, None, :] + corners[None, :, :]).reshape(-1, 2)
    ll = np.round(network.to_lonlat(pts), 6).reshape(len(centres_km), 4, 2)
    return ll.tolist()


def _cells(config: GeoConfig) -> tuple[list, list, list]:
    """Polygons of output cells (side h0) and target cells (side h_fine), candidate lon/lat (per config)."""

    def build() -> tuple[list, list, list]:
        problem = cached_problem(config)
        net, grid = problem.network, problem.grid
        cand_xy, _ = candidates(config.city)
        return (
            _squares(net, problem.outputs_km, grid.h0),
            _squares(net, problem.targets_km, grid.h_fine),
            np.round(net.to_lonlat(cand_xy), 6).tolist(),
        )

    return store().get_or_compute(("cells", config), build)


def _roads_json(city: str) -> str:
    """Compact JSON of the road polylines (cached per map: the big, constant part of every deck)."""
    return store().get_or_compute(
        ("roads", city),
        lambda: json.dumps([{"path": p} for p in cached_network(city).paths_lonlat], separators=(",", ":")),
    )


def _fit_view(network: RoadNetwork, height: int) -> dict[str, float]:
    """Centre and zoom (Web Mercator, deck.gl's 512 px world) that fit the network's bounds."""
    lon0, lat0 = network.lonlat.min(axis=0)
    lon1, lat1 = network.lonlat.max(axis=0)

    def merc(lat: float) -> float:
        return math.log(math.tan(math.pi / 4 + math.radians(lat) / 2))

    z_lon = math.log2(FIT_WIDTH * 360 / (512 * max(lon1 - lon0, 1e-9)))
    z_lat = math.log2(height * 2 * math.pi / (512 * max(merc(lat1) - merc(lat0), 1e-12)))
    return {
        "longitude": float((lon0 + lon1) / 2),
        "latitude": float((lat0 + lat1) / 2),
        "zoom": round(min(z_lon, z_lat) - 0.15, 3),
        "pitch": 0,
        "bearing": 0,
    }


def _scale_bar(network: RoadNetwork) -> tuple[list, list, float]:
    """A round-length scale bar (path + label) in the bottom-left corner of the map."""
    width, height = network.extent_km
    length = next((v for v in (5.0, 2.0, 1.0, 0.5, 0.2, 0.1) if v <= width / 4), 0.05)
    x0, y0 = 0.03 * width, 0.03 * height
    ll = np.round(network.to_lonlat(np.array([[x0, y0], [x0 + length, y0]])), 6).tolist()
    label_at = network.to_lonlat(np.array([[x0 + length / 2, y0 + 0.025 * height]]))[0]
    label = f"{length:g} km" if length >= 1 else f"{length * 1000:.0f} m"
    return ll, [{"position": np.round(label_at, 6).tolist(), "text": label}], length


@dataclass(frozen=True)
class GeoView:
    """What the map shows: 'report' (P(report | true location)) or 'error' (expected error per location)."""

    colour_by: str
    true_index: int
    candidate: int


class _JsonDeck(pdk.Deck):
    """A pydeck Deck whose JSON is given (compact, with the cached road layer spliced in)."""

    def __init__(self, spec: str, tooltip: dict[str, object]) -> None:
        super().__init__(layers=[], map_style=None, tooltip=tooltip)
        self._spec = spec

    def to_json(self) -> str:
        return self._spec


def deck(
    config: GeoConfig,
    mech: GeoMechanism | None,
    view: GeoView,
    reports: np.ndarray | None,
    height: int = MAP_HEIGHT,
) -> tuple[pdk.Deck, float]:
    """The map: coloured cells (P(report | x) on output cells, or expected error on target cells), roads,
    candidate locations (clickable), sampled reports, the true location and a scale bar.

    No base map (``mapStyle`` = ``NO_BASE_MAP``): roads are drawn from the data, so the page makes no
    outside request.
    With ``mech`` None: a preview (roads, candidates, true location) while the mechanism is built.
    Returns the deck and the colour scale's maximum (for the legend; 0 for a preview).
    """
    problem = cached_problem(config)
    net = problem.network
    out_cells, target_cells, cand_ll = _cells(config)
    layers: list[dict[str, object]] = []
    vmax = 0.0
    if mech is None:
        pass
    elif view.colour_by == "error":
        values = mech.error_by_target_km(problem)
        vmax = float(values.max())
        colours = colour_scale(values, vmax).tolist()
        data = [
            {"polygon": poly, "color": c, "e": float(v), "tip": f"expected error {v:.3f} km"}
            for poly, c, v in zip(target_cells, colours, values, strict=True)
        ]
        layers.append(_polygon_layer("geo_error", data))
    else:
        values = mech.matrix[view.true_index]
        vmax = float(values.max())
        colours = colour_scale(values, vmax).tolist()
        data = [
            {"polygon": poly, "color": c, "p": float(v), "tip": f"P(report here) = {100 * v:.2f} %"}
            for poly, c, v in zip(out_cells, colours, values, strict=True)
        ]
        layers.append(_polygon_layer("geo_heat", data))
    layers.append(
        {
            "@@type": "PathLayer",
            "id": "geo_roads",
            "data": "__ROADS__",
            "getPath": "@@=path",
            "getColor": [60, 60, 60, 150],
            "getWidth": 1,
            "widthMinPixels": 1,
            "widthUnits": "pixels",
        }
    )
    out_ll = np.round(net.to_lonlat(problem.outputs_km), 6)
    drawn = np.asarray([] if reports is None else reports, dtype=np.int64)
    counts = np.bincount(drawn, minlength=len(out_ll))
    hit = np.flatnonzero(counts)
    layers.append(
        {
            "@@type": "ScatterplotLayer",
            "id": "geo_targets",
            "data": [
                {"position": p, "cand": k, "tip": f"candidate #{k}: click to make it the true location"}
                for k, p in enumerate(cand_ll)
            ],
            "getPosition": "@@=position",
            "getRadius": 4,
            "radiusUnits": "pixels",
            "getFillColor": [255, 255, 255, 230],  # white rings: not the blue reports
            "getLineColor": [40, 40, 40, 200],
            "stroked": True,
            "lineWidthMinPixels": 1,
            "pickable": True,
            "autoHighlight": True,
        }
    )
    layers.append(
        {
            "@@type": "ScatterplotLayer",
            "id": "geo_reports",
            "data": [
                {
                    "position": out_ll[y].tolist(),
                    "n": int(counts[y]),
                    "r": round(3 + 2 * math.sqrt(counts[y]), 2),
                    "tip": f"{counts[y]} sampled reports",
                }
                for y in hit
            ],
            "getPosition": "@@=position",
            "getRadius": "@@=r",
            "radiusUnits": "pixels",
            "getFillColor": [0, 90, 255, 230],
            "getLineColor": [255, 255, 255, 255],
            "stroked": True,
            "lineWidthMinPixels": 1,
            "pickable": True,
        }
    )
    true_ll = np.round(net.to_lonlat(problem.targets_km[[view.true_index]]), 6)[0].tolist()
    layers.append(
        {
            "@@type": "ScatterplotLayer",
            "id": "geo_true",
            "data": [{"position": true_ll, "tip": "true location"}],
            "getPosition": "@@=position",
            "getRadius": 8,
            "radiusUnits": "pixels",
            "getFillColor": [0, 0, 0, 255],
            "getLineColor": [255, 255, 255, 255],
            "stroked": True,
            "lineWidthMinPixels": 2,
            "pickable": True,
        }
    )
    bar, label, _ = _scale_bar(net)
    layers.append(
        {
            "@@type": "PathLayer",
            "id": "geo_scale_bar",
            "data": [{"path": bar}],
            "getPath": "@@=path",
            "getColor": [0, 0, 0, 255],
            "getWidth": 4,
            "widthUnits": "pixels",
        }
    )
    layers.append(
        {
            "@@type": "TextLayer",
            "id": "geo_scale_label",
            "data": label,
            "getPosition": "@@=position",
            "getText": "@@=text",
            "getSize": 14,
            "getColor": [0, 0, 0, 255],
            "getTextAnchor": "middle",
            "getAlignmentBaseline": "bottom",
        }
    )
    spec = {
        "initialViewState": _fit_view(net, height),
        "layers": layers,
        "mapStyle": NO_BASE_MAP,
        "views": [{"@@type": "MapView", "controller": True}],
    }
    text = json.dumps(spec, separators=(",", ":")).replace('"__ROADS__"', _roads_json(config.city), 1)
    return _JsonDeck(text, tooltip={"text": "{tip}"}), vmax


def _polygon_layer(layer_id: str, data: list[dict[str, object]]) -> dict[str, object]:
    return {
        "@@type": "PolygonLayer",
        "id": layer_id,
        "data": data,
        "getPolygon": "@@=polygon",
        "getFillColor": "@@=color",
        "stroked": False,
        "filled": True,
        "pickable": True,
    }
