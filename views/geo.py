"""Geo mechanisms on a city map: tree extension vs EM, EM + remap and LP-A (seed 004), painted as heatmaps."""

from __future__ import annotations

import dataclasses

import streamlit as st

from ui import geo, geo_bound, geo_curve, geo_map, geo_results, geo_settings, jobs
from ui.state import get_state

st.title("Geo mechanisms on a city map")
st.caption(
    "A location mechanism is optimised on a coarse seed grid and extended level by level to a fine grid over "
    "the roads (tree-based extension), then compared with the exponential mechanism, EM + Bayesian "
    "remapping, an LP on the seed grid only and, on request, a lattice LP that is ε-mDP everywhere and a "
    "LP over every target close to the optimum (spanner LP), whose multipliers also bound the best possible "
    "with the same outputs, and, at depth 1, the exact optimum itself. "
    "Utility: expected error in travel distance to task points (km). ε is per km of straight-line "
    "distance between the grid's points (a location is first snapped to its nearest grid point): two "
    "points d km apart are e^(ε·d)-indistinguishable."
)

# ---- the map and its settings (every setting widget is keyed per map: issue 11, failure 5) --------------
city = geo_settings.choose_city()
network = geo_settings.read_network(city)
settings = geo_settings.choose_settings(city, network)
eps = settings.eps

# ---- compute (cached per map, depth, seed cells, eps, method) and paint ---------------------------------
config = geo.GeoConfig(city=city, seed_n=settings.seed_n, depth=settings.depth, seed=get_state().seed)
slots = st.empty(), st.empty(), st.empty()  # the legend, the progress bar, the map
problem = geo_settings.load_problem(config, slots[1])
optimum_offered = geo_bound.optimal_offered(config, eps)
search = geo_bound.optimum_search(config, eps)  # above one block: the longest bound may solve the optimum
if settings.method == "optimal" and not optimum_offered:  # the selectbox offers it on every map
    tree = geo.method_labels()["tree"]
    st.info(geo_bound.optimal_too_large(problem, search == "offer") + f" The map shows {tree} meanwhile.")
    settings = dataclasses.replace(settings, method="tree", method_label=tree)
view = geo_settings.true_view(config, settings.colour_by, settings.true_label)
left = jobs.time_left(geo.WAIT_SECONDS)  # one waiting budget for the whole run
comp = geo_map.show(
    config, eps, settings.method, settings.method_label, view, settings.true_label, left, slots
)

# ---- comparison -----------------------------------------------------------------------------------------
st.subheader("Comparison")
included = geo_results.extra_toggles(config, eps, settings.method)
if included["optimal"] and not optimum_offered:  # asked for where it is not built: say why, in the page
    geo_bound.optimum_notice(config, eps, search)
shown = geo_results.shown_methods(included, optimum_offered, settings.method)
comps = geo_results.build_rows(config, eps, shown, left)
geo.prefetch_levels(config, settings.method)  # after the rows: a first switch of level is instant
comps = geo_results.exact_checks(config, eps, comps, shown)
bound = geo_bound.bound_controls(config, eps, comps)
geo_results.show_table(comps, bound)
if comp is not None:
    geo_results.downloads(comp, config, settings.method, eps)
geo_curve.show_curve(config, shown, left)
