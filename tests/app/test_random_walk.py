"""Seeded random interaction walk over every page, as a curious user would click through the app.

For each page registered in ``app.py`` (discovered from its ``st.Page(...)`` calls, so pages added later are
walked too) and each data source (the embedded heart, adult and wine samples and one messy uploaded CSV), a
walk of ``MDP_WALK_STEPS`` steps (default 40) changes one enabled widget per rerun: selectboxes and radios by
their shown label, sliders at both ends and in between, number inputs at their bounds, toggles, buttons, text
inputs with plausible values, uploads, and the global sidebar widgets (dataset, target column, seed).

After every rerun the walk asserts: no exception element, no ``st.error`` that is a raw traceback, and the run
finished within the AppTest timeout (60 s). Every failure (page, dataset, walk seed, the widget sequence that
led to it, the head of the traceback) is collected; with ``MDP_WALK_LOG=path`` it is also appended to that
markdown file, dated. ``MDP_WALK_SEED`` shifts every walk's seed (default 0); ``MDP_WALK_STEPS=2000`` runs a
long walk on demand.
"""

from __future__ import annotations

import datetime as dt
import os
import random
import re
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest
from streamlit.testing.v1.element_tree import Widget

from bench.pages import app_pages  # one parser of app.py's st.Page(...) calls
from ui.jobs import builder

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "app.py"
TIMEOUT = 60.0  #: seconds; one rerun longer than this is a failure
STEPS = int(os.environ.get("MDP_WALK_STEPS", "40"))
#: Buttons that start an explicit, user-sized long job with its own progress bar and cancel (a sweep of
#: thousands of pipeline runs, a geo bound of up to 10 minutes in the background): by design not bound by the
#: 60 s rerun rule, so the walk does not press them; tests/sweep/test_page.py runs the page's sweep on a tiny
#: spec instead, tests/app/test_geo_page.py the bound on a small map, its stop and "Find the exact optimum"
#: (which starts the 10-minute bound) on stand-ins.
LONG_JOBS = frozenset({"sweep_run", "geo_bound_run", "geo_find_optimum"})
SEED_SHIFT = int(os.environ.get("MDP_WALK_SEED", "0"))
LOG = os.environ.get("MDP_WALK_LOG", "")
DATASETS = ("heart", "adult", "wine", "upload")
SLOW = 5.0  #: seconds; reruns slower than this are listed in the walk's summary
#: Weight factor of a widget the walk has not driven yet: every widget of a page gets its turn within the
#: walk's steps (without it a 40-step walk left about one widget in ten of the geo page untouched).
UNTRIED = 10.0
MAX_FAILURES = 6  #: distinct failures collected per walk before it stops

#: Widget types the walk knows how to drive, with their relative weight when choosing the next widget.
WEIGHTS = {
    "selectbox": 1.0,
    "radio": 1.0,
    "multiselect": 1.0,
    "slider": 1.0,
    "select_slider": 1.0,
    "number_input": 1.0,
    "toggle": 1.0,
    "checkbox": 1.0,
    "button": 2.0,
    "download_button": 0.5,
    "text_input": 1.5,
    "text_area": 1.5,
    "file_uploader": 0.7,
}
#: A traceback, a stack frame or a bare ``SomeError: ...`` shown in an st.error is a crash, not a message for
#: a user (a sentence that names the parser's complaint after saying what went wrong is fine).
TRACEBACK = re.compile(
    r"Traceback \(most recent call last\)|File \"[^\"]+\", line \d+|^\s*[\w.]*(?:Error|Exception)\b"
)


