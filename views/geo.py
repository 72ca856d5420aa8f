"""Geo mechanisms on a city map: tree extension vs EM, EM + remap and LP-A (seed 004), painted as heatmaps."""

from __future__ import annotations

import streamlit as st

from mdp_core.errors import DataError
from ui import geo, geo_bound, geo_curve, geo_map, geo_results, jobs, sweep
from ui.state import get_state
from ui.store import store
from ui.widgets import eps_slider

st.title("Geo mechanisms on a city map")
st.caption(
    "A location mechanism is optimised on a coarse seed grid and extended level by level to a fine grid over "
    "the roads (tree-based extension), then compared with the exponential mechanism, EM + Bayesian "
    "remapping, an LP on the seed grid only and, on request, a lattice LP that is ε-mDP everywhere and a "
    "near-optimal LP over every target (spanner LP), whose multipliers also bound the best possible, and, "
    "at depth 1, the exact optimum itself. "
    "Utility: expected error in travel distance to task points (km). ε is per km: two places d km apart "
    "are e^(ε·d)-indistinguishable."
)

# ---- the map -------------------------------------------------------------------------------------------
sources = ["Embedded: central Helsinki", "Upload a map file", "Place name (online)"]
source = st.radio(
    "City",
    sources,
    index=sources.index(geo.remembered("geo_source", "source", sources[0], lambda v: v in sources)),
    horizontal=True,
    key="geo_source",
)
city = "default"
if source == "Upload a map file":
    upload = st.file_uploader(
        "OpenStreetMap extract (.osm.pbf, .osm, .osm.bz2) or osmnx .graphml",
        type=geo.UPLOAD_TYPES,
        key="geo_upload",
    )
    if upload is None:
        st.info("Upload a map file, or pick the embedded city.")
        st.stop()
    city, _ = geo.store_upload(upload.name, upload.getvalue())
elif source == "Place name (online)":
    city = st.text_input("Place (e.g. 'Kallio, Helsinki')", key="geo_place").strip()
    if not city:
        st.info("Type a district or small town; needs internet access to OpenStreetMap.")
        st.stop()
mk = geo.map_key(city)  # every setting widget below is keyed per map (issue 11, failure 5)

status = st.empty()
try:
    with status, st.spinner("Reading the map…"):
        network = geo.cached_network(city)
except DataError as exc:
    status.empty()
    st.error(str(exc))
    st.stop()
status.empty()
for note in network.notes:  # what the reader left out of the map (a cut-off part, a clipped extract)
    st.caption(note)

# ---- settings (created with default = current value: a re-mounted widget shows what is computed) -------
labels = geo.method_labels()
by_label = {v: k for k, v in labels.items()}
levels = [geo.level_label(name) for name in geo.LEVEL_RADIUS_KM] + [geo.CUSTOM]
c1, c2, c3, c4 = st.columns([2, 3, 1, 1])
with c1:
    key = f"geo_method_{mk}"
    method_label = st.selectbox(
        "Mechanism shown",
        list(by_label),
        index=list(by_label).index(geo.remembered(key, "method", labels["tree"], lambda v: v in by_label)),
        key=key,
    )
    method = by_label[method_label]
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
        help="Seed-grid cells along the longer side.",
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

views = {
    "Where reports land: P(report | true location)": "report",
    "Where privacy is expensive: expected error per true location": "error",
}
cand_xy, cand_labels = geo.candidates(city)
deck_key = f"geo_map_{mk}"
picks = st.session_state.setdefault("geo_pick", {})
generation = st.session_state.setdefault("geo_pick_gen", {})
clicked = (st.session_state.get(deck_key) or {}).get("selection", {}).get("objects", {}).get("geo_targets")
if clicked:
    cand = int(clicked[0]["cand"])
    if 0 <= cand < len(cand_labels) and st.session_state.get(f"geo_clicked_{mk}") != cand:
        st.session_state[f"geo_clicked_{mk}"] = cand  # apply a click once, so the list still works after it
        picks[mk] = cand_labels[cand]
        generation[mk] = generation.get(mk, 0) + 1  # a new list widget, created showing the click
