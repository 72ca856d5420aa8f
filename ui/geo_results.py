"""Geo page's results: the comparison table (its columns, the bound's headroom and gap, notes), the verdict
sentence under it, and the downloads of the shown mechanism (.npz and GeoJSON, cached in the store)."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

import mdp_core.geo as cgeo
from mdp_core.geo import GeoComparison, GeoMechanism
from ui import geo, jobs
from ui.geo import GeoConfig, cached_problem, method_labels
from ui.geo_bound import OPTIMAL_MAX_TARGETS, optimum_certificate
from ui.markdown import md
from ui.store import store

__all__ = [
    "CHECKING",
    "EXTRAS",
    "HINT_GAP",
    "NEAR_OPTIMAL",
    "TABLE_COLUMNS",
    "TOGGLES_PER_ROW",
    "build_rows",
    "calibration_note",
    "comparison_table",
    "downloads",
    "exact_checks",
    "extra_toggles",
    "geojson_bytes",
    "mechanism_npz",
    "show_table",
    "shown_methods",
    "verdict",
]

#: Session key of the checks of every pair this session asked for last.
EXACT_CHECKS_KEY = "geo_exact_checks"
#: The progress bar's text while rows are checked on every pair in the background.
CHECKING = "Checking every pair of targets (the note under the table then says so):"
#: Optional rows of the table: toggle name -> (label, help) (short labels: three side by side).
EXTRAS = {
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
    "calibrated": (
        "Calibrated ε",
        "The tree extension and EM + remap spending the whole ε: their privacy proofs hold on every map, so "
        "on this one they are private at a smaller ε than asked (the tree often at about half). Each is "
        "built at the largest budget whose exact ε, over every pair of targets and every output, is still "
        "the chosen one (a few builds; every pair checked; EM's remapping then lowers it further, and the "
        "caption gives the exact ε of what is shown). Same guarantee, less error. Maps up to "
        f"{cgeo.CALIBRATE_MAX_TARGETS:,} targets; seconds in the background (up to a minute at depth 4).",
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
        "Close to the optimum: the LP over all mechanisms on every target, with the privacy rows of a "
        "geometric spanner only, raised to ε-mDP on all pairs and checked on all of them; its multipliers "
        f"also certify the lower bound. Maps up to {geo.SPANNER_MAX_TARGETS:,} targets; "
        f"{geo.PAGE_LP_SECONDS['spanner']:.0f} s of LP ({geo.PAGE_FINE_SPANNER_SECONDS:.0f} s above "
        f"{geo.FINE_GRID_TARGETS:,} targets) plus the raise, in the background: about 20 s at depth 1, "
        "half a minute at depth 2, about three minutes at depth 3.",
    ),
    "optimal": (
        "Exact optimum",
        "The best ε-mDP mechanism with these outputs: the LP over every pair of targets, solved exactly by "
        "row generation and checked on all pairs. Its row is the yardstick: the bound becomes exact. Maps "
        f"up to {OPTIMAL_MAX_TARGETS:,} targets (depth 1); 10-90 s in the background.",
    ),
}


#: Toggles side by side (six in one row cut their labels short in a 1,400 px window).
TOGGLES_PER_ROW = 3
#: A gap to the bound above this share, with no near-optimal method shown, points to the toggle of one: on
#: the 15 km city at depth 2, Medium, the tree errs 1.718 km, the 20 s bound says 1.046 and the spanner LP
#: builds a private 1.109 km in 26 s (the district, 20 s bound: the tree 1.6 / 7.2 / 20.7 % above it at
#: High / Medium / Low).
HINT_GAP = 0.10
#: Methods that are near-optimal (or optimal): shown, the hint has nothing to add.
NEAR_OPTIMAL = frozenset({"spanner", "bilinear", "optimal"})


# ------------------------------------------------------------------------------------------- the page's rows


def extra_toggles(config: GeoConfig, eps: float, method: str) -> dict[str, bool]:
    """The toggles of the optional rows, side by side (keyed per map); turning a reference LP off stops its
    build unless it is the mechanism shown on the map."""
    mk = geo.map_key(config.city)
    included: dict[str, bool] = {}
    items = list(EXTRAS.items())
    places = [c for _ in range(0, len(items), TOGGLES_PER_ROW) for c in st.columns(TOGGLES_PER_ROW)]
    for column, (name, (label, help_text)) in zip(places, items, strict=False):
        with column:
            key = f"geo_{name}_{mk}"
            value = bool(geo.remembered(key, name, False))
            stop = geo.stop_when_off if name in geo.PAGE_LP_SECONDS else None  # turned off: a long LP stops
            included[name] = st.toggle(
                label,
                value=value,
                key=key,
                help=help_text,
                on_change=stop,
                args=(key, config, eps, name, method),
            )
    geo.remember(**included)
    return included


def shown_methods(included: dict[str, bool], optimum_offered: bool, method: str) -> list[str]:
    """The table's methods in display order: the defaults, the optional rows toggled on (the exact optimum
    only where it is offered) and the method shown on the map."""
    optional = {
        "tree_m": included["variants"],
        "tree_o": included["variants"],
        "lp_coarse": included["lpa"],
        "tree_cal": included["calibrated"],
        "em_remap_cal": included["calibrated"],
        "bilinear": included["bilinear"],
        "spanner": included["spanner"],
        "optimal": included["optimal"] and optimum_offered,
    }
    return [m for m in method_labels() if optional.get(m, True) or m == method]


def build_rows(
    config: GeoConfig, eps: float, shown: list[str], left: Callable[[], float]
) -> dict[str, GeoComparison]:
    """The comparisons of ``shown`` that are built (waiting up to ``left()`` s for them); a failed build is
    said in a warning, unfinished ones in a progress bar polled by a fragment until they land."""
    labels = method_labels()
    slot = st.empty()
    builds = {m: geo.request_mechanism(config, eps, m) for m in shown}
    text = "Building the other mechanisms…"
    bar = slot.progress(0.0, text=text)

    def tick() -> None:
        bar.progress(sum(j.done() for j in builds.values()) / len(builds), text=text)

    jobs.wait(list(builds.values()), left(), tick)
    slot.empty()
    comps = {m: j.result() for m, j in builds.items() if j.done() and j.exception() is None}
    for m, j in builds.items():
        if j.done() and j.exception() is not None:
            st.warning(f"{labels[m]} could not be built: {md(j.exception())}")
    pending = [labels[m] for m, j in builds.items() if not j.done()]
    if pending:
        with slot.container():  # a row that lands redraws the page with it
            jobs.poll_all(
                list(builds.values()), f"Still building: {', '.join(pending)} (the table fills in by itself)"
            )
    return comps


def exact_checks(
    config: GeoConfig,
    eps: float,
    comps: dict[str, GeoComparison],
    shown: list[str],
) -> dict[str, GeoComparison]:
    """``comps`` with the check of every pair for the rows checked on the sample, once the background has
    finished it (:func:`~ui.geo.request_exact_check`); a progress bar, polled by a fragment, while the
    checks run. They start only when every row of ``shown`` is built, and the page does not wait for them:
    on two cores a check beside a build, or a wait for it, slowed the 15 km city's depth 3 from 1.8-2.1 to
    2.4-3.3 s to the table."""
    # the checks this session started for settings it no longer shows stop: a long-job thread is not held
    # for seconds (the district's EM at depth 4: 16 s) by a check nobody waits for
    keys = {geo.exact_check_key(config, eps, m) for m in shown}
    for stale in st.session_state.get(EXACT_CHECKS_KEY, set()) - keys:
        jobs.builder().cancel(stale)
    st.session_state[EXACT_CHECKS_KEY] = keys
    if any(m not in comps for m in shown):
        return comps
    labels = method_labels()
    jobs_of = {m: geo.request_exact_check(config, eps, c) for m, c in comps.items()}
    checks = {m: job for m, job in jobs_of.items() if job is not None}
    done = {m: job.result() for m, job in checks.items() if job.done() and job.exception() is None}
    if pending := [labels[m] for m, job in checks.items() if not job.done()]:
        # a check that lands redraws the table and its note with it
        jobs.poll_all(list(checks.values()), f"{CHECKING} {', '.join(pending)}")
    return {**comps, **done}


def show_table(comps: dict[str, GeoComparison], bound: Any | None) -> None:
    """The comparison table, the verdict under it and the notes (the check, the best possible)."""
    st.dataframe(
        comparison_table(comps, bound), hide_index=True, width="stretch", column_config=TABLE_COLUMNS
    )
    if said := verdict(comps, bound):
        st.markdown(said)
    notes = [check_note(comps)]
    notes += [calibration_note(comps[key].mechanisms[key]) for key in cgeo.CALIBRATED_METHODS if key in comps]
    how = None
    if bound is not None:
        kind = "exact optimum" if bound.exact else "certified lower bound"
        notes.append(
            f"Best possible with these outputs ({kind}, {bound.seconds:.1f} s; the ⓘ says how it was "
            f"computed): {bound.value:.3f} km; no ε-mDP mechanism has a smaller expected travel error."
            + (
                ""
                if bound.exact
                else " A bound is as tight as the time it got allows: a busy machine gives a looser one in "
                "the same time (both are valid); a longer bound tightens it."
            )
        )
        how = f"How the {kind} was computed: {bound.method}."  # solver words, out of the plain sentence
    st.caption(" ".join(notes), help=how)


def check_note(comps: dict[str, GeoComparison]) -> str:
    """Which pairs of targets the privacy check covered: every pair where affordable (exact), else the
    nearest neighbours and :data:`~ui.geo.PAGE_SAMPLES` random pairs; named per method when they differ."""
    labels = method_labels()
    shown = [key for key in labels if key in comps]
    every = [labels[key] for key in shown if comps[key].all_pairs.get(key)]
    sampled = [labels[key] for key in shown if not comps[key].all_pairs.get(key)]
    on_every = "on every pair of targets"
    on_sample = f"on all nearest-neighbour pairs plus {geo.PAGE_SAMPLES:,} random pairs (too many for all)"
    if every and sampled:
        where = f"{on_every} for {', '.join(every)}; {on_sample} for {', '.join(sampled)}"
    else:
        where = on_every if every else on_sample
    return (
        f"Violation ratio: share of checked (x, x′, y) triples over the bound, {where}; LP-A reports "
        "through the nearest seed and is not private on the fine grid."
    )


def calibration_note(mech: GeoMechanism) -> str:
    """What a calibrated row is: its nominal budget and its exact eps over every pair of targets."""
    return (
        f"{method_labels()[mech.method]}: built at nominal ε {mech.info['nominal_eps']:.3g}/km; its exact ε "
        f"over all {len(mech.targets_km):,} targets' pairs is {mech.info['actual_eps']:.4g}/km ≤ "
        f"{mech.eps:.4g}/km (checked on every pair)."
    )


def downloads(comp: GeoComparison, config: GeoConfig, method: str, eps: float) -> None:
    """Download buttons of the shown mechanism: .npz (with CRS, origin and metadata) and GeoJSON; each file
    is made on its click (0.1 s), not on every run. Their metadata carry the privacy check; a mechanism
    that failed it (LP-A) is said to be not private beside the buttons and in their labels."""
    mech, mk, check = comp.mechanisms[method], geo.map_key(config.city), cgeo.check_metadata(comp, method)
    flag = "" if check["private"] else ", NOT ε-mDP"
    if not check["private"]:
        st.warning(
            f"{method_labels()[method]} is not ε-mDP at {eps:.3g}/km on this grid (its log-ratios exceed "
            f"ε·d by up to {comp.max_excess[method]:.3g}): its files say so (metadata.privacy_check) and "
            "must not be used to release locations."
        )
    d1, d2 = st.columns(2)
    with d1:
        st.download_button(
            f"Download the shown mechanism (.npz, with CRS, origin and metadata{flag})",
            lambda: mechanism_npz(mech, config, check),
            file_name=f"geo_{method}_eps{eps:.3g}.npz",
            key=f"geo_download_{mk}",
        )
    with d2:
        st.download_button(
            f"Download targets and outputs (GeoJSON, WGS84 lon/lat{flag})",
            lambda: geojson_bytes(mech, config, check),
            file_name=f"geo_{method}_eps{eps:.3g}.geojson",
            mime="application/geo+json",
            key=f"geo_geojson_{mk}",
        )


# ---------------------------------------------------------------------------------------------------- tables


#: How the page shows the comparison table's columns (units, digits, what a ratio means).
TABLE_COLUMNS = {
    # wide enough for the longest name, "Exact optimum (LP over every pair)" (it was cut off: audit)
    "method": st.column_config.TextColumn(width=250),
    "expected travel error (km)": st.column_config.NumberColumn(format="%.3f"),
    "vs EM": st.column_config.NumberColumn(format="%.3f", help="Expected travel error / EM's"),
    "at most % better possible": st.column_config.NumberColumn(
        format="%.1f",
        help="Share of this method's error some ε-mDP mechanism with the same outputs may save: "
        "1 − bound / error",
    ),
    "% above the bound": st.column_config.NumberColumn(
        format="%.1f",
        help="100 × (error / bound − 1): how far this method's error is above the certified "
        "lower bound (the same gap as the column before, measured from the bound instead of the error)",
    ),
    "construction (s)": st.column_config.NumberColumn(format="%.2f"),
    "violation ratio": st.column_config.NumberColumn(format="%.2g"),
    "private (checked)": st.column_config.TextColumn(width="medium"),
}


#: The comparison table's last columns: how the privacy check and the construction went.
_CHECK_DETAILS = ("violation ratio", "construction (s)")


def comparison_table(comps: dict[str, GeoComparison], bound: Any | None = None) -> pd.DataFrame:
    """One row per method: travel error, vs EM, the bound's headroom and gap, privacy check, seconds.

    With a bound B (``GeoBound``): "at most X % better possible" is ``1 - B / U`` and "% above the bound"
    ``100 (U / B - 1)`` (private rows only: the bound holds for eps-mDP mechanisms). A tree variant worse
    than EM + remap on the same map and eps gets a note saying so (the calibrated tree: worse than the
    calibrated EM + remap).
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
        private = comp.private(key)
        if bound is not None:
            value = float(bound.value)
            ok = private and u > 0 and value > 0
            row["at most % better possible"] = 100.0 * max(0.0, 1.0 - value / u) if ok else np.nan
            row["% above the bound"] = 100.0 * (u / value - 1.0) if ok else np.nan
        row["construction (s)"] = comp.mechanisms[key].seconds
        row["violation ratio"] = comp.violation_ratio[key]
        row["private (checked)"] = "yes" if private else "NO"
        rival = cgeo.EM_REMAP_RIVAL.get(key)  # like with like: the calibrated tree against calibrated EM
        if rival in utility and u > utility[rival]:
            row["note"] = f"worse than {labels[rival]} by {_percent(100 * (u / utility[rival] - 1))}"
        if key == "optimal":  # out of time, it is not the optimum: say how close it is
            row["note"] = _optimum_note(comp.mechanisms[key], u)
        rows.append(row)
    table = pd.DataFrame(rows)
    if "note" in table:
        table["note"] = table["note"].fillna("")
    # what a reader decides by first: the numbers, whether private, the note; the check's details last
    # (a wide table cut "private (checked)" off its right edge: audit)
    first = [c for c in table.columns if c not in ("note", *_CHECK_DETAILS)]
    return table[first + [c for c in ("note", *_CHECK_DETAILS) if c in table.columns]]


