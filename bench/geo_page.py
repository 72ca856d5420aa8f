"""The geo page as a user drives it (issue 15 "Speed", item 7), with AppTest: the embedded district and an
uploaded 15 km city (``../shared/data/baltimore.osm.pbf``, skipped when absent).

Per step: ``run_s``, the seconds until the page's run returns (what the user waits for before the page
answers: the map, or the roads with a progress bar while a build goes on in the background; target <= 3 s),
``done_s``, the seconds until the build behind it is finished and the heatmap and the table are final (the
page polls every second), and ``checked_s``, until the rows checked on a sample are checked on every pair in
the background too (the note under the table then says so; ``done_s`` when none was). Every widget of the page
at default settings, one at a time, each followed by its way back: open the page (district) or upload the map
(city), each mechanism shown, another true location, each colouring, each privacy level and a custom eps, seed
cells, depths 1 and 3, the sidebar's seed, the optional rows (MLaEt variants, LP-A; the bilinear lattice's run
only: its LP takes 30 s in the background) and the loss curve; then depth 4 at the default level (depth 4 of
the city: the < 60 s target), and depth 1 with the exact optimum toggled on (``done_s``: until its row and the
exact bound are in the table).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from streamlit.testing.v1 import AppTest

from bench._geo import CITY
from bench.pages import _label_index
from ui.geo_results import CHECKING

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 600.0
#: Seconds between reruns while a build is pending: the page's own poll interval. (AppTest reruns the whole
#: page where the browser only reruns the small polling fragment; polling every 0.2 s slowed a 20 s build to
#: 75 s through the GIL.)
POLL = 1.0
#: Environment variables that shorten a run: comma-separated step names to time (prefixes; the steps before
#: the last chosen one still run, untimed, so each timed step starts from the same settings) and the maps.
STEPS_ENV, MAPS_ENV = "MDP_BENCH_GEO_STEPS", "MDP_BENCH_GEO_MAPS"


def _bars(at: AppTest) -> list[str]:
    return [bar.proto.text for bar in at.get("progress")]


def _pending(at: AppTest) -> bool:
    """A build is pending (not counting the checks of every pair that follow the table)."""
    building = [text for text in _bars(at) if not text.startswith(CHECKING)]
    return bool(building) or any("is being built" in c.value for c in at.caption)


def _timed(at: AppTest, action: Callable[[], Any], wait: bool = True) -> tuple[float, float, float]:
    """Seconds until the run returns, until no build is pending and until no check of every pair is (the
    page's poller reruns; not waited for when ``wait`` is false)."""
    start = time.perf_counter()
    action()
    at.run()
    run_s = time.perf_counter() - start
    while wait and _pending(at) and time.perf_counter() - start < TIMEOUT:
        time.sleep(POLL)
        at.run()
    done_s = time.perf_counter() - start
    while wait and any(text.startswith(CHECKING) for text in _bars(at)) and done_s < TIMEOUT:
        time.sleep(POLL)
        at.run()
    if at.exception:
        raise RuntimeError(f"the geo page raised: {[e.value for e in at.exception]}")
    return run_s, done_s, time.perf_counter() - start


def _widget(at: AppTest, kind: str, label: str) -> Any:
    return next(w for w in getattr(at, kind) if w.label.startswith(label))


def _steps(at: AppTest) -> list[tuple[str, Callable[[], Any], bool]]:
    """(name, action, wait for its builds) of every interaction, in order."""

    def setter(kind: str, label: str, value: Any) -> Callable[[], Any]:
        return lambda: _widget(at, kind, label).set_value(value)

    def seed(value: int) -> Callable[[], Any]:
        return lambda: at.number_input(key="side_seed").set_value(value)

    levels = _widget(at, "radio", "Privacy level").options
    colour = _widget(at, "radio", "Colour the map by").options
    steps = [
        ("switch to EM", setter("selectbox", "Mechanism shown", "Exponential mechanism"), True),
        ("switch to EM + remap", setter("selectbox", "Mechanism shown", "EM + Bayesian remap"), True),
        ("other true location", lambda: _widget(at, "selectbox", "True location").select_index(3), True),
        ("colour by error", setter("radio", "Colour the map by", colour[1]), True),
        ("colour by report", setter("radio", "Colour the map by", colour[0]), True),
        ("back to tree", setter("selectbox", "Mechanism shown", "Tree extension (MLaEt-A)"), True),
    ]
    steps += [(f"level {v.split(':')[0]}", setter("radio", "Privacy level", v), True) for v in levels]
    steps += [
        ("custom eps 2", setter("select_slider", "Privacy budget", 2.0), True),
        ("back to default level", setter("radio", "Privacy level", levels[1]), True),
        ("seed cells 10", setter("slider", "Seed cells", 10), True),
        ("seed cells back to 12", setter("slider", "Seed cells", 12), True),
        ("depth 1", setter("selectbox", "Depth", 1), True),
        ("depth 3", setter("selectbox", "Depth", 3), True),
        ("depth back to 2", setter("selectbox", "Depth", 2), True),
        ("seed 1", seed(1), True),
        ("seed 2", seed(2), True),
        ("seed back to 0", seed(0), True),
        ("MLaEt variants on", setter("toggle", "MLaEt-M and -O", True), True),
        ("MLaEt variants off", setter("toggle", "MLaEt-M and -O", False), True),
        ("LP-A on", setter("toggle", "LP-A", True), True),
        ("LP-A off", setter("toggle", "LP-A", False), True),
        ("bilinear on (run only)", setter("toggle", "Bilinear lattice", True), False),
        ("bilinear off", setter("toggle", "Bilinear lattice", False), False),
        ("loss curve on", setter("toggle", "Loss against", True), True),
        ("loss curve off", setter("toggle", "Loss against", False), True),
    ]
    steps += [(f"depth {d}", setter("selectbox", "Depth", d), True) for d in (4, 1)]
    steps.append(("exact optimum (depth 1)", setter("toggle", "Exact optimum", True), True))
    return steps


def _map(name: str, open_map: Callable[[AppTest], tuple[float, float]]) -> list[dict]:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.run()
    at.switch_page("views/geo.py")
    run_s, done_s, checked_s = open_map(at)
    first = "open" if name == "district" else "upload"
    times = {"run_s": run_s, "done_s": done_s, "checked_s": checked_s}
    rows = [{"map": name, "step": first, **times, "load": os.getloadavg()[0]}]
    chosen = [s.strip() for s in os.environ.get(STEPS_ENV, "").split(",") if s.strip()]
    steps = _steps(at)
    timed = [not chosen or any(step.startswith(c) for c in chosen) for step, _, _ in steps]
    last = max((k for k, t in enumerate(timed) if t), default=-1)
    for (step, action, wait), keep in list(zip(steps, timed, strict=True))[: last + 1]:
        run_s, done_s, checked_s = _timed(at, action, wait)
        if keep:
            rows.append(
                {
                    "map": name,
                    "step": step,
                    "run_s": run_s,
                    "done_s": done_s,
                    "checked_s": checked_s,
                    "load": os.getloadavg()[0],
                }
            )
    return rows


def _open_district(at: AppTest) -> tuple[float, float, float]:
    return _timed(at, lambda: None)


def _upload_city(at: AppTest) -> tuple[float, float, float]:
    _timed(at, lambda: None)  # the district first, as a user arrives
    _timed(at, lambda: _widget(at, "radio", "City").set_value("Upload a map file"))
    data = CITY.read_bytes()
    return _timed(at, lambda: at.file_uploader(key="geo_upload").set_value((CITY.name, data, "x")))


def run(quick: bool = False) -> list[dict]:
    maps = os.environ.get(MAPS_ENV, "district,city")
    rows: list[dict] = []
    with _label_index():
        if "district" in maps:
            rows += _map("district", _open_district)
        if "city" in maps and CITY.exists() and not quick:
            rows += _map("city (Baltimore, 15 km)", _upload_city)
    return rows
