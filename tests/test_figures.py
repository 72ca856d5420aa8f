"""The shared log axis of the report and the pages: round, unique labels inside the data's range."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from mdp_core._figures import log_axis


@given(st.floats(1e-9, 1e6), st.floats(1.001, 1e8), st.integers(2, 12))
def test_ticks_are_round_unique_sorted_and_inside_the_range(lo: float, ratio: float, most: int) -> None:
    hi = lo * ratio
    axis = log_axis(lo, hi, max_ticks=most)
    ticks, labels = axis["tickvals"], axis["ticktext"]
    assert isinstance(ticks, list) and isinstance(labels, list)
    assert ticks == sorted(ticks) and len(set(labels)) == len(labels) >= (2 if ratio >= 2 else 1)
    assert all(lo * (1 - 1e-9) <= t <= hi * (1 + 1e-9) for t in ticks) or len(ticks) <= 3  # rounded ends
    assert len(ticks) <= max(most, 3)
    assert all(float(f"{t:.2g}") == t for t in ticks)  # at most two significant digits


def test_known_axes() -> None:
    assert log_axis(1.0, 20.0)["ticktext"] == ["1", "2", "5", "10", "20"]
    assert log_axis(0.25, 20.0)["ticktext"] == ["0.5", "1", "2", "5", "10", "20"]
    assert log_axis(1e-8, 1e-2)["ticktext"] == ["10⁻⁸", "10⁻⁷", "10⁻⁶", "10⁻⁵", "10⁻⁴", "10⁻³", "10⁻²"]
    assert log_axis(0.0, 1.0) == {"type": "log"} and log_axis(math.nan, 1.0) == {"type": "log"}