def tiny_osm() -> bytes:
    """A 6 x 6 street grid (about 0.1 km spacing) in central Helsinki as OpenStreetMap XML."""
    lat0, lon0, dlat, dlon = 60.165, 24.935, 0.0009, 0.0018
    nodes = [
        f'<node id="{1 + i * 6 + j}" lat="{lat0 + i * dlat:.6f}" lon="{lon0 + j * dlon:.6f}"/>'
        for i in range(6)
        for j in range(6)
    ]
    ways, wid = [], 1000
    for i in range(6):
        for refs in ([1 + i * 6 + j for j in range(6)], [1 + j * 6 + i for j in range(6)]):
            nds = "".join(f'<nd ref="{r}"/>' for r in refs)
            ways.append(f'<way id="{wid}">{nds}<tag k="highway" v="residential"/></way>')
            wid += 1
    body = "\n".join(nodes + ways)
    return f'<?xml version="1.0"?>\n<osm version="0.6">\n{body}\n</osm>\n'.encode()


def uploads_for(widget: Widget, messy: bytes) -> list[tuple[str, bytes, str] | None]:
    """Plausible files for an uploader, chosen from its label and accepted types."""
    text = f"{widget.label} {widget.key} {' '.join(widget.proto.type)}".lower()
    if "json" in text:
        good = b'{"tau_dpn": 0.5, "eps": 2.0, "p": "inf", "task": "record"}'
        return [
            ("good.json", good, "application/json"),
            ("bad.json", b'{"tau_dpn": 7}', "application/json"),
            ("junk.json", b"\x00\xff{not json", "application/json"),
            None,
        ]
    if "csv" in text or "tsv" in text:
        return [("messy.csv", messy, "text/csv"), None]
    if "osm" in text or "map" in text or "graphml" in text:
        return [("grid.osm", tiny_osm(), "application/xml"), ("junk.osm", b"not a map", "text/plain"), None]
    return [None]


def text_for(widget: Widget, rng: random.Random) -> str | None:
    """A plausible text for a text input, or None when typing would reach the network."""
    text = f"{widget.label} {widget.key}".lower()
    if any(word in text for word in ("place", "online", "url", "address")):
        return None  # a place name makes the page download a map: never in tests
    if "vector" in text or "," in (widget.value or ""):
        n = rng.choice([1, 2, 3, 4, 6, 8, 12])
        if rng.random() < 0.4:
            return ",".join(["1"] * n)
        return ", ".join(str(rng.choice([1, 2, 0.5, 3, 10])) for _ in range(n))
    return rng.choice(["", "1", "abc", "2.5", "a, b", "Größe"])


def _name(widget: Widget) -> str:
    """What identifies a widget across reruns: its key, else its label."""
    return str(widget.key or widget.label)


def _grid_value(lo: float, hi: float, step: float, rng: random.Random, integer: bool) -> float:
    """Both ends or a random point on the slider's step grid."""
    r = rng.random()
    if r < 0.3:
        return lo
    if r < 0.6:
        return hi
    k = rng.randint(0, max(round((hi - lo) / step), 0)) if step > 0 else 0
    value = min(hi, lo + k * step)
    return round(value) if integer else round(value, 10)


@dataclass
class Failure:
    """One distinct failure: where, after which steps, and the head of what went wrong."""

    page: str
    dataset: str
    seed: int
    step: int
    kind: str  # exception / st.error traceback / timeout / harness
    head: str
    detail: str
    steps: list[str] = field(default_factory=list)

    def signature(self) -> str:
        return re.sub(r"\d+", "N", f"{self.kind}:{self.head}")[:160]

    def markdown(self) -> str:
        when = dt.datetime.now().strftime("%Y-%m-%d %H:%M")
        lines = [
            f"### {when} · {self.page} · {self.dataset} · walk seed {self.seed} · step {self.step} · "
            f"{self.kind}",
            "",
            "```",
            self.head,
            *([self.detail] if self.detail else []),
            "```",
            f"Replay: `MDP_WALK_SEED={SEED_SHIFT} MDP_WALK_STEPS={STEPS} python -m pytest "
            f"tests/app/test_random_walk.py -k '{Path(self.page).stem} and {self.dataset}'`",
            "",
            "Widget sequence (setup, then one widget per rerun):",
            "",
            *(f"{i}. {s}" for i, s in enumerate(self.steps, 1)),
            "",
        ]
        return "\n".join(lines)


