"""AppTest: the DepHDP mechanism-selection page (profiles behind a button, sliders, figures, config JSON
round trip, downloads, evaluation, another target column, degenerate-release warnings)."""

from __future__ import annotations

import base64
import json
import math
import re
import threading
import time
from collections.abc import Callable, Iterator
from types import SimpleNamespace

import numpy as np
import pytest
from pagewait import rerun_until, until_button  # tests/app is on sys.path (rootdir conftest layout)
from streamlit.testing.v1 import AppTest

import mdp_core as core
from mdp_core import DepHDPConfig
from ui import dephdp as view
from ui import dephdp_display as display
from ui.markdown import plain
from ui.widgets import log_grid

#: Settings that keep a cold profile computation to a few seconds (small OPT groups, short grid).
FAST = {"opt_max_domain": 4, "grid_points": 8, "calibration_pairs": 300, "max_contexts": 60}

Stalled = Callable[[str], Callable[..., None]]  # the stalled fixture (conftest.py)
EPS_K, BETA = "budget ε_k", "weight β"  # headers of the groups table


@pytest.fixture(autouse=True)
def empty_store() -> Iterator[None]:
    """The page's result store is process-wide: start and leave every test with it empty."""
    view.store().clear()
    yield
    view.store().clear()


def _spec(at: AppTest, index: int) -> dict:
    return json.loads(at.get("plotly_chart")[index].proto.spec)


def _array(value: object) -> np.ndarray:
    """A plotly spec's array: a list, or a typed array ``{"dtype", "bdata"}`` (base64)."""
    if isinstance(value, dict):
        return np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
    return np.asarray(value, dtype=float)


def _metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def _open(app: AppTest, settings: dict | None = None) -> AppTest:
    """The page with ``settings`` loaded from a JSON file (if any) and its profiles computed."""
    app.switch_page("views/dephdp.py").run()
    assert not app.exception
    if settings is not None:
        raw = json.dumps(settings).encode()
        app.file_uploader(key="dep_config_upload").set_value(("s.json", raw, "application/json")).run()
        assert not app.exception
    return _compute(app)


def _compute(app: AppTest) -> AppTest:
    assert [b.label for b in app.button] == ["Compute group profiles"]
    assert not app.get("plotly_chart")  # nothing drawn before the explicit button
    app.button(key="dep_compute").click().run()
    rerun_until(app, lambda: "dep_profiles_stop" not in [b.key for b in app.button], 120, "the profiles")
    return app


def test_dephdp_page_renders_and_reacts(app: AppTest) -> None:
    _open(app)
    assert app.title[0].value == "Mechanism selection (DepHDP)"
    scatter = _spec(app, 0)
    names = {t["name"] for t in scatter["data"]}
    assert names == {"OPT", "DPN"}
    groups = app.dataframe[0].value
    assert set(groups.mechanism) <= {"OPT", "DPN"} and (groups[EPS_K] > 0).all()
    metrics = _metrics(app)
    assert float(metrics["Lower bound on the loss"]) <= float(metrics["DepHDP surrogate loss"])
    assert float(metrics["DepHDP surrogate loss"]) <= float(metrics["ALC+RMP surrogate loss"])
    app.slider(key="dep_tau_dpn").set_value(0.0).run()  # no group scores <= 0: everything DPN
    assert not app.exception and not any(b.label == "Compute group profiles" for b in app.button)
    assert (app.dataframe[0].value.mechanism == "DPN").all()
    before = float(_metrics(app)["DepHDP surrogate loss"])
    eps = max(v for v in log_grid(0.1, 20.0) if v <= 5.0)
    app.select_slider(key="dep_eps").set_value(eps).run()
    assert not app.exception
    eps_k = app.dataframe[0].value[EPS_K].to_numpy()
    norm = float(np.sqrt(np.sum(eps_k**2)))
    assert norm <= eps * (1 + 1e-12)  # l2 metric: ||eps_k||_2 <= eps
    rule = next(c.value for c in app.caption if c.value.startswith("Composition of the group budgets"))
    assert f"‖ε_k‖_2 = {norm:.4g} ≤ ε = {eps:g}" in rule and f"plain sum is {eps_k.sum():.4g}" in rule
    after = float(_metrics(app)["DepHDP surrogate loss"])
    assert after < before
    r2 = float(_metrics(app)["Surrogate held-out R²"])
    assert r2 < 0.5 and any("Low fit by nature of the task" in c.value for c in app.caption)


