"""Geo page's map: a pydeck deck (no base map, no outside request) of the mechanism's cells coloured by
P(report | true location) or expected error, the roads, the candidate and true locations, sampled reports
and a scale bar, with its colour scale and legend."""

from __future__ import annotations

import html
import json
import math
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass

import numpy as np
import pydeck as pdk
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from mdp_core.geo import GeoComparison, GeoMechanism, RoadNetwork
from ui import jobs
from ui.geo import (
    GeoConfig,
    cached_network,
    cached_problem,
    candidates,
    map_key,
    mechanism_key,
    request_mechanism,
)
from ui.markdown import md
from ui.store import store

__all__ = [
    "ATTRIBUTION",
    "IN_USE",
    "MAP_HEIGHT",
    "NO_BASE_MAP",
    "N_REPORTS",
    "GeoView",
    "colour_scale",
    "deck",
    "legend_html",
    "outputs_in_use",
    "sample_reports",
    "show",
]

ATTRIBUTION = "Map data © OpenStreetMap contributors (ODbL)"
#: Map height in pixels (issue 15: at least 640).
MAP_HEIGHT = 680
#: Width (px) assumed when fitting the view to the network's bounds (the wide layout is wider).
FIT_WIDTH = 900
#: Streamlit's deck.gl frontend (1.67) fills a missing/null ``mapStyle`` with a CARTO basemap from
#: basemaps.cartocdn.com; this sentinel value is the one it treats as "no base map" (checked in its bundle).
NO_BASE_MAP = "__MAP_STYLE__"
#: Poll interval (s) of the shown mechanism's build: the picture lands up to this long after it (a
#: fragment run reads one progress value, so a quarter second costs nothing; the table polls each second).
MAP_POLL_SECONDS = 0.25
#: Sampled reports drawn from the shown row.
N_REPORTS = 40
#: Probability above which an output counts as reported (the caption's "of them reported").
IN_USE = 1e-6
#: Sequential colour scale (low -> high), light yellow to dark red (ColorBrewer YlOrRd, 7 classes).
_SCALE = ("#ffffb2", "#fed976", "#feb24c", "#fd8d3c", "#fc4e2a", "#e31a1c", "#b10026")


def sample_reports(mech: GeoMechanism, true_index: int, count: int, seed: int) -> np.ndarray:
    """Output indices of ``count`` reports drawn from the row of ``true_index`` (seeded by seed and row)."""
    row = mech.matrix[true_index]
    rng = np.random.default_rng([seed, true_index])
    return rng.choice(len(row), size=count, p=row / row.sum())


# --------------------------------------------------------------------------------------------------- drawing


def colour_scale(
    values: np.ndarray, vmax: float, alpha: int = 170, hide_at_most: float | None = None
) -> np.ndarray:
    """RGBA (uint8, shape (n, 4)) of ``values`` on the sequential scale from 0 to ``vmax`` (linear); values
    at most ``hide_at_most`` are transparent (cells never reported looked like rarely reported ones)."""
    stops = np.array([[int(c[i : i + 2], 16) for i in (1, 3, 5)] for c in _SCALE], dtype=np.float64)
    t = np.clip(np.asarray(values, dtype=np.float64) / vmax if vmax > 0 else 0.0, 0.0, 1.0)
    pos = t * (len(stops) - 1)
    lo = np.minimum(np.floor(pos).astype(int), len(stops) - 2)
    frac = (pos - lo)[:, None]
    rgb = (1 - frac) * stops[lo] + frac * stops[lo + 1]
    out = np.empty((len(t), 4), dtype=np.uint8)
    out[:, :3] = np.round(rgb)
    out[:, 3] = alpha
    if hide_at_most is not None:
        out[np.asarray(values) <= hide_at_most, 3] = 0
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


