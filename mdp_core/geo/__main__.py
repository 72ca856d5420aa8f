"""Command line: ``python -m mdp_core.geo bench --city default|PATH --depth D --eps E --out FILE.npz --json``.

Builds the tree extension and the baselines (EM, EM + remap, LP-A), verifies them, writes the tree mechanism
to FILE.npz and prints, as its last line, one JSON object with keys targets, outputs, seconds, utility_km,
violation_ratio, verified_all_pairs (per method: checked on every pair of targets, or on large maps the
nearest neighbours and ``--samples`` random pairs), lower_bound (certified, km) and gap (utility / bound - 1
per method the check found private: none for LP-A, which the bound says nothing of), and a few extras
(``best_private``: the verified eps-mDP method of least utility), when ``--json`` is given; a short table
otherwise. ``--reference`` adds the bilinear lattice mechanism (any depth)
and the spanner LP mechanism (near-optimal on the full domain, up to 4,000 targets, and from depth 2 on up to
10,000 extended from the grid one level coarser); ``--optimal`` the exact optimum (up to 600 targets, or 2,000
from depth 2 on, started from the optimum one level coarser: minutes; depth 2 of a 15 km city 7-10 minutes),
whose certificate then is the record's ``lower_bound`` and ``bound_exact`` is true when it is within 1e-5 of
the optimum's utility (``utility_km["optimal"]``).
"""

from __future__ import annotations

import argparse
import json
import sys

from mdp_core.errors import DataError
from mdp_core.geo.calibrate import CALIBRATED_METHODS
from mdp_core.geo.compare import COSET_CHOICES, COSET_CHOICES_TEXT, METHODS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mdp_core.geo", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    bench = sub.add_parser(  # every option's default in its help
        "bench",
        help="build and compare the geo mechanisms on one city",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    bench.add_argument("--city", default="default", help="'default' (embedded Helsinki) or a map file")
    bench.add_argument("--depth", type=int, default=2, help="refinement levels 0..5")
    bench.add_argument("--eps", type=float, default=0.5, help="privacy budget in 1/km")
    bench.add_argument("--seed-n", type=int, default=12, help="seed cells along the longer side")
    bench.add_argument("--tasks", type=int, default=60, help="task points of the travel loss")
    bench.add_argument(
        "--prior",
        default="uniform",
        choices=["uniform", "roads"],
        help="where the true locations are: every target alike, or in proportion to its nearest road nodes",
    )
    bench.add_argument(
        "--samples",
        type=int,
        default=200_000,
        help="random pairs verified per method where not every pair is checked",
    )
    bench.add_argument("--seed", type=int, default=0, help="random seed (task points, sampled pairs)")
    bench.add_argument(
        "--bound-seconds",
        type=float,
        default=60.0,
        help="time for the lower bound (s; more time takes smaller cells or larger cosets, a tighter bound), "
        "on top of building and checking the mechanisms (depth 4 of a 15 km city: ~11 s; --bound-seconds 40 "
        "keeps it under 60 s)",
    )
    bench.add_argument(
        "--no-bound",
        action="store_true",
        help="skip the timed lower bound (--reference and --optimal still certify one of their own)",
    )
    bench.add_argument(
        "--bound-cosets",
        type=_cosets,
        default=0,
        help="bound from the K x K cosets of the grid, 'auto' (cosets of <= 250 targets) or 'coarser' "
        "(those of the grid one level coarser, targets aggregated onto it); "
        "0: the default, the LP over cells at city scale, else cosets where each gets the time it needs, "
        "else geo_lower_bound",
    )
    bench.add_argument(
        "--methods",
        default=",".join(METHODS),
        help=f"comma-separated subset of {METHODS}, or the calibrated {tuple(CALIBRATED_METHODS)}",
    )
    bench.add_argument(
        "--reference", action="store_true", help="also the bilinear and spanner LP mechanisms (slow)"
    )
    bench.add_argument(
        "--optimal",
        action="store_true",
        help="also the exact optimum (up to 600 targets, 2,000 from depth 2 on: minutes)",
    )
    bench.add_argument(
        "--out", help="write the tree-extension mechanism (else the first method built) to this .npz file"
    )
    bench.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    args = parser.parse_args(argv)

    from mdp_core.geo.compare import run_bench
    from mdp_core.geo.export import check_metadata, save_mechanism

    try:
        record, comp = run_bench(
            args.city,
            depth=args.depth,
            eps=args.eps,
            seed_n=args.seed_n,
            n_tasks=args.tasks,
            prior=args.prior,
            verify_samples=args.samples,
            seed=args.seed,
            bound=not args.no_bound,
            bound_time_limit=args.bound_seconds,
            bound_cosets=args.bound_cosets,
            methods=tuple(m.strip() for m in args.methods.split(",") if m.strip()),
            reference=args.reference,
            optimal=args.optimal,
        )
        if args.out:
            name = "tree" if "tree" in comp.mechanisms else next(iter(comp.mechanisms))
            problem = comp.problem
            saved = save_mechanism(
                comp.mechanisms[name],
                args.out,
                network=None if problem is None else problem.network,
                grid=None if problem is None else problem.grid,
                seed=args.seed,
                check=check_metadata(comp, name),
            )
            record["out"] = str(saved)
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(record))
    else:
        print(f"{record['targets']} targets, {record['outputs']} outputs, eps {args.eps}/km")
        for name, value in record["utility_km"].items():
            ratio = record["violation_ratio"][name]
            checked = "every pair" if record["verified_all_pairs"][name] else "sampled pairs"
            gap = record["gap"].get(name)
            extra = "" if gap is None else f"  gap {gap:.2%}"
            print(f"  {name:10s} {value:8.4f} km  violation ratio {ratio:.4f} ({checked}){extra}")
        if record["lower_bound"] is not None:
            print(f"  lower bound {record['lower_bound']:.4f} km ({record['bound_method']})")
        print("  seconds:", record["seconds"])
    return 0


def _cosets(text: str) -> int | str:
    """``--bound-cosets``: 'auto', 'coarser' or a non-negative integer (0: no cosets)."""
    if text in COSET_CHOICES:
        return text
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected {COSET_CHOICES_TEXT}, got {text!r}")
    return int(text)


if __name__ == "__main__":
    sys.exit(main())