class Walk:
    """One seeded random walk over one page, starting from one data source."""

    def __init__(self, page: str, dataset: str, seed: int, messy: bytes) -> None:
        self.page, self.dataset, self.seed, self.messy = page, dataset, seed, messy
        self.rng = random.Random(seed)
        self.at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
        self.steps: list[str] = []
        self.failures: list[Failure] = []
        self.slow: list[str] = []
        self.seconds: list[float] = []
        self.follow_up_button = False
        self.dead = False
        self.tried: set[str] = set()  # widgets driven so far (key, else label)

    # -- running and checking --------------------------------------------------------------------------
    def run(self, description: str) -> None:
        self.steps.append(description)
        start = time.perf_counter()
        try:
            self.at.run(timeout=TIMEOUT)
        except RuntimeError as exc:
            if "timed out" not in str(exc):
                raise
            self.seconds.append(time.perf_counter() - start)
            self._record("timeout", f"rerun took longer than {TIMEOUT:.0f} s", str(exc))
            self.dead = True  # the script thread is still running: this AppTest is no longer usable
            return
        self.seconds.append(time.perf_counter() - start)
        if self.seconds[-1] > SLOW:
            self.slow.append(f"{self.seconds[-1]:.1f} s at step {len(self.steps)}: {description}")
        for exc in self.at.exception:
            kind = getattr(exc.proto, "type", "") or "Exception"
            first = exc.message.strip().splitlines()[0] if exc.message.strip() else ""
            frames = [line for line in exc.stack_trace if line.strip().startswith("File ")]
            ours = [f for f in frames if "site-packages" not in f and "/lib/python3" not in f]
            frames = ours or frames  # the project's own frames say where to look
            self._record("exception", f"{kind}: {first}", "\n".join(s.rstrip() for s in frames[-3:]))
        for err in self.at.error:
            if TRACEBACK.search(err.value):
                self._record("st.error traceback", err.value.strip().splitlines()[0], err.value[:600])

    def _record(self, kind: str, head: str, detail: str) -> None:
        failure = Failure(
            self.page, self.dataset, self.seed, len(self.steps), kind, head, detail, list(self.steps)
        )
        if failure.signature() not in {f.signature() for f in self.failures}:
            self.failures.append(failure)

    # -- setup ------------------------------------------------------------------------------------------
    def start(self) -> None:
        self.run("open the app")
        if self.failures or not any(w.key == "side_dataset" for _, w in self.widgets()):
            self._record("setup", "the app did not open with its sidebar dataset picker", "")
            self.dead = True
            return
        box = self.at.selectbox(key="side_dataset")
        wanted = "upload" if self.dataset == "upload" else self.dataset
        label = next(o for o in box.options if wanted in o.lower())
        box.set_value(label)
        self.run(f"sidebar selectbox side_dataset = {label!r}")
        if self.dataset == "upload":
            self.at.file_uploader(key="side_upload").set_value(("messy.csv", self.messy, "text/csv"))
            self.run("sidebar file_uploader side_upload = messy.csv (';', decimal commas, latin-1)")
        if not self.dead:
            self.at.switch_page(self.page)
            self.run(f"switch to page {self.page}")

    # -- one step ---------------------------------------------------------------------------------------
    def widgets(self) -> list[tuple[str, Widget]]:
        """Enabled widgets, except the buttons that start an explicit long job (see LONG_JOBS)."""
        found = []
        for where, block in (("sidebar", self.at.sidebar), ("main", self.at.main)):
            for node in block:
                if (
                    isinstance(node, Widget)
                    and node.type in WEIGHTS
                    and not getattr(node.proto, "disabled", False)
                    and getattr(node, "key", None) not in LONG_JOBS
                ):
                    found.append((where, node))
        return found

    def step(self) -> None:
        candidates = self.widgets()
        if not candidates:
            self.run("rerun (no widget)")
            return
        buttons = [(w, n) for w, n in candidates if n.type == "button"]
        if self.follow_up_button and buttons and self.rng.random() < 0.6:
            where, widget = self.rng.choice(buttons)
        else:
            weights = [self._weight(n) * (1.0 if _name(n) in self.tried else UNTRIED) for _, n in candidates]
            where, widget = self.rng.choices(candidates, weights=weights)[0]
        self.tried.add(_name(widget))
        self.follow_up_button = False
        description = self.act(widget)
        if description is None:
            self.run("rerun")
            return
        self.run(f"{where} {widget.type} {widget.key or widget.label!r} {description}")

    def _weight(self, widget: Widget) -> float:
        if widget.key == "side_dataset":
            return 0.3  # leaving the walk's data source now and then, not every few steps
        if widget.type in ("selectbox", "radio", "select_slider") and len(widget.options) < 2:
            return 0.05
        return WEIGHTS[widget.type]

    def act(self, w: Widget) -> str | None:
        """Give ``w`` a random valid value; return a description, or None for no change."""
        rng = self.rng
        if w.type in ("selectbox", "radio"):
            if not w.options:
                return None
            label = rng.choice(w.options)
            w.set_value(label)
            return f"= {label!r}"
        if w.type == "select_slider":
            options = w.options
            r = rng.random()
            label = options[0] if r < 0.3 else options[-1] if r < 0.6 else rng.choice(options)
            current = w.value
            if isinstance(current, (list, tuple)):
                lo, hi = sorted(rng.sample(range(len(options)), 2)) if len(options) > 1 else (0, 0)
                w.set_value([options[lo], options[hi]])
                return f"= [{options[lo]!r}, {options[hi]!r}]"
            w.set_value(label)
            return f"= {label!r}"
        if w.type == "multiselect":
            cap = w.max_selections or min(len(w.options), 4)
            k = rng.randint(0, min(cap, len(w.options)))
            chosen = rng.sample(w.options, k)
            w.set_value(chosen)
            return f"= {chosen!r}"
        if w.type == "slider":
            proto = w.proto
            integer = proto.data_type == proto.DataType.INT
            if proto.data_type not in (proto.DataType.INT, proto.DataType.FLOAT):
                return None
            a = _grid_value(proto.min, proto.max, proto.step, rng, integer)
            if isinstance(w.value, (list, tuple)):
                b = _grid_value(proto.min, proto.max, proto.step, rng, integer)
                w.set_value(sorted([a, b]))
                return f"= {sorted([a, b])!r}"
            w.set_value(a)
            return f"= {a!r}"
        if w.type == "number_input":
            return self._number(w)
        if w.type in ("toggle", "checkbox"):
            flipped = not w.value
            w.set_value(flipped)
            return f"= {flipped}"  # (after set_value, w.value is already the new value)
        if w.type in ("button", "download_button"):
            w.click()
            return "click"
        if w.type in ("text_input", "text_area"):
            text = text_for(w, rng)
            if text is None:
                return None
            w.set_value(text)
            self.follow_up_button = True
            return f"= {text!r}"
        if w.type == "file_uploader":
            upload = rng.choice(uploads_for(w, self.messy))
            w.set_value(upload)
            self.follow_up_button = True
            return "= (cleared)" if upload is None else f"= {upload[0]}"
        return None

    def _number(self, w: Widget) -> str:
        proto = w.proto
        integer = proto.data_type == proto.DataType.INT
        current = w.value if w.value is not None else (w.min if w.min is not None else 1)
        step = proto.step or 1
        lo = w.min
        hi = w.max
        choices: list[float] = []
        if lo is not None:
            choices += [lo, lo]
        if hi is not None:
            choices += [hi, hi]
        choices += [current + step, max(current - step, lo) if lo is not None else current - step]
        if lo is not None and hi is not None:
            choices.append(lo + (hi - lo) * self.rng.random())
        else:
            choices.append(current * 10 ** self.rng.uniform(-1.0, 1.5))
        value = self.rng.choice(choices)
        if lo is not None:
            value = max(value, lo)
        if hi is not None:
            value = min(value, hi)
        value = round(value) if integer else float(value)
        w.set_value(value)
        self.follow_up_button = True
        return f"= {value!r}"


