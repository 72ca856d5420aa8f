"""AppTest: the DepHDP mechanism-selection page (sliders, figures, config JSON round trip, downloads)."""

from __future__ import annotations

import json
import math

import numpy as np
from streamlit.testing.v1 import AppTest

from mdp_core import DepHDPConfig
from ui.widgets import log_grid


def _spec(at: AppTest, index: int) -> dict:
    return json.loads(at.get("plotly_chart")[index].proto.spec)


def test_dephdp_page_renders_and_reacts(app: AppTest) -> None:
    app.switch_page("views/dephdp.py").run()
    assert not app.exception
    assert app.title[0].value == "Mechanism selection (DepHDP)"
    scatter = _spec(app, 0)
    names = {t["name"] for t in scatter["data"]}
    assert names == {"OPT", "DPN"}
    groups = app.dataframe[0].value
    assert set(groups.mechanism) <= {"OPT", "DPN"} and (groups.eps_k > 0).all()
    metrics = {m.label: m.value for m in app.metric}
    assert float(metrics["Lower bound (Prop. 2)"]) <= float(metrics["DepHDP surrogate loss"])
    assert float(metrics["DepHDP surrogate loss"]) <= float(metrics["ALC+RMP surrogate loss"])
    n_opt = int((groups.mechanism == "OPT").sum())
    app.slider(key="dep_tau_dpn").set_value(0.0).run()  # no group scores <= 0: everything DPN
    assert not app.exception
    assert (app.dataframe[0].value.mechanism == "DPN").all() and n_opt >= 0
    before = float({m.label: m.value for m in app.metric}["DepHDP surrogate loss"])
    eps = max(v for v in log_grid(0.1, 20.0) if v <= 5.0)
    app.select_slider(key="dep_eps").set_value(eps).run()
    assert not app.exception
    eps_k = app.dataframe[0].value.eps_k.to_numpy()
    assert float(np.sqrt(np.sum(eps_k**2))) <= eps * (1 + 1e-12)  # l2 metric: ||eps_k||_2 <= eps
    after = float({m.label: m.value for m in app.metric}["DepHDP surrogate loss"])
    assert after < before
    r2 = float({m.label: m.value for m in app.metric}["Surrogate held-out R²"])
    assert r2 < 0.5 and any("Low fit by nature of the task" in c.value for c in app.caption)


def test_dephdp_page_config_upload_validates(app: AppTest) -> None:
    app.switch_page("views/dephdp.py").run()
    app.file_uploader(key="dep_config_upload").set_value(
        ("bad.json", b'{"tau_dpn": 7}', "application/json")
    ).run()
    assert not app.exception
    assert any("tau_dpn must lie in [0, 1]" in e.value for e in app.error)
    good = json.dumps({"tau_dpn": 0.5, "eps": 2.0, "p": "inf", "task": "record"}).encode()
    app.file_uploader(key="dep_config_upload").set_value(("good.json", good, "application/json")).run()
    assert not app.exception
    assert app.slider(key="dep_tau_dpn").value == 0.5
    assert app.select_slider(key="dep_p").value == "inf"
    assert app.selectbox(key="dep_task").value == "record"


def test_dephdp_page_axes_and_entropy_task(app: AppTest) -> None:
    app.switch_page("views/dephdp.py").run()
    scatter = _spec(app, 0)
    largest = int(app.dataframe[0].value.domain_size.max())
    tau_dim = min(300, DepHDPConfig().opt_max_domain)
    lo, hi = scatter["layout"]["xaxis"]["range"]  # log10 units: from below 1 to a bit beyond the data
    assert lo < 0 < math.log10(max(largest, tau_dim)) < hi <= math.log10(2 * max(largest, tau_dim))
    for ann in scatter["layout"]["annotations"]:  # labels sit inside the axis (log10 x on a log axis)
        assert ann.get("xref", "x") != "x" or lo <= ann["x"] <= hi
    curves = _spec(app, 2)
    grid = DepHDPConfig().eps_grid
    clo, chi = math.log10(grid[0]), math.log10(grid[-1])
    for ann in curves["layout"]["annotations"]:
        assert ann.get("xref", "x") != "x" or clo - 1e-9 <= ann["x"] <= chi + 1e-9
    app.selectbox(key="dep_task").set_value("entropy").run()
    assert not app.exception
    metrics = {m.label: m.value for m in app.metric}
    assert metrics["Surrogate held-out R²"] == "exact"
    assert any("Entropy task" in c.value for c in app.caption)