def verdict(comps: dict[str, GeoComparison], bound: Any | None) -> str:
    """In plain words: the private method shown (other than the exact optimum) with the least expected travel
    error, and how far it is from the best possible ("" without a bound or a private method)."""
    labels = method_labels()
    private = {k: c.utility_km[k] for k, c in comps.items() if k != "optimal" and c.private(k)}
    if not private or bound is None or bound.value <= 0:
        return ""
    best = min(private, key=lambda k: private[k])
    better = 100 * max(1 - bound.value / private[best], 0.0)  # the table's "at most % better possible"
    outputs = comps[best].mechanisms[best].matrix.shape[1]
    if bound.exact:
        how_far = f"the best possible, the exact optimum's {bound.value:.3f} km, is {better:.1f} % less"
    else:  # the optimum lies between the bound and the best method
        how_far = f"at most {better:.1f} % less is possible (no ε-mDP mechanism reporting one of these "
        how_far += f"{outputs:,} output points errs less than {bound.value:.3f} km)"
    others = " apart from the exact optimum" if "optimal" in comps else ""  # it errs least by definition
    said = (
        f"Of the private methods shown{others}, **{labels[best]}** has the least expected travel error "
        f"({private[best]:.3f} km): {how_far}."
    )
    if not bound.exact and better >= 100 * HINT_GAP and not NEAR_OPTIMAL & comps.keys():
        said += _closer_hint(comps[best].mechanisms[best].matrix.shape[0])
    return said


