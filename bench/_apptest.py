"""What the page benchmarks share: the app in an AppTest on an empty result store, a timed run, and a wait
for a background job's result (watched in the store, as a page's poll watches the job in a fragment,
without re-running the page)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

APP = Path(__file__).resolve().parents[1] / "app.py"


def open_app(timeout: float = 600.0) -> Any:
    """The app, run once, with the process's result store emptied (nothing computed before counts)."""
    from streamlit.testing.v1 import AppTest

    from ui.store import store

    logging.getLogger("streamlit").setLevel(logging.CRITICAL)  # the rows count exceptions; no tracebacks
    store().clear()
    return AppTest.from_file(str(APP), default_timeout=timeout).run()


def timed(at: Any, step: Callable[[Any], Any]) -> float:
    """Seconds of the run after ``step(at)`` (a widget action); an exception on the page raises."""
    t0 = time.perf_counter()
    step(at).run()
    if at.exception:
        raise RuntimeError(str(at.exception[0].value))
    return time.perf_counter() - t0


def until(found: Callable[[], Any], poll: float = 0.1, limit: float = 900.0) -> tuple[float, Any]:
    """Seconds until ``found()`` is truthy, and its value."""
    t0 = time.perf_counter()
    while not (value := found()):
        if time.perf_counter() - t0 > limit:
            raise RuntimeError(f"nothing landed within {limit:g} s")
        time.sleep(poll)
    return time.perf_counter() - t0, value