def test_dephdp_page_config_upload_validates(app: AppTest) -> None:
    app.switch_page("views/dephdp.py").run()
    app.file_uploader(key="dep_config_upload").set_value(
        ("bad.json", b'{"tau_dpn": 7}', "application/json")
    ).run()
    assert not app.exception
    assert any("tau_dpn must lie in [0, 1]" in plain(e.value) for e in app.error)
    good = json.dumps({"tau_dpn": 0.5, "eps": 2.0, "p": "inf", "task": "record", **FAST}).encode()
    app.file_uploader(key="dep_config_upload").set_value(("good.json", good, "application/json")).run()
    assert not app.exception
    assert app.session_state["dep_tau_dpn"] == 0.2  # the first widget's key is never written from outside
    assert app.slider(key="dep_tau_dpn_1").value == 0.5  # fresh widgets show the loaded values
    assert app.select_slider(key="dep_p_1").value == "inf"
    assert app.selectbox(key="dep_task_1").value == "record"
    _compute(app)
    assert any(c.value.startswith("τ_dim is set to 300 but acts as 4:") for c in app.caption)  # others kept


def test_dephdp_page_axes_and_entropy_task(app: AppTest) -> None:
    _open(app, FAST)
    scatter = _spec(app, 0)
    largest = int(app.dataframe[0].value["joint values"].max())
    tau_dim = FAST["opt_max_domain"]
    lo, hi = scatter["layout"]["xaxis"]["range"]  # log10 units: from below 1 to a bit beyond the data
    assert lo < 0 < math.log10(max(largest, tau_dim)) < hi <= math.log10(2 * max(largest, tau_dim))
    for ann in scatter["layout"]["annotations"]:  # labels sit inside the axis (log10 x on a log axis)
        assert ann.get("xref", "x") != "x" or lo <= ann["x"] <= hi
    curves = _spec(app, 2)
    grid = DepHDPConfig(**FAST).eps_grid
    clo, chi = math.log10(grid[0]), math.log10(grid[-1])
    for ann in curves["layout"]["annotations"]:
        assert ann.get("xref", "x") != "x" or clo - 1e-9 <= ann["x"] <= chi + 1e-9
    for fig in (scatter, curves):  # log axes labelled by decades (and 2, 5 on short ranges) only
        ticks = fig["layout"]["xaxis"]["tickvals"]
        assert ticks and all(round(v / 10 ** math.floor(math.log10(v)), 9) in (1, 2, 5) for v in ticks)
        assert fig["layout"]["xaxis"]["ticktext"] == [f"{v:g}" for v in ticks]
    assert _spec(app, 2)["layout"]["xaxis"]["tickvals"] == [0.01, 0.1, 1.0, 10.0]
    app.selectbox(key="dep_task_1").set_value("entropy").run()
    _compute(app)  # another task: other profiles, behind the button again
    metrics = _metrics(app)
    assert metrics["Surrogate held-out R²"] == "not fitted"  # audit: it said "exact" for a partial model
    assert any("Entropy task" in c.value and "predicts only that part" in c.value for c in app.caption)


@pytest.mark.parametrize("target", ["slope", "cp", "sex"])
def test_another_target_column(app: AppTest, target: str) -> None:
    """Issue 11 failure 1: another sidebar target used to raise IndexError / 'x not in tuple'."""
    _open(app, FAST)
    key = next(s.key for s in app.selectbox if s.key and s.key.startswith("side_target_"))
    assert key == "side_target_sample:heart:0"
    app.selectbox(key=key).set_value(target).run()
    assert not app.exception
    _compute(app)
    groups = app.dataframe[0].value
    released = sorted(a for g in groups.group for a in g.split(" + "))
    assert target not in released and "target" in released and len(released) == 13


