"""AppTest: the Decide & release page (plain words, which eps, release with audit, scenarios compared)."""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable

import numpy as np
import pytest
from pagewait import rerun_until, until_button  # tests/app is on sys.path (rootdir conftest layout)
from streamlit.testing.v1 import AppTest

import mdp_core as core
import ui.release as view
from mdp_core import release as rel
from mdp_core._text import share
from ui.markdown import plain
from ui.state import AppState

FAST = {"grid_points": 8, "opt_max_domain": 8, "calibration_pairs": 200, "max_contexts": 20}

Stalled = Callable[[str], Callable[..., None]]  # the stalled fixture (conftest.py)


@pytest.fixture
def small_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process sweeps on a short grid, fast DepHDP settings, and an empty result store."""
    monkeypatch.setattr(view, "SWEEP_CLIENT", False)
    monkeypatch.setattr(view, "WHICH_EPS", (1.0, 5.0, 20.0))
    monkeypatch.setattr(view, "WHICH_REPETITIONS", 2)
    monkeypatch.setattr(view, "CONFIG_OPTIONS", dict(FAST))
    view.store().clear()


def test_plain_words_follow_the_budget(app: AppTest, small_engine: None) -> None:
    """Browser audit: with the target released (its own channel, on by default) the plain words and the
    posterior table spoke of the features' ε beside a record budget of ‖(ε, ε)‖_2: they take the record's."""
    app.switch_page("views/release.py").run()
    assert not app.exception
    assert app.title[0].value == "Decide & release"
    record = math.sqrt(2.0)  # the l_2 record metric: ε = 1 for the features and 1 for the target
    assert any(f"a record's whole budget is at most {record:.3g}" in m.value for m in app.markdown)
    assert any(f"e^({record:.4g} × 1)" in m.value for m in app.markdown)
    table = app.dataframe[0].value
    assert list(table["attacker's prior"]) == ["1.0 %", "10.0 %", "50.0 %"]
    assert table["largest posterior"].iloc[2] == f"{100 * rel.posterior_bound(0.5, record):.1f} %"
    app.toggle(key="rel_include_target").set_value(False).run()  # the features alone: ε itself
    assert any("e^(1 × 1)" in m.value for m in app.markdown)
    assert app.dataframe[0].value["largest posterior"].iloc[2] == f"{100 * math.e / (math.e + 1):.1f} %"
    app.select_slider(key="rel_eps").set_value(2.0).run()
    assert not app.exception
    posterior = app.dataframe[0].value["largest posterior"].iloc[2]
    assert posterior == f"{100 * rel.posterior_bound(0.5, 2.0):.1f} %"


def test_without_a_target_there_is_no_target_toggle(app: AppTest, small_engine: None) -> None:
    """Browser audit: "Release the target column too" was shown, and on, for an upload without a target."""
    app.switch_page("views/release.py").run()
    assert any(t.key == "rel_include_target" for t in app.toggle)
    state = app.session_state["mdp_app_state"]
    app.selectbox(key=f"side_target_{state.dataset_key}").set_value("(none)").run()
    assert not app.exception
    assert not any(t.key == "rel_include_target" for t in app.toggle)
    assert not any("released too" in m.value for m in app.markdown)


def test_a_posterior_short_of_certainty_is_not_rounded_to_it() -> None:
    """Audit: at eps 20 the table and the which-eps answer said "100.0%" for 1 - 2e-9."""
    posterior = rel.posterior_bound(0.5, 20.0)
    assert 0.999 < posterior < 1.0
    assert list(view.posterior_frame(20.0)["largest posterior"]) == ["> 99.9 %"] * 3
    assert share(posterior) == "> 99.9 %" and share(1e-6) == "< 0.1 %" and share(0.5) == "50.0 %"
    assert share(1.0) == "100.0 %" and share(0.0) == "0.0 %"  # certainties are said as they are


def test_which_eps_answers_with_ci_and_frontier(app: AppTest, small_engine: None) -> None:
    app.switch_page("views/release.py").run()
    app.slider(key="rel_share").set_value(80).run()
    app.button(key="rel_which").click().run(timeout=600)
    _until_landed(app, "rel_which_stop")
    sentences = [e.value for e in (*app.success, *app.warning)]
    assert any("ε" in s and ("95 % CI" in s or "not met at" in s) for s in sentences)
    labels = {m.label for m in app.metric}
    assert "95 % CI" in labels and "accuracy" in labels
    spec = json.loads(app.get("plotly_chart")[0].proto.spec)
    assert {t["name"] for t in spec["data"]} == {"DepHDP", "SPL+DPN", "SPL+RMP", "ALC+DPN", "ALC+RMP"}
    # round budgets only: plotly's minor labels read "2" for 0.2 at one end and 20 at the other
    assert spec["layout"]["xaxis"]["ticktext"] == ["1", "2", "5", "10", "20"]
    # cached: the same question is answered from the store on the next run
    key = next(k for k in view.store()._items if k[0] == "which")
    assert view.store().get(key) is not None
    app.run()
    assert any("95 % CI" in m.label for m in app.metric)


def test_a_target_the_majority_label_meets_is_a_warning_not_an_answer(
    app: AppTest, small_engine: None
) -> None:
    """Browser audit: on wine at the defaults a green box said "The smallest budget … is ε = 0.25" and the big
    numbers showed ε and 0.794, although always predicting the majority label scores 0.794 too (95 % of
    non-private is 0.777): only the last sentence said the target means nothing."""
    app.selectbox(key="side_dataset").set_value("wine").run()
    app.switch_page("views/release.py").run()
    app.button(key="rel_which").click().run(timeout=600)
    _until_landed(app, "rel_which_stop")
    answer = next(v for k, v in view.store()._items.items() if k[0] == "which")
    assert answer.choice.met and answer.target_value <= answer.majority  # the premise
    assert not app.success
    (said,) = [w.value for w in app.warning if "more frequent label" in w.value]
    assert said.startswith(
        f"Always predicting the more frequent label already scores {answer.majority:.3f} on these records"
    )
    level = answer.majority + 0.005
    share = math.floor(100 * level / answer.reference) + 1
    assert f"Set a target above {level:.3f}: keep at least {share} % of the non-private accuracy" in said
    assert share / 100 * answer.reference > level
    labels = [m.label for m in app.metric]
    assert labels == ["always the majority label", f"accuracy at ε = {answer.choice.eps:.3g}", "95 % CI"]
    assert app.metric[0].value == f"{answer.majority:.3f}"
    assert not any(c.value.startswith("ε = ") for c in app.caption)  # no "ε = 1 is the smallest budget …"
    spec = json.loads(app.get("plotly_chart")[0].proto.spec)
    (line,) = [a for a in spec["layout"]["annotations"] if a["text"].startswith("ε = ")]
    assert line["text"].endswith(": target ≤ majority label")
    app.slider(key="rel_share").set_value(share).run()  # the suggested target: asked again
    assert "rel_which" in [b.key for b in app.button]


def test_an_answer_found_on_another_encoding_is_not_shown(app: AppTest, small_engine: None) -> None:
    """Audit: after the Data page's bins changed, the page kept the old "which eps" answer (and its report
    paired it with a release on the new encoding): the answer's key left out the bins, kinds, exclusions."""
    app.switch_page("views/release.py").run()
    app.button(key="rel_which").click().run(timeout=600)
    _until_landed(app, "rel_which_stop")
    assert [e.value for e in (*app.success, *app.warning)] and "rel_which" not in [b.key for b in app.button]
    state = app.session_state["mdp_app_state"]
    state.bins = {c: 2 for c in ("age", "thalach", "trestbps", "chol", "oldpeak")}  # the Data page's editor
    app.run()
    assert not app.exception
    assert "rel_which" in [b.key for b in app.button]  # asked again, not answered from the other encoding
    assert not [e.value for e in (*app.success, *app.warning)]
    state.bins = {}
    app.run()
    assert [e.value for e in (*app.success, *app.warning)]  # the first encoding's answer is still stored
    for declared in ({"ranges": {"chol": (100.0, 600.0)}}, {"categories": {"cp": ("1", "2", "3", "4")}}):
        for name, value in declared.items():  # a declared public domain is another encoding too
            setattr(state, name, value)
        app.run()
        assert "rel_which" in [b.key for b in app.button], declared
        state.ranges, state.categories = {}, {}
        app.run()