def _walk_seed(page: str, dataset: str) -> int:
    return zlib.crc32(f"{page}|{dataset}".encode()) + SEED_SHIFT


def _log(failures: list[Failure]) -> None:
    if not LOG or not failures:
        return
    with open(LOG, "a", encoding="utf-8") as fh:
        fh.write("\n".join(f.markdown() for f in failures) + "\n")


def _page_id(page: str) -> str:
    return Path(page).stem


#: Walks that fail on today's code: (page stem, data source) -> (reason, strict). Exceptions are
#: deterministic for a given code version, so they are strict (a fix turns them into XPASS: delete the
#: entry); runs over 60 s depend on the machine, so they are not. Empty: the last two (release "Which ε" and
#: playground curves on adult, over 60 s) now take 11 s and 16-18 s and passed the 40-step walk.
KNOWN_OPEN: dict[tuple[str, str], tuple[str, bool]] = {}


def _walk_params() -> list:
    params = []
    for page in app_pages():
        for dataset in DATASETS:
            known = KNOWN_OPEN.get((_page_id(page), dataset))
            marks = [pytest.mark.xfail(reason=known[0], strict=known[1])] if known else []
            params.append(pytest.param(page, dataset, marks=marks, id=f"{_page_id(page)}-{dataset}"))
    return params


