"""AppTest: app shell (sidebar dataset picker, upload, seed) and the data & dependencies page."""

from __future__ import annotations

import ast
import gzip
import importlib.util
import json
from pathlib import Path
from types import ModuleType

import numpy as np
from streamlit.testing.v1 import AppTest

STATE = "mdp_app_state"


def test_home_loads_heart_by_default(app: AppTest) -> None:
    assert not app.exception
    assert app.title[0].value == "mDP Lab"
    state = app.session_state[STATE]
    assert state.dataset == "heart" and state.frame.shape == (303, 14) and state.target == "target"


def test_the_overview_links_every_page_of_the_app(app: AppTest) -> None:
    """Each page registered in app.py has a numbered workflow step on the overview, in the sidebar's order
    and under the sidebar's title (two pages had none)."""
    tree = ast.parse((Path(__file__).resolve().parents[2] / "app.py").read_text(encoding="utf-8"))
    titles = {
        node.args[0].value: keyword.value.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "Page"
        for keyword in node.keywords
        if keyword.arg == "title" and isinstance(keyword.value, ast.Constant)
    }
    pages = [page for page in titles if page != "views/home.py"]
    assert len(pages) == 8
    linked = [link.proto.label for link in app.get("page_link")]
    assert linked == [f"{i}. {titles[page]}" for i, page in enumerate(pages, start=1)]


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
    # the page says why DepHDP can show more groups at the same tau (issue 11: 5 vs 9 groups unexplained)
    why = [c.value for c in app.caption if c.value.startswith("The DepHDP page groups")]
    assert len(why) == 1 and "without the target **target**" in why[0] and "exceeds 512" in why[0]
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