def test_which_eps_of_a_strict_release_looks_at_the_tuning_records_only(
    app: AppTest, small_engine: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Privacy audit (stop 63): "Which ε?" measured utility on the held-out records, the very records a
    strict release publishes; now it sweeps the tuning records, encoded by themselves."""
    seen: list[core.Encoded] = []
    which = view.rel.which_eps
    monkeypatch.setattr(view.rel, "which_eps", lambda *a, **k: seen.append(k["encoded"]) or which(*a, **k))
    app.switch_page("views/release.py").run()
    app.radio(key="rel_rows").set_value("held_out").run()
    app.button(key="rel_which").click().run(timeout=600)
    _until_landed(app, "rel_which_stop")
    assert not app.exception and len(seen) == 1
    df = core.load_dataset("heart")
    fit, _ = core.split_rows(len(df), 0.625, np.random.default_rng(0))
    assert len(seen[0].codes) == len(fit) == 189  # the tuning records alone
    assert seen[0].fingerprint == core.encode_table(df.iloc[fit], target="target").fingerprint
    assert any(view.TUNING_ONLY.strip() in c.value for c in app.caption)
    app.radio(key="rel_rows").set_value("all").run()
    assert "rel_which" in [b.key for b in app.button]  # the answer for every record is another one


def test_a_strict_release_holds_only_the_held_out_records(app: AppTest, small_engine: None) -> None:
    app.switch_page("views/release.py").run()
    assert "release only the held-out records" in app.caption[0].value
    app.radio(key="rel_rows").set_value("held_out").run()
    app.button(key="rel_prepare").click().run(timeout=600)
    _until_landed(app, "rel_prepare_stop")
    assert not app.exception
    statement = next(plain(m.value) for m in app.markdown if m.value.startswith("**Records released:**"))
    assert statement.startswith("**Records released:** Only the 114 held-out records are released; the 189")
    assert "computed from the records that tuned the channels only" in statement
    assert any("189 record(s) tuned the channels and are not released" in plain(w.value) for w in app.warning)
    done = view.store().get(next(k for k in view.store()._items if k[0] == "outcome"))
    assert len(done.released) == done.audit["rows_released"] == 114 == len(app.dataframe[1].value) + 94
    assert done.audit["scope"]["release_rows"] == "held_out"


def test_a_release_of_a_sampled_file_says_the_rest_is_not_released(
    app: AppTest, small_engine: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Audit: on a 200,000-row file the page said "All 58,237 records are released" of its 60,000 sample."""
    import mdp_core.data.io as io

    monkeypatch.setattr(io, "INTERACTIVE_ROW_LIMIT", 150)
    rng = np.random.default_rng(5)
    age = rng.integers(20, 80, 400)
    raw = "age,smoker,target\n" + "".join(
        f"{a},{s},{int(a + 10 * s > 55)}\n" for a, s in zip(age, rng.integers(0, 2, 400), strict=True)
    )
    app.selectbox(key="side_dataset").set_value("Upload CSV/TSV…").run()
    app.file_uploader(key="side_upload").set_value(("big.csv", raw.encode(), "text/csv")).run()
    app.session_state["mdp_app_state"].target = "target"
    app.switch_page("views/release.py").run()
    app.button(key="rel_prepare").click().run(timeout=600)
    _until_landed(app, "rel_prepare_stop")
    statement = next(plain(m.value) for m in app.markdown if m.value.startswith("**Records released:**"))
    assert statement.startswith(
        "**Records released:** The table is a uniform random sample of 150 of the file's 400 rows: the other "
        "250 are not released. All 150 records are released"
    )
    done = view.store().get(next(k for k in view.store()._items if k[0] == "outcome"))
    assert done.audit["rows"] == 150 and done.audit["scope"]["rows_in_source"] == 400


def test_release_shows_flags_before_the_downloads(app: AppTest, small_engine: None) -> None:
    app.switch_page("views/release.py").run()
    app.button(key="rel_prepare").click().run(timeout=600)
    _until_landed(app, "rel_prepare_stop")
    texts = [w.value for w in app.warning]
    assert any("smallest budget of the grid" in t or "became constant" in t for t in texts)
    preview = app.dataframe[1].value
    assert "target" in preview.columns and len(preview) == 20
    assert any("Composition of the group budgets" in m.value for m in app.markdown)
    done = view.store().get(next(k for k in view.store()._items if k[0] == "outcome"))
    (said,) = [m.value for m in app.markdown if m.value.startswith("**Utility**")]
    assert f"always predicting the more frequent label {done.utility['majority']:.3f}" in said
    # what the number is: a mean over draws and the band of single draws, not a single draw (browser audit)
    (how,) = [c.value for c in app.caption if c.value.startswith("The accuracy is the mean over")]
    u = done.utility
    assert how == view.utility_caption(u, 2)
    assert how.startswith(
        f"The accuracy is the mean over 10 privatisations of the 114 held-out records through the same "
        f"channels; the band ({u['lo']:.3f}–{u['hi']:.3f}, a 95 % prediction interval from those draws) "
        "is where about 95 % of single draws fall. One privatised draw, such as the DepHDP page's"
    )
    assert "“Which ε?” frontier is a sweep of its own: 2 draws per budget" in how
    report = next(v for k, v in view.store()._items.items() if k[0] == "report")
    assert "<h1>Release report: ε = 1, prediction on heart</h1>" in report  # not the placeholder "current"
    assert "<title>mDP Lab report: ε = 1, prediction on heart</title>" in report
    assert not any(c.value.startswith("The CSV is written as the upload was read") for c in app.caption)
    keys = [b.proto.id for b in app.get("download_button")]
    assert len(keys) >= 3
    state = app.session_state["mdp_app_state"]
    state.csv_separator, state.csv_decimal = ";", ","  # as select_upload sets them for such a file
    app.toggle(key="rel_include_target").set_value(False).run()
    app.button(key="rel_prepare").click().run(timeout=600)
    _until_landed(app, "rel_prepare_stop")
    assert "target" not in app.dataframe[1].value.columns
    said = "The CSV is written as the upload was read: fields separated by semicolons, decimal commas."
    assert said in [c.value for c in app.caption]


def test_the_privatised_csv_keeps_the_uploads_convention() -> None:
    """Browser audit: a ';'-separated upload with decimal commas was released with ',' and '.', which
    German-locale Excel reads as one text column."""
    import pandas as pd

    released = pd.DataFrame({"Größe": [1.72, 1.8], "Stufe": ["hoch", "mittel"]})
    text, note = view.privatised_csv(released, ";", ",")
    assert text.splitlines() == ["Größe;Stufe", "1,72;hoch", "1,8;mittel"]
    assert note == (
        "The CSV is written as the upload was read: fields separated by semicolons, decimal commas."
    )
    assert view.privatised_csv(released) == (released.to_csv(index=False), "")
    state = AppState()
    assert view.csv_convention(state) == (",", ".")


def test_scenarios_saved_compared_and_bad_files_refused(app: AppTest, small_engine: None) -> None:
    app.switch_page("views/release.py").run()
    app.text_input(key="rel_scenario_name").input("low").run()
    app.button(key="rel_save").click().run()
    app.select_slider(key="rel_eps").set_value(5.0).run()
    app.text_input(key="rel_scenario_name").input("high").run()
    app.button(key="rel_save").click().run()
    assert not app.exception
    assert app.multiselect(key="rel_compare_pick").value == ["low", "high"]
    saved = app.session_state["rel_saved_scenarios"]
    assert json.loads(dict(saved["high"].pages)["release"])["rel_eps"] == 5.0
    app.button(key="rel_compare").click().run(timeout=600)
    _until_landed(app, "rel_compare_stop")
    table = app.dataframe[-1].value
    assert list(table.columns) == ["low", "high"]
    assert table.loc["eps", "low"] == "1" and table.loc["eps", "high"] == "5"
    app.run()  # the table stays (stored) on the next rerun: no second click, no recomputation
    assert "rel_compare" not in [b.key for b in app.button] and app.dataframe[-1].value.equals(table)
    app.file_uploader(key="rel_scenarios_upload").set_value(
        ("s.json", b'{"scenarios": 3}', "application/json")
    )
    app.run()
    assert any("Could not load s.json: not a scenario file" in plain(e.value) for e in app.error)


def test_the_scenario_name_follows_the_settings_until_typed_and_a_save_says_it_replaces(
    app: AppTest, small_engine: None
) -> None:
    """The keyed name box kept its first value: a second save at another eps overwrote the first scenario
    under the stale name "ε = 1, prediction" (UX audit, stop 54). The name is now the box's placeholder
    until the user types one: the page never writes the box."""
    app.switch_page("views/release.py").run()
    box = app.text_input(key="rel_scenario_name")
    assert box.value == "" and box.placeholder == "ε = 1, prediction"
    app.button(key="rel_save").click().run()
    app.select_slider(key="rel_eps").set_value(4.0).run()
    assert app.text_input(key="rel_scenario_name").placeholder == "ε = 4, prediction"
    assert app.button(key="rel_save").label == "Save current settings"
    app.button(key="rel_save").click().run()
    saved = app.session_state["rel_saved_scenarios"]
    assert sorted(saved) == ["ε = 1, prediction", "ε = 4, prediction"]
    assert saved["ε = 4, prediction"].config.eps == 4.0 and saved["ε = 1, prediction"].config.eps == 1.0
    assert not any("_auto" in key for _, page in saved["ε = 4, prediction"].pages for key in json.loads(page))
    app.text_input(key="rel_scenario_name").input("mine").run()
    app.select_slider(key="rel_eps").set_value(2.0).run()
    assert app.text_input(key="rel_scenario_name").value == "mine"  # a typed name stays
    assert "Saving stores these settings as “mine”." in [c.value for c in app.caption]
    app.text_input(key="rel_scenario_name").input("ε = 1, prediction").run()
    assert app.button(key="rel_save").label == "Replace the saved scenario"
    assert any(
        plain(c.value).startswith(
            "A scenario named “ε = 1, prediction” is saved already with other settings (ε = 1"
        )
        and "saving replaces it" in c.value
        for c in app.caption
    )
    app.button(key="rel_save").click().run()  # asked for: the typed name, the button saying "Replace"
    assert app.session_state["rel_saved_scenarios"]["ε = 1, prediction"].config.eps == 2.0


def test_the_name_follows_several_settings_changed_in_one_run_and_in_quick_succession(
    app: AppTest, small_engine: None
) -> None:
    """Browser audit: three quick arrow presses on the floor (or ε) slider froze the name box at "ε = 1,
    prediction, floor 0.05" while ε was 2.5: runs cut short by the next press never sent the box's new
    value, the browser sent back the old one, and the page took it for a name the user typed; saving then
    stored ε = 2.5 under the old name and offered to replace an unrelated saved scenario."""
    app.switch_page("views/release.py").run()
    app.button(key="rel_save").click().run()  # "ε = 1, prediction"
    shown = app.text_input(key="rel_scenario_name").value  # what the browser's box holds now
    for eps in (1.5, 2.0):  # consecutive runs, each cut short in the browser before the name box
        app.select_slider(key="rel_eps").set_value(eps).run()
        assert app.text_input(key="rel_scenario_name").placeholder == f"ε = {eps:g}, prediction"
    # one run with several widgets changed, the browser still sending the box as it last showed it
    app.select_slider(key="rel_eps").set_value(2.5)
    app.select_slider(key="rel_floor").set_value("0.05")
    app.radio(key="rel_method").set_value("ALC+DPN")
    app.select_slider(key="rel_p").set_value("1")
    app.text_input(key="rel_scenario_name").set_value(shown)
    app.run()
    assert not app.exception
    expected = "ε = 2.5, prediction, ALC+DPN, floor 0.05, ℓ_1"
    assert app.text_input(key="rel_scenario_name").placeholder == expected
    assert app.button(key="rel_save").label == "Save current settings"
    app.button(key="rel_save").click().run()
    saved = app.session_state["rel_saved_scenarios"]
    assert list(saved) == ["ε = 1, prediction", expected]
    assert saved["ε = 1, prediction"].config.eps == 1.0  # untouched
    stored = saved[expected]
    assert (stored.config.eps, stored.config.min_group_eps, stored.method, stored.config.p) == (
        2.5, 0.05, "ALC+DPN", 1.0
    )  # fmt: skip


def test_a_save_never_replaces_a_scenario_with_other_settings_unasked(
    app: AppTest, small_engine: None
) -> None:
    """Settings the suggested name leaves out (the utility target, the Data page's bins) get a numbered
    name instead of the saved scenario's: only a typed name and the "Replace" button replace one."""
    app.switch_page("views/release.py").run()
    app.button(key="rel_save").click().run()
    app.slider(key="rel_share").set_value(80).run()
    assert app.text_input(key="rel_scenario_name").placeholder == "ε = 1, prediction (2)"
    assert any("(“ε = 1, prediction” is saved with other settings.)" in plain(c.value) for c in app.caption)
    assert app.button(key="rel_save").label == "Save current settings"
    app.button(key="rel_save").click().run()
    saved = app.session_state["rel_saved_scenarios"]
    assert [s.utility_target.value for s in saved.values()] == [0.95, 0.8]
    assert list(saved) == ["ε = 1, prediction", "ε = 1, prediction (2)"]
    app.slider(key="rel_share").set_value(95).run()  # the first one's settings again: its own name
    assert app.text_input(key="rel_scenario_name").placeholder == "ε = 1, prediction"
    app.toggle(key="rel_include_target").set_value(False)
    app.radio(key="rel_rows").set_value("held_out")
    app.run()
    assert app.text_input(key="rel_scenario_name").placeholder == (
        "ε = 1, prediction, target not released, held-out records"
    )


def test_a_distance_task_asks_for_an_upper_limit_and_answers(app: AppTest, small_engine: None) -> None:
    """On a lower-is-better task a share of non-private cannot be met (no reference): every upload starts
    without a target, so on the record task, whose sweep failed only after minutes (CSV audit, stop 55)."""
    app.switch_page("views/release.py").run()
    assert app.radio(key="rel_target_kind").value == "share of non-private"  # prediction: both offered
    app.selectbox(key="rel_task").set_value("record").run()
    assert "rel_target_kind" not in [r.key for r in app.radio]
    assert any("there is no non-private value to take a share of" in c.value for c in app.caption)
    limit = app.number_input(key="rel_abs_record")
    assert limit.label == "mean distance at most" and limit.value == 0.5
    limit.set_value(2.0).run()
    app.button(key="rel_which").click().run(timeout=600)
    _until_landed(app, "rel_which_stop")
    assert not app.exception and not app.error
    answer = next(s.value for s in (*app.success, *app.warning) if "mean distance ≤ 2" in s.value)
    assert "ε" in answer


def test_em_on_every_group_releases_no_constant_column_where_dephdp_did(
    app: AppTest, small_engine: None
) -> None:
    """Heart at eps 1: DepHDP's task-optimal channels leave columns constant; the page says why and offers
    EM on every group (ALC+DPN), whose release collapses no column to one value."""
    app.switch_page("views/release.py").run()
    assert app.radio(key="rel_method").value == "DepHDP"
    app.button(key="rel_prepare").click().run(timeout=600)
    _until_landed(app, "rel_prepare_stop")
    assert any("became constant" in w.value for w in app.warning)
    assert any(i.value == view.CONSTANT_COLUMNS_HINT for i in app.info)
    key = next(k for k in view.store()._items if k[0] == "outcome" and k[2].method == "DepHDP")
    dephdp = view.store().get(key)
    spec = json.loads(
        next(c for c in app.get("plotly_chart") if "keeps of each column" in c.proto.spec).proto.spec
    )
    kept = dephdp.leakage.set_index("attribute")["information_kept"]
    assert spec["data"][0]["x"] == list(kept.index)
    assert spec["data"][0]["y"] == pytest.approx(list(100 * kept), abs=1e-9)
    (said,) = [c.value for c in app.caption if "feature columns keep less than 1 %" in c.value]
    assert all(c in said for c in dephdp.check.constant_columns)  # a constant column keeps nothing
    app.radio(key="rel_method").set_value("ALC+DPN").run()
    assert app.text_input(key="rel_scenario_name").placeholder == "ε = 1, prediction, ALC+DPN"
    app.button(key="rel_prepare").click().run(timeout=600)
    _until_landed(app, "rel_prepare_stop")
    assert not app.exception
    assert not any("became constant" in w.value for w in app.warning)
    assert not any(i.value == view.CONSTANT_COLUMNS_HINT for i in app.info)
    preview = app.dataframe[1].value
    assert all(preview[c].nunique() > 1 for c in preview.columns if c != "target")
    key = next(k for k in view.store()._items if k[0] == "outcome" and k[2].method == "ALC+DPN")
    outcome = view.store().get(key)
    assert outcome.audit["method"] == "ALC+DPN" and set(outcome.result.mechanism.kinds) == {"DPN"}
    assert all(v["verified"] for v in outcome.audit["verification"])


def test_a_release_is_shown_beside_the_other_method_on_request(app: AppTest, small_engine: None) -> None:
    """One click releases the same settings by EM on every group; the table's numbers are the two outcomes'
    (recounted here from their information shares), and switching the method shows the pair at once."""
    app.switch_page("views/release.py").run()
    app.button(key="rel_prepare").click().run(timeout=600)
    _until_landed(app, "rel_prepare_stop")
    assert not _pair_tables(app)
    app.button(key="rel_pair").click().run(timeout=600)
    _until_landed(app, "rel_pair_stop")
    assert not app.exception and not app.error
    keys = [k for k in view.store()._items if k[0] == "outcome"]
    outcomes = {k[2].method: view.store().get(k) for k in keys}
    assert set(outcomes) == {"DepHDP", "ALC+DPN"}
    (table,) = _pair_tables(app)
    assert list(table["release by"]) == ["DepHDP", "EM on every group"]
    for row, method in zip(table.itertuples(index=False), ("DepHDP", "ALC+DPN"), strict=True):
        o = outcomes[method]
        kept = o.leakage["information_kept"].to_numpy()
        n = len(kept)
        assert row[1] == round(o.utility["mean"], 3)
        assert row[3] == f"{len(o.check.constant_columns)} of {n}"
        assert row[4] == f"{int(np.sum(kept >= 0.01))} of {n}"
    assert table["constant columns"].iloc[1] == f"0 of {n}"  # EM collapses no column
    said = next(m.value for m in app.markdown if m.value.startswith("EM on every group: accuracy"))
    em, dephdp = (outcomes[m].utility["mean"] for m in ("ALC+DPN", "DepHDP"))
    assert f"{em:.3f} against {dephdp:.3f}" in said
    app.radio(key="rel_method").set_value("ALC+DPN").run()
    assert "rel_prepare" not in [b.key for b in app.button]  # released already: no recomputation
    (table,) = _pair_tables(app)
    assert list(table["release by"]) == ["EM on every group", "DepHDP"]


@pytest.mark.parametrize(("p", "total"), [(2.0, math.sqrt(2.0)), (math.inf, 2.0), (1.0, None)])
def test_releasing_the_target_says_the_records_whole_budget(p: float, total: float | None) -> None:
    """The target's own channel at eps composes with the groups' budgets by the l_q norm (q conjugate to
    p): at eps 1 and l_2 a record's budget is sqrt(2), not the slider's 1."""
    text = view.record_budget_text(1.0, p)
    if total is None:
        assert "stays ε = 1" in text
    else:
        assert f"= {total:.3g}, not 1" in text


def test_the_page_states_the_target_channels_budget(app: AppTest, small_engine: None) -> None:
    app.switch_page("views/release.py").run()
    assert any("a record's whole budget is at most ‖(ε, ε)‖_2 = 1.41, not 1" in i.value for i in app.info)
    assert any("see “Record metric ℓ_p”" in i.value for i in app.info)
    # the metric the box refers to says, in plain words, what p does (it had no help)
    help_ = app.select_slider(key="rel_p").help
    assert help_ == view.RECORD_METRIC_HELP
    for said in ("How a record's budget is shared between its columns.", "p = 2 (the default)",
                 "‖(ε, ε)‖_2 = √(1² + 1²) = 1.41", "p = 1: distances add up",
                 "must add up to ε"):  # fmt: skip
        assert said in help_, said
    app.toggle(key="rel_include_target").set_value(False).run()
    assert not any("whole budget" in i.value for i in app.info)


def _pair_tables(app: AppTest) -> list:
    return [d.value for d in app.dataframe if "release by" in d.value.columns]


def _until_landed(app: AppTest, stop_key: str, seconds: float = 300.0) -> None:
    """Rerun (as the page's poll does) until the background job with the stop button ``stop_key`` ended."""
    rerun_until(app, lambda: stop_key not in [b.key for b in app.button], seconds)


def test_a_comparison_runs_in_the_background_and_can_be_stopped(
    app: AppTest, small_engine: None, monkeypatch: pytest.MonkeyPatch, stalled: Stalled
) -> None:
    """Four scenarios on adult took 16 s in one page run (stop 53): now a job with progress and a stop."""
    monkeypatch.setattr(rel, "evaluate_scenario", stalled("repetition {}"))
    app.switch_page("views/release.py").run()
    for name, eps in (("a", 1.0), ("b", 2.0)):
        app.select_slider(key="rel_eps").set_value(eps).run()
        app.text_input(key="rel_scenario_name").input(name).run()
        app.button(key="rel_save").click().run()
    started = time.monotonic()
    app.button(key="rel_compare").click().run()
    assert time.monotonic() - started < view.JOB_WAIT_SECONDS + 10 and not app.exception
    assert re.match(
        r"Comparing the scenarios: scenario a: repetition \d+$", plain(app.get("progress")[-1].proto.text)
    )
    app.button(key="rel_compare_stop").click().run()
    until_button(app, "rel_compare")
    assert "Comparing the scenarios was stopped; start it again to finish it." in [i.value for i in app.info]


def test_which_eps_and_the_release_run_in_the_background_say_why_they_stopped_or_failed(
    app: AppTest, small_engine: None, monkeypatch: pytest.MonkeyPatch, stalled: Stalled
) -> None:
    """Both ran in one page run (5-7 s on adult, no stop); now jobs: progress, a stop, the reason."""
    monkeypatch.setattr(rel, "which_eps", stalled("repetition {}"))

    def broken(*args: object, **kwargs: object) -> None:
        raise core.DataError("no group could be configured")

    monkeypatch.setattr(rel, "evaluate_scenario", broken)
    app.switch_page("views/release.py").run()
    app.button(key="rel_which").click().run()
    assert re.match(
        r"Sweeping ε for DepHDP and the four baselines: repetition \d+$", app.get("progress")[0].proto.text
    )
    assert "rel_which" not in [b.key for b in app.button] and "rel_prepare" in [b.key for b in app.button]
    app.button(key="rel_which_stop").click().run()
    until_button(app, "rel_which")  # "Stopping…" until the sweep's next report
    stopped = "Sweeping ε for DepHDP and the four baselines was stopped; start it again to finish it."
    assert stopped in [i.value for i in app.info] and "rel_which" in [b.key for b in app.button]
    app.button(key="rel_prepare").click().run()
    until_button(app, "rel_prepare")
    assert "Preparing the release failed: no group could be configured" in [e.value for e in app.error]
    assert "rel_prepare" in [b.key for b in app.button]


def test_a_blank_name_saves_under_the_suggestion(app: AppTest) -> None:
    """A blank name saved an unnamed scenario (the random walk: the page raised); blank or spaces now mean
    the suggested name, and typed names are trimmed."""
    app.switch_page("views/release.py").run()
    for blank in ("", "   "):
        app.text_input(key="rel_scenario_name").input(blank).run()
        assert not app.button(key="rel_save").disabled
        assert any(
            "Saving stores these settings as “ε = 1, prediction”" in plain(c.value) for c in app.caption
        )
    app.button(key="rel_save").click().run()
    app.text_input(key="rel_scenario_name").input("  mine ").run()
    app.button(key="rel_save").click().run()
    assert not app.exception
    assert list(app.session_state["rel_saved_scenarios"]) == ["ε = 1, prediction", "mine"]


def test_a_budget_floor_gives_every_group_a_budget(app: AppTest, small_engine: None) -> None:
    """Heart at eps 1: groups at the grid's smallest budget are released as near-random values; the page
    offers the floor that fits (eps / K^(1/q)), and with a floor no group is left at the grid's minimum."""
    app.switch_page("views/release.py").run()
    app.button(key="rel_prepare").click().run(timeout=600)
    _until_landed(app, "rel_prepare_stop")
    first = view.store().get(next(k for k in view.store()._items if k[0] == "outcome"))
    assert first.check.min_budget_groups  # the premise: some groups got the grid's smallest budget
    groups = len(first.result.groups)
    (hint,) = [i.value for i in app.info if "Budget floor per group" in i.value]
    grid = first.result.eps_grid  # a floor is snapped up to the grid: the largest offer whose point fits
    fits = [v for v in (0.02, 0.05, 0.1, 0.2, 0.3) if grid[np.searchsorted(grid, v)] * math.sqrt(groups) <= 1]
    assert f"with {groups} groups the largest the page offers that fits is {fits[-1]:g}" in hint
    assert all(view.floor_fits(first.result, v) == (v in fits) for v in (0.02, 0.05, 0.1, 0.2, 0.3, 0.5))
    app.select_slider(key="rel_floor").set_value("0.1").run()
    assert app.text_input(key="rel_scenario_name").placeholder == "ε = 1, prediction, floor 0.1"
    app.button(key="rel_prepare").click().run(timeout=600)
    _until_landed(app, "rel_prepare_stop")
    assert not app.exception
    key = next(k for k in view.store()._items if k[0] == "outcome" and k[2].config.min_group_eps == 0.1)
    floored = view.store().get(key)
    assert floored.result.mechanism.eps.min() >= 0.1 and not floored.check.min_budget_groups
    assert core.budget_norm(floored.result.mechanism.eps, 2.0) <= 1.0 + 1e-12  # still within eps
    assert floored.audit["config"]["min_group_eps"] == 0.1
    assert all(v["verified"] for v in floored.audit["verification"])
    assert not any("smallest budget of the grid" in w.value for w in app.warning)
    app.select_slider(key="rel_floor").set_value("1").run()  # above eps / sqrt(K): no release exists
    app.button(key="rel_prepare").click().run(timeout=600)
    _until_landed(app, "rel_prepare_stop")
    assert any("lower the budget floor (min_group_eps) to at most" in plain(e.value) for e in app.error)


def test_the_big_numbers_say_or_less_at_the_grids_floor_and_no_interval_from_one_draw() -> None:
    import pandas as pd

    from mdp_core.sweep import EpsChoice

    def shown(**fields: object) -> list[str]:
        choice = EpsChoice(**{"eps": 0.25, "estimate": 0.8, "ci": (0.78, 0.82), "met": True, "reason": "r",
                              "settings": {"method": "DepHDP"}, **fields})  # type: ignore[arg-type]  # fmt: skip
        frontier = pd.DataFrame({"higher_is_better": [True]})
        target = rel.UtilityTarget("absolute", 0.75)
        answer = rel.Decision(choice, frontier, target, "accuracy", 0.85, 1.0, "heart")
        return [value for _, value, _ in view.decision_metrics(answer)]

    assert shown() == ["0.25", "0.800", "0.780 – 0.820"]
    assert shown(grid_floor=True)[0] == "≤ 0.25"
    assert shown(met=False, ci=(math.nan, math.nan))[2] == "none (under 2 draws)"
