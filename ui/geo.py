"""Geo page glue: cached road networks / problems / comparisons, pydeck map and plotly builders."""

from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pydeck as pdk
import streamlit as st

from mdp_core._validation import Progress
from mdp_core.geo import (
    METHODS,
    GeoComparison,
    GeoMechanism,
    GeoProblem,
    RoadNetwork,
    build_problem,
    compare_methods,
    em_remap_geo,
    exponential_geo,
    load_road_network,
    save_mechanism,
    tree_extension,
)

__all__ = [
    "ATTRIBUTION",
    "METHOD_LABELS",
    "GeoConfig",
    "cached_comparison",
    "cached_curve",
    "cached_network",
    "cached_problem",
    "candidate_points",
    "comparison_table",
    "deck",
    "fig_loss_curve",
    "mechanism_npz",
    "sample_reports",
    "store_upload",
]

ATTRIBUTION = "Map data © OpenStreetMap contributors (ODbL)"
METHOD_LABELS = {
    "tree": "Tree extension (MLaEt-A)",
    "em": "Exponential mechanism",
    "em_remap": "EM + Bayesian remap",
    "lp_coarse": "LP on seed grid (LP-A)",
}
METHOD_COLORS = {"tree": "#d62728", "em": "#1f77b4", "em_remap": "#2ca02c", "lp_coarse": "#9467bd"}
#: Candidate true locations offered on the map / in the list.
MAX_CANDIDATES = 400
#: Verified random pairs per method on the page (the bench uses 200k).
PAGE_SAMPLES = 50_000


@dataclass(frozen=True)
class GeoConfig:
    """Everything a cached geo result depends on (hashable cache key)."""

    city: str = "default"
    seed_n: int = 12
    depth: int = 2
    n_tasks: int = 60
    prior: str = "uniform"
    seed: int = 0


def store_upload(name: str, data: bytes) -> str:
    """Write an uploaded map to a temp file named by its checksum; return the path (the cache key)."""
    digest = hashlib.sha256(data).hexdigest()[:16]
    suffix = ".osm.bz2" if name.lower().endswith(".osm.bz2") else Path(name).suffix.lower()
    path = Path(tempfile.gettempdir()) / f"mdp_geo_{digest}{suffix}"
    if not path.exists():
        path.write_bytes(data)
    return str(path)


@st.cache_resource(show_spinner="Loading the road network…", max_entries=4)
def cached_network(city: str) -> RoadNetwork:
    """The (immutable) road network of ``city`` ("default", a file path, or a place name)."""
    return load_road_network(city)


@st.cache_resource(show_spinner="Laying the grid and computing travel distances…", max_entries=8)
def cached_problem(config: GeoConfig) -> GeoProblem:
    """Grid, task points, prior and travel-loss matrix for ``config``."""
    return build_problem(
        cached_network(config.city),
        seed_n=config.seed_n,
        depth=config.depth,
        n_tasks=config.n_tasks,
        prior=config.prior,
        rng=np.random.default_rng(config.seed),
    )


@st.cache_resource(show_spinner=False)
def _comparison_store() -> dict[tuple[GeoConfig, float], GeoComparison]:
    """Process-wide store of comparisons (a plain dict, so progress bars can run outside the cache)."""
    return {}


def cached_comparison(config: GeoConfig, eps: float, progress: Progress = None) -> GeoComparison:
    """All methods built, scored and verified at ``eps``, cached per (config, eps); the 16 newest are kept.

    Not an ``st.cache_*`` function itself: ``progress`` may drive a page's progress bar, which a cached
    function could not replay.
    """
    store = _comparison_store()
    key = (config, float(eps))
    if key not in store:
        store[key] = compare_methods(
            cached_problem(config),
            eps,
            verify_samples=PAGE_SAMPLES,
            rng=np.random.default_rng(config.seed + 1),
            progress=progress,
        )
        while len(store) > 16:
            store.pop(next(iter(store)))
    return store[key]


@st.cache_data(show_spinner=False, max_entries=8)
def cached_curve(config: GeoConfig, eps_values: tuple[float, ...]) -> pd.DataFrame:
    """Expected travel error (km) of tree / EM / EM + remap over a grid of eps (long format)."""
    problem = cached_problem(config)
    rows = []
    for eps in eps_values:
        em = exponential_geo(problem, eps)
        mechs = {
            "tree": tree_extension(problem, eps),
            "em": em,
            "em_remap": em_remap_geo(problem, eps, em=em),
        }
        rows += [{"eps": eps, "method": k, "utility_km": m.utility_km(problem)} for k, m in mechs.items()]
    return pd.DataFrame(rows)


def candidate_points(problem: GeoProblem, limit: int = MAX_CANDIDATES) -> np.ndarray:
    """Indices of targets offered as true locations: an even spread of at most ``limit`` targets."""
    n = problem.grid.n_targets
    if n <= limit:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, limit).round().astype(int))


