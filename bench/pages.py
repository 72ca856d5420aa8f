"""Seconds per rerun of every page, driven with AppTest: default settings, then typical widget changes.

For each page registered in app.py and each embedded dataset (heart only with ``--quick``): a fresh app with
empty caches opens the page (``cold_s``, reported apart), reruns it twice unchanged, then moves every value
widget of the page (select boxes, radios, sliders, select sliders, number inputs, multiselects) one step away
from its default and back (the way back is usually a cache hit). ``p50_s`` / ``p95_s`` / ``max_s`` are over
those reruns; the target is p95 <= 1 s at default settings. Toggles, buttons, uploads and text inputs start
optional computations and are not part of the typical path. A rerun that exceeds ``TIMEOUT`` counts as
``TIMEOUT`` seconds and is named in ``slowest``.
"""

from __future__ import annotations

import ast
import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "app.py"
TIMEOUT = 120.0
VALUE_WIDGETS = ("selectbox", "radio", "slider", "select_slider", "number_input", "multiselect")


def app_pages() -> list[str]:
    """Page scripts registered in app.py (first argument of each ``st.Page(...)``)."""
    tree = ast.parse(APP.read_text(encoding="utf-8"))
    pages = [
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "Page"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ]
    return list(dict.fromkeys(pages))


@contextlib.contextmanager
def _label_index() -> Iterator[None]:
    """Selectboxes and radios set by their shown label map back to an index (AppTest format_func quirk)."""
    from streamlit.proto.WidgetStates_pb2 import WidgetState
    from streamlit.testing.v1.element_tree import Radio, Selectbox, SelectSlider

    def index(self) -> int | None:
        if self.value is None:
            return None
        try:
            shown = self.format_func(self.value)
        except Exception:
            shown = None
        if isinstance(shown, str) and shown in self.options:
            return self.options.index(shown)
        return self.options.index(self.value)

    slider_state = SelectSlider.__dict__["_widget_state"]

    def select_slider_state(self) -> WidgetState:
        shown = self.value if isinstance(self.value, (list, tuple)) else [self.value]
        if not all(isinstance(v, str) and v in self.options for v in shown):
            return slider_state.fget(self)
        ws = WidgetState()  # a shown label goes to the server as it is, as the browser sends it
        ws.id = self.id
        ws.string_array_value.data[:] = list(shown)
        return ws

    saved = {cls: cls.__dict__["index"] for cls in (Selectbox, Radio)}
    try:
        for cls in saved:
            cls.index = property(index)
        SelectSlider._widget_state = property(select_slider_state)
        yield
    finally:
        for cls, prop in saved.items():
            cls.index = prop
        SelectSlider._widget_state = slider_state


def _timed_run(at, label: str, times: list[tuple[float, str]]) -> None:
    start = time.perf_counter()
    try:
        at.run(timeout=TIMEOUT)
        seconds = time.perf_counter() - start
    except RuntimeError as exc:
        if "timed out" not in str(exc):
            raise
        seconds = TIMEOUT
    if at.exception:
        label += f" (exception: {at.exception[0].message.splitlines()[0][:60]})"
    times.append((seconds, label))


def _neighbour(widget) -> tuple[object, object] | None:
    """(a value one step away from the current one, the current value as the widget takes it back)."""
    kind = widget.type
    if kind in ("selectbox", "radio", "select_slider"):
        options = widget.options
        if len(options) < 2:
            return None
        if kind == "select_slider":
            fmt = widget.format_func
            current = fmt(widget.value) if not isinstance(widget.value, (list, tuple)) else None
            if current not in options:
                return None
        else:
            current = options[widget.index]
        i = options.index(current)
        other = options[i + 1] if i + 1 < len(options) else options[i - 1]
        return other, current
    if kind == "slider":
        value = widget.value
        if isinstance(value, (list, tuple)) or not isinstance(value, (int, float)):
            return None
        step = widget.proto.step or 1
        other = value + step if value + step <= widget.proto.max else value - step
        return (round(other) if isinstance(value, int) else other), value
    if kind == "number_input":
        value = widget.value
        if value is None:
            return None
        step = widget.proto.step or 1
        hi = widget.max if widget.max is not None else float("inf")
        other = value + step if value + step <= hi else value - step
        return (round(other) if isinstance(value, int) else other), value
    if kind == "multiselect":
        current = list(widget.value)
        extra = [o for o in widget.options if o not in widget.values]
        cap = widget.max_selections or len(widget.options)
        if len(current) > 1:
            return current[:-1], current
        if extra and len(current) < cap and current:
            return [*widget.values, extra[0]], list(widget.values)
        return None
    return None


def drive_page(page: str, dataset: str, max_widgets: int | None = None) -> dict:
    """Open ``page`` on ``dataset`` and time its reruns (see the module docstring)."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    st.cache_data.clear()
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.run(timeout=TIMEOUT)
    box = at.selectbox(key="side_dataset")
    box.set_value(next(o for o in box.options if dataset in o.lower()))
    at.run(timeout=TIMEOUT)
    start = time.perf_counter()
    at.switch_page(page).run(timeout=TIMEOUT)
    cold = time.perf_counter() - start
    times: list[tuple[float, str]] = []
    for i in range(2):
        _timed_run(at, f"unchanged rerun {i + 1}", times)
    keys = [
        w.key
        for w in at.main
        if getattr(w, "type", None) in VALUE_WIDGETS and getattr(w, "key", None)
        if not getattr(w.proto, "disabled", False)
    ]
    for key in keys[:max_widgets]:
        try:
            widget = at.main.get_by_key(key)
        except Exception:
            continue  # gone after an earlier change
        move = _neighbour(widget)
        if move is None:
            continue
        other, back = move
        widget.set_value(other)
        _timed_run(at, f"{key} = {other!r}", times)
        try:
            at.main.get_by_key(key).set_value(back)
        except Exception:
            continue
        _timed_run(at, f"{key} back to {back!r}", times)
    seconds = np.array([t for t, _ in times])
    worst = max(times)
    return {
        "page": Path(page).stem,
        "dataset": dataset,
        "cold_s": cold,
        "reruns": len(times),
        "p50_s": float(np.percentile(seconds, 50)),
        "p95_s": float(np.percentile(seconds, 95)),
        "max_s": float(seconds.max()),
        "p95_ok": bool(np.percentile(seconds, 95) <= 1.0),
        "slowest": worst[1][:70],
        "exceptions": sum("exception:" in label for _, label in times),
    }


def run(quick: bool = False) -> list[dict]:
    import logging
    import os
    import sys

    os.chdir(ROOT)
    logging.getLogger("streamlit").setLevel(logging.CRITICAL)  # the table counts exceptions; no tracebacks
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    rows = []
    datasets = ["heart"] if quick else ["heart", "adult", "wine"]
    with _label_index():
        for page in app_pages():
            for dataset in datasets:
                rows.append(drive_page(page, dataset, max_widgets=4 if quick else None))
    return rows