def test_evaluation_toggle_keeps_downloads(app: AppTest) -> None:
    """Issue 11 failure 2: the evaluation toggle raised UnhashableParamError and the downloads vanished."""
    _open(app, FAST)
    assert len(app.get("download_button")) == 2
    app.toggle(key="dep_evaluate").set_value(True).run()
    assert not app.exception and len(app.get("download_button")) == 2
    app.slider(key="dep_reps").set_value(5).run()
    app.button(key="dep_run_eval").click().run()
    _until_evaluated(app)
    table = app.dataframe[1].value
    assert set(table.method) == {"DepHDP", "SPL+DPN", "SPL+RMP", "ALC+DPN", "ALC+RMP"}
    assert sorted(set(table["ε"])) == [1.0, 2.0, 5.0, 10.0]
    assert list(table.columns[:6]) == [
        "ε",
        "method",
        "task loss (mean)",
        "task loss (sd)",
        "mean − 1.96 sd",
        "mean + 1.96 sd",
    ]
    leaks = [c for c in table.columns if CODE_TEXT.search(c) or "_" in c]  # no raw keys such as marginal_tv
    assert not leaks, leaks
    formats = json.loads(app.dataframe[1].proto.columns)
    assert all(formats[c]["type_config"]["format"] == "%.3g" for c in table.columns[2:])
    chart = _spec(app, 4)
    assert chart["layout"]["title"]["text"] == "Held-out task loss by global ε"
    (bars,) = [c.value for c in app.caption if c.value.startswith("Each point:")]
    assert "mean over 5 independent draws" in bars and "± 1.96 standard deviations" in bars
    ours = table[table.method == "DepHDP"]
    (trace,) = [t for t in chart["data"] if t["name"] == "DepHDP"]
    np.testing.assert_allclose(_array(trace["error_y"]["array"]), 1.96 * ours["task loss (sd)"].to_numpy())
    assert len(app.get("download_button")) == 2
    app.run()  # a rerun reads the stored table: no button, same numbers
    assert not app.exception and "dep_run_eval" not in [b.key for b in app.button]
    assert app.dataframe[1].value.equals(table)


def _until_evaluated(app: AppTest, seconds: float = 60.0) -> None:
    """Rerun (as the page's poll does) until the background evaluation's table is drawn."""
    rerun_until(app, lambda: len(app.dataframe) >= 2, seconds, "the evaluation")  # groups, then evaluation


def test_evaluation_runs_in_the_background_and_can_be_stopped(
    app: AppTest, monkeypatch: pytest.MonkeyPatch, stalled: Stalled
) -> None:
    """Walk seed 5101: the evaluation (Adult, record task, 50 repetitions) held one rerun for 91 s. It now
    runs on the builder: the run that starts it returns, the page shows its progress and a stop button."""
    monkeypatch.setattr(core, "evaluate_dephdp", stalled("draw {}"))
    _open(app, FAST)
    app.toggle(key="dep_evaluate").set_value(True).run()
    started = time.monotonic()
    app.button(key="dep_run_eval").click().run()
    assert time.monotonic() - started < view.EVAL_WAIT_SECONDS + 10
    assert not app.exception, app.exception
    assert "dep_run_eval" not in [b.key for b in app.button]  # no second start while it runs
    assert re.match(r"Running the held-out evaluation: draw \d+", app.get("progress")[0].proto.text)
    assert len(app.get("download_button")) == 2  # the rest of the page is drawn meanwhile
    app.button(key="dep_eval_stop").click().run()
    rerun_until(app, lambda: app.info, 10, "the stop")
    assert [i.value for i in app.info] == [
        "Running the held-out evaluation was stopped; start it again to finish it."
    ]
    assert "dep_run_eval" in [b.key for b in app.button]
    assert len(app.dataframe) == 1  # the groups table only: no evaluation table


def test_an_evaluation_queued_behind_other_long_jobs_says_so(
    app: AppTest, monkeypatch: pytest.MonkeyPatch, stalled: Stalled
) -> None:
    """The long-job threads are shared with the geo page: with both busy, the evaluation waits and says so."""
    from ui import jobs

    monkeypatch.setattr(core, "evaluate_dephdp", stalled("draw {}"))
    _open(app, FAST)
    app.toggle(key="dep_evaluate").set_value(True).run()
    release = threading.Event()
    busy = [
        jobs.builder().request(("test-busy", i), lambda progress: release.wait(60), slow=True) for i in (0, 1)
    ]
    try:
        app.button(key="dep_run_eval").click().run()
        assert not app.exception, app.exception
        assert app.get("progress")[0].proto.text == f"Running the held-out evaluation: {jobs.QUEUED}"
        app.button(key="dep_eval_stop").click().run()  # a queued job never starts
        assert not app.exception and "dep_run_eval" in [b.key for b in app.button]
    finally:
        release.set()
        for job in busy:
            job.result(10)


