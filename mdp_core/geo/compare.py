"""One comparison run: the tree extension and the baselines on one city, grid and budget.

Used by the CLI (``python -m mdp_core.geo bench``), ``bench/geo.py`` and the map page.
"""

from __future__ import annotations

import functools
import os
import resource
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from mdp_core._validation import Progress, check_eps, part, report
from mdp_core.errors import DataError
from mdp_core.geo.baselines import em_remap_geo, exponential_geo, lp_coarse
from mdp_core.geo.bilinear import bilinear_mechanism
from mdp_core.geo.bounds import GeoBound
from mdp_core.geo.calibrate import CALIBRATED_METHODS, calibrated_method
from mdp_core.geo.cosets import auto_lower_bound, coset_lower_bound
from mdp_core.geo.extension import GeoMechanism, tree_extension, tree_seed
from mdp_core.geo.optimal import OPTIMAL_ADVICE, OPTIMAL_MAX_TARGETS, coarser_start, optimal_geo_mechanism
from mdp_core.geo.roads import RoadNetwork, load_road_network
from mdp_core.geo.seed_lp import SeedLPResult
from mdp_core.geo.spanner import (
    EXTENSION_SPANNER_SECONDS,
    FINE_GRID_TARGETS,
    SPANNER_FROM_COARSER_TARGETS,
    SPANNER_MAX_TARGETS,
    spanner_from_coarser,
    spanner_mechanism,
)
from mdp_core.geo.utility import GeoProblem, build_problem, check_reach, check_target_count
from mdp_core.geo.verify import GeoVerification, verify_geo
from mdp_core.mechanisms.verify import VIOLATION_TOL

__all__ = [
    "COSET_CHOICES",
    "COSET_CHOICES_TEXT",
    "EM_REMAP_RIVAL",
    "METHODS",
    "REFERENCE_METHODS",
    "TREE_VARIANTS",
    "GeoComparison",
    "compare_methods",
    "peak_memory_mb",
    "run_bench",
    "tighter_bound",
]

#: Method keys, in display order: the three MLaEt variants (A, M, O), EM, EM + remap, LP-A.
METHODS = ("tree", "tree_m", "tree_o", "em", "em_remap", "lp_coarse")
#: Methods compare_methods also builds on request, too slow for the map page (minutes each): the
#: LP on a spanner of the full target domain (:func:`~mdp_core.geo.spanner.spanner_mechanism`, up to
#: SPANNER_MAX_TARGETS targets; :func:`~mdp_core.geo.spanner.spanner_from_coarser` beyond, when the grid
#: one level coarser is given) and the bilinear lattice mechanism
#: (:func:`~mdp_core.geo.bilinear.bilinear_mechanism`, any depth): the best eps-mDP mechanisms we can
#: build at city scale and the fairest yardsticks for the lower bound; and the exact optimum
#: (:func:`~mdp_core.geo.optimal.optimal_geo_mechanism`, up to OPTIMAL_MAX_TARGETS targets: minutes).
REFERENCE_METHODS = ("spanner", "bilinear", "optimal")
#: Seconds of solver each reference mechanism gets inside a comparison (the optimum: its whole time
#: limit). The bilinear lattice refines coarse to fine while the time allows: 240 s take the 15 km city
#: to level 1 (47 + 133 s, 1.136 km at depth 3, eps 1.5 / km), where 60 s stop at level 0 (1.245 km).
SPANNER_SECONDS = 60.0
BILINEAR_SECONDS = 240.0
OPTIMAL_SECONDS = 900.0
_REFERENCE_SECONDS = {"spanner": SPANNER_SECONDS, "bilinear": BILINEAR_SECONDS, "optimal": OPTIMAL_SECONDS}
#: The spanner LP's seconds above :data:`~mdp_core.geo.spanner.FINE_GRID_TARGETS` targets, where PDLP
#: converges slowly: 15 km city at depth 3 (3,469 targets), eps 1.5 / km, 60 / 120 / 200 / 240 s of PDLP:
#: 1.0595 / 1.0353 / 1.0257 / 1.0267 km; at eps 0.5 / 1.0 1.8678 / 1.3959 km with 60 s, 1.7793 / 1.3403
#: with 240 s. The spanner and the raise add 40-70 s: 288-314 s in all, about what 60 s of PDLP took
#: before they were made faster. Depth 2 gains little (eps 1.5: 1.0415 km with 60 s, 1.0379 with 120).
#: These at slack 0.02; after 240 s :func:`~mdp_core.geo.spanner.spanner_slacks` offers 0.005, which raised
#: the same LP solutions to 1.3272 / 1.0142 km at eps 1.0 / 1.5, and the remap to 1.3145 / 1.0067.
FINE_GRID_SPANNER_SECONDS = 240.0
#: Targets up to which :func:`run_bench` still offers the exact optimum above OPTIMAL_MAX_TARGETS, from depth
#: 2 on: started from the outputs of the grid one level coarser (:func:`~mdp_core.geo.optimal.coarser_start`;
#: depth 2 of the 15 km city, 1,251 targets: 396 / 587 / 464 s at eps 0.5 / 1 / 1.5, ``bench geo_optimal``).
OPTIMAL_FROM_COARSER_TARGETS = 2_000
#: The least depth whose grid one level coarser has the same outputs, so that its solution can start or
#: extend this grid's (depth 0's outputs differ from depth 1's).
COARSER_FROM_DEPTH = 2
#: Named ``bound_cosets`` choices (besides an integer step): the automatic step, the coarser grid's cosets.
COSET_CHOICES = ("auto", "coarser")
#: What ``bound_cosets`` / ``--bound-cosets`` accept, in words, for their error messages.
COSET_CHOICES_TEXT = ", ".join(map(repr, COSET_CHOICES)) + " or a non-negative integer"
#: The eps-mDP tree variants, each compared with EM + remap (a variant worse than it is reported).
TREE_VARIANTS = {"tree": "A", "tree_m": "M", "tree_o": "O"}
#: The EM + remap each tree method must not be worse than (like with like: the calibrated tree against the
#: calibrated EM + remap; seed 004 / issue 15: a tree worse than EM + remap is said, never hidden).
EM_REMAP_RIVAL = {**dict.fromkeys(TREE_VARIANTS, "em_remap"), "tree_cal": "em_remap_cal"}