def _cells(config: GeoConfig) -> tuple[list[str], list[str], list]:
    """Polygons of output cells (side h0) and target cells (side h_fine), each as its compact JSON text, and
    candidate lon/lat. Cached per grid (map, seed cells, depth): the seed only moves the task points, so a
    seed change, a recolour or another eps reuses them, and no run encodes the polygons again."""

    def build() -> tuple[list[str], list[str], list]:
        problem = cached_problem(config)
        net, grid = problem.network, problem.grid
        cand_xy, _ = candidates(config.city)
        return (
            _polygon_texts(_squares(net, problem.outputs_km, grid.h0)),
            _polygon_texts(_squares(net, problem.targets_km, grid.h_fine)),
            np.round(net.to_lonlat(cand_xy), 6).tolist(),
        )

    return store().get_or_compute(("cells", config.city, config.seed_n, config.depth), build)


def _polygon_texts(polygons: list[list[list[float]]]) -> list[str]:
    """Each polygon's compact JSON text."""
    return [json.dumps(poly, separators=(",", ":")) for poly in polygons]


def _cell_data(
    cells: list[str], values: np.ndarray, vmax: float, field: str, tip: str, scale: float, hide: float | None
) -> str:
    """JSON text of a cell layer's data: one object per cell (polygon, colour on the scale to ``vmax``, value
    under ``field``, tooltip ``tip.format(scale * value)``), spliced from the cells' cached polygon texts
    (json.dumps of the nested polygon lists was most of a recolour's time at depth 4); cells at most ``hide``
    are transparent."""
    colours = colour_scale(values, vmax, hide_at_most=hide).tolist()
    shown = (scale * np.asarray(values, dtype=np.float64)).tolist()
    rows = (  # the tips are this module's plain-ASCII formats: nothing to escape
        f'{{"polygon":{poly},"color":[{r},{g},{b},{a}],"{field}":{v!r},"tip":"{tip.format(t)}"}}'
        for poly, (r, g, b, a), v, t in zip(
            cells, colours, np.asarray(values, dtype=np.float64).tolist(), shown, strict=True
        )
    )
    return "[" + ",".join(rows) + "]"


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
    if mech is not None:
        if view.colour_by == "error":  # where privacy is expensive: expected error per true location
            values, cells, field, layer_id = mech.error_by_target_km(problem), target_cells, "e", "geo_error"
            tip, scale, hide = "expected error {:.3f} km", 1.0, None
        else:  # the mechanism's row: P(report | true location); cells never reported from it are clear
            values, cells, field, layer_id = mech.matrix[view.true_index], out_cells, "p", "geo_heat"
            tip, scale, hide = "P(report here) = {:.2f} %", 100.0, IN_USE
        vmax = float(values.max())
        cell_data = _cell_data(cells, values, vmax, field, tip, scale, hide)
        layers.append(_polygon_layer(layer_id, "__CELLS__"))
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
    halo = ("geo_scale_halo", [255, 255, 255, 230], 10)  # under the black bar: readable over roads (audit)
    for layer_id, colour, width in (halo, ("geo_scale_bar", [0, 0, 0, 255], 4)):
        layers.append(
            {
                "@@type": "PathLayer",
                "id": layer_id,
                "data": [{"path": bar}],
                "getPath": "@@=path",
                "getColor": colour,
                "getWidth": width,
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
            "fontFamily": "sans-serif",  # the page's, not deck.gl's monospace default
            "background": True,
            "getBackgroundColor": [255, 255, 255, 230],
            "backgroundPadding": [4, 2],
        }
    )
    spec = {
        "initialViewState": _fit_view(net, height),
        "layers": layers,
        "mapStyle": NO_BASE_MAP,
        "views": [{"@@type": "MapView", "controller": True}],
    }
    text = json.dumps(spec, separators=(",", ":")).replace('"__ROADS__"', _roads_json(config.city), 1)
    if mech is not None:
        text = text.replace('"__CELLS__"', cell_data, 1)
    return _JsonDeck(text, tooltip={"text": "{tip}"}), vmax


def _polygon_layer(layer_id: str, data: str) -> dict[str, object]:
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