def _closer_hint(n_targets: int) -> str:
    """Which toggle shows how much of a wide gap a mechanism can close (the bound may be loose too)."""
    fits = n_targets <= geo.SPANNER_MAX_TARGETS
    names = [EXTRAS[k][0] for k in ("bilinear", "spanner") if k == "bilinear" or fits]
    which = " or ".join(f"**{name}**" for name in names)
    return (
        f" The optimum lies somewhere in that range: turn on {which} above for a private mechanism close to "
        "it (built in the background; which is closer depends on the map and depth) to see how much of the "
        "range a mechanism can close."
    )


def _percent(value: float) -> str:
    """A positive percentage in words: "< 0.1 %" rather than "0.0 %" (the table's "worse by" note)."""
    return "< 0.1 %" if value < 0.05 else f"{value:.1f} %"


def _optimum_note(optimum: GeoMechanism, utility: float) -> str:
    """Nothing when the optimum is exact, else how far above the optimum its mechanism may be."""
    certificate = optimum_certificate(optimum)
    if certificate.exact:
        return ""
    if certificate.value <= 0:
        return "not closed in time: no certificate yet"
    return f"not closed in time: at most {100 * (utility / certificate.value - 1):.2f} % above the optimum"


# --------------------------------------------------------------------------------------------------- exports


