"""AppTest: the correlated-leakage page (pair curves, triad, all-pairs heatmap, calibration)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest


@pytest.fixture(autouse=True)
def empty_result_store() -> None:
    """All-pairs models live in the process-wide result store (a cache resource): start each test without."""
    st.cache_resource.clear()


def _spec(at: AppTest, key_fragment: int) -> dict:
    return json.loads(at.get("plotly_chart")[key_fragment].proto.spec)


def test_leakage_page_pair_curves_and_eps(app: AppTest) -> None:
    app.switch_page("views/leakage.py").run()
    assert not app.exception
    assert app.selectbox(key="leak_target").value == "age"
    app.selectbox(key="leak_target").set_value("sex").run()
    app.selectbox(key="leak_other").set_value("thal").run()
    assert not app.exception
    heat = _spec(app, 0)
    assert heat["data"][0]["type"] == "heatmap" and len(heat["data"][0]["y"]) == 2
    curves = _spec(app, 1)
    names = [t.get("name", "") for t in curves["data"]]
    assert {"CPL* (exact)", "DT (α, β, δ)", "(α, γ, δ) uncalibrated"} <= set(names)
    exact = np.array(curves["data"][names.index("CPL* (exact)")]["y"])
    dt = np.array(curves["data"][names.index("DT (α, β, δ)")]["y"])
    assert np.all(dt >= exact - 1e-12) and exact.max() > 0
    assert curves["layout"]["xaxis"]["type"] == "log"
    assert [m.label for m in app.metric][:3] == ["α", "β", "δ"]

    def at_eps_caption() -> str:
        return next(c.value for c in app.caption if c.value.startswith("At ε ="))

    before = at_eps_caption()
    slider = app.select_slider(key="leak_eps")
    target_eps = min((float(o) for o in slider.options), key=lambda v: abs(v - 5.0))
    slider.set_value(target_eps).run()
    assert not app.exception
    after = at_eps_caption()
    assert after.startswith(f"At ε = {target_eps:g}:") and after != before
    marker = [s for s in _spec(app, 1)["layout"]["shapes"] if s.get("type") == "line"]
    assert marker and marker[0]["x0"] == target_eps


def test_leakage_page_uncertainty_all_pairs_and_calibration(app: AppTest) -> None:
    app.switch_page("views/leakage.py").run()
    app.radio(key="leak_unc").set_value("relative").run()
    app.slider(key="leak_e").set_value(0.2).run()
    assert not app.exception
    names = [t.get("name", "") for t in _spec(app, 1)["data"]]
    assert any(n.startswith("DT with uncertainty") for n in names)
    app.radio(key="leak_unc").set_value("groups").run()
    assert not app.exception
    names = [t.get("name", "") for t in _spec(app, 1)["data"]]
    assert "CPL* across sources" in names
    assert not app.get("plotly_chart")[2:]  # all pairs wait for the button (seconds on large tables)
    app.button(key="leak_pairs_go").click().run()
    assert not app.exception
    pairs = _spec(app, 2)
    assert len(pairs["data"][0]["x"]) == 14  # heart: 14 attributes
    tpl = app.dataframe[0].value
    assert list(tpl.iloc[:, 1]) == sorted(tpl.iloc[:, 1], reverse=True)
    app.number_input(key="leak_eps_bar").set_value(2.0).run()
    assert not app.exception
    app.button(key="leak_cal_go").click().run()
    assert not app.exception
    cal = app.dataframe[1].value
    assert (cal["TPL"] <= 2.0 + 1e-12).all() and cal["eps"].sum() >= cal["uniform eps"].sum() - 1e-9
    app.select_slider(key="leak_eps").set_value(2.0).run()  # back later: model and budgets from the store
    assert not app.exception and len(app.dataframe) == 2
    app.radio(key="leak_method").set_value("exact").run()
    assert not app.exception
    app.button(key="leak_pairs_go").click().run()
    app.button(key="leak_cal_go").click().run()
    assert not app.exception
    assert (app.dataframe[1].value["TPL"] <= 2.0 + 1e-12).all()


def test_readable_axes_and_plain_words(app: AppTest) -> None:
    """Log axis by round values, at most 12 unique level ticks, budgets in odds (issue 11, figures)."""
    app.switch_page("views/leakage.py").run()
    app.selectbox(key="leak_target").set_value("chol").run()  # many binned levels
    assert not app.exception
    heat = _spec(app, 0)["layout"]
    for axis in (heat["xaxis"], heat["yaxis"]):
        assert len(axis["tickvals"]) <= 12 and len(set(axis["ticktext"])) == len(axis["ticktext"])
    curves = _spec(app, 1)["layout"]["xaxis"]
    assert curves["type"] == "log" and curves["ticktext"] == ["0.01", "0.1", "1", "10"]
    words = " ".join(i.value for i in app.info)
    assert "attacker's odds" in words and "e^ε" in words


def test_all_pairs_progress_is_drawn_outside_any_cache(app: AppTest) -> None:
    """The model's progress bar lived inside st.cache_resource: a rerun replaying it could fail; now the
    model sits in the locked store, and coming back (another target, back again) needs no click."""
    app.switch_page("views/leakage.py").run()
    app.button(key="leak_pairs_go").click().run()
    assert not app.exception and len(app.get("plotly_chart")) == 3
    app.selectbox(key="leak_target").set_value("sex").run()
    app.switch_page("views/noise.py").run()
    app.switch_page("views/leakage.py").run()
    assert not app.exception and len(app.get("plotly_chart")) == 3
