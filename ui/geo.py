"""Geo page glue: cached maps / problems / mechanisms and widget state per map.

Everything here is presentation or caching; the science is in :mod:`mdp_core.geo` (mechanisms, utility,
verification, export). The page (``views/geo.py``) is a short script over these helpers and their siblings:
:mod:`ui.geo_settings` (the map and the settings widgets), :mod:`ui.geo_map` (the pydeck map, the legend and
the shown mechanism's build), :mod:`ui.geo_results` (the optional rows, the comparison table and the
downloads), :mod:`ui.geo_bound` (the lower bound and the exact optimum) and :mod:`ui.geo_curve` (the loss
curve).

Widget state (issue 11, failure 5): every setting widget is keyed per map (``geo_<name>_<map key>``) and is
created with its default equal to its current value, so a browser that re-mounts a widget can only ever
show the value the content was computed with; a new map gets new widgets seeded from the last settings.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import math
import tempfile
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import streamlit as st
from scipy.spatial import cKDTree

import mdp_core.geo as cgeo
from mdp_core._validation import Progress
from mdp_core.errors import DataError
from mdp_core.geo import GeoComparison, GeoMechanism, GeoProblem, RoadNetwork
from mdp_core.geo.verify import pair_work
from ui.jobs import builder
from ui.store import store

__all__ = [
    "BACKGROUND_VERIFY_WORK",
    "CUSTOM",
    "DEFAULT_LEVEL",
    "FINE_GRID_TARGETS",
    "LEVEL_RADIUS_KM",
    "LONG_METHODS",
    "PAGE_FINE_SPANNER_SECONDS",
    "PAGE_LP_SECONDS",
    "PAGE_METHODS",
    "PAGE_VERIFY_WORK",
    "SPANNER_MAX_TARGETS",
    "UPLOAD_TYPES",
    "WAIT_SECONDS",
    "GeoConfig",
    "build_row",
    "cached_network",
    "cached_problem",
    "candidates",
    "eps_meaning",
    "exact_check_key",
    "level_eps",
    "level_label",
    "map_key",
    "mechanism",
    "mechanism_key",
    "method_labels",
    "nearest_target",
    "optimum_claim",
    "prefetch_levels",
    "remember",
    "remembered",
    "request_exact_check",
    "request_mechanism",
    "stop_when_off",
    "store_upload",
    "stored_mechanism",
]

#: File types the uploader accepts (Streamlit checks the last suffix: .osm.pbf -> pbf, .osm.bz2 -> bz2).
UPLOAD_TYPES = ["pbf", "osm", "bz2", "graphml", "xml"]
#: Named privacy levels (DESIGN.md "Geo privacy levels"): odds move at most x2 within r km, eps = ln 2 / r.
LEVEL_RADIUS_KM = {"High": 2.0, "Medium": 0.5, "Low": 0.2}
CUSTOM = "Custom ε"
DEFAULT_LEVEL = "Medium"
#: Candidate true locations offered per map (road nodes spread over the map; depth-independent).
MAX_CANDIDATES = 300
#: Verified random pairs per method on the page (the bench uses 200k) where not every pair is checked.
PAGE_SAMPLES = 50_000
#: Largest check of every pair of targets on the page (pairs x outputs in use; the core's default is 1e9).
#: At depth 3 of the 15 km city (7.1e8) every pair adds ~0.75 s to the three rows (tree 0.44, EM 0.42, EM +
#: remap 0.17 s against 0.08-0.10 sampled), which with the page's 1 s poll put the final picture at 3.5 s:
#: there the rows are checked on the sample first and on every pair once the table is built (below); at
#: depth 2 of either map (<= 1.0e8) on every pair at once, 0.006-0.13 s each.
PAGE_VERIFY_WORK = 3e8
#: Largest check of every pair run in the background for a row checked on the sample (then its numbers and
#: the note are the exact ones): depth 4 of the district (21,171 targets), EM on all 112 outputs, is 2.5e10
#: (~16 s); the city's depth 4 4.7e9 (~3 s a row).
BACKGROUND_VERIFY_WORK = 3e10
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
PAGE_METHODS = (*cgeo.METHODS, *cgeo.CALIBRATED_METHODS, "bilinear", "spanner", "optimal")
#: Builds that run on the long jobs' threads: the reference LPs and the calibrated methods (a few builds
#: each, every pair checked: the 15 km city at depth 2, the tree 7-10 s).
LONG_METHODS = frozenset({*PAGE_LP_SECONDS, *cgeo.CALIBRATED_METHODS})
#: Seconds a page run waits for a queued build before drawing a preview and polling: a build that takes
#: longer than this shows the roads and a progress bar first, so every run answers within a second
#: (issue 11: p95 <= 1 s per rerun; a depth change builds for 1.0-1.2 s on the district).
WAIT_SECONDS = 0.6
_LABELS = {
    "tree": "Tree extension (MLaEt-A)",
    "tree_m": "Tree extension (MLaEt-M)",
    "tree_o": "Tree extension (MLaEt-O)",
    "em": "Exponential mechanism",
    "em_remap": "EM + Bayesian remap",
    "tree_cal": "Tree extension, calibrated ε",
    "em_remap_cal": "EM + remap, calibrated ε",
    "lp_coarse": "LP on seed grid (LP-A, not private)",
    "bilinear": "Bilinear lattice (ε-mDP everywhere)",
    "spanner": "Spanner LP (close to the optimum)",
    "optimal": "Exact optimum (LP over every pair)",
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
    # beyond a million the exact factor (21 digits on a city at Low) says nothing more
    odds = f"×{math.exp(across):,.0f}" if across < math.log(1e6) else "over ×1,000,000"
    said = (
        f"ε = {eps:.3g}/km on this {extent_km[0]:.1f} × {extent_km[1]:.1f} km map: from one report an "
        f"attacker's odds between two places move by at most ×2 if they are {_metres(math.log(2) / eps)} "
        f"apart in a straight line, ×10 at {_metres(math.log(10) / eps)}, and {odds} between opposite "
        f"corners ({diagonal:.1f} km)."
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
    """Write an uploaded map to a temp folder named by its checksum, under the user's file name (what the
    page's messages and the exports' ``city`` then say); return (path, map key).

    The file name keeps the map's suffix (``.osm.pbf``, ``.osm.bz2``, ...), so the core loader knows the
    format.
    """
    digest = hashlib.sha256(data).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / f"mdp_geo_{digest}"
    folder.mkdir(exist_ok=True)
    path = folder / (Path(name).name or "map.osm")  # no folders from the browser's name
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
        mechanism_key(config, eps, method), lambda: build_row(config, eps, method, progress)
    )


def page_lp_seconds(method: str, n_targets: int) -> float | None:
    """Seconds of solver a reference method gets on the page (None: not a reference LP)."""
    if method == "spanner" and n_targets > cgeo.FINE_GRID_TARGETS:
        return PAGE_FINE_SPANNER_SECONDS
    return PAGE_LP_SECONDS.get(method)


def build_row(
    config: GeoConfig, eps: float, method: str, progress: Progress, prebuilt: GeoMechanism | None = None
) -> GeoComparison:
    """One method on ``config`` at ``eps``; the tree variants and the calibrated tree's first build share one
    seed LP through the store.
    ``prebuilt``: the method's mechanism, built before (only scored and verified here)."""
    problem = cached_problem(config)
    seed = None
    if method in cgeo.TREE_VARIANTS or cgeo.CALIBRATED_METHODS.get(method) in cgeo.TREE_VARIANTS:
        seed = store().get_or_compute(
            ("geo-seed", config, round(float(eps), 12)),
            lambda: cgeo.tree_seed(problem, eps, progress=progress),
        )
    comp = cgeo.compare_methods(
        problem,
        eps,
        methods=(method,),
        verify_samples=PAGE_SAMPLES,
        verify_max_work=PAGE_VERIFY_WORK,
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


def request_exact_check(config: GeoConfig, eps: float, comp: GeoComparison) -> Future[GeoComparison] | None:
    """Queue (or find) the check of every pair of targets for a one-method row that was checked on the
    sample; the future's result is the row with the exact check. None: checked on every pair already, or
    above :data:`BACKGROUND_VERIFY_WORK`."""
    ((method, mech),) = comp.mechanisms.items()
    if comp.all_pairs.get(method, True) or pair_work(mech.matrix) > BACKGROUND_VERIFY_WORK:
        return None

    def exact(progress: Progress) -> GeoComparison:
        check = cgeo.verify_geo(mech, exhaustive=True, progress=progress)  # stoppable: see exact_check_key
        return dataclasses.replace(
            comp,
            violation_ratio={method: check.violation_ratio},
            max_excess={method: check.max_excess},
            all_pairs={method: True},
        )

    return builder().request(exact_check_key(config, eps, method), exact, slow=True)


def exact_check_key(config: GeoConfig, eps: float, method: str) -> tuple[object, ...]:
    """Store and job key of one row's check of every pair (a page stops those it no longer shows)."""
    return ("geo-exact", *mechanism_key(config, eps, method)[1:])


def request_mechanism(config: GeoConfig, eps: float, method: str) -> Future[GeoComparison]:
    """Queue (or find) the build of one method; the future's result is a one-method ``GeoComparison``."""

    key, slow = mechanism_key(config, eps, method), method in LONG_METHODS
    build = _optimal_row if method == "optimal" else build_row
    return builder().request(key, lambda progress: build(config, eps, method, progress), slow=slow)


def prefetch_levels(config: GeoConfig, method: str) -> list[Future[GeoComparison]]:
    """Queue ``method`` at the named levels, behind the jobs this page run asked for (the pool is first in,
    first out), so a first switch of level finds its picture built: Chromium, quiet machine, 3.8-4.3 s to a
    level's first heatmap against 0.3-0.8 s to one built before. Quick methods only (LPs when asked for)."""
    if method in LONG_METHODS:  # the reference LPs ("optimal" among them) and the calibrated methods
        return []
    return [request_mechanism(config, level_eps(level), method) for level in LEVEL_RADIUS_KM]


def _optimal_row(config: GeoConfig, eps: float, method: str, progress: Progress) -> GeoComparison:
    """The exact optimum's row, unless a bound that ran the same optimum left it in the store meanwhile."""
    with optimum_claim(config, eps, progress):
        stored = stored_mechanism(config, eps, method)
        return stored if stored is not None else build_row(config, eps, method, progress)


_claims: dict[tuple[object, ...], threading.Event] = {}
_claims_lock = threading.Lock()


@contextlib.contextmanager
def optimum_claim(config: GeoConfig, eps: float, progress: Progress) -> Iterator[None]:
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
