"""AppTest for views/noise.py (generalized Gaussian shape selection, seed 003)."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

import mdp_core as core


@pytest.fixture
def at(app: AppTest) -> AppTest:
    """The app (fresh, caches cleared: tests/app/conftest.py) switched to the noise-shape page."""
    app.switch_page("views/noise.py").run()
    assert not app.exception
    return app


def metric(app: AppTest, label: str) -> str:
    return next(m.value for m in app.metric if m.label == label)


def test_defaults_show_the_003_table_2_selection(at: AppTest) -> None:
    # (eps, delta, Delta) = (1, 0.01, 3): p = 1.065, 3.40 % below Laplace (003 Sec. 6.1)
    assert metric(at, "Selected shape p") == "1.065"
    assert metric(at, "Improvement") == "3.40 %"
    assert float(metric(at, "E|Z|²")) == pytest.approx(16.71, abs=0.01)
    assert any("modest" in info.value for info in at.info)
    specs = [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]
    assert len(specs) == 2
    names = {trace.get("name") for spec in specs for trace in spec["data"]}
    assert "selected p = 1.065" in names and "Gaussian (p = 2)" in names


def test_small_eps_large_delta_selects_a_larger_shape(at: AppTest) -> None:
    at.select_slider(key="ggm_eps").set_value(0.1).run()
    at.select_slider(key="ggm_delta").set_value(0.1).run()
    assert not at.exception
    choice = core.select_shape(0.1, 0.1, 3.0)
    assert metric(at, "Selected shape p") == f"{choice.p:.4g}"
    assert metric(at, "Improvement") == f"{100 * choice.improvement:.2f} %"
    assert any("worth it" in info.value for info in at.info)


def test_heatmap_with_progress_and_vector_query(at: AppTest) -> None:
    at.toggle(key="ggm_heatmap").set_value(True).run()
    assert not at.exception
    heat = json.loads(at.get("plotly_chart")[-1].proto.spec)
    assert [trace["type"] for trace in heat["data"]] == ["heatmap", "heatmap"]
    assert heat["data"][0]["z"]["shape"] == "20, 40"  # plotly ships z as typed binary
    assert any("of the grid gains" in c.value for c in at.caption)
    at.text_input(key="ggm_vector").set_value("1, 2").run()
    at.button(key="ggm_vector_go").click().run()
    assert not at.exception
    table = at.dataframe[0].value
    assert list(table["shape p"])[-1] == "∞" and (table["scale b"] > 0).all()
    at.text_input(key="ggm_vector").set_value("a, b").run()
    at.button(key="ggm_vector_go").click().run()
    assert "numbers separated by commas" in at.error[0].value
