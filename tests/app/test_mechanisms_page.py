"""AppTest for views/mechanisms.py (mechanism playground)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import mdp_core as core
from ui import mechanisms as mech


@pytest.fixture
def at(app: AppTest) -> AppTest:
    """The app (fresh, caches cleared) on the playground page with the default heart data."""
    app.switch_page("views/mechanisms.py").run()
    assert not app.exception
    return app


def metric(app: AppTest, label: str) -> str:
    return next(m.value for m in app.metric if m.label == label)


def reference(columns: list[str], p: float, task: str, eps: float, threshold: int = 0) -> dict[str, float]:
    df = core.load_dataset("heart")
    enc = core.discretize(df, core.infer_schema(df, target="target"), bins=8)  # the app's defaults
    domain = mech.domain_of(enc, columns, p)
    loss = mech.task_loss(domain, task, threshold)
    em = core.exponential_mechanism(domain.dist, eps)
    opt = core.optimal_mechanism(domain.prior, loss, domain.dist, eps)
    return {
        "EM": core.expected_loss(em, domain.prior, loss),
        "EM+remap": core.expected_loss(core.bayesian_remap(em, domain.prior, loss), domain.prior, loss),
        "OPT": opt.objective,
    }


def test_default_view_shows_three_verified_channels(at: AppTest) -> None:
    attrs = at.multiselect(key="mech_attrs").value
    assert attrs == ["age"]
    eps = at.select_slider(key="mech_eps").value  # the log-grid stop nearest to 2
    ref = reference(attrs, 2.0, "squared", eps)
    for name, value in ref.items():
        assert metric(at, f"{name} expected loss") == f"{value:.4g}"
    violations = [float(c.value.split(": ")[1]) for c in at.caption if c.value.startswith("verified max")]
    assert len(violations) == 3 and max(violations) <= 1e-9
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    assert [t["type"] for t in charts[0]["data"]] == ["heatmap"] * 3
    assert len(charts) == 2  # heatmaps + curves (small domain: curves on by default)
    curve_names = [t["name"] for t in charts[1]["data"]]
    assert curve_names[:3] == ["EM", "EM+remap", "OPT"] and curve_names[3] == f"current ε = {eps:g}"
    opt_curve = np.array(charts[1]["data"][2]["y"], dtype=float)
    assert np.all(np.diff(opt_curve) <= 1e-9)


def test_threshold_task_and_group(at: AppTest) -> None:
    at.radio(key="mech_task").set_value("threshold").run()
    assert not at.exception
    at.multiselect(key="mech_attrs").set_value(["sex", "cp"]).run()
    assert not at.exception
    threshold = at.selectbox(key="mech_threshold").value
    eps = at.select_slider(key="mech_eps").value
    ref = reference(["sex", "cp"], 2.0, "threshold", eps, threshold)
    assert metric(at, "OPT expected loss") == f"{ref['OPT']:.4g}"
    assert ref["OPT"] < 0.95 * ref["EM+remap"]
    assert any("OPT beats" in info.value for info in at.info)
    heat = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert heat["data"][0]["z"]["shape"] == "8, 8"  # sex (2) x cp (4) joint domain


def test_eps_and_p_change_the_numbers(at: AppTest) -> None:
    before = metric(at, "EM expected loss")
    at.select_slider(key="mech_eps").set_value(10.0).run()
    at.select_slider(key="mech_p").set_value(1.0).run()
    assert not at.exception
    after = metric(at, "EM expected loss")
    assert float(after) < float(before)
    assert metric(at, "EM expected loss") == f"{reference(['age'], 1.0, 'squared', 10.0)['EM']:.4g}"


def test_empty_selection_guides_the_user(at: AppTest) -> None:
    at.multiselect(key="mech_attrs").set_value([]).run()
    assert not at.exception
    assert any("Choose at least one attribute" in info.value for info in at.info)
