"""Geo page's inputs: the map (embedded, uploaded or named), and the settings widgets of a map (mechanism,
privacy level or eps, seed cells, depth, colouring, true location, a click on the map), keyed per map; the
chosen location as the map's view (its nearest target, looked up once per grid).

Widget state (issue 11, failure 5): every setting widget is keyed per map (``geo_<name>_<map key>``) and is
created with its default equal to its current value (:func:`ui.geo.remembered`), so a browser that re-mounts
a widget can only ever show the value the content was computed with; a new map gets new widgets seeded from
the last settings.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import streamlit as st
from scipy.spatial import cKDTree
from streamlit.delta_generator import DeltaGenerator

from mdp_core.errors import DataError
from mdp_core.geo import GeoProblem, RoadNetwork
from ui import geo
from ui.geo_map import GeoView
from ui.markdown import md
from ui.store import store
from ui.widgets import eps_slider

__all__ = [
    "SOURCES",
    "VIEWS",
    "Settings",
    "choose_city",
    "choose_settings",
    "load_problem",
    "read_network",
    "true_view",
]

#: Where the map comes from (radio options).
SOURCES = ["Embedded: central Helsinki", "Upload a map file", "Place name (online)"]
#: Colourings of the map: radio label -> ``GeoView.colour_by``.
VIEWS = {
    "Where reports land: P(report | true location)": "report",
    "Where privacy is expensive: expected error per true location": "error",
}


@dataclass(frozen=True)
class Settings:
    """What the page computes and shows, as the widgets hold it."""

    method: str
    method_label: str
    level: str
    eps: float
    seed_n: int
    depth: int
    view_label: str
    true_label: str

    @property
    def colour_by(self) -> str:
        """``"report"`` (P(report | true location)) or ``"error"`` (expected error per location)."""
        return VIEWS[self.view_label]


def choose_city() -> str:
    """The map: ``"default"``, an uploaded file's path or a place name (the page stops without one)."""
    source = st.radio(
        "City",
        SOURCES,
        index=SOURCES.index(geo.remembered("geo_source", "source", SOURCES[0], lambda v: v in SOURCES)),
        horizontal=True,
        key="geo_source",
    )
    if source == "Upload a map file":
        upload = st.file_uploader(
            "OpenStreetMap extract (.osm.pbf, .osm, .osm.bz2) or osmnx .graphml",
            type=geo.UPLOAD_TYPES,
            key="geo_upload",
        )
        if upload is None:
            st.info("Upload a map file, or pick the embedded city.")
            st.stop()
        return geo.store_upload(upload.name, upload.getvalue())[0]
    if source == "Place name (online)":
        city = st.text_input("Place (e.g. 'Kallio, Helsinki')", key="geo_place").strip()
        if not city:
            st.info("Type a district or small town; needs internet access to OpenStreetMap.")
            st.stop()
        return city
    return "default"


def read_network(city: str) -> RoadNetwork:
    """The map's road network (a spinner while it is read; an unreadable map stops the page with why), and
    what the reader left out of it (a cut-off part, a clipped extract) as captions."""
    status = st.empty()
    try:
        with status, st.spinner("Reading the map…"):
            network = geo.cached_network(city)
    except DataError as exc:
        status.empty()
        st.error(md(exc))
        st.stop()
    status.empty()
    for note in network.notes:
        st.caption(md(note))
    return network


def load_problem(config: geo.GeoConfig, slot: DeltaGenerator) -> GeoProblem:
    """The grid, tasks and travel losses of ``config`` (a spinner in ``slot``; a failure stops the page)."""
    try:
        with slot, st.spinner("Laying the grid and computing travel distances…"):
            return geo.cached_problem(config)
    except DataError as exc:
        slot.empty()
        st.error(md(exc))
        st.stop()


