"""AppTest of the "Sweep & frontier" page: estimate, in-process run, frontier, Pareto table, downloads."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path

import numpy as np
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from ui.markdown import md

APP = Path(__file__).resolve().parents[2] / "app.py"


@pytest.fixture
def page(monkeypatch: pytest.MonkeyPatch) -> AppTest:
    import ui.sweep

    monkeypatch.setattr(ui.sweep, "PRESTART", False)  # no Dask cluster in the background of a page test
    st.cache_data.clear()
    at = AppTest.from_file(str(APP), default_timeout=180)
    at.run()
    at.switch_page("views/sweep.py").run()
    return at


def _until_done(at: AppTest, seconds: float = 120.0) -> None:
    """Rerun, as the page's poll does, until the background sweep has landed (its chart is drawn) or ended
    otherwise (its start button is back: stopped or failed)."""
    deadline = time.monotonic() + seconds
    while not at.get("plotly_chart") and "sweep_run" not in [b.key for b in at.button]:
        assert time.monotonic() < deadline, "the sweep did not land"
        time.sleep(0.1)
        at.run()


def test_the_page_estimates_runs_and_draws_the_frontier(page: AppTest) -> None:
    at = page
    assert not at.exception
    assert at.title[0].value == "Sweep & frontier"
    at.radio(key="sweep_engine").set_value("serial").run()
    at.multiselect(key="sweep_methods").set_value(["DepHDP", "SPL+DPN"]).run()
    at.slider(key="sweep_n_eps").set_value(2).run()
    at.slider(key="sweep_reps").set_value(2).run()
    assert not at.exception
    text = " ".join(m.value for m in at.markdown)
    assert (  # counts that multiply to the rows; "2 tasks (configurations)" sat beside a one-task box
        "**2 configurations** (2 budgets × 1 task × 1 τ_group × 1 τ_dpn) × 2 methods × 2 repetitions → 8 rows"
        in text
    )
    assert any(c.value.startswith("Engine: in-process") for c in at.caption)
    at.button(key="sweep_run").click().run()
    _until_done(at)
    assert not at.exception, at.exception
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    names = {trace["name"] for trace in spec["data"]}
    assert names == {"DepHDP", "SPL+DPN"}
    assert spec["layout"]["xaxis"]["type"] == "log"
    assert spec["layout"]["xaxis"]["ticktext"] == ["0.5", "1", "2", "5", "10"]
    table = at.dataframe[0].value
    assert list(table.columns) == [
        "ε",
        "method",
        "τ_group",
        "τ_dpn",
        "metric",
        "utility",
        "CI low",
        "CI high",
    ]
    assert len(table) >= 1
    labels = [b.label for b in at.get("download_button")]
    assert labels == ["Results (CSV)", "Results (Parquet)", "Sweep spec (JSON)"]


def test_the_page_guards_an_empty_choice(page: AppTest) -> None:
    at = page
    at.multiselect(key="sweep_tasks").set_value([]).run()
    assert not at.exception
    assert any("Choose at least one task" in i.value for i in at.info)


def test_a_two_row_upload_says_why_the_sweep_cannot_run_instead_of_a_traceback(page: AppTest) -> None:
    """Audit of uploads: a 2-row table (the loader's minimum) raised a DataError out of the page."""
    at = page
    at.selectbox(key="side_dataset").set_value("Upload CSV/TSV…").run()
    raw = b"age,sex,income,city\n34,M,42000,Paris\n51,F,58000,Lyon\n"
    at.file_uploader(key="side_upload").set_value(("two.csv", raw, "text/csv")).run()
    at.multiselect(key="sweep_tasks").set_value(["record"]).run()
    at.radio(key="sweep_engine").set_value("serial").run()
    at.button(key="sweep_run").click().run()
    _until_done(at)
    assert not at.exception
    assert [e.value for e in at.error] == [  # the core's message, escaped for Markdown (ui.markdown.md)
        "The sweep failed: "
        + md(
            "the table has 2 rows; at least 3 are needed, as 62.5% of the "
            "rows fit the mechanisms and the rest are held out to measure the utility of the release"
        )
    ]
    assert not at.get("progress")


def test_an_upload_without_target_keeps_a_task_chosen(page: AppTest) -> None:
    """Audit of uploads: on heart the default task is prediction; after uploading a table (no target yet)
    the Tasks box was empty and the page asked to "Choose at least one task"."""
    at = page
    assert at.multiselect(key="sweep_tasks").value == ["prediction"]
    at.selectbox(key="side_dataset").set_value("Upload CSV/TSV…").run()
    raw = (
        "age,sex,city\n" + "".join(f"{20 + i},{'MF'[i % 2]},{'ab'[i % 3 % 2]}\n" for i in range(12))
    ).encode()
    at.file_uploader(key="side_upload").set_value(("t.csv", raw, "text/csv")).run()
    assert not at.exception
    assert at.multiselect(key="sweep_tasks").value == ["record"]  # the upload's default, not an empty box
    at.multiselect(key="sweep_tasks").set_value(["record", "mismatch"]).run()
    at.selectbox(key="side_dataset").set_value("heart").run()
    assert at.multiselect(key="sweep_tasks").value == ["record", "mismatch"]  # still offered: kept
    at.multiselect(key="sweep_tasks").set_value(["prediction"]).run()
    at.selectbox(key="side_dataset").set_value("Upload CSV/TSV…").run()
    assert at.multiselect(key="sweep_tasks").value == ["record"]
    at.multiselect(key="sweep_tasks").set_value([]).run()
    assert any("Choose at least one task" in i.value for i in at.info)  # an emptied box stays empty


def test_the_time_estimate_grows_with_the_number_of_columns() -> None:
    """Audit of uploads: a 300-column, 500-row table was estimated at 9 s and took 117 s (20 columns: 2 s,
    80 columns: 8 s); heart-sized tables keep their estimate."""
    import mdp_core as core
    from ui.sweep import estimate_seconds

    spec = core.SweepSpec(dataset="x", task=["record"], eps=[0.5, 10.0], repetitions=2, target=None)
    assert 60 < estimate_seconds(spec, 500, 300, 1) < 240
    assert estimate_seconds(spec, 500, 20, 1) < 12 and estimate_seconds(spec, 303, 14, 1) < 12


def test_a_running_sweep_leaves_the_page_usable_and_stops_on_request(
    page: AppTest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sweep ran in the page run (a 300-column upload's held it for 165 s, CSV audit of stop 55); it is
    now a background job with progress and a stop button."""
    import mdp_core as core

    def endless(spec: object, *, progress: object, **_: object) -> None:
        for i in range(3000):  # 5 minutes unless stopped: the stop raises out of progress
            progress(i / 3000, f"configuration {i}")  # type: ignore[operator]
            time.sleep(0.1)

    monkeypatch.setattr(core, "run_sweep", endless)
    at = page
    at.radio(key="sweep_engine").set_value("serial").run()
    at.button(key="sweep_run").click().run()
    assert "sweep_stop" in [b.key for b in at.button] and at.get("progress")
    assert not [i for i in at.info if "Press **Run sweep**" in i.value]  # not while it runs
    at.slider(key="sweep_reps").set_value(2).run()  # another spec: the page answers meanwhile
    assert not at.exception and "sweep_run" in [b.key for b in at.button]
    at.slider(key="sweep_reps").set_value(5).run()  # back to the running one: its progress and stop
    at.button(key="sweep_stop").click().run()
    _until_done(at, 30.0)
    assert any("The sweep was stopped; start it again to finish it." in i.value for i in at.info)
    assert "sweep_run" in [b.key for b in at.button] and not at.get("plotly_chart")


def test_the_frontier_marks_the_majority_class_and_names_methods_no_better(page: AppTest) -> None:
    """Adult: DepHDP, SPL+RMP and ALC+RMP scored 0.758 at every budget, exactly what always predicting
    '<=50K' scores, and the page let that read as a good private accuracy."""
    import mdp_core as core

    at = page
    at.selectbox(key="side_dataset").set_value("adult").run()
    at.switch_page("views/sweep.py").run()
    at.radio(key="sweep_engine").set_value("serial").run()
    at.multiselect(key="sweep_methods").set_value(["DepHDP", "SPL+RMP", "SPL+DPN"]).run()
    at.slider(key="sweep_n_eps").set_value(2).run()
    at.slider(key="sweep_reps").set_value(2).run()
    at.button(key="sweep_run").click().run()
    _until_done(at, 240.0)
    assert not at.exception, at.exception
    df = core.load_dataset("adult")
    enc = core.discretize(df, core.infer_schema(df, target="income"), bins=8)
    fit, test = core.split_encoded(enc, 0.625, np.random.default_rng(0))
    share = float(np.mean(test.codes["income"].to_numpy() == fit.codes["income"].max()))
    chance = max(share, 1 - share)
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    lines = [s for s in spec["layout"]["shapes"] if s.get("line", {}).get("dash") == "dash"]
    assert len(lines) == 1 and lines[0]["y0"] == pytest.approx(chance, abs=1e-12)
    note = next(
        c.value for c in at.caption if c.value.startswith("Always predicting the most frequent class")
    )
    assert note.startswith(f"Always predicting the most frequent class scores {chance:.3f} on the held-out")
    flat = [t["name"] for t in spec["data"] if _values(t["y"]).max() <= chance + 0.005]
    assert flat  # adult at eps 0.5 and 10: the remapping methods release the majority class
    if len(flat) == 3:  # every method shown
        assert "No method beats it at any budget shown" in note
    else:
        assert f"{', '.join(flat)} at every budget shown" in note


def test_the_majority_class_note_groups_methods_by_where_they_score_no_better() -> None:
    import pandas as pd

    from ui.sweep import chance_note

    rows = [
        (method, eps, utility)
        for method, values in {
            "DepHDP": (0.76, 0.80),
            "SPL+RMP": (0.758, 0.758),
            "ALC+RMP": (0.75, 0.76),
        }.items()
        for eps, utility in zip((0.5, 10.0), values, strict=True)
    ]
    fr = pd.DataFrame(rows, columns=["method", "eps", "utility_mean"]).assign(
        task="prediction", tau_group=0.1, tau_dpn=0.2, metric="accuracy"
    )
    note = chance_note(fr, "prediction", 0.1, 0.2, 0.758)
    assert "No better than that: DepHDP at ε = 0.5; SPL+RMP, ALC+RMP at every budget shown." in note
    assert chance_note(fr.assign(utility_mean=0.7), "prediction", 0.1, 0.2, 0.758).endswith(
        "No method beats it at any budget shown: at these budgets the released table carries nothing this "
        "prediction can use. Raise ε."
    )
    assert chance_note(fr.assign(metric="auc"), "prediction", 0.1, 0.2, 0.758) == ""


def _values(y: object) -> np.ndarray:
    """A trace's values as an array (plotly ships them as typed binary: dtype, base64 bytes)."""
    if isinstance(y, dict):
        return np.frombuffer(base64.b64decode(y["bdata"]), dtype=y["dtype"])
    return np.asarray(y, dtype=float)


def test_the_time_estimate_of_the_default_sweep_is_near_the_measured_time() -> None:
    """The default sweep (5 budgets x 5 methods x 5 repetitions) was estimated at 46 s on adult (2 workers)
    and 8 s on heart; it ran in 3.8 s and 1.1 s (in process: adult 2.6-7.7 s over the five tasks)."""
    import mdp_core as core
    from ui.sweep import estimate_seconds

    spec = core.SweepSpec(
        dataset="adult",
        task=["prediction"],
        eps=[0.5, 1.06, 2.24, 4.73, 10.0],
        repetitions=5,
        target="income",
    )
    assert 3 < estimate_seconds(spec, 48_842, 15, 1) < 12
    assert 2 < estimate_seconds(spec, 48_842, 15, 2) < 8
    assert estimate_seconds(spec, 303, 14, 2) < 3


def test_the_page_never_connects_to_an_unreachable_scheduler_in_its_own_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Cluster audit: with DASK_SCHEDULER_ADDRESS unreachable (or the scheduler dead) every rerun of the
    Sweep page blocked 30 s, then crashed with "Timed out trying to connect". The page run now only says
    the engine is not connected; the run's job (in the background) tries and reports the error."""
    import threading

    import dask

    import ui.sweep as view

    holder = view._Engine()
    holder.starting = threading.Thread(target=lambda: None)  # a background start that ended (failed)
    holder.starting.start()
    holder.starting.join()
    monkeypatch.setattr(view, "_engine", lambda: holder)
    with dask.config.set({"scheduler-address": "tcp://127.0.0.1:9"}):
        start = time.perf_counter()
        client, where, workers = view.engine("dask")
        assert time.perf_counter() - start < 1
    assert client is None and workers >= 1
    assert (
        where
        == "cluster at tcp://127.0.0.1:9, not connected (the run's error says why; each run tries again)"
    )


def test_the_page_shows_the_engine_it_holds_after_the_core_was_imported_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Review: a re-import of the core empties its client registry while the page's holder keeps a running
    client; the page said "not connected"."""
    from types import SimpleNamespace

    import ui.sweep as view

    holder = view._Engine()
    holder.client = SimpleNamespace(status="running", scheduler_info=lambda: {"workers": {"a": 1, "b": 2}})
    monkeypatch.setattr(view, "_engine", lambda: holder)
    monkeypatch.setattr(view, "running_client", lambda: None)  # the registry the re-import emptied
    monkeypatch.setattr(view, "describe_engine", lambda client: "cluster: 2 workers")
    assert view.engine("dask") == (holder.client, "cluster: 2 workers", 2)
