"""Geo page's lower bound and exact optimum: the bound's background jobs and keys, what more time buys it,
and whether (and why not) the page offers the exact optimum on a map.

An optimum that a bound runs is kept as the page's "optimal" row (built like the rows of :mod:`ui.geo`), and
the optimum's row and a bound on one block solve it once between them (``optimum_claim``).
"""

from __future__ import annotations

import contextlib
from concurrent.futures import Future
from typing import Any

import streamlit as st

import mdp_core.geo as cgeo
from mdp_core._validation import Progress
from mdp_core.errors import DataError
from mdp_core.geo import GeoComparison, GeoMechanism, GeoProblem, cosets
from ui import jobs
from ui.geo import (
    SPANNER_MAX_TARGETS,
    GeoConfig,
    build_row,
    cached_problem,
    map_key,
    mechanism_key,
    optimum_claim,
    stored_mechanism,
)
from ui.jobs import builder
from ui.markdown import md
from ui.store import store

__all__ = [
    "BOUND_SECONDS",
    "BOUND_TIMES",
    "OPTIMAL_MAX_TARGETS",
    "best_bound",
    "bound_available",
    "bound_controls",
    "bound_key",
    "bound_time_help",
    "cached_bound",
    "optimal_offered",
    "optimal_too_large",
    "optimum_certificate",
    "optimum_notice",
    "optimum_search",
    "request_bound",
    "seconds_label",
]

#: Time budget (s) of the lower bound on the page (behind a button, with a progress bar).
BOUND_SECONDS = 20.0
#: Times (s) a user can give the bound (on the background builder): more time takes smaller cells at city
#: scale (``mdp_core.geo.cells.cell_plan``), larger cosets below it. The 15 km city at depth 4, eps 1.5 / km:
#: 20 s certify 0.927 km, 60 s 0.953 (the best verified mechanism: 0.997).
BOUND_TIMES = (BOUND_SECONDS, 60.0, 120.0, 300.0, 600.0)
#: Largest map (targets) the exact optimum takes: one LP block (depth 1; depth 0 is not offered).
OPTIMAL_MAX_TARGETS = cgeo.OPTIMAL_MAX_TARGETS


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
    background builder, so the page stays usable: at city scale the LP over cells (more time, smaller
    cells, a tighter bound), else the coset bound where the cosets get their time (``fitting_step``), else
    ``geo_lower_bound``; on a grid of one block,
    and from ``OPTIMUM_SECONDS`` on within ``OPTIMUM_BLOCK_BYTES``, the exact optimum's row generation, exact
    when it closes in time, otherwise a certified bound."""
    key = bound_key(config, eps, seconds)
    return builder().request(key, lambda progress: _bound(config, eps, seconds, progress), slow=True)


def bound_time_help() -> str:
    """What more time buys the bound, from the core's thresholds (``mdp_core.geo.cosets``)."""
    return (
        "More time, a tighter bound: smaller cells or larger cosets on fine grids; the exact optimum, when "
        f"it closes in the time, on grids of up to {cosets.BLOCK_TARGETS:,} targets (depth 0 or 1) and, from "
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
    and the map. Where the row builds the optimum too, one solves it at a time (``optimum_claim``)."""
    with optimum_claim(config, eps, progress) if _row_builds_optimum(config) else contextlib.nullcontext():
        return _bound_once(config, eps, seconds, progress)


def _bound_once(config: GeoConfig, eps: float, seconds: float, progress: Progress) -> Any:
    key = mechanism_key(config, eps, "optimal")
    stored = store().get(key)
    if stored is not None and optimum_certificate(stored.mechanisms["optimal"]).exact:
        return optimum_certificate(stored.mechanisms["optimal"])  # nothing tighter to find
    found: list[GeoMechanism] = []
    bound = cgeo.auto_lower_bound(
        cached_problem(config), eps, time_limit=seconds, progress=progress, on_optimum=found.append
    )
    if found and _kept_as_row(config, eps, found[0]):  # (it runs the optimum once)
        with contextlib.suppress(DataError):  # a row the page cannot check is left out, never the bound
            store()[key] = build_row(config, eps, "optimal", progress, prebuilt=found[0])
    return bound


def _kept_as_row(config: GeoConfig, eps: float, optimum: GeoMechanism) -> bool:
    """Whether an optimum that a bound ran becomes the page's "optimal" row: when exact (unless an exact one
    is kept); not closed in time, only on maps above the row's own limit, where nothing else would show it
    (the table then says how far above the optimum it may be)."""
    kept = stored_mechanism(config, eps, "optimal")
    if optimum_certificate(optimum).exact:
        return kept is None or not optimum_certificate(kept.mechanisms["optimal"]).exact
    return kept is None and not _row_builds_optimum(config)


def optimum_certificate(mech: GeoMechanism) -> Any:
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
        f"which comes close to it on maps of up to {SPANNER_MAX_TARGETS:,} targets."
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


# ------------------------------------------------------------------------------------------------- the page


def optimum_notice(config: GeoConfig, eps: float, search: str) -> None:
    """Asked for the exact optimum where the page does not build it: why, and where the longest bound stands
    in finding it (``search``: :func:`optimum_search`), with a button that starts it when it would."""
    st.info(optimal_too_large(cached_problem(config), search == "offer"))
    longest = max(BOUND_TIMES)
    if search == "running":
        st.caption("Finding the exact optimum: the lower bound below is solving it.")
    elif search == "missed":
        st.caption(
            f"The {seconds_label(longest)} bound found no optimum it could check on this map; the "
            "table shows its certified bound."
        )
    elif search == "offer" and st.button(
        f"Find the exact optimum ({seconds_label(longest)} bound, in the background)",
        key="geo_find_optimum",
    ):
        st.session_state[f"geo_bound_time_{map_key(config.city)}"] = longest  # its progress and stop show
        request_bound(config, eps, longest)
        st.rerun()


def bound_controls(config: GeoConfig, eps: float, comps: dict[str, GeoComparison]) -> Any | None:
    """The lower bound's time slider, its start button, progress and stop; returns the tightest of the stored
    bound and the built rows' certificates (None without any)."""
    if not bound_available():
        return best_bound(None, comps)
    mk = map_key(config.city)
    bound = best_bound(cached_bound(config, eps), comps)
    b1, b2 = st.columns([3, 2], vertical_alignment="bottom")
    seconds = b2.select_slider(
        "Time for the bound",
        options=BOUND_TIMES,
        format_func=seconds_label,
        key=f"geo_bound_time_{mk}",
        help=bound_time_help(),
    )
    bkey, first = bound_key(config, eps, seconds), seconds <= BOUND_SECONDS
    bound_job = builder().job(bkey)
    if bound is not None and bound.exact:
        b1.caption("The bound is the exact optimum: more time cannot tighten it.")
    elif (
        store().get(bkey) is None
        and (bound is None or not first)  # 20 s would add nothing to a stored bound
        and (bound_job is None or bound_job.done())
        and b1.button(
            "How far from the best possible? (lower bound)"
            if first
            else f"Tighter bound, in the background (up to {seconds_label(seconds)})",
            key=f"geo_bound_{mk}" if first else "geo_bound_run",
        )
    ):
        # on the builder, even for 20 s: touching a widget meanwhile no longer throws the bound away
        request_bound(config, eps, seconds)
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
            b1.warning(f"The bound could not be computed: {md(error)}")
    return best_bound(cached_bound(config, eps), comps)  # a job may have landed since the top of this run
