"""``python -m mdp_core.release report [SCENARIO.json] (--dataset NAME | --data FILE) --out REPORT.html``.

Writes one self-contained HTML report (see :func:`mdp_core.release.build_report`). Without a scenario file
the report uses the default settings of every page on that dataset (an embedded sample's documented
target, or ``--target``). ``--scenario NAME`` picks one scenario of a file holding several (default: the
first). ``--method`` overrides what releases the features (DepHDP, or a baseline such as ALC+DPN, which
collapses no column to one value), ``--rows held-out`` releases only the records the tuning never saw
(:func:`mdp_core.release.release_scope`). ``--which-eps SHARE`` adds the "which eps" answer for
"utility >= SHARE of non-private" (a sweep of DepHDP and the four baselines; ``--serial`` runs it
in-process instead of on the embedded Dask cluster).
The last line printed is one JSON object: ``out``, ``bytes``, ``scenario``, ``release_rows``, ``seconds``
(and ``eps``, ``met`` with ``--which-eps``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from mdp_core.data import load_dataset_report
from mdp_core.dephdp import DepHDPConfig
from mdp_core.errors import DataError
from mdp_core.release.scenarios import RELEASE_METHODS

if TYPE_CHECKING:
    import pandas as pd

    from mdp_core.release import Scenario


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m mdp_core.release", description=__doc__.split("\n\n")[1])
    sub = ap.add_subparsers(dest="command", required=True)
    rep = sub.add_parser("report", help="write a self-contained HTML report")
    rep.add_argument("scenario_file", nargs="?", type=Path, help="scenario JSON (save_scenarios)")
    src = rep.add_mutually_exclusive_group(required=True)
    src.add_argument("--dataset", help="embedded sample name: " + ", ".join(("heart", "adult", "wine")))
    src.add_argument("--data", type=Path, help="a CSV/TSV file (optionally gzipped)")
    rep.add_argument("--out", type=Path, required=True, help="the HTML file to write")
    rep.add_argument("--scenario", help="name of the scenario to use (default: the first in the file)")
    rep.add_argument(
        "--target",
        help="target column (default: an embedded sample's documented target; a --data file has none, so the "
        "prediction task, the default, needs it)",
    )
    rep.add_argument(
        "--which-eps",
        type=float,
        default=None,
        metavar="SHARE",
        help="add the smallest eps with utility >= SHARE of non-private (e.g. 0.95)",
    )
    rep.add_argument(
        "--method",
        choices=RELEASE_METHODS,
        help="what releases the features (default: the scenario's, else DepHDP); ALC+DPN collapses no "
        "column to one value",
    )
    rep.add_argument(
        "--rows",
        choices=("all", "held-out"),
        help="records released (default: the scenario's, else all): every record (the channels are tuned "
        "on 62.5 %% of them, and that tuning is not private) or only the held-out ones, whose channels were "
        "chosen without them, as were the values they are released at (bin centres, categories)",
    )
    rep.add_argument(
        "--release-seed",
        type=int,
        help="seed of the release's random draws, for a reproducible release (default: the scenario's, "
        "else fresh entropy recorded nowhere; a recorded seed lets anyone with the audit record redo the "
        "draws)",
    )
    rep.add_argument("--repetitions", type=int, default=10, help="utility repetitions (default 10)")
    rep.add_argument("--serial", action="store_true", help="run the which-eps sweep in-process")
    return ap


def _scenario(args: argparse.Namespace, df: pd.DataFrame, name: str, target: str | None) -> Scenario:
    from mdp_core.release import Scenario, dataset_fingerprint, load_scenarios

    if args.scenario_file is None:
        return Scenario("default", name, DepHDPConfig(), fingerprint=dataset_fingerprint(df), target=target)
    items = load_scenarios(args.scenario_file)
    if args.scenario is None:
        return items[0]
    for s in items:
        if s.name == args.scenario:
            return s
    raise DataError(
        f"no scenario named {args.scenario!r} in {args.scenario_file} ({[s.name for s in items]})"
    )


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from mdp_core.release import UtilityTarget, build_report, sweep_options, tuning_table, which_eps

    t0 = time.perf_counter()
    if not args.out.parent.is_dir():  # before the work, not after it (a traceback then lost it)
        print(f"error: the folder of --out does not exist: {args.out.parent}", file=sys.stderr)
        return 2
    try:
        source = args.dataset if args.dataset is not None else str(args.data)
        df, load = load_dataset_report(source)
        name = args.dataset if args.dataset is not None else args.data.name
        target = args.target or load.target
        scenario = _scenario(args, df, name, target)
        if scenario.config.task == "prediction" and scenario.target is None:
            raise DataError("the prediction task needs a target column: pass --target COLUMN")
        if args.method is not None:
            scenario = replace(scenario, method=args.method)
        if args.rows is not None:
            scenario = replace(scenario, release_rows=args.rows.replace("-", "_"))
        if args.release_seed is not None:
            scenario = replace(scenario, release_seed=args.release_seed)
        decision = None
        if args.which_eps is not None:
            enc = tuning_table(scenario, df)  # a held-out release: its tuning records alone
            decision = which_eps(
                name,
                UtilityTarget("relative", args.which_eps),
                encoded=enc,
                task=scenario.config.task,
                p=scenario.config.p,
                seed=scenario.seed,
                client=False if args.serial else None,
                method=scenario.method,
                options=sweep_options(scenario.config),  # the scenario's floor and solver settings
            )
        page = build_report(
            scenario,
            data=df,
            decision=decision,
            repetitions=args.repetitions,
            source_rows=load.original_rows if load.sampled else None,
        )
    except (DataError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        args.out.write_text(page, encoding="utf-8")
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    summary = {
        "out": str(args.out),
        "bytes": len(page.encode()),
        "scenario": scenario.name,
        "release_rows": scenario.release_rows,
        # a file over the interactive row limit is a uniform sample (the report says so; audit: not this)
        "rows_read": len(df),
        "rows_in_source": load.original_rows if load.sampled else len(df),
        "seconds": round(time.perf_counter() - t0, 2),
    }
    if decision is not None:
        summary.update({"eps": decision.choice.eps, "met": bool(decision.choice.met)})
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