def show(
    config: GeoConfig,
    eps: float,
    method: str,
    method_label: str,
    view: GeoView,
    true_label: str,
    left: Callable[[], float],
    slots: tuple[DeltaGenerator, DeltaGenerator, DeltaGenerator],
) -> GeoComparison | None:
    """Build (in the background) and paint the shown mechanism: the roads and the true location at once, the
    coloured cells, the legend and the sampled reports when the build lands within ``left()`` seconds, else a
    progress bar polled by a fragment (the page stays usable). ``slots``: the legend, progress and map
    placeholders. Returns the one-method comparison, or None while it is built; a failed build stops the page
    with why."""
    legend, progress_slot, map_slot = slots
    job = request_mechanism(config, eps, method)
    if not job.done():  # first picture now: the roads and the true location while the mechanism is built
        preview, _ = deck(config, None, view, None)
        map_slot.pydeck_chart(preview, height=MAP_HEIGHT)
        _follow(mechanism_key(config, eps, method), job, method_label, left(), progress_slot)
    if job.done():
        progress_slot.empty()
    if job.done() and job.exception() is not None:
        st.error(f"Building {method_label} failed: {md(job.exception())}")
        st.stop()
    if not job.done():
        st.caption(
            f"{method_label} at ε = {eps:.3g}/km is being built; the map colours itself when it is done."
        )
        return None
    comp = job.result()
    mech = comp.mechanisms[method]
    reports = sample_reports(mech, view.true_index, N_REPORTS, config.seed)
    chart, vmax = deck(config, mech, view, reports)
    if view.colour_by == "error":
        legend.html(legend_html("Expected travel error if you are here (km)", vmax, " km", "{:.2f}"))
    else:
        legend.html(legend_html("Probability of reporting each cell (%)", 100 * vmax, " %", "{:.2g}"))
    map_slot.pydeck_chart(
        chart,
        on_select="rerun",
        selection_mode="single-object",
        key=f"geo_map_{map_key(config.city)}",
        height=MAP_HEIGHT,
    )
    problem = cached_problem(config)
    st.caption(
        f"{method_label} at ε = {eps:.3g}/km. "
        + (
            "Colour: expected travel error for a user at each location (all locations). "
            if view.colour_by == "error"
            else f"Colour: probability of each reported cell for the true location {true_label}; cells "
            "without colour are never reported from it. "
        )
        + f"Black: the true location; blue discs: {N_REPORTS} sampled reports (a disc's size: how "
        "many fell in that cell); white dots: candidate true locations (click one). "
        f"{problem.grid.n_targets:,} target vertices, {len(problem.grid.outputs)} outputs "
        f"({outputs_in_use(comp.mechanisms[method])} of them reported by this mechanism), seed spacing "
        f"{problem.grid.h0 * 1000:.0f} m; utility {comp.utility_km[method]:.3f} km. {ATTRIBUTION}"
    )
    return comp


def outputs_in_use(mechanism: GeoMechanism) -> int:
    """Outputs some location reports with probability above :data:`IN_USE`: an optimised mechanism reports
    on the few outputs that serve the task points (a true location's own cell may not be among them)."""
    return int(np.count_nonzero(mechanism.matrix.max(axis=0) > IN_USE))


def _follow(
    key: tuple[object, ...], job: Future[GeoComparison], label: str, seconds: float, slot: DeltaGenerator
) -> None:
    """The build's progress in ``slot`` for up to ``seconds``; then, if it is still running, a fragment that
    polls it every second and re-runs the page when it lands."""
    bar = slot.progress(0.0, text=f"Building {label}…")

    def tick() -> None:
        fraction, message = jobs.builder().progress(key)
        bar.progress(fraction, text=f"Building {label}: {md(message)}")

    if jobs.wait([job], seconds, tick):
        return

    @st.fragment(run_every=MAP_POLL_SECONDS)
    def poll() -> None:
        fraction, message = jobs.builder().progress(key)
        st.progress(fraction, text=f"Building {label}: {md(message)} (the page stays usable)")
        if job.done():
            st.rerun()

    slot.empty()
    with slot.container():
        poll()
