"""Time to the "which eps" answer (issue 14): heart and adult, prediction task, "accuracy >= 95 % of
non-private", DepHDP and the four baselines on the 9-point grid 0.25-20, 5 repetitions.

Rows per dataset:

* ``engine start``: the embedded Dask LocalCluster (2 workers) starting, imports warmed. The pages start it in
  the background when they open (:func:`mdp_core.sweep.cluster.start_default_client`), so it is not on the
  first question's critical path; its time is shown on its own.
* ``cold``: the first question on the running engine: nothing cached anywhere (data preparation, every
  group profile, every configuration).
* ``warm``: the same question again (the page's store bypassed): the stage-1 profiles are reused, every
  configuration re-runs.
* ``cached``: the page's store: the answer is looked up, nothing runs.
* ``in-process``: the cold question with ``client=False`` (one process, for comparison).

Each row carries the answer (eps, estimate, CI, met), the wall seconds, the calling process's CPU seconds
and the 1-minute load average when it started (the machine is shared). Quick mode: heart only, grid (1, 5,
20), 2 repetitions.

Then the page (AppTest, adult; heart when quick), where "Find the smallest ε" and "Compare" (four saved
scenarios) held one page run each before stop 53 and now run in the background: the run that starts each
and when its result lands.
"""

from __future__ import annotations

import os
import time

from bench._apptest import open_app, timed, until
from mdp_core.release import WHICH_EPS_GRID, UtilityTarget, which_eps


def _row(dataset: str, mode: str, seconds: float, cpu: float, load: float, decision: object) -> dict:
    row: dict = {"dataset": dataset, "mode": mode, "seconds": seconds, "client CPU s": cpu, "load avg": load}
    if decision is None:
        return row
    c = decision.choice  # type: ignore[attr-defined]
    return {
        **row,
        "eps": float(c.eps),
        "met": bool(c.met),
        "estimate": float(c.estimate),
        "ci_lo": float(c.ci[0]),
        "ci_hi": float(c.ci[1]),
        "reference": float(decision.reference),  # type: ignore[attr-defined]
        "sentence": decision.sentence,  # type: ignore[attr-defined]
    }


def run(quick: bool = False) -> list[dict]:
    from mdp_core.sweep import close_default_client, default_client
    from mdp_core.sweep.engine import clear_sweep_caches

    datasets = ("heart",) if quick else ("heart", "adult")
    grid = (1.0, 5.0, 20.0) if quick else WHICH_EPS_GRID
    reps = 2 if quick else 5
    target = UtilityTarget("relative", 0.95)
    rows: list[dict] = []

    def timed(name: str, mode: str, client: object) -> object:
        load, t0, c0 = os.getloadavg()[0], time.perf_counter(), time.process_time()
        d = which_eps(name, target, eps=grid, repetitions=reps, client=client)
        rows.append(_row(name, mode, time.perf_counter() - t0, time.process_time() - c0, load, d))
        return d

    for name in datasets:
        close_default_client()  # a fresh embedded cluster: no worker holds a profile yet
        clear_sweep_caches()
        load, t0, c0 = os.getloadavg()[0], time.perf_counter(), time.process_time()
        default_client(n_workers=2)
        rows.append(
            _row(name, "engine start", time.perf_counter() - t0, time.process_time() - c0, load, None)
        )
        store = {(name, target, grid, reps): timed(name, "cold", None)}
        timed(name, "warm", None)
        load, t0, c0 = os.getloadavg()[0], time.perf_counter(), time.process_time()
        d = store[(name, target, grid, reps)]
        rows.append(_row(name, "cached", time.perf_counter() - t0, time.process_time() - c0, load, d))
        clear_sweep_caches()
        timed(name, "in-process", False)
    close_default_client()
    rows.extend(_page_rows("heart" if quick else "adult"))
    return rows


def _page_rows(dataset: str) -> list[dict]:
    from ui.store import store

    at = open_app()
    at.selectbox(key="side_dataset").set_value(dataset).run()
    at.switch_page("views/release.py").run()

    def start_and_land(button: str, tag: str) -> tuple[float, float]:
        start = timed(at, lambda a: a.button(key=button).click())
        return start, start + until(lambda: any(key[0] == tag for key in store().keys()))[0]  # noqa: SIM118

    rows = _page_pair(dataset, "Find the smallest ε", *start_and_land("rel_which", "which"))
    for i, eps in enumerate((1.0, 2.0, 5.0, 0.5)):
        at.select_slider(key="rel_eps").set_value(eps).run()
        at.text_input(key="rel_scenario_name").set_value(f"s{i}").run()
        at.button(key="rel_save").click().run()
    rows += _page_pair(dataset, "Compare (4 scenarios)", *start_and_land("rel_compare", "compare"))
    return rows


def _page_pair(dataset: str, label: str, start: float, lands: float) -> list[dict]:
    return [
        {"dataset": dataset, "mode": f"page: {label}, the run that starts it", "seconds": start},
        {
            "dataset": dataset,
            "mode": f"page: {label}, it lands (background, from the click)",
            "seconds": lands,
        },
    ]
