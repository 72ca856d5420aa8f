"""Waiting in page tests for work the page runs in the background (ui/jobs.py). AppTest never fires a
fragment's timer, so a test reruns the page itself, as the page's poll would."""

from __future__ import annotations

import time
from collections.abc import Callable

from streamlit.testing.v1 import AppTest


def rerun_until(
    app: AppTest, done: Callable[[], object], seconds: float = 60.0, what: str = "the job"
) -> None:
    """Rerun ``app`` until ``done()`` (never past an exception on the page, nor past ``seconds``)."""
    deadline = time.monotonic() + seconds
    while not done():
        assert not app.exception, app.exception
        assert time.monotonic() < deadline, f"{what} did not land within {seconds:g} s"
        time.sleep(0.1)
        app.run()
    assert not app.exception, app.exception


def until_button(app: AppTest, key: str, seconds: float = 10.0) -> None:
    """Rerun until the start button ``key`` is back: a job stopped (after "Stopping…") or failed."""
    rerun_until(app, lambda: key in [b.key for b in app.button], seconds, f"the button {key}")