def mechanism_npz(mech: GeoMechanism, config: GeoConfig, check: dict[str, object]) -> bytes:
    """The mechanism as .npz bytes (core ``save_mechanism``: arrays, CRS, origin and metadata with the
    privacy ``check``), cached."""
    key = ("npz", config, round(float(mech.eps), 12), mech.method, tuple(check.items()))
    return store().get_or_compute(key, lambda: _npz(mech, config, check))


def _npz(mech: GeoMechanism, config: GeoConfig, check: dict[str, object]) -> bytes:
    problem = cached_problem(config)
    with tempfile.TemporaryDirectory() as folder:
        path = cgeo.save_mechanism(
            mech,
            Path(folder) / "mechanism.npz",
            network=problem.network,
            grid=problem.grid,
            seed=config.seed,
            check=check,
        )
        return Path(path).read_bytes()


def geojson_bytes(mech: GeoMechanism, config: GeoConfig, check: dict[str, object]) -> bytes:
    """GeoJSON (WGS84 points of targets and outputs + metadata with the privacy ``check``, core
    ``export_geojson``), cached."""

    def build() -> bytes:
        problem = cached_problem(config)
        doc = cgeo.export_geojson(mech, problem.network, grid=problem.grid, seed=config.seed, check=check)
        return json.dumps(doc, separators=(",", ":")).encode()

    key = ("geojson", config, round(float(mech.eps), 12), mech.method, tuple(check.items()))
    return store().get_or_compute(key, build)
