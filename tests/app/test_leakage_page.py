"""AppTest: the correlated-leakage page (pair curves, triad, all-pairs heatmap, calibration)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest
import streamlit as st
from pagewait import rerun_until, until_button  # tests/app is on sys.path (rootdir conftest layout)
from streamlit.testing.v1 import AppTest

import mdp_core as core
import ui.leakage as leak

Stalled = Callable[[str], Callable[..., None]]  # the stalled fixture (conftest.py)


@pytest.fixture(autouse=True)
def empty_result_store() -> None:
    """All-pairs models live in the process-wide result store (a cache resource): start each test without."""
    st.cache_resource.clear()


CAL_EPS, CAL_TPL = "calibrated ε (nats)", "total leakage, calibrated (nats)"
UNIFORM_EPS = "uniform ε (nats)"
PAPER_ID = re.compile(r"\bseed\s*0\d\d\b|\b0\d\d\s+Sec\.|\(0\d\d\b")  # "seed 001", "001 Sec. V-D", "(001"


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
    assert (cal[CAL_TPL] <= 2.0 + 1e-12).all() and cal[CAL_EPS].sum() >= cal[UNIFORM_EPS].sum() - 1e-9
    app.select_slider(key="leak_eps").set_value(2.0).run()  # back later: model and budgets from the store
    assert not app.exception and len(app.dataframe) == 2
    app.radio(key="leak_method").set_value("exact").run()
    assert not app.exception
    app.button(key="leak_pairs_go").click().run()
    app.button(key="leak_cal_go").click().run()
    assert not app.exception
    assert (app.dataframe[1].value[CAL_TPL] <= 2.0 + 1e-12).all()


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


def test_cpl_chart_axis_fits_the_curves_and_the_eps_label_sits_by_its_line(app: AppTest) -> None:
    """UX audit: the x axis ran to about 100 while the curves stop at ε = 20, and the "ε = 3" label sat in the
    top-right corner (add_vline's label on a log axis lands at 10^ε, and the axis stretched to it)."""
    app.switch_page("views/leakage.py").run()
    slider = app.select_slider(key="leak_eps")
    eps = min((float(o) for o in slider.options), key=lambda v: abs(v - 3.0))
    slider.set_value(eps).run()
    assert not app.exception
    spec = _spec(app, 1)
    xs = np.concatenate([np.asarray(t["x"], dtype=float) for t in spec["data"]])
    lo, hi = spec["layout"]["xaxis"]["range"]  # log10 units on a log axis
    assert np.log10(xs.min()) - 1e-9 <= lo < hi <= np.log10(xs.max()) + 1e-9
    assert hi - lo >= np.log10(xs.max() / xs.min()) - 1e-9  # and every point of the curves is shown
    (label,) = [a for a in spec["layout"]["annotations"] if a["text"] == f"ε = {eps:g}"]
    assert label["xref"] == "x" and label["x"] == pytest.approx(np.log10(eps))  # at its red line
    assert lo <= label["x"] <= hi


def test_coinciding_curves_stay_visible_and_are_named(app: AppTest) -> None:
    """UX audit: "DT (α, β, δ)" and "(α, γ, δ) uncalibrated" were in the legend, hidden under other lines."""
    app.switch_page("views/leakage.py").run()  # age <- sex: DT equals CPL* exactly
    spec = _spec(app, 1)
    style = {t["name"]: t.get("line", {}) for t in spec["data"] if "name" in t}
    dashes = [
        style[n].get("dash", "solid") for n in ("CPL* (exact)", "DT (α, β, δ)", "(α, γ, δ) uncalibrated")
    ]
    assert len(set(dashes)) == 3  # each of the three keeps its own dash style on top of the others
    names = [t.get("name") for t in spec["data"]]
    assert names.index("CPL* (exact)") < names.index("DT (α, β, δ)")  # the solid line under the dashed one
    notes = [c.value for c in app.caption if "coincide" in c.value]
    assert notes == [
        "For this pair CPL* (exact) and DT (α, β, δ) coincide at every ε shown: their lines lie on top of "
        "each other (each keeps its own dash style)."
    ]
    app.selectbox(key="leak_target").set_value("sex").run()
    app.selectbox(key="leak_other").set_value("thal").run()  # three distinct curves: no such note
    assert not app.exception and not [c for c in app.caption if "coincide" in c.value]


def test_close_but_unequal_curves_are_not_said_to_coincide(app: AppTest) -> None:
    """Leakage audit: oldpeak <- fbs, CPL* 0.0199 and (alpha, gamma, delta) 0.0355 at eps 0.1 were said to
    "coincide" (within 0.5 % of the axis); the note now gives their largest difference."""
    app.switch_page("views/leakage.py").run()
    app.selectbox(key="leak_target").set_value("oldpeak").run()
    app.selectbox(key="leak_other").set_value("fbs").run()
    assert not app.exception
    (note,) = [c.value for c in app.caption if c.value.startswith("For this pair")]
    assert "coincide" not in note and "differ by at most" in note and "under 0.5% of the axis" in note
    gap = float(note.split("differ by at most ")[1].split(" nats")[0])
    assert 0 < gap <= 0.005 * 20  # a real difference, below the drawing's resolution


def test_a_triad_parameter_below_rounding_reads_zero() -> None:
    """Leakage audit: beta of an independent pair showed 3.73e-14 (the conservative rounding slack)."""
    from ui.leakage import parameter_text

    assert parameter_text(3.73e-14) == "0" and parameter_text(0.0) == "0"
    assert parameter_text(0.01234567) == "0.01235" and parameter_text(2.5) == "2.5"


def test_plain_words_instead_of_paper_ids(app: AppTest) -> None:
    """UX audit: "seed 001" in the caption and "(001 Sec. V-D)" in a help were internal paper ids."""
    app.switch_page("views/leakage.py").run()
    app.button(key="leak_pairs_go").click().run()
    app.button(key="leak_cal_go").click().run()
    assert not app.exception
    texts = [e.value for e in (*app.caption, *app.markdown, *app.info, *app.title, *app.subheader)]
    texts += [w.help or "" for w in (*app.radio, *app.selectbox, *app.select_slider, *app.number_input)]
    assert texts and not [t for t in texts if PAPER_ID.search(t)]
    assert "seed 001" not in json.dumps([json.loads(c.proto.spec) for c in app.get("plotly_chart")])


def test_tables_have_readable_headers_in_nats_with_three_decimals(app: AppTest) -> None:
    """UX audit: raw headers ("TPL = ε + ΣCPL", "eps", "uniform TPL") and values like 38.1983, no unit."""
    app.switch_page("views/leakage.py").run()
    app.button(key="leak_pairs_go").click().run()
    app.button(key="leak_cal_go").click().run()
    assert not app.exception and len(app.dataframe) == 2
    tpl, cal = app.dataframe
    assert list(tpl.value.columns) == ["attribute", "total leakage (nats)"]
    assert list(cal.value.columns) == [
        "attribute",
        CAL_EPS,
        CAL_TPL,
        UNIFORM_EPS,
        "total leakage, uniform (nats)",
    ]
    for table in (tpl, cal):
        config = json.loads(table.proto.columns)
        numbers = [c for c in table.value.columns if c != "attribute"]
        assert all(config[c]["type_config"]["format"] == "%.3f" for c in numbers)
    assert (
        "ε + Σ CPL" in json.loads(tpl.proto.columns)["total leakage (nats)"]["help"]
    )  # the formula: a tooltip
    at_eps = next(c.value for c in app.caption if c.value.startswith("At ε ="))
    assert at_eps.endswith("(nats)") and re.search(r"CPL\* = \d+\.\d{3},", at_eps)


def test_pairwise_leakage_and_calibration_run_in_the_background_and_can_be_stopped(
    app: AppTest, monkeypatch: pytest.MonkeyPatch, stalled: Stalled
) -> None:
    """Audit of uploads: on a 300-column table "Compute leakage for every pair" held one page run for 281 s
    and "Calibrate budgets" 82 s more, under a spinner; both are now jobs with progress and a stop."""
    real = core.pairwise_leakage
    monkeypatch.setattr(leak, "WAIT_SECONDS", 0.5)
    monkeypatch.setattr(core, "pairwise_leakage", stalled("pair {}"))
    app.switch_page("views/leakage.py").run()
    started = time.monotonic()
    app.button(key="leak_pairs_go").click().run()
    assert time.monotonic() - started < 10 and not app.exception
    assert re.match(r"Pairwise leakage: pair \d+$", app.get("progress")[0].proto.text)
    assert "leak_pairs_go" not in [b.key for b in app.button]  # no second start while it runs
    app.button(key="leak_pairs_stop").click().run()
    until_button(app, "leak_pairs_go")
    assert "Pairwise leakage was stopped; start it again to finish it." in [i.value for i in app.info]
    monkeypatch.setattr(core, "pairwise_leakage", real)
    monkeypatch.setattr(core, "calibrate_budgets", stalled("polish round {}"))
    app.button(key="leak_pairs_go").click().run()
    rerun_until(app, lambda: len(app.get("plotly_chart")) == 3, 30, "the pairwise leakage")  # its heatmap
    app.button(key="leak_cal_go").click().run()
    assert re.match(r"Calibrating budgets: polish round \d+$", app.get("progress")[0].proto.text)
    app.button(key="leak_cal_stop").click().run()
    until_button(app, "leak_cal_go")
    assert "Calibrating budgets was stopped; start it again to finish it." in [i.value for i in app.info]


def test_alpha_is_called_the_large_eps_limit_only_when_delta_is_zero(app: AppTest, label_index: None) -> None:
    """Adult, age <- workclass: delta > 0 (Never-worked has empty age bins), and CPL* climbs to ~14 nats at
    eps = 20, far above alpha = 3.6, which the page called "the leakage limit at large ε"."""
    app.selectbox(key="side_dataset").set_value("adult").run()
    app.switch_page("views/leakage.py").run()
    app.selectbox(key="leak_target").set_value("age").run()
    app.selectbox(key="leak_other").set_value("workclass").run()
    assert not app.exception
    delta = next(m for m in app.metric if m.label == "δ")
    assert float(delta.value) > 0
    captions = [c.value for c in app.caption]
    alpha_caption = next(c for c in captions if c.startswith("largest log-ratio"))
    assert "leakage limit" not in alpha_caption and "keeps growing with ε" in alpha_caption
    curve = _spec(app, 1)
    names = [t.get("name", "") for t in curve["data"]]
    exact = np.array(curve["data"][names.index("CPL* (exact)")]["y"])
    alpha = float(next(m for m in app.metric if m.label == "α").value)
    assert exact.max() > 2 * alpha  # what the caption now says, measured
    app.selectbox(key="leak_other").set_value("sex").run()  # delta = 0: alpha is the limit
    captions = [c.value for c in app.caption]
    assert any(c.endswith("the leakage limit at large ε") for c in captions)


def test_the_plain_words_bound_allows_for_the_chosen_prior_uncertainty(app: AppTest) -> None:
    """With a prior-uncertainty model chosen, the sentence quoted only this table's CPL* as "at most"."""
    app.switch_page("views/leakage.py").run()
    app.radio(key="leak_unc").set_value("relative").run()
    app.slider(key="leak_e").set_value(0.3).run()
    assert not app.exception
    sentence = next(i.value for i in app.info if i.value.startswith("In plain words"))
    caption = next(c.value for c in app.caption if c.value.startswith("At ε ="))
    cpl = float(re.search(r"CPL\* = ([0-9.]+)", caption).group(1))
    dt_unc = float(re.search(r"DT with uncertainty = ([0-9.]+)", caption).group(1))
    assert dt_unc > cpl
    assert f"e^CPL = {np.exp(cpl):.3g} if the real distribution is the one in this table" in sentence
    robust = f"Allowing for the prior uncertainty chosen above, by at most e^DT = {np.exp(dt_unc):.3g}"
    assert robust in sentence
    app.radio(key="leak_unc").set_value("none").run()
    sentence = next(i.value for i in app.info if i.value.startswith("In plain words"))
    assert "uncertainty" not in sentence and sentence.endswith(f"e^CPL = {np.exp(cpl):.3g}.")


def test_a_pair_with_thousands_of_levels_says_so_instead_of_hanging(app: AppTest) -> None:
    """An identifier re-included as nominal as the target: the page computed the exact CPL* over every pair
    of its levels on 120 budgets in the page's run: 3,000 levels took seconds per change, 20,000 minutes."""
    rng = np.random.default_rng(3)
    rows = "".join(f"P{i:05d},{rng.choice(['a', 'b', 'c'])},{int(rng.integers(0, 5))}\n" for i in range(3000))
    _leakage_with_identifier(app, "people.csv", rows)
    app.selectbox(key="leak_target").set_value("pid").run()
    with pytest.MonkeyPatch.context() as patch:  # the guard answers before any leakage is computed
        patch.setattr(core, "dependency_triad", _never)
        patch.setattr(core, "cpl_exact", _never)
        app.selectbox(key="leak_other").set_value("grp").run()
    assert not app.exception
    warning = app.warning[0].value
    assert warning.startswith("pid has 3,000 levels and grp 3: the exact leakage compares every pair")
    assert "fewer levels" in warning and not app.get("plotly_chart")  # no pair curves, no triad
    assert not [m for m in app.metric if m.label == "α"]
    app.selectbox(key="leak_target").set_value("val").run()  # 5 x 3: computed as before
    assert not app.warning and len(app.get("plotly_chart")) == 2
    app.radio(key="leak_unc").set_value("bootstrap").run()  # 20 resamples: still small
    assert not app.warning and not app.exception


def test_the_level_guard_counts_the_sources_of_the_uncertainty_modes() -> None:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"t": [f"L{i}" for i in range(400)] * 3, "o": rng.integers(0, 5, 1200)})
    enc = core.discretize(frame, core.infer_schema(frame, include={"t": None}))
    assert enc.domain_sizes["t"] == 400  # 400^2 x 5 = 800,000 steps: within the limit, 21 times that not
    assert leak.pair_too_large(enc, "t", "o") is None
    assert leak.pair_too_large(enc, "t", "o", "relative") is None
    message = leak.pair_too_large(enc, "t", "o", "bootstrap")
    assert (
        message is not None and "for each of 20 sources" in message and "another prior uncertainty" in message
    )