def choose_settings(city: str, network: RoadNetwork) -> Settings:
    """The settings widgets of the map ``city`` (created with default = current value: a re-mounted widget
    shows what is computed), remembered for the next map's widgets."""
    mk = geo.map_key(city)
    labels = geo.method_labels()
    by_label = {v: k for k, v in labels.items()}
    levels = [geo.level_label(name) for name in geo.LEVEL_RADIUS_KM] + [geo.CUSTOM]
    c1, c2, c3, c4 = st.columns([2, 3, 1, 1])
    with c1:
        key = f"geo_method_{mk}"
        method_label = st.selectbox(
            "Mechanism shown",
            list(by_label),
            index=list(by_label).index(
                geo.remembered(key, "method", labels["tree"], lambda v: v in by_label)
            ),
            key=key,
        )
    with c2:
        key = f"geo_level_{mk}"
        default_level = geo.level_label(geo.DEFAULT_LEVEL)
        level = st.radio(
            "Privacy level",
            levels,
            index=levels.index(geo.remembered(key, "level", default_level, lambda v: v in levels)),
            key=key,
            help="After Location Guard: how far apart two places must be before one report can double an "
            "attacker's odds between them (ε = ln 2 / r).",
        )
        if level == geo.CUSTOM:
            key = f"geo_eps_{mk}"
            eps = eps_slider(
                "Privacy budget ε (1/km)",
                key=key,
                default=float(geo.remembered(key, "eps", 1.0, lambda v: 0.1 <= float(v) <= 5.0)),
                lo=0.1,
                hi=5.0,
                stops=[geo.level_eps(name) for name in geo.LEVEL_RADIUS_KM],
            )
        else:
            eps = geo.level_eps(level.split(":")[0])
    with c3:
        key = f"geo_seed_n_{mk}"
        seed_n = st.slider(
            "Seed cells",
            4,
            16,
            int(geo.remembered(key, "seed_n", 12, lambda v: 4 <= int(v) <= 16)),
            key=key,
            help="Cells of the seed grid along the map's longer side (each depth level halves them). More "
            "cells: a finer optimised grid and a little less error, but a slower seed LP (the 15 km city at "
            "Medium: 12 cells 1.7 s, 1.718 km; 16 cells 9 s, 1.684 km).",
        )
    with c4:
        key = f"geo_depth_{mk}"
        depth = st.selectbox(
            "Depth",
            [1, 2, 3, 4],
            index=[1, 2, 3, 4].index(geo.remembered(key, "depth", 2, lambda v: v in (1, 2, 3, 4))),
            key=key,
            help="2 × 2 refinements per level.",
        )
    st.caption(geo.eps_meaning(eps, network.extent_km))
    view_label, true_label = _view_and_location(city)
    geo.remember(method=method_label, level=level, eps=eps, seed_n=seed_n, depth=depth, view=view_label)
    return Settings(
        method=by_label[method_label],
        method_label=method_label,
        level=level,
        eps=float(eps),
        seed_n=int(seed_n),
        depth=int(depth),
        view_label=view_label,
        true_label=true_label,
    )


def _view_and_location(city: str) -> tuple[str, str]:
    """The colouring radio and the true-location list (a click on a white dot of the map picks it too)."""
    mk = geo.map_key(city)
    _, cand_labels = geo.candidates(city)
    picks = st.session_state.setdefault("geo_pick", {})
    generation = st.session_state.setdefault("geo_pick_gen", {})
    clicked = (
        (st.session_state.get(f"geo_map_{mk}") or {})
        .get("selection", {})
        .get("objects", {})
        .get("geo_targets")
    )
    if clicked:
        cand = int(clicked[0]["cand"])
        if 0 <= cand < len(cand_labels) and st.session_state.get(f"geo_clicked_{mk}") != cand:
            st.session_state[f"geo_clicked_{mk}"] = (
                cand  # apply a click once, so the list still works after it
            )
            picks[mk] = cand_labels[cand]
            generation[mk] = generation.get(mk, 0) + 1  # a new list widget, created showing the click
    v1, v2 = st.columns([3, 2])
    with v1:
        key = f"geo_view_{mk}"
        view_label = st.radio(
            "Colour the map by",
            list(VIEWS),
            index=list(VIEWS).index(geo.remembered(key, "view", next(iter(VIEWS)), lambda v: v in VIEWS)),
            key=key,
        )
    with v2:
        key = f"geo_true_{mk}_{generation.get(mk, 0)}"
        true_label = st.selectbox(
            "True location (or click a white dot on the map)",
            cand_labels,
            index=cand_labels.index(st.session_state.get(key, picks.get(mk, cand_labels[0]))),
            key=key,
        )
        picks[mk] = true_label
    return view_label, true_label


def true_view(config: geo.GeoConfig, colour_by: str, true_label: str) -> GeoView:
    """The map's view: the colouring and the target nearest the chosen candidate location."""
    _, cand_labels = geo.candidates(config.city)
    cand = cand_labels.index(true_label)
    return GeoView(colour_by=colour_by, true_index=int(_candidate_targets(config)[cand]), candidate=cand)


def _candidate_targets(config: geo.GeoConfig) -> np.ndarray:
    """The target nearest each candidate location, per grid (map, seed cells, depth): one k-d tree query
    for all candidates instead of a tree over every target in every run."""

    def build() -> np.ndarray:
        cand_xy, _ = geo.candidates(config.city)
        return cKDTree(geo.cached_problem(config).targets_km).query(cand_xy)[1].astype(np.int64)

    return store().get_or_compute(("cand-targets", config.city, config.seed_n, config.depth), build)