@dataclass(frozen=True, eq=False)
class GeoComparison:
    """Mechanisms, utility (km), violation ratio and seconds per stage for one (problem, eps).

    ``bound`` is the certified lower bound (:func:`mdp_core.geo.geo_lower_bound`) when computed; ``gap``
    is ``utility / bound - 1`` per method the check found private (how far above the best possible; the bound
    says nothing of a mechanism that is not eps-mDP, such as LP-A); ``worse_than_em_remap`` lists
    the tree variants whose utility exceeds EM + remap's on this map and eps (never hidden; the calibrated
    tree against the calibrated EM + remap); ``problem``
    is the problem they were built on (its network and grid give exports their projection and metadata);
    ``failed`` maps a reference method that could not be built (too many targets, unrepairable LP) to why;
    ``timed_bound`` is the bound computed within the comparison's bound time limit, before ``bound`` takes
    the tighter of it and the LP mechanisms' own certificates (which took their LPs' time); ``all_pairs``
    says per method whether its check covered every pair of targets (exact; :func:`verify_geo`'s default
    up to :data:`~mdp_core.geo.verify.EXHAUSTIVE_WORK`, and a calibrated method's own final check) or the
    nearest neighbours and sampled pairs.
    """

    mechanisms: dict[str, GeoMechanism]
    utility_km: dict[str, float]
    violation_ratio: dict[str, float]
    max_excess: dict[str, float]
    seconds: dict[str, float] = field(default_factory=dict)
    bound: GeoBound | None = None
    gap: dict[str, float] = field(default_factory=dict)
    worse_than_em_remap: tuple[str, ...] = ()
    problem: GeoProblem | None = None
    failed: dict[str, str] = field(default_factory=dict)
    timed_bound: GeoBound | None = None
    all_pairs: dict[str, bool] = field(default_factory=dict)

    def private(self, method: str) -> bool:
        """Whether the check found ``method`` eps-mDP: no log-ratio over eps d by more than VIOLATION_TOL."""
        return self.max_excess[method] <= VIOLATION_TOL


def _timed_bound(problem: GeoProblem, eps: float, bound_cosets: int | str, time_limit: float) -> GeoBound:
    """The bound within ``time_limit``: from the cosets asked for, else :func:`auto_lower_bound`'s."""
    if not bound_cosets:
        return auto_lower_bound(problem, eps, time_limit=time_limit)
    step = None if isinstance(bound_cosets, str) else int(bound_cosets)
    coarser = bound_cosets == "coarser"
    return coset_lower_bound(problem, eps, step=step, time_limit=time_limit, aggregate=coarser)