v1, v2 = st.columns([3, 2])
with v1:
    key = f"geo_view_{mk}"
    view_label = st.radio(
        "Colour the map by",
        list(views),
        index=list(views).index(geo.remembered(key, "view", next(iter(views)), lambda v: v in views)),
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
geo.remember(method=method_label, level=level, eps=eps, seed_n=seed_n, depth=depth, view=view_label)

# ---- compute (cached per map, depth, seed cells, eps, method) and paint ---------------------------------
config = geo.GeoConfig(city=city, seed_n=seed_n, depth=depth, seed=get_state().seed)
legend = st.empty()
progress_slot = st.empty()
map_slot = st.empty()
try:
    with progress_slot, st.spinner("Laying the grid and computing travel distances…"):
        problem = geo.cached_problem(config)
except DataError as exc:
    progress_slot.empty()
    st.error(str(exc))
    st.stop()
optimum_offered = geo_bound.optimal_offered(config, eps)
search = geo_bound.optimum_search(config, eps)  # above one block: the longest bound may solve the optimum
if method == "optimal" and not optimum_offered:  # the selectbox offers it on every map
    st.info(
        geo_bound.optimal_too_large(problem, search == "offer")
        + f" The map shows {labels['tree']} meanwhile."
    )
    method, method_label = "tree", labels["tree"]
cand = cand_labels.index(true_label)
true_index = geo.nearest_target(problem, cand_xy[cand])
view = geo_map.GeoView(colour_by=views[view_label], true_index=true_index, candidate=cand)
left = jobs.time_left(geo.WAIT_SECONDS)  # one waiting budget for the whole run
job = geo.request_mechanism(config, eps, method)
if not job.done():  # first picture now: the roads and the true location while the mechanism is built
    preview, _ = geo_map.deck(config, None, view, None)
    map_slot.pydeck_chart(preview, height=geo_map.MAP_HEIGHT)
    key_ = geo.mechanism_key(config, eps, method)
    bar = progress_slot.progress(0.0, text=f"Building {method_label}…")

    def tick() -> None:
        fraction, message = jobs.builder().progress(key_)
        bar.progress(fraction, text=f"Building {method_label}: {message}")

    if not jobs.wait([job], left(), tick):

        @st.fragment(run_every=jobs.POLL_SECONDS)
        def poll() -> None:
            fraction, message = jobs.builder().progress(key_)
            st.progress(fraction, text=f"Building {method_label}: {message} (the page stays usable)")
            if job.done():
                st.rerun()

        progress_slot.empty()
        with progress_slot.container():
            poll()
if job.done():
    progress_slot.empty()
if job.done() and job.exception() is not None:
    st.error(f"Building {method_label} failed: {job.exception()}")
    st.stop()
comp = job.result() if job.done() else None
if comp is None:
    st.caption(f"{method_label} at ε = {eps:.3g}/km is being built; the map colours itself when it is done.")
else:
    mech = comp.mechanisms[method]
    reports = geo_map.sample_reports(mech, true_index, geo_map.N_REPORTS, get_state().seed)
    chart, vmax = geo_map.deck(config, mech, view, reports)
    if view.colour_by == "error":
        legend.html(geo_map.legend_html("Expected travel error if you are here (km)", vmax, " km", "{:.2f}"))
    else:
        legend.html(geo_map.legend_html("Probability of reporting each cell (%)", 100 * vmax, " %", "{:.2g}"))
    map_slot.pydeck_chart(
        chart,
        on_select="rerun",
        selection_mode="single-object",
        key=deck_key,
        height=geo_map.MAP_HEIGHT,
    )
    st.caption(
        f"{method_label} at ε = {eps:.3g}/km. "
        + (
            "Colour: expected travel error for a user at each location (all locations). "
            if view.colour_by == "error"
            else f"Colour: probability of each reported cell for the true location {true_label}. "
        )
        + f"Black: the true location; blue discs: {geo_map.N_REPORTS} sampled reports (a disc's size: how "
        "many fell in that cell); white dots: candidate true locations (click one). "
        f"{problem.grid.n_targets:,} target vertices, {len(problem.grid.outputs)} outputs, seed spacing "
        f"{problem.grid.h0 * 1000:.0f} m; utility {comp.utility_km[method]:.3f} km. {geo_map.ATTRIBUTION}"
    )

# ---- comparison -----------------------------------------------------------------------------------------
st.subheader("Comparison")
extras = {  # toggle name -> (label, help): optional rows of the table (short labels: five side by side)
    "variants": (
        "MLaEt-M and -O",
        "Two more tree extensions, MLaEt-M and MLaEt-O (Liu and Qiu, a graph-based framework for extending "
        "mDP mechanisms, Sec. 6); one more seed LP each.",
    ),
    "lpa": (
        "LP-A (not private)",
        "The LP on the seed grid (LP-A), a non-private reference from Liu and Qiu: reports through the "
        "nearest seed; slow at large ε.",
    ),
    "bilinear": (
        "Bilinear lattice",
        "LP-A made private: the best mechanism interpolated bilinearly from a lattice, with the gradient "
        "bounded at every cell corner, so it is ε-mDP between any two places. Often the closest to the "
        f"lower bound; up to {geo.PAGE_LP_SECONDS['bilinear']:.0f} s per build (coarse lattice first, "
        "finer while the time allows), in the background.",
    ),
    "spanner": (
        "Spanner LP",
        "Near-optimal: the LP over all mechanisms on every target, with the privacy rows of a geometric "
        "spanner only, raised to ε-mDP on all pairs and checked on all of them; its multipliers also "
        f"certify the lower bound. Maps up to {geo.SPANNER_MAX_TARGETS:,} targets; "
        f"{geo.PAGE_LP_SECONDS['spanner']:.0f} s of LP ({geo.PAGE_FINE_SPANNER_SECONDS:.0f} s above "
        f"{geo.FINE_GRID_TARGETS:,} targets) plus the raise, in the background: about 20 s at depth 1, "
        "half a minute at depth 2, about three minutes at depth 3.",
    ),
    "optimal": (
        "Exact optimum",
        "The best ε-mDP mechanism with these outputs: the LP over every pair of targets, solved exactly by "
        "row generation and checked on all pairs. Its row is the yardstick: the bound becomes exact. Maps "
        f"up to {geo_bound.OPTIMAL_MAX_TARGETS:,} targets (depth 1); 10-90 s in the background.",
    ),
}
included: dict[str, bool] = {}
for column, (name, (label, help_text)) in zip(st.columns(len(extras)), extras.items(), strict=True):
    with column:
        key = f"geo_{name}_{mk}"
        value = bool(geo.remembered(key, name, False))
        stop = geo.stop_when_off if name in geo.PAGE_LP_SECONDS else None  # turned off: a long LP stops
        included[name] = st.toggle(
            label, value=value, key=key, help=help_text, on_change=stop, args=(key, config, eps, name, method)
        )
if included["optimal"] and not optimum_offered:  # asked for where it is not built: say why, in the page
    st.info(geo_bound.optimal_too_large(problem, search == "offer"))
    longest = max(geo_bound.BOUND_TIMES)
    if search == "running":
        st.caption("Finding the exact optimum: the lower bound below is solving it.")
    elif search == "missed":
        st.caption(
            f"The {geo_bound.seconds_label(longest)} bound found no optimum it could check on this map; the "
            "table shows its certified bound."
        )
    elif search == "offer" and st.button(
        f"Find the exact optimum ({geo_bound.seconds_label(longest)} bound, in the background)",
        key="geo_find_optimum",
    ):
        st.session_state[f"geo_bound_time_{mk}"] = longest  # the bound's progress and stop button show
        geo_bound.request_bound(config, eps, longest)
        st.rerun()
optional = {
    "tree_m": included["variants"],
    "tree_o": included["variants"],
    "lp_coarse": included["lpa"],
    "bilinear": included["bilinear"],
    "spanner": included["spanner"],
    "optimal": included["optimal"] and optimum_offered,
}
shown = [m for m in labels if optional.get(m, True) or m == method]
slot = st.empty()
builds = {m: geo.request_mechanism(config, eps, m) for m in shown}
bar = slot.progress(0.0, text="Building the other mechanisms…")
jobs.wait(
    list(builds.values()),
    left(),
    lambda: bar.progress(
        sum(j.done() for j in builds.values()) / len(builds), text="Building the other mechanisms…"
    ),
)
slot.empty()
comps = {m: j.result() for m, j in builds.items() if j.done() and j.exception() is None}
for m, j in builds.items():
    if j.done() and j.exception() is not None:
        st.warning(f"{labels[m]} could not be built: {j.exception()}")
pending = [labels[m] for m, j in builds.items() if not j.done()]
if pending:
    ready = len(builds) - len(pending)

    @st.fragment(run_every=jobs.POLL_SECONDS)
    def poll_table() -> None:
        done = sum(j.done() for j in builds.values())
        st.progress(
            done / len(builds), text=f"Still building: {', '.join(pending)} (the table fills in by itself)"
        )
        if done > ready:  # a row is ready: redraw the page with it
            st.rerun()

    with slot.container():
        poll_table()
geo.remember(**included)
bound = (
    geo_bound.best_bound(geo_bound.cached_bound(config, eps), comps) if geo_bound.bound_available() else None
)
if geo_bound.bound_available():
    b1, b2 = st.columns([3, 2], vertical_alignment="bottom")
    seconds = b2.select_slider(
        "Time for the bound",
        options=geo_bound.BOUND_TIMES,
        format_func=geo_bound.seconds_label,
        key=f"geo_bound_time_{mk}",
        help=geo_bound.bound_time_help(),
    )
    bkey, first = geo_bound.bound_key(config, eps, seconds), seconds <= geo_bound.BOUND_SECONDS
    bound_job = jobs.builder().job(bkey)
    if bound is not None and bound.exact:
        b1.caption("The bound is the exact optimum: more time cannot tighten it.")
    elif (
        store().get(bkey) is None
        and (bound is None or not first)  # 20 s would add nothing to a stored bound
        and (bound_job is None or bound_job.done())
        and b1.button(
            "How far from the best possible? (lower bound)"
            if first
            else f"Tighter bound, in the background (up to {geo_bound.seconds_label(seconds)})",
            key=f"geo_bound_{mk}" if first else "geo_bound_run",
        )
    ):
        # on the builder, even for 20 s: touching a widget meanwhile no longer throws the bound away
        geo_bound.request_bound(config, eps, seconds)
        st.rerun()  # draw the page with the job running (and no start button)
    if bound_job is not None and not bound_job.done():
        with b1:  # cosets stop within a second; HiGHS's PDLP takes no interrupt: a stop waits for its round
            jobs.poll(
                bkey,
                "Stop the bound",
                "geo_bound_stop",
                stopping="Stopping (an LP round runs to its end, at most the time chosen)…",
            )
    elif bound_job is not None and (error := bound_job.exception()) is not None:
        if isinstance(error, jobs.BuildStoppedError):
            b1.info("The bound was stopped; start it again to finish it.")
        else:
            b1.warning(f"The bound could not be computed: {error}")
    bound = geo_bound.cached_bound(config, eps)  # a job may have landed since the top of this run
bound = geo_bound.best_bound(bound, comps)
st.dataframe(
    geo_results.comparison_table(comps, bound),
    hide_index=True,
    width="stretch",
    column_config=geo_results.TABLE_COLUMNS,
)
if said := geo_results.verdict(comps, bound):
    st.markdown(said)
notes = [
    "Violation ratio: share of checked (x, x′, y) triples over the bound, on all nearest-neighbour pairs "
    "plus 50,000 random pairs; LP-A reports through the nearest seed and is not private on the fine grid."
]
if bound is not None:
    kind = "exact optimum" if bound.exact else "certified lower bound"
    what = bound.method if bound.method.startswith(kind) else f"{kind}, {bound.method}"
    notes.append(
        f"Best possible with these outputs ({what}, {bound.seconds:.1f} s): "
        f"{bound.value:.3f} km; no ε-mDP mechanism has a smaller expected travel error."
    )
st.caption(" ".join(notes))

if comp is not None:
    d1, d2 = st.columns(2)
    with d1:
        st.download_button(
            "Download the shown mechanism (.npz, with CRS, origin and metadata)",
            lambda: geo_results.mechanism_npz(mech, config),  # built on the click (0.1 s), not every rerun
            file_name=f"geo_{method}_eps{eps:.3g}.npz",
            key=f"geo_download_{mk}",
        )
    with d2:
        st.download_button(
            "Download targets and outputs (GeoJSON, WGS84 lon/lat)",
            lambda: geo_results.geojson_bytes(mech, config),
            file_name=f"geo_{method}_eps{eps:.3g}.geojson",
            mime="application/geo+json",
            key=f"geo_geojson_{mk}",
        )

key = f"geo_curve_{mk}"
if st.toggle(
    "Loss against ε (one build per method and ε)", value=bool(st.session_state.get(key, False)), key=key
):
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
    private = [m for m in shown if m not in ("lp_coarse", *geo.PAGE_LP_SECONDS)]  # one LP per ε: not swept
    # on the background builder, like the table (the points here, or one sweep on the cluster): a page
    # run never waits for the sweep
    points = geo_curve.request_curve(
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
                fraction, message = jobs.builder().progress(geo_curve.curve_key(config, private))
                st.progress(fraction, text=f"Sweeping ε on the cluster: {message}")
            if now > built:  # more points: redraw the curve with them
                st.rerun()

        with curve_slot.container():
            poll_curve()
    failed = [p.exception() for p in points if p.done() and p.exception() is not None]
    if failed and kind != "serial":
        st.warning(
            f"The sweep on the cluster failed ({failed[0]}); the curve shows the points built before. "
            f"Choose “{sweep.ENGINES['serial']}” to build the rest here."
        )
    elif failed:
        st.warning(f"{len(failed)} point(s) of the curve could not be built; the curve leaves them out.")
    curve = geo_curve.stored_curve(config, private)
    st.plotly_chart(geo_curve.fig_loss_curve(curve), key="geo_curve_chart")