def test_group_profiles_run_in_the_background_can_be_stopped_and_say_why_they_failed(
    app: AppTest, monkeypatch: pytest.MonkeyPatch, stalled: Stalled
) -> None:
    """Stage 1 took 10-30 s in one rerun on Adult (walks 5303, 5404): now a job, polled, with a stop."""
    monkeypatch.setattr(view, "dephdp_profiles", stalled("draw {}"))
    app.switch_page("views/dephdp.py").run()
    started = time.monotonic()
    app.button(key="dep_compute").click().run()
    assert time.monotonic() - started < view.PROFILES_WAIT_SECONDS + 10 and not app.exception
    assert re.match(r"Computing the group profiles: draw \d+", app.get("progress")[0].proto.text)
    assert "dep_compute" not in [b.key for b in app.button] and not app.get("plotly_chart")
    app.button(key="dep_profiles_stop").click().run()
    until_button(app, "dep_compute")
    assert "Computing the group profiles was stopped; start it again to finish it." in [
        i.value for i in app.info
    ]

    def refuse(*args: object, **kwargs: object) -> None:
        raise core.DataError("no group has two rows")

    monkeypatch.setattr(view, "dephdp_profiles", refuse)
    app.button(key="dep_compute").click().run()
    assert not app.exception, app.exception
    assert [e.value for e in app.error] == ["Computing the group profiles failed: no group has two rows"]
    assert "dep_compute" in [b.key for b in app.button]