def test_every_pair_is_not_offered_with_an_attribute_of_thousands_of_levels(app: AppTest) -> None:
    """The all-pairs triads hold (levels)^2 arrays: 370 MB at 3,000 levels, ~16 GB for a re-included
    identifier of 20,000; the page offered the button ('Dependency Triad (instant)')."""
    rows = "".join(f"P{i:05d},{'abc'[i % 3]},{i % 5}\n" for i in range(3500))
    _leakage_with_identifier(app, "wide.csv", rows)
    assert not app.exception
    assert "leak_pairs_go" not in [b.key for b in app.button]
    warning = next(w.value for w in app.warning if w.value.startswith("Leakage for every pair"))
    assert "pid (3,500 levels)" in warning
    app.switch_page("views/data.py").run()
    key = app.session_state["mdp_app_state"].dataset_key
    app.multiselect(key=f"data_include_{key}").set_value([]).run()
    app.switch_page("views/leakage.py").run()
    assert "leak_pairs_go" in [b.key for b in app.button]


def _leakage_with_identifier(app: AppTest, name: str, rows: str) -> None:
    """Upload ``pid,grp,val`` rows, re-include the identifier ``pid`` (data page), open the leakage page."""
    app.selectbox(key="side_dataset").set_value("Upload CSV/TSV…").run()
    app.file_uploader(key="side_upload").set_value((name, ("pid,grp,val\n" + rows).encode(), "text/csv"))
    app.run()
    key = app.session_state["mdp_app_state"].dataset_key
    app.switch_page("views/data.py").run()
    app.multiselect(key=f"data_include_{key}").set_value(["pid"]).run()
    app.switch_page("views/leakage.py").run()


def _never(*args: object, **kwargs: object) -> None:
    raise AssertionError("computed the leakage of a pair the guard should have stopped")


def test_the_conditional_heatmap_labels_only_the_levels_it_has_rows_for() -> None:
    """Audit: with an empty bin of a public range, conditional() has no row for it, but the heatmap labelled
    every level, so each row after the gap carried the previous bin's label."""
    df = pd.DataFrame({"age": [10.0, 10.0, 100.0, 110.0], "sex": ["f", "m", "f", "m"]})
    schema = core.Schema(kinds=(("age", "numeric"), ("sex", "binary")))
    encoded = core.discretize(df, schema, bins=4, ranges={"age": (0, 120)})  # bins at 15 45 75 105: two empty
    cond = core.conditional(encoded.codes, "age", "sex")
    heat = leak.conditional_figure(cond, encoded, "age", "sex").data[0]
    assert cond.shape == (2, 2) and len(heat.text) == 2
    assert [row[0].split("<br>")[0] for row in heat.text] == ["age = 15", "age = 105"]
