"""AppTest helpers: a fresh app run per test with caches cleared."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

APP = Path(__file__).resolve().parents[2] / "app.py"


@pytest.fixture
def stalled() -> Callable[[str], Callable[..., None]]:
    """A factory of stand-ins for a slow core computation run as a background job: each only reports
    progress (``message.format(step)``, 50 a second) until the page's stop raises out of it."""

    def factory(message: str) -> Callable[..., None]:
        def run(*args: object, progress: Callable[[float, str], None], **kwargs: object) -> None:
            for i in range(3000):
                progress(i / 3000, message.format(i + 1))
                time.sleep(0.02)
            raise AssertionError("the job was not stopped")

        return run

    return factory


@pytest.fixture
def app() -> AppTest:
    st.cache_data.clear()
    at = AppTest.from_file(str(APP), default_timeout=90)
    return at.run()


# --- added for the random walk (tests/app/test_random_walk.py) and other page tests ----------------------


def _option_index(options: list[str], format_func, value: object) -> int:
    """Index of ``value`` among the shown ``options``: by its formatted label, else as the label itself."""
    try:
        shown = format_func(value)
    except Exception:
        shown = None
    if isinstance(shown, str) and shown in options:
        return options.index(shown)
    if isinstance(value, str) and value in options:
        return options.index(value)
    raise ValueError(f"{value!r} is neither an option nor a shown label of {options}")


@pytest.fixture
def label_index(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let selectboxes, radios, multiselects and select sliders be set by their shown label, as the browser
    does.

    AppTest's ``select_index`` / ``set_value`` on a widget with a ``format_func`` stores the shown label and
    then fails with "None is not in list" when it maps the value back (ENGINEERING.md, second round).
    """
    from streamlit.proto.WidgetStates_pb2 import WidgetState
    from streamlit.testing.v1.element_tree import Multiselect, Radio, Selectbox, SelectSlider

    def index(self) -> int | None:
        if self.value is None:
            return None
        if len(self.options) == 0:
            return 0
        return _option_index(self.options, self.format_func, self.value)

    def values(self) -> list[str]:
        return [self.options[_option_index(self.options, self.format_func, v)] for v in self.value]

    slider_state = SelectSlider._widget_state

    def select_slider_state(self) -> WidgetState:
        shown = self.value if isinstance(self.value, (list, tuple)) else [self.value]
        if not all(isinstance(v, str) and v in self.options for v in shown):
            return slider_state.fget(self)
        ws = WidgetState()  # shown labels go to the server as they are, as the browser sends them
        ws.id = self.id
        ws.string_array_value.data[:] = list(shown)
        return ws

    monkeypatch.setattr(SelectSlider, "_widget_state", property(select_slider_state))
    monkeypatch.setattr(Selectbox, "index", property(index))
    monkeypatch.setattr(Radio, "index", property(index))
    monkeypatch.setattr(Multiselect, "values", property(values))


def build_messy_csv(rows: int = 240, seed: int = 7) -> bytes:
    """A European-style CSV as real users upload it: ``;`` separator, decimal commas and thousands
    separators, latin-1, a quoted header, an identifier column, dates, free text and blanks."""
    import numpy as np

    rng = np.random.default_rng(seed)
    words = ["Müller", "größer", "café", "ok", "später anrufen", "n/a", "Straße 5", "früh", "élan", "x"]
    lines = ["ID;'Alter';Einkommen;Geschlecht;Datum;Notiz;Stufe;Größe;Zufrieden"]
    for i in range(rows):
        age = "" if rng.random() < 0.05 else str(int(rng.integers(18, 90)))
        income = float(rng.lognormal(10.3, 0.6))
        whole, cents = divmod(round(income * 100), 100)
        income_s = f"{whole:,}".replace(",", ".") + f",{cents:02d}"
        sex = "" if rng.random() < 0.04 else str(rng.choice(["m", "w", "d"], p=[0.48, 0.48, 0.04]))
        date = (
            f"{int(rng.integers(1, 29)):02d}.{int(rng.integers(1, 13)):02d}.{int(rng.integers(2015, 2025))}"
        )
        note = " ".join(rng.choice(words, int(rng.integers(1, 4)))) + f" {i}"
        level = str(rng.choice(["niedrig", "mittel", "hoch"]))
        height = f"{rng.normal(1.72, 0.09):.2f}".replace(".", ",")
        happy = str(int(rng.integers(1, 6)))
        lines.append(f"ID{i:05d};{age};{income_s};{sex};{date};{note};{level};{height};{happy}")
    return ("\n".join(lines) + "\n").encode("latin-1")


@pytest.fixture
def messy_csv() -> bytes:
    """See :func:`build_messy_csv`."""
    return build_messy_csv()


@pytest.fixture
def bounded_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make an AppTest run that exceeds its timeout really stop.

    AppTest's own timeout asks the script to stop and then joins the script thread without a limit, so a
    script busy in a long computation (no Streamlit call to stop at) blocks the test until it ends. Here the
    script thread also gets a ``StopException`` raised asynchronously (at its next Python bytecode), and the
    join waits at most 30 s more; the run then raises ``RuntimeError("AppTest script run timed out ...")``.
    """
    import ctypes
    import time as _time

    from streamlit.runtime.scriptrunner_utils.exceptions import StopException
    from streamlit.testing.v1 import local_script_runner

    def require_widgets_deltas(runner, timeout: float = 3) -> None:
        t0 = _time.time()
        while _time.time() - t0 < timeout:
            _time.sleep(0.005)
            if runner.script_stopped():
                return
        runner.request_stop()
        thread = getattr(runner, "_script_thread", None)
        if thread is not None and thread.ident is not None and thread.is_alive():
            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(thread.ident), ctypes.py_object(StopException)
            )
            thread.join(30.0)
            alive = thread.is_alive()
        else:
            alive = False
        raise RuntimeError(
            f"AppTest script run timed out after {timeout}(s)"
            + (" and the script thread did not stop within 30 s more" if alive else "")
        )

    monkeypatch.setattr(local_script_runner, "require_widgets_deltas", require_widgets_deltas)