def sample_reports(mech: GeoMechanism, true_index: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """Output indices of ``count`` reports drawn from the row of ``true_index``."""
    row = mech.matrix[true_index]
    return rng.choice(len(row), size=count, p=row / row.sum())


def comparison_table(comp: GeoComparison) -> pd.DataFrame:
    """One row per method: expected travel error, ratio to EM, construction time, violation ratio."""
    em = comp.utility_km.get("em")
    rows = []
    for key in METHODS:
        if key not in comp.mechanisms:
            continue
        rows.append(
            {
                "method": METHOD_LABELS[key],
                "expected travel error (km)": comp.utility_km[key],
                "vs EM": comp.utility_km[key] / em if em else np.nan,
                "construction (s)": comp.mechanisms[key].seconds,
                "violation ratio": comp.violation_ratio[key],
                "private (checked)": "yes" if comp.max_excess[key] <= 1e-9 else "NO",
            }
        )
    return pd.DataFrame(rows)


def _hex_rgb(color: str, alpha: int = 255) -> list[int]:
    return [int(color[i : i + 2], 16) for i in (1, 3, 5)] + [alpha]


def deck(
    problem: GeoProblem,
    mech: GeoMechanism,
    true_index: int,
    reports: np.ndarray,
    candidates: np.ndarray,
) -> pdk.Deck:
    """Roads (PathLayer), output distribution (heat + sized dots), reports, candidates, the true location.

    No base map: ``map_style=None`` draws the layers on a blank background (works offline).
    """
    net = problem.network
    out_ll = net.to_lonlat(problem.outputs_km)
    row = mech.matrix[true_index]
    dist = pd.DataFrame({"lon": out_ll[:, 0], "lat": out_ll[:, 1], "p": row, "r": 8 + 120 * np.sqrt(row)})
    counts = np.bincount(reports, minlength=len(row))
    hit = np.flatnonzero(counts)
    rep = pd.DataFrame({"lon": out_ll[hit, 0], "lat": out_ll[hit, 1], "n": counts[hit]})
    cand_ll = net.to_lonlat(problem.targets_km[candidates])
    cand = pd.DataFrame({"lon": cand_ll[:, 0], "lat": cand_ll[:, 1], "target": candidates})
    true_ll = net.to_lonlat(problem.targets_km[[true_index]])
    true = pd.DataFrame({"lon": true_ll[:, 0], "lat": true_ll[:, 1]})
    roads = pd.DataFrame({"path": net.paths_lonlat})
    layers = [
        pdk.Layer(
            "PathLayer",
            roads,
            id="geo_roads",
            get_path="path",
            get_color=[120, 120, 120, 200],
            width_min_pixels=1,
            get_width=2,
        ),
        pdk.Layer(
            "HeatmapLayer",
            dist,
            id="geo_heat",
            get_position=["lon", "lat"],
            get_weight="p",
            radius_pixels=40,
            opacity=0.45,
        ),
        pdk.Layer(
            "ScatterplotLayer",
            dist,
            id="geo_outputs",
            get_position=["lon", "lat"],
            get_radius="r",
            get_fill_color=[214, 39, 40, 90],
            stroked=False,
        ),
        pdk.Layer(
            "ScatterplotLayer",
            cand,
            id="geo_targets",
            get_position=["lon", "lat"],
            get_radius=6,
            get_fill_color=[31, 119, 180, 70],
            pickable=True,
            auto_highlight=True,
        ),
        pdk.Layer(
            "ScatterplotLayer",
            rep,
            id="geo_reports",
            get_position=["lon", "lat"],
            get_radius=10,
            radius_min_pixels=3,
            get_fill_color=[255, 140, 0, 230],
        ),
        pdk.Layer(
            "ScatterplotLayer",
            true,
            id="geo_true",
            get_position=["lon", "lat"],
            get_radius=18,
            radius_min_pixels=6,
            get_fill_color=[0, 0, 0, 255],
            get_line_color=[255, 255, 255],
            stroked=True,
            line_width_min_pixels=2,
        ),
    ]
    centre = net.lonlat.mean(axis=0)
    view = pdk.ViewState(longitude=float(centre[0]), latitude=float(centre[1]), zoom=14, pitch=0)
    return pdk.Deck(
        layers=layers, initial_view_state=view, map_style=None, tooltip={"text": "target {target}"}
    )


def fig_loss_curve(curve: pd.DataFrame) -> go.Figure:
    """Expected travel error (km) against eps (1/km, log axis), one line per method."""
    fig = go.Figure()
    for key, part in curve.groupby("method", sort=False):
        fig.add_scatter(
            x=part["eps"],
            y=part["utility_km"],
            mode="lines+markers",
            name=METHOD_LABELS[key],
            line={"color": METHOD_COLORS[key]},
        )
    fig.update_layout(
        xaxis={"title": "ε (1/km)", "type": "log"},
        yaxis={"title": "expected travel error (km)"},
        height=360,
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        legend={"orientation": "h"},
    )
    return fig


def mechanism_npz(mech: GeoMechanism) -> bytes:
    """The mechanism as .npz bytes (targets_km, outputs_km, matrix, eps) for a download button."""
    with tempfile.TemporaryDirectory() as folder:
        path = save_mechanism(mech, Path(folder) / "mechanism.npz")
        return path.read_bytes()