# --- uploads with real-file guard rails (issue 11 "Real files") -------------------------------------------
def _messy() -> ModuleType:
    path = Path(__file__).resolve().parents[1] / "data" / "messy_files.py"
    spec = importlib.util.spec_from_file_location("messy_files", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _upload(app: AppTest, name: str, raw: bytes) -> AppTest:
    app.selectbox(key="side_dataset").set_value("Upload CSV/TSV…").run()
    return app.file_uploader(key="side_upload").set_value((name, raw, "text/csv")).run()


def test_upload_european_file_excludes_columns_and_preselects_no_target(app: AppTest) -> None:
    raw, truth = _messy().european()
    _upload(app, "kunden.csv", raw)
    assert not app.exception and not app.sidebar.error
    state = app.session_state[STATE]
    assert state.frame.shape == (800, 9) and state.target is None
    target = app.selectbox(key=f"side_target_{state.dataset_key}")
    assert target.value == "(none)"  # never guessed (the old default was the last column, 'Zufrieden')
    assert any(c.value.startswith("No target: a prediction task needs one") for c in app.sidebar.caption)
    assert not {"ID", "Datum", "Notiz"} & set(target.options)  # excluded columns cannot be the target
    info = " ".join(i.value for i in app.sidebar.info)
    assert "**ID** (identifier-like)" in info and "**Datum** (date (dd.mm.yyyy))" in info
    assert "**Notiz** (free text)" in info
    assert any("decimal comma: Einkommen, Größe" in c.value for c in app.sidebar.caption)
    dropped = int(np.isnan(truth["age"]).sum())
    assert [w.value for w in app.sidebar.warning] == [
        f"{dropped} of 800 rows are left out because a numeric attribute is missing: 'Alter' ({dropped} "
        "missing). To keep them, exclude these columns or set their kind to ordinal or nominal (a 'missing' "
        "level)."
    ]

    app.switch_page("views/data.py").run()
    assert not app.exception
    excluded = app.dataframe[1].value  # [0] is the preview
    assert excluded["column"].tolist() == ["ID", "Datum", "Notiz"]
    assert excluded["reason"].iloc[0].startswith("identifier-like: 800 distinct values in 800 rows")
    assert any("never" not in c.value and "no mechanism" in c.value for c in app.caption)
    assert app.warning[0].value.startswith(f"{dropped} of 800 rows are left out")
    assert "'Geschlecht'" in app.info[0].value  # blanks kept as a 'missing' level

    # re-include the date as ordinal year, exclude the numeric column with gaps: every row comes back
    key = state.dataset_key
    app.multiselect(key=f"data_include_{key}").set_value(["Datum"]).run()
    app.radio(key=f"data_date_{key}_Datum").set_value("year").run()
    app.multiselect(key=f"data_exclude_{key}").set_value(["Alter"]).run()
    assert not app.exception and not app.warning
    state = app.session_state[STATE]
    assert state.include == {"Datum": "year"} and state.exclude == ["Alter"]
    attributes = app.dataframe[2].value  # the schema editor
    row = attributes.set_index("attribute").loc["Datum"]
    assert row["kind"] == "ordinal" and row["levels"] == 10  # 2015..2024
    assert "Alter" not in attributes["attribute"].tolist() and "ID" not in attributes["attribute"].tolist()
    assert app.dataframe[1].value.set_index("column").loc["Alter", "reason"] == "excluded by you"


def test_upload_penguins_like_keeps_rows_and_warns_with_counts(app: AppTest) -> None:
    raw, truth = _messy().penguins_like()
    _upload(app, "penguins_raw.csv", raw)
    assert not app.exception and not app.sidebar.error
    dropped = int(truth["numeric_missing"].sum())
    warning = app.sidebar.warning[0].value
    assert warning.startswith(f"{dropped} of 344 rows are left out because a numeric attribute is missing")
    assert dropped < 40  # today 310 of 344 vanished
    app.switch_page("views/data.py").run()
    assert not app.exception
    excluded = app.dataframe[1].value["column"].tolist()
    assert excluded == ["Region", "Stage", "Individual ID", "Date Egg", "Comments"]
    assert [m.value for m in app.metric][:2] == ["344", "17"]


def test_embedded_samples_keep_their_documented_target(app: AppTest) -> None:
    assert app.session_state[STATE].target == "target"
    for name, target in (("adult", "income"), ("wine", "quality")):
        app.selectbox(key="side_dataset").set_value(name).run()
        assert not app.exception
        state = app.session_state[STATE]
        assert state.target == target
        assert app.selectbox(key=f"side_target_{state.dataset_key}").value == target


def test_upload_with_every_column_excluded_says_why_and_recovers(app: AppTest) -> None:
    rows = "".join(f"K{i:04d},call back later about order {i}\n" for i in range(30))
    _upload(app, "notes.csv", ("Kunde,Notiz\n" + rows).encode())
    assert not app.exception
    errors = [e.value for e in app.sidebar.error]
    assert len(errors) == 1
    assert "every column is excluded (Kunde: identifier-like; Notiz: free text)" in errors[0]
    app.switch_page("views/data.py").run()
    assert not app.exception
    assert app.dataframe[1].value["column"].tolist() == ["Kunde", "Notiz"]
    assert any("every column is excluded" in e.value for e in app.main.error)
    key = app.session_state[STATE].dataset_key
    app.multiselect(key=f"data_include_{key}").set_value(["Kunde"]).run()
    assert not app.exception and not app.error  # the stale message is gone once the table encodes
    assert app.dataframe[2].value["attribute"].tolist() == ["Kunde"]


def test_large_gzipped_upload_is_sampled_with_a_stated_note(app: AppTest) -> None:
    rng = np.random.default_rng(9)
    n = 70_000
    ages, groups = rng.integers(18, 90, n), rng.choice(["a", "b", "c"], n)
    body = "\n".join(map("{},{},{}".format, ages, groups, range(n)))
    raw = gzip.compress(("age,group,row\n" + body + "\n").encode())
    _upload(app, "big.csv.gz", raw)
    assert not app.exception and not app.sidebar.error
    state = app.session_state[STATE]
    assert len(state.frame) == 60_000 and state.target is None
    notes = [c.value for c in app.sidebar.caption]
    sampled = "big.csv.gz has 70,000 rows; using a uniform random sample of 60,000 rows (seed 0) to stay"
    assert any(note.startswith(sampled) for note in notes)
    assert "**row** (identifier-like)" in app.sidebar.info[0].value  # a running row number is a row key


def test_bad_uploads_say_what_to_do_and_keep_the_previous_table(app: AppTest) -> None:
    cases = [
        ("empty.csv", b"", "is empty; upload a CSV or TSV file with a header row"),
        ("photo.csv", b"\x89PNG\r\n\x1a\n\x00\x00", "is a PNG image; upload the table itself as CSV"),
        ("book.xlsx.csv", b"PK\x03\x04\x14\x00", "save the sheet as CSV (UTF-8) and upload that"),
        ("blob.csv", bytes(range(256)) * 8, "is not a text file"),
        ("one.csv", b"a;b\n1;2\n", "has 1 data row(s); need at least 2 rows below the header"),
        ("dup.csv", b"a,'a'\n1,2\n3,4\n", "duplicate column name(s) ['a']; make every header unique"),
    ]
    app.selectbox(key="side_dataset").set_value("Upload CSV/TSV…").run()
    for name, raw, message in cases:
        app.file_uploader(key="side_upload").set_value((name, raw, "text/csv")).run()
        assert not app.exception, name
        errors = [e.value for e in app.sidebar.error]
        assert len(errors) == 1 and errors[0].startswith(f"Could not load {name}: "), (name, errors)
        assert message in errors[0], (name, errors)
        assert app.session_state[STATE].frame.shape == (303, 14)  # heart stays loaded


def test_target_survives_option_changes_and_is_dropped_when_excluded(app: AppTest) -> None:
    raw, _ = _messy().european(rows=200)
    _upload(app, "kunden.csv", raw)
    key = app.session_state[STATE].dataset_key
    app.selectbox(key=f"side_target_{key}").set_value("Stufe").run()
    app.switch_page("views/data.py").run()
    assert app.session_state[STATE].target == "Stufe"
    app.multiselect(key=f"data_include_{key}").set_value(["Datum"]).run()  # target options grow
    assert not app.exception
    assert app.session_state[STATE].target == "Stufe"
    assert "Datum" in app.selectbox(key=f"side_target_{key}").options
    app.multiselect(key=f"data_exclude_{key}").set_value(["Stufe"]).run()  # the target itself is excluded
    assert not app.exception
    state = app.session_state[STATE]
    assert state.target is None and app.selectbox(key=f"side_target_{key}").value == "(none)"
    assert "Stufe" not in app.dataframe[2].value["attribute"].tolist()
