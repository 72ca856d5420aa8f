"""AppTest: app shell (sidebar dataset picker, upload, seed) and the data & dependencies page."""

from __future__ import annotations

import json

from streamlit.testing.v1 import AppTest

STATE = "mdp_app_state"


def test_home_loads_heart_by_default(app: AppTest) -> None:
    assert not app.exception
    assert app.title[0].value == "mDP Lab"
    state = app.session_state[STATE]
    assert state.dataset == "heart" and state.frame.shape == (303, 14) and state.target == "target"


def test_dataset_picker_and_bad_upload_keeps_previous_table(app: AppTest) -> None:
    app.selectbox(key="side_dataset").set_value("wine").run()
    assert not app.exception
    assert app.session_state[STATE].frame.shape == (6497, 13)
    app.selectbox(key="side_dataset").set_value("Upload CSV/TSV…").run()
    app.file_uploader(key="side_upload").set_value(("bad.csv", b"only_one_column\n1\n2\n", "text/csv")).run()
    assert not app.exception
    assert any("1 column" in e.value for e in app.sidebar.error)
    assert app.session_state[STATE].frame.shape == (6497, 13)  # previous dataset stays loaded
    good = b"a,b,c\n1,x,3\n2,y,4\n3,x,5\n4,y,6\n"
    app.file_uploader(key="side_upload").set_value(("good.csv", good, "text/csv")).run()
    assert not app.exception
    assert app.session_state[STATE].frame.shape == (4, 3) and not app.sidebar.error


def test_data_page_slider_changes_groups(app: AppTest) -> None:
    app.switch_page("views/data.py").run()
    assert not app.exception
    assert [m.value for m in app.metric][:2] == ["303", "14"]
    charts = app.get("plotly_chart")
    assert len(charts) == 2
    heat = json.loads(charts[0].proto.spec)
    assert len(heat["data"][0]["x"]) == 14
    groups_at = {}
    for tau in (0.05, 0.3, 0.9):
        app.slider(key="data_tau").set_value(tau).run()
        assert not app.exception
        groups_at[tau] = len(app.dataframe[-2].value)
    assert groups_at[0.05] <= groups_at[0.3] <= groups_at[0.9] == 14
    app.toggle(key="data_cap").set_value(True).run()
    app.slider(key="data_tau").set_value(0.05).run()
    app.number_input(key="data_max_domain").set_value(20).run()
    assert not app.exception
    assert all(
        size <= 20 or "," not in attrs
        for attrs, size in zip(
            app.dataframe[-2].value["attributes"], app.dataframe[-2].value["joint domain"], strict=True
        )
    )