@pytest.fixture
def quiet_after() -> Iterator[None]:
    """Stop the background jobs when the walk ends: a walk toggles long LPs (spanner, lattice, exact
    optimum), bounds and held-out evaluations that would otherwise run on, on the cores of the tests after
    it (a coset bound's time share collapsed under them in CI)."""
    yield
    builder().shutdown()


@pytest.mark.slow
@pytest.mark.parametrize(("page", "dataset"), _walk_params())
def test_random_walk(
    page: str, dataset: str, label_index: None, bounded_runs: None, messy_csv: bytes, quiet_after: None
) -> None:
    st.cache_data.clear()  # process-global: each walk starts cold, whatever ran before on this worker
    walk = Walk(page, dataset, _walk_seed(page, dataset), messy_csv)
    walk.start()
    steps = STEPS if dataset != "upload" else max(STEPS // 2, 1)
    for _ in range(steps):
        if walk.dead or len(walk.failures) >= MAX_FAILURES:
            break
        walk.step()
    _log(walk.failures)
    slowest = max(walk.seconds, default=0.0)
    total = sum(walk.seconds)
    print(
        f"\n{page} {dataset}: {len(walk.seconds)} reruns in {total:.0f} s, slowest {slowest:.1f} s, "
        f"{len(walk.failures)} failures" + "".join(f"\n  slow: {s}" for s in walk.slow)
    )
    assert not walk.failures, "\n\n".join(f.markdown() for f in walk.failures)


def test_page_discovery_reads_app_py() -> None:
    pages = app_pages()
    assert pages[0] == "views/home.py" and len(pages) == len(set(pages)) >= 7
    assert all((ROOT / p).is_file() for p in pages)


def test_label_index_maps_shown_labels_back(label_index: None) -> None:
    at = AppTest.from_string(
        "import streamlit as st\n"
        "v = st.selectbox('s', ['a', 'b'], format_func={'a': 'Alpha', 'b': 'Beta'}.get, key='s')\n"
        "r = st.radio('r', [1, 2], format_func=lambda i: f'#{i}', key='r')\n"
        "g = lambda v: 'none' if v == 0 else f'{v:g}'\n"
        "f = st.select_slider('f', [0.0, 0.5], format_func=g, key='f')\n"
        "st.write(f'{v}|{r}|{f}')\n"
    ).run()
    at.selectbox(key="s").set_value("Beta")
    at.radio(key="r").set_value("#2")
    at.select_slider(key="f").set_value("0.5")
    at.run()
    assert not at.exception
    assert at.markdown[0].value == "b|2|0.5"
    at.select_slider(key="f").set_value("none").run()
    assert at.markdown[0].value == "b|2|0.0"