def _checked_prebuilt(problem: GeoProblem, eps: float, mech: GeoMechanism, name: str) -> GeoMechanism:
    """``mech`` if it was built for ``name`` on this problem's targets and outputs at ``eps``."""
    same = mech.matrix.shape == problem.cost.shape and np.array_equal(mech.targets_km, problem.targets_km)
    same = same and np.array_equal(mech.outputs_km, problem.outputs_km)
    if not (same and mech.method == name and np.isclose(mech.eps, eps, rtol=1e-12, atol=0.0)):
        raise DataError(f"the prebuilt {name!r} mechanism was not built for this problem at eps {eps:g}")
    return mech


def _verified(
    mech: GeoMechanism, samples: int, max_work: float | None, rng: np.random.Generator
) -> GeoVerification:
    """:func:`verify_geo`, unless the mechanism was checked on every pair when it was built (a calibrated
    one: ``info["all_pairs_excess"]``, at most 1e-9, so no triple is over the bound), which is not run
    again."""
    excess = mech.info.get("all_pairs_excess")
    if excess is None:
        return verify_geo(mech, samples=samples, max_work=max_work, rng=rng)
    n = len(mech.targets_km)
    return GeoVerification(float(excess), 0.0, n * (n - 1) // 2, 0, 0, exhaustive=True)  # type: ignore[arg-type]


def peak_memory_mb() -> float:
    """Peak resident memory of this process in MB (Linux ru_maxrss is in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def compare_methods(
    problem: GeoProblem,
    eps: float,
    *,
    methods: tuple[str, ...] = METHODS,
    verify_samples: int = 200_000,
    verify_max_work: float | None = None,
    rng: np.random.Generator | None = None,
    bound: bool = False,
    bound_time_limit: float = 60.0,
    bound_cosets: int | str = 0,
    seed: SeedLPResult | None = None,
    reference_seconds: float | None = None,
    optimal_start: np.ndarray | None = None,
    spanner_coarse: GeoProblem | None = None,
    prebuilt: Mapping[str, GeoMechanism] | None = None,
    progress: Progress = None,
) -> GeoComparison:
    """Build each method on ``problem`` at ``eps`` (1/km), score it and verify it (on every pair of targets,
    or on large maps the nearest neighbours and ``verify_samples`` random pairs: ``all_pairs`` says which;
    ``verify_max_work`` is :func:`~mdp_core.geo.verify.verify_geo`'s ``max_work``).

    With ``bound=True`` also the certified lower bound (:func:`~mdp_core.geo.cosets.auto_lower_bound`,
    ``bound_time_limit`` seconds; the spanner LP's own certificate instead when ``"spanner"`` is built
    and its bound is tighter) and every method's gap
    ``utility / bound - 1``. ``worse_than_em_remap`` is filled whenever both a tree variant and
    ``em_remap`` are among ``methods``. The tree variants share one seed LP (``seed``: one solved before by
    :func:`~mdp_core.geo.extension.tree_seed` for this problem and eps, else solved here once); the
    calibrated tree's first build (at eps itself) takes it too when it is there.
    ``reference_seconds`` replaces the reference methods' solver time (SPANNER_SECONDS, or
    FINE_GRID_SPANNER_SECONDS on finer grids, EXTENSION_SPANNER_SECONDS extended from a coarser one;
    BILINEAR_SECONDS). ``optimal_start``: outputs that start the
    exact optimum (:func:`~mdp_core.geo.optimal.coarser_start`), which then takes up to
    :data:`OPTIMAL_FROM_COARSER_TARGETS` targets. ``spanner_coarse``: the grid one level coarser, whose
    spanner LP mechanism is extended to this one (:func:`~mdp_core.geo.spanner.spanner_from_coarser`).
    ``prebuilt``: mechanisms of some of ``methods`` built before on this problem and eps (the exact optimum
    that a bound ran, say), scored and verified here like the others instead of built again.
    ``bound_cosets=k > 0`` takes the bound from the k x k cosets of the fine grid instead, ``"auto"`` from
    cosets of at most :data:`~mdp_core.geo.cosets.COSET_TARGETS` targets, ``"coarser"`` from those of the
    grid one level coarser, the targets aggregated onto it
    (:func:`~mdp_core.geo.cosets.coset_lower_bound`, ``bound_time_limit`` seconds for all of them).
    """
    eps = check_eps(eps)
    check_reach(problem, eps)
    named = isinstance(bound_cosets, str) and bound_cosets in COSET_CHOICES
    if not (named or (isinstance(bound_cosets, int | np.integer) and bound_cosets >= 0)):
        raise DataError(f"bound_cosets must be {COSET_CHOICES_TEXT}, got {bound_cosets!r}")
    known = (*METHODS, *CALIBRATED_METHODS, *REFERENCE_METHODS)
    if unknown := set(methods) - set(known):
        raise DataError(f"unknown methods {sorted(unknown)}; choose from {list(known)}")
    rng = np.random.default_rng(0) if rng is None else rng
    mechs: dict[str, GeoMechanism] = {}
    seconds: dict[str, float] = {}
    failed: dict[str, str] = {}
    for k, name in enumerate(methods):
        report(progress, k / (len(methods) + 1), f"building {name}")
        if prebuilt and name in prebuilt:
            mechs[name] = _checked_prebuilt(problem, eps, prebuilt[name], name)
        elif name in TREE_VARIANTS:
            if seed is None:  # one seed LP for all variants
                seed = tree_seed(problem, eps)
                seconds["seed_lp"] = seed.seconds
            mechs[name] = tree_extension(problem, eps, variant=TREE_VARIANTS[name], seed=seed)
        elif name == "em":
            mechs[name] = exponential_geo(problem, eps)
        elif name == "em_remap":
            mechs[name] = em_remap_geo(problem, eps, em=mechs.get("em"))
        elif name in CALIBRATED_METHODS:
            try:
                share = part(progress, k / (len(methods) + 1), (k + 1) / (len(methods) + 1))
                mechs[name] = calibrated_method(problem, eps, name, seed=seed, progress=share)
            except DataError as exc:  # a map too large to check every pair: say why, keep the others
                failed[name] = str(exc)
                continue
        elif name in REFERENCE_METHODS:
            builders: dict[str, Callable[..., GeoMechanism]] = {  # looked up per call (tests patch them)
                "spanner": spanner_mechanism
                if spanner_coarse is None
                else functools.partial(spanner_from_coarser, spanner_coarse),
                "bilinear": bilinear_mechanism,
                "optimal": optimal_geo_mechanism
                if optimal_start is None
                else functools.partial(
                    optimal_geo_mechanism, outputs=optimal_start, max_targets=OPTIMAL_FROM_COARSER_TARGETS
                ),
            }
            build, seconds_lp = builders[name], _REFERENCE_SECONDS[name]
            if name == "spanner" and problem.grid.n_targets > FINE_GRID_TARGETS:
                extended = spanner_coarse is not None
                seconds_lp = EXTENSION_SPANNER_SECONDS if extended else FINE_GRID_SPANNER_SECONDS
            try:
                share = part(progress, k / (len(methods) + 1), (k + 1) / (len(methods) + 1))
                mechs[name] = build(problem, eps, time_limit=reference_seconds or seconds_lp, progress=share)
            except DataError as exc:  # a reference only: say why, keep the other methods
                failed[name] = str(exc)
                continue
        else:
            mechs[name] = lp_coarse(problem, eps)
        seconds[name] = mechs[name].seconds
    report(progress, len(methods) / (len(methods) + 1), "verifying")
    start = time.perf_counter()
    checks = {name: _verified(m, verify_samples, verify_max_work, rng) for name, m in mechs.items()}
    seconds["verify"] = time.perf_counter() - start
    utility = {name: m.utility_km(problem) for name, m in mechs.items()}
    timed = None
    gap: dict[str, float] = {}
    if bound:
        report(progress, len(methods) / (len(methods) + 1), "lower bound")
        optimum = tighter_bound(None, mechs.get("optimal"))
        try:
            if optimum is None or not optimum.exact:  # an exact optimum leaves nothing tighter to find
                timed = _timed_bound(problem, eps, bound_cosets, bound_time_limit)
        except DataError:  # too large for the bound's memory cap: reported as no bound
            timed = None
        if timed is not None:
            seconds["bound"] = timed.seconds
    # the spanner LP's and the optimum's certificates come free with them, a bound asked for or not
    lower = tighter_bound(timed, mechs.get("spanner"), mechs.get("optimal"))
    if lower is not None:  # of the private methods only: the bound holds for eps-mDP mechanisms
        gap = {
            k: (u / lower.value - 1.0 if lower.value > 0 else float("inf"))
            for k, u in utility.items()
            if checks[k].holds  # the check's own verdict, as private() reads it later
        }
    worse = tuple(
        k for k, r in EM_REMAP_RIVAL.items() if k in utility and r in utility and utility[k] > utility[r]
    )
    report(progress, 1.0, "done")
    return GeoComparison(
        mechanisms=mechs,
        utility_km=utility,
        violation_ratio={name: c.violation_ratio for name, c in checks.items()},
        max_excess={name: c.max_excess for name, c in checks.items()},
        seconds=seconds,
        bound=lower,
        gap=gap,
        worse_than_em_remap=worse,
        problem=problem,
        failed=failed,
        timed_bound=timed,
        all_pairs={name: c.exhaustive for name, c in checks.items()},
    )


def tighter_bound(lower: GeoBound | None, *mechanisms: GeoMechanism | None) -> GeoBound | None:
    """The tightest of ``lower`` (or none) and the certificates that LP mechanisms carry in
    ``info["lower_bound"]`` (the spanner LP's and the exact optimum's; all by weak duality).

    The spanner LP runs at eps on a subset of the privacy rows, so its multipliers certify a bound too
    (:mod:`mdp_core.geo.spanner`); with dilation 1.1 and 60 s each it was the tighter one in 6 of the 12
    configurations of ``bench geo`` at depths 1-2 (district and 15 km city, eps 0.5-1.5 / km). The exact
    optimum's (:mod:`mdp_core.geo.optimal`) is within 1e-5 of the best mechanism when ``exact``.
    """
    best = lower
    for mech in mechanisms:
        certificate = None if mech is None else cast("GeoBound | None", mech.info.get("lower_bound"))
        if certificate is not None and (best is None or certificate.value > best.value):
            best = certificate
    return best


def run_bench(
    city: str | os.PathLike[str] | RoadNetwork = "default",
    *,
    depth: int = 2,
    eps: float = 0.5,
    seed_n: int = 12,
    n_tasks: int = 60,
    prior: str = "uniform",
    verify_samples: int = 200_000,
    seed: int = 0,
    bound: bool = True,
    bound_time_limit: float = 60.0,
    bound_cosets: int | str = 0,
    methods: tuple[str, ...] = METHODS,
    reference: bool = False,
    optimal: bool = False,
) -> tuple[dict[str, Any], GeoComparison]:
    """Load, grid, build all methods, verify; return the CLI's JSON record and the comparison.

    With ``reference=True`` the bilinear lattice mechanism joins ``methods``, and the spanner LP mechanism too
    when the grid has at most :data:`~mdp_core.geo.spanner.SPANNER_MAX_TARGETS` targets, or, from depth 2
    on, up to :data:`~mdp_core.geo.spanner.SPANNER_FROM_COARSER_TARGETS` extended from the grid one level
    coarser. ``best_private``
    in the record is the verified eps-mDP method of least utility (LP-A is never private across targets);
    ``timed_lower_bound`` the bound found within ``bound_time_limit`` (``seconds["bound"]``),
    ``spanner_lower_bound`` the spanner LP's own certificate when it was built (``lower_bound`` is the
    tighter of it and the relaxation's). With ``optimal=True`` the exact optimum joins too (at most
    :data:`~mdp_core.geo.optimal.OPTIMAL_MAX_TARGETS` targets, or from depth 2 on
    :data:`OPTIMAL_FROM_COARSER_TARGETS` started from the grid one level coarser; else DataError); its
    certificate is then the bound, exact when within 1e-5 of its utility.
    """
    start = time.perf_counter()
    network = city if isinstance(city, RoadNetwork) else load_road_network(city)
    t_load = time.perf_counter()

    def at_depth(level: int) -> GeoProblem:  # the grid of this map at ``level``, same tasks and prior
        rng = np.random.default_rng(seed)
        return build_problem(network, seed_n=seed_n, depth=level, n_tasks=n_tasks, prior=prior, rng=rng)

    problem = at_depth(depth)
    t_problem = time.perf_counter()
    spanner_coarse = None
    if reference:
        n = problem.grid.n_targets
        if SPANNER_MAX_TARGETS < n <= SPANNER_FROM_COARSER_TARGETS and depth >= COARSER_FROM_DEPTH:
            spanner_coarse = at_depth(depth - 1)
        small = n <= SPANNER_MAX_TARGETS or spanner_coarse is not None
        extra = [m for m in ("spanner", "bilinear") if m not in methods and (small or m != "spanner")]
        methods = (*methods, *extra)
    start_set, s_start = None, 0.0
    if optimal and "optimal" not in methods:  # asked for by name: refused, not reported as failed
        t_start = time.perf_counter()
        start_set = _optimal_start(problem, eps, depth, at_depth)
        s_start = time.perf_counter() - t_start
        methods = (*methods, "optimal")
    comp = compare_methods(
        problem,
        eps,
        methods=methods,
        verify_samples=verify_samples,
        rng=np.random.default_rng(seed + 1),
        bound=bound,
        bound_time_limit=bound_time_limit,
        bound_cosets=bound_cosets,
        optimal_start=start_set,
        spanner_coarse=spanner_coarse,
    )
    spanner = comp.mechanisms.get("spanner")  # its LP's own certificate (none from a coarser grid's LP)
    certificate = None if spanner is None else cast("GeoBound | None", spanner.info.get("lower_bound"))
    seconds = {"load": t_load - start, "grid_and_loss": t_problem - t_load, **comp.seconds}
    if start_set is not None:
        seconds["optimal_start"] = s_start
    seconds["total"] = time.perf_counter() - start
    record: dict[str, object] = {
        "targets": problem.grid.n_targets,
        "outputs": len(problem.grid.outputs),
        "seconds": {k: round(v, 4) for k, v in seconds.items()},
        "utility_km": {k: round(v, 6) for k, v in comp.utility_km.items()},
        "violation_ratio": comp.violation_ratio,
        "verified_all_pairs": comp.all_pairs,
        "max_excess": {k: (v if np.isfinite(v) else "inf") for k, v in comp.max_excess.items()},
        "tree_vs_em": round(comp.utility_km["tree"] / comp.utility_km["em"], 4)
        if {"tree", "em"} <= set(comp.utility_km)
        else None,
        "lower_bound": None if comp.bound is None else round(comp.bound.value, 6),
        "bound_exact": None if comp.bound is None else comp.bound.exact,
        "bound_method": None if comp.bound is None else comp.bound.method,
        "timed_lower_bound": None if comp.timed_bound is None else round(comp.timed_bound.value, 6),
        "spanner_lower_bound": None if certificate is None else round(certificate.value, 6),
        "gap": {k: round(v, 6) for k, v in comp.gap.items()},
        "worse_than_em_remap": list(comp.worse_than_em_remap),
        "best_private": _best_private(comp),
        "failed": comp.failed,
        "seed_lp": comp.mechanisms["tree"].info.get("message") if "tree" in comp.mechanisms else None,
        "peak_memory_mb": round(peak_memory_mb(), 1),
        "depth": depth,
        "eps": eps,
        "n_tasks": n_tasks,
        "prior": prior,
    }
    return record, comp


def _optimal_start(
    problem: GeoProblem, eps: float, depth: int, at_depth: Callable[[int], GeoProblem]
) -> np.ndarray | None:
    """None when the exact optimum takes ``problem`` as it is; from depth 2 on, above OPTIMAL_MAX_TARGETS
    targets, the outputs of the grid one level coarser that start it (DataError when too large for both)."""
    n = problem.grid.n_targets
    if n <= OPTIMAL_MAX_TARGETS or depth < COARSER_FROM_DEPTH:
        check_target_count(n, OPTIMAL_MAX_TARGETS, "the exact optimum", OPTIMAL_ADVICE)
        return None
    check_target_count(n, OPTIMAL_FROM_COARSER_TARGETS, "the exact optimum", OPTIMAL_ADVICE)
    return coarser_start(at_depth(depth - 1), problem, eps, time_limit=OPTIMAL_SECONDS)


def _best_private(comp: GeoComparison) -> str | None:
    """The method of least utility among those verified eps-mDP on every checked pair (never LP-A)."""
    private = {k: u for k, u in comp.utility_km.items() if k != "lp_coarse" and comp.private(k)}
    return min(private, key=private.__getitem__) if private else None