def test_a_failed_evaluation_says_why(app: AppTest, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise core.DataError("repetitions must be an integer >= 2, got 1")

    monkeypatch.setattr(core, "evaluate_dephdp", refuse)
    _open(app, FAST)
    app.toggle(key="dep_evaluate").set_value(True).run()
    app.button(key="dep_run_eval").click().run()
    assert not app.exception, app.exception
    assert (
        plain(app.error[-1].value)
        == "Running the held-out evaluation failed: repetitions must be an integer >= 2, got 1"
    )
    assert "dep_run_eval" in [b.key for b in app.button]  # it can be run again


def test_degenerate_release_is_flagged_and_fixed(app: AppTest) -> None:
    # the default grid, down to 0.005; the entropy task at eps = 0.5 leaves two groups at its minimum (groups
    # the surrogate weighs 0 get the budget the others leave, so the prediction task no longer starves them)
    settings = {k: v for k, v in FAST.items() if k != "grid_points"} | {"task": "entropy", "eps": 0.5}
    _open(app, settings)
    groups = app.dataframe[0].value
    starved = groups[groups[EPS_K] <= DepHDPConfig(**settings).eps_grid[0] * (1 + 1e-9)]
    assert len(starved)
    alarm = next(e.value for e in app.error if "degenerate" in e.value)
    assert f"{len(starved)} group(s) sit at the grid's minimum budget" in alarm
    fix = next(b for b in app.button if b.key == "dep_fix_floor")
    floor = float(re.search(r"floor of ([0-9.]+)", fix.label).group(1))
    fix.click().run()
    assert not app.exception
    eps_k = app.dataframe[0].value[EPS_K].to_numpy()
    assert eps_k.min() >= floor and float(np.sqrt(np.sum(eps_k**2))) <= 0.5 * (1 + 1e-12)
    assert not any("grid's minimum budget" in e.value for e in app.error)


def test_infeasible_floor_is_explained(app: AppTest) -> None:
    _open(app, FAST)
    app.select_slider(key="dep_floor_1").set_value("1").run()
    assert not app.exception
    assert any("lower the budget floor (min_group_eps) to at most" in plain(e.value) for e in app.error)


def test_release_utility_in_the_tasks_own_units(app: AppTest) -> None:
    _open(app, FAST)
    df = core.load_dataset("heart")
    enc = core.discretize(df, core.infer_schema(df, target="target"), bins=8)  # the app's defaults
    fit, test = core.split_encoded(enc, 0.625, np.random.default_rng(0))
    res = core.run_dephdp(fit, DepHDPConfig(**FAST))
    attrs = list(res.task.attributes)
    y = view.privatized_codes(res, test).to_numpy()  # the downloadable draw (fresh entropy, kept per split)
    labels = core.prediction_labels(fit, test.codes)
    u = core.task_utility(res.task, test.codes[attrs].to_numpy(), y, labels=labels)
    assert _metrics(app)["Release: accuracy"] == f"{u.value:.3f}"
    caption = next(c.value for c in app.caption if c.value.startswith("Utility in the task's own units"))
    assert f"non-private {u.reference:.3f} ({u.relative:.0%} of non-private)" in caption
    majority = max(labels.mean(), 1 - labels.mean())  # always predicting the more frequent label
    assert f"always predicting the more frequent label {majority:.3f}" in caption
    assert ("does no better" in caption) == (u.value <= majority + core.MAJORITY_TOLERANCE)


def test_an_accuracy_no_better_than_the_majority_label_is_said() -> None:
    """Adult: the release's accuracy 0.758 equals always predicting '<=50K'; the page gave it as 89 % of
    non-private without saying so."""
    u = SimpleNamespace(metric="accuracy", higher_is_better=True, relative=0.893, value=0.758,
                        reference=0.849, unit="share of test records classified correctly")  # fmt: skip
    _, value, caption = view.utility_text(u, majority=0.758)
    assert value == "0.758" and caption.endswith(
        "always predicting the more frequent label 0.758 (this release does no better: it carries nothing "
        "the task can use)."
    )
    assert "does no better" not in view.utility_text(u, majority=0.70)[2]
    assert "more frequent" not in view.utility_text(u)[2]  # not a prediction task


# --- readable page text (UX audit of the heart defaults) ---------------------------------------------------

#: Paper ids and code keys that must not reach the page's labels, captions, headers and chart texts (the
#: references live in help tooltips).
CODE_TEXT = re.compile(
    r"\b000\b|Prop\.|Proposition|Theorem|\bEq\.|RelErr|GCM|LCM|tau_dim|tau_group|tau_dpn|max_group_domain"
    r"|domain_size|radial_fit|mse_likeness|\beps_k\b|\bbeta\b"
)


def _shown_text(app: AppTest) -> list[str]:
    """Every text the main area shows outside tooltips: headings, captions, alerts, widget and metric labels,
    table headers and the charts' titles, axis titles, legend names and annotations."""
    main = app.main
    texts = [
        e.value
        for kind in ("title", "subheader", "caption", "info", "error", "warning")
        for e in main.get(kind)
    ]
    widgets = (
        "slider",
        "select_slider",
        "selectbox",
        "radio",
        "toggle",
        "button",
        "download_button",
        "metric",
    )
    texts += [e.proto.label for kind in widgets for e in main.get(kind)]
    texts += [str(c) for d in main.dataframe for c in d.value.columns]
    for chart in main.get("plotly_chart"):
        spec = json.loads(chart.proto.spec)
        layout = spec["layout"]
        texts += [t.get("name", "") for t in spec["data"]]
        texts += [a.get("text", "") for a in layout.get("annotations", [])]
        texts += [str(layout.get(k, {}).get("title", "")) for k in ("xaxis", "yaxis")]
        texts.append(str(layout.get("title", "")))
    return texts


def _captions(app: AppTest, part: str) -> list[str]:
    return [c.value for c in app.main.caption if part in c.value]


def test_groups_table_has_readable_headers_formats_and_exact_numbers(app: AppTest) -> None:
    _open(app, FAST)
    groups = app.dataframe[0].value
    assert list(groups.columns) == [
        "group",
        "joint values",
        "radial fit",
        "MSE-likeness",
        "mechanism",
        BETA,
        EPS_K,
    ]
    config = json.loads(app.dataframe[0].proto.columns)
    formats = {c: config[c]["type_config"].get("format") for c in groups.columns}
    assert formats == {
        "group": None,
        "joint values": "%d",
        "radial fit": "%.3f",  # scores lie in [0, 1]: 3 decimals, so float noise (3e-11) reads 0.000
        "MSE-likeness": "%.3f",
        "mechanism": None,
        BETA: "%.3g",
        EPS_K: "%.3g",
    }
    assert all(config[c].get("help") for c in groups.columns)  # each header says what it is
    df = core.load_dataset("heart")  # the numbers themselves stay exact (the table's CSV export keeps them)
    enc = core.discretize(df, core.infer_schema(df, target="target"), bins=8)
    fit, _ = core.split_encoded(enc, 0.625, np.random.default_rng(0))
    scores = core.run_dephdp(fit, DepHDPConfig(**FAST)).scores
    np.testing.assert_array_equal(groups[EPS_K].to_numpy(), scores.eps_k.to_numpy())
    np.testing.assert_array_equal(groups["MSE-likeness"].to_numpy(), scores.mse_likeness.to_numpy())


def test_page_text_names_no_paper_ids_and_explains_the_baselines(app: AppTest) -> None:
    _open(app)  # the audited state: heart, defaults, profiles computed
    leaks = [t for t in _shown_text(app) if CODE_TEXT.search(t)]
    assert not leaks, leaks
    metrics = {m.label: m for m in app.metric}
    assert "Lower bound on the loss" in metrics and "Gap to the lower bound" in metrics
    assert (
        "Proposition 2" in metrics["Lower bound on the loss"].proto.help
    )  # the reference moved to a tooltip
    composition = app.main.caption[
        [c.value for c in app.main.caption].index(_captions(app, "Composition")[0])
    ]
    assert "Theorem 1" in composition.proto.help
    (legend,) = _captions(app, "SPL:")
    for words in (
        "SPL: the budget split equally",
        "ALC: budgets allocated by the surrogate",
        "DPN: distance",
    ):
        assert words in legend
    assert "RMP: the same with Bayesian remapping" in legend
    (yardsticks,) = _captions(app, "yardsticks")  # surrogate figures vs the measured release utility
    assert "lower bound" in yardsticks and "114 held-out test records" in yardsticks


def test_tau_dim_cap_and_group_split_are_said_once_in_the_sliders_words(app: AppTest) -> None:
    _open(app)
    slider = app.slider(key="dep_tau_dim")
    assert slider.value == 300 and "acts as that size" in slider.proto.help
    (cap,) = _captions(app, "τ_dim")
    assert cap.startswith("τ_dim is set to 300 but acts as 48:")
    (split,) = _captions(app, "512")  # one sentence on the split of large groups, not two
    groups = len(app.dataframe[0].value)
    assert "has 8 connected components; those with more than 512 joint values were split" in split
    assert f"giving {groups} groups" in split and split.startswith(f"{groups} groups:")
    assert not _captions(app, "tau_")
    slider.set_value(10).run()  # below the cap: nothing to say
    assert not app.exception and not _captions(app, "τ_dim")


def test_allocation_chart_names_its_colours_and_shows_the_smallest_budgets(app: AppTest) -> None:
    _open(app)
    groups = app.dataframe[0].value
    assert set(groups.mechanism) == {"OPT", "DPN"}  # heart's defaults use both
    spec = _spec(app, 1)
    bars = {t["name"]: t for t in spec["data"] if t["type"] == "bar"}
    assert set(bars) == {display.ALLOCATION_BARS["OPT"], display.ALLOCATION_BARS["DPN"]}
    for mech, name in display.ALLOCATION_BARS.items():
        assert "OPT" in name if mech == "OPT" else "DPN" in name
        assert sorted(bars[name]["x"]) == sorted(groups.group[groups.mechanism == mech])
        assert isinstance(bars[name]["marker"]["color"], str)  # one colour per legend entry
    assert (
        bars[display.ALLOCATION_BARS["OPT"]]["marker"]["color"]
        != bars[display.ALLOCATION_BARS["DPN"]]["marker"]["color"]
    )
    yaxis = spec["layout"]["yaxis"]
    assert yaxis["type"] == "log"  # bars at the grid's minimum (0.005) next to ~1 stay visible
    assert (
        10 ** yaxis["range"][0] < groups[EPS_K].min() / 1.2 and 10 ** yaxis["range"][1] > groups[EPS_K].max()
    )
    assert any("ALC+RMP" in t["name"] for t in spec["data"] if t["type"] == "scatter")


def _csv_download(app: AppTest) -> list:
    """The column of the privatised CSV's download button: its elements in order."""
    for col in app.columns:
        kids = list(col.children.values())
        if any(getattr(k, "type", "") == "download_button" and "CSV" in k.proto.label for k in kids):
            return kids
    raise AssertionError("no privatised CSV download")


def test_degenerate_release_download_is_labelled_for_inspection_only(app: AppTest) -> None:
    settings = {k: v for k, v in FAST.items() if k != "grid_points"}
    _open(app, settings)
    assert any("This release is degenerate" in e.value for e in app.error)
    caveat, button = _csv_download(app)  # the caveat sits right above the (still offered) download
    assert caveat.type == "caption" and view.DEGENERATE_CAVEAT in caveat.value
    assert button.proto.label == "Privatised test split (CSV, for inspection only)"
    assert button.proto.help == view.DEGENERATE_CAVEAT and not button.proto.disabled
    fine = {
        **FAST,
        "task": "record",
        "eps": 20.0,
        "min_group_eps": 1.0,
    }  # every attribute counts, well funded
    app.file_uploader(key="dep_config_upload").set_value(
        ("f.json", json.dumps(fine).encode(), "text/json")
    ).run()
    _compute(app)
    assert not any("degenerate" in e.value for e in app.error)
    (button,) = _csv_download(app)  # no caveat on a release that is fine
    assert button.proto.label == "Privatised test split (CSV)"
    assert not _captions(app, "inspection only")


def test_a_two_row_upload_says_why_dephdp_cannot_run_instead_of_a_traceback(app: AppTest) -> None:
    """Audit of uploads: a 2-row table (the loader's minimum) raised a DataError out of the page."""
    app.selectbox(key="side_dataset").set_value("Upload CSV/TSV…").run()
    raw = b"age,sex,income,city\n34,M,42000,Paris\n51,F,58000,Lyon\n"
    app.file_uploader(key="side_upload").set_value(("two.csv", raw, "text/csv")).run()
    app.switch_page("views/dephdp.py").run()
    assert not app.exception
    assert [plain(e.value) for e in app.error] == [
        "DepHDP cannot run on this table: the table has 2 rows; at least 3 are needed, as 62.5% of the rows "
        "fit the mechanisms and the rest are held out to measure the utility of the release."
    ]
    assert not app.button  # nothing to start


def test_an_attribute_of_thousands_of_values_is_named_before_its_profiles_start(app: AppTest) -> None:
    """Audit: a 4,908-value column made the profiles take 4 minutes without a word before they started."""
    rng = np.random.default_rng(8)
    code, a, t = (rng.integers(0, k, 6000) for k in (1200, 3, 2))
    rows = "".join(f"c{v:04d},{x},{y}\n" for v, x, y in zip(code, a, t, strict=True))
    app.selectbox(key="side_dataset").set_value("Upload CSV/TSV…").run()
    app.file_uploader(key="side_upload").set_value(
        ("codes.csv", f"code,a,t\n{rows}".encode(), "text/csv")
    ).run()
    app.session_state["mdp_app_state"].target = "t"
    app.switch_page("views/dephdp.py").run()
    assert not app.exception
    (warning,) = [w.value for w in app.warning if w.value.startswith("Large attributes")]
    values = len(set(code))
    assert warning.startswith(
        f"Large attributes: code ({values:,} values). DepHDP's profiles of an attribute grow"
    )
    app.switch_page("views/release.py").run()
    assert any(w.value == warning for w in app.warning)


def test_constant_columns_get_only_the_fixes_that_address_them(app: AppTest) -> None:
    """Audit: the page advised the record-fidelity task and a floor for constant columns; on heart at eps 1
    the record task then still released 12 of 13 columns constant, with the same advice. Now constant
    columns name their groups' budgets and what helps; the task and floor buttons only where they help."""
    _open(app, {k: v for k, v in FAST.items() if k != "grid_points"} | {"task": "record", "eps": 1.0})
    alarm = next(e.value for e in app.error if "degenerate" in e.value)
    groups = app.dataframe[0].value
    assert "columns are constant" in alarm and "What helps: a larger ε; fewer released columns" in alarm
    assert "record fidelity counts every attribute" not in alarm
    assert not any(b.key == "dep_fix_task" for b in app.button)  # already the record task
    starved = (groups[EPS_K] <= DepHDPConfig().eps_grid[0] * (1 + 1e-9)).any()
    assert any(b.key == "dep_fix_floor" for b in app.button) == bool(starved)
    low = re.search(r"budgets are ε_k = ([0-9.]+)", alarm)
    assert low and float(low.group(1)) >= groups[EPS_K].min() - 1e-3


def test_degeneracy_advice_follows_its_cause() -> None:
    base = view.Degeneracy((), (), (), 5, 100, 100, 0.005)
    assert view.degeneracy_message(base) == ""
    starved = view.Degeneracy(("a",), ("a",), (), 5, 100, 100, 0.005, (), "prediction")
    text = view.degeneracy_message(starved)
    assert starved.task_fix and "What helps: a task that uses these attributes" in text
    assert "a per-group budget floor" in text and "a larger ε" not in text
    assert not view.Degeneracy(("a",), ("a",), (), 5, 100, 100, 0.005, (), "record").task_fix
    constant = view.Degeneracy((), (), ("b", "c"), 5, 3, 100, 0.005, (0.2, 0.35), "record")
    text = view.degeneracy_message(constant)
    assert "budgets are ε_k = 0.2-0.35" in text and "per-group budget floor" not in text
    assert "“EM on every group”" in text and not constant.task_fix


def test_the_surrogate_note_does_not_promise_the_smallest_budget_to_unweighted_groups() -> None:
    """Audit: "6 of 9 groups get β_k = 0 ... receive the smallest budget" beside a groups table showing them
    at 0.175 and 0.138 (heart, eps 1): the allocation gives them what the other groups leave over."""
    surrogate = SimpleNamespace(pairs=40, r2_heldout=0.9, betas=(0.0, 0.3, 0.0))
    text = view.surrogate_note(SimpleNamespace(surrogate=surrogate))  # type: ignore[arg-type]
    assert text.startswith("2 of 3 groups get β_k = 0") and "smallest budget" not in text
    assert "only the budget the other groups leave" in text
    starved = view.degeneracy_message(view.Degeneracy(("a",), (), (), 5, 100, 100, 0.005))
    assert "nearly random, or one value where the channel remaps" in starved  # not only "at random"


def test_a_running_job_before_its_first_report_is_not_called_queued() -> None:
    """Browser audit: adult's profiles showed "queued: both long-job threads … are busy" for 8 s while they
    ran (before their first report)."""
    from ui import jobs

    builder = jobs.Builder(workers=1, slow_workers=1)
    started, release = threading.Event(), threading.Event()

    def compute(progress: object) -> int:
        started.set()
        release.wait(10)
        return 1

    key = ("test-started", time.perf_counter())
    job = builder.request(key, compute)
    try:
        assert started.wait(5)
        assert builder.progress(key) == (0.0, jobs.STARTED)
    finally:
        release.set()
    assert job.result(5) == 1


def test_the_privatised_test_split_is_shown_in_a_random_order_of_one_fresh_draw() -> None:
    """Privacy audit (stop 63): the download was drawn from the page's seed, which the configuration JSON
    records, and kept the file's row order, which can give values away."""
    from collections import Counter

    df = core.load_dataset("heart")
    enc = core.discretize(df, core.infer_schema(df, target="target"), bins=8)
    fit, test = core.split_encoded(enc, 0.625, np.random.default_rng(0))
    res = core.run_dephdp(fit, DepHDPConfig(**FAST))
    view.store().clear()
    shown = view.privatized_test(res, test)
    in_order = test.decode(view.privatized_codes(res, test))
    assert Counter(map(tuple, shown.astype(str).to_numpy())) == Counter(
        map(tuple, in_order.astype(str).to_numpy())
    )
    assert not shown.equals(in_order) and view.privatized_test(res, test) is shown  # shuffled once, kept
    codes = view.privatized_codes(res, test)
    view.store().clear()
    assert not view.privatized_codes(res, test).equals(codes)  # a new draw, not the seed's again
