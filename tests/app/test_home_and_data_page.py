"""AppTest: app shell (sidebar dataset picker, upload, seed) and the data & dependencies page."""

from __future__ import annotations

import ast
import gzip
import importlib.util
import json
from pathlib import Path
from types import ModuleType

import numpy as np
import pandas as pd
from streamlit.testing.v1 import AppTest

import mdp_core as core
from ui.dependency import (
    PAD_PIXELS,
    PLOT_HEIGHT,
    PLOT_WIDTH,
    dephdp_groups_caption,
    label_box,
    label_extent,
    sparse_pairs_warning,
)
from ui.markdown import plain

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
    # the page says plainly why DepHDP shows more groups at the same tau (audit: 5 here vs 9 there read as a
    # contradiction): the target is left out (8 groups), groups over 512 joint values are split (9)
    why = [c.value for c in app.caption if c.value.startswith("This page: ")]
    assert len(why) == 1
    assert why[0].startswith(
        "This page: 5 groups over all 14 attributes. The DepHDP page never releases the "
    )
    assert "target **target**, so it groups the other 13 only: 8 groups" in why[0]
    assert "exceeds 512 values at its weakest edge: 9 groups" in why[0] and "fitting split" in why[0]
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


# --- audit of the data page: sparse pairs named, graph labels inside the plot, tables' formats ------------
def _table(app: AppTest, *columns: str) -> pd.DataFrame:
    """The one table (dataframe or data editor) of the page with these columns."""
    found = [d.value for d in app.dataframe if set(columns) <= set(d.value.columns)]
    assert len(found) == 1, [list(d.value.columns) for d in app.dataframe]
    return found[0]


def _column_config(app: AppTest, column: str) -> dict:
    """The column config the page sent for ``column`` of the table that has it."""
    found = [
        config
        for d in app.dataframe
        if column in d.value.columns
        for name, config in json.loads(d.proto.columns or "{}").items()
        if name == column
    ]
    assert len(found) == 1, found
    return found[0]


def test_sparse_pairs_warning_names_the_pairs_and_bins_that_fix_them(app: AppTest) -> None:
    app.switch_page("views/data.py").run()
    assert not app.exception
    [warning] = [w.value for w in app.warning if "contingency cell" in w.value]
    assert warning.startswith(
        "3 attribute pairs have fewer than 5 rows per contingency cell (4.7 at the fewest)"
    )
    assert "(age, trestbps), (age, thalach) and (trestbps, thalach)" in warning
    assert warning.endswith("lower the bins of **age** and **trestbps** to 7.")
    # the step it names works: with those bins no pair is sparse any more
    app.session_state[STATE].bins = {"age": 7, "trestbps": 7}
    app.run()
    assert not app.exception and not [w for w in app.warning if "contingency cell" in w.value]
    bins = _table(app, "attribute", "bins").set_index("attribute")["bins"]
    assert bins["age"] == bins["trestbps"] == 7 and bins["thalach"] == 8


def test_sparse_pairs_warning_lists_a_few_then_counts_and_says_when_bins_cannot_help() -> None:
    sizes = {"x": 8, "y": 8, "z": 8, "country": 40, "job": 15}
    sparse = pd.DataFrame(
        {
            "a": ["country", "x", "x", "y", "z"],
            "b": ["job", "y", "country", "z", "country"],
            "rows_per_cell": [0.5, 3.0, 0.6, 3.0, 0.6],
            "mi_bias": [0.9, 0.1, 0.2, 0.1, 0.2],
        }
    )
    text = sparse_pairs_warning(sparse, sizes, ["x", "y", "z"], 300, min_per_cell=5.0)
    assert "(country, job), (x, y), (x, country) and 2 more." in text
    # x and z pair with a 40-level nominal: at most 60 / 40 -> 1 bin, so bins cannot help them
    assert "lower the bins of **y** to 7." in text
    assert "fewer bins cannot help (country, job), (x, country) and (z, country);" in text


def _graph_nodes(app: AppTest) -> tuple[dict, list[dict]]:
    """The dependency graph's layout and one dict per node (name, x, y, label place, marker size, colour)."""
    spec = json.loads(app.get("plotly_chart")[1].proto.spec)
    nodes = []
    for trace in spec["data"]:
        if trace.get("mode") == "markers+text":
            n, place = len(trace["text"]), trace.get("textposition", "middle center")
            places = place if isinstance(place, list) else [place] * n
            for t, x, y, p, m in zip(
                trace["text"], trace["x"], trace["y"], places, trace["marker"]["size"], strict=True
            ):
                nodes.append(
                    {"name": t, "x": x, "y": y, "place": p, "size": m, "colour": trace["marker"]["color"]}
                )
    return spec["layout"], nodes


def _check_labels_fit(layout: dict, nodes: list[dict]) -> None:
    """Every node with its label lies inside the axis ranges (drawn on PLOT_WIDTH x PLOT_HEIGHT pixels) with
    room to spare, and no two labels overlap there (audit: 'ours-per-week', 'native-country' over
    'capital-loss' on adult)."""
    assert "range" in layout["xaxis"] and "range" in layout["yaxis"], (
        "the axes must have fixed, padded ranges"
    )
    (x0, x1), (y0, y1) = layout["xaxis"]["range"], layout["yaxis"]["range"]
    sx, sy = PLOT_WIDTH / (x1 - x0), PLOT_HEIGHT / (y1 - y0)
    texts = []
    for node in nodes:
        left, right, bottom, top = label_extent(node["name"], node["place"], node["size"])
        px, py = (node["x"] - x0) * sx, (node["y"] - y0) * sy
        assert px + left >= PAD_PIXELS - 0.5 and px + right <= PLOT_WIDTH - PAD_PIXELS + 0.5, node
        assert py + bottom >= PAD_PIXELS - 0.5 and py + top <= PLOT_HEIGHT - PAD_PIXELS + 0.5, node
        left, right, bottom, top = label_box(node["name"], node["place"], node["size"])
        texts.append((node["name"], (px + left, px + right, py + bottom, py + top)))
    for i, (a, p) in enumerate(texts):
        for b, q in texts[:i]:  # labels may touch, but not cover a quarter of the smaller one
            shared = max(0.0, min(p[1], q[1]) - max(p[0], q[0])) * max(0.0, min(p[3], q[3]) - max(p[2], q[2]))
            smaller = min((p[1] - p[0]) * (p[3] - p[2]), (q[1] - q[0]) * (q[3] - q[2]))
            assert shared <= smaller / 4, (a, b)


def test_dependency_graph_keeps_labels_inside_and_explains_node_size(app: AppTest) -> None:
    for dataset in ("heart", "adult", "wine"):
        app.selectbox(key="side_dataset").set_value(dataset).run()
        app.switch_page("views/data.py").run()
        assert not app.exception
        layout, nodes = _graph_nodes(app)
        assert len(nodes) == {"heart": 14, "adult": 15, "wine": 13}[dataset]
        assert layout["xaxis"].get("autorange") is False and layout["yaxis"].get("autorange") is False
        _check_labels_fit(layout, nodes)
        places = {node["place"] for node in nodes}
        assert len(places) > 2  # labels point away from the centre, not all "top center"
        assert any("node size: the attribute's number of levels" in c.value for c in app.caption)


def test_dependency_graph_colours_up_to_24_groups_apart(app: AppTest) -> None:
    app.switch_page("views/data.py").run()
    app.slider(key="data_tau").set_value(0.2).run()  # heart: 14 groups (10 colours repeated G1 as G11)
    _, nodes = _graph_nodes(app)
    colours = {}
    for trace in json.loads(app.get("plotly_chart")[1].proto.spec)["data"]:
        if trace.get("mode") == "markers+text":
            colours[trace["name"]] = trace["marker"]["color"]
    assert len(colours) == 14 and len(set(colours.values())) == 14
    # an upload of 24 independent columns: 24 groups at tau 1, 24 colours
    rng = np.random.default_rng(3)
    header = ",".join(f"c{i:02d}" for i in range(24))
    rows = "\n".join(",".join(map(str, row)) for row in rng.integers(0, 6, size=(600, 24)))
    _upload(app, "wide.csv", f"{header}\n{rows}\n".encode())
    app.switch_page("views/data.py").run()
    app.slider(key="data_tau").set_value(1.0).run()
    assert not app.exception
    layout, nodes = _graph_nodes(app)
    assert len(nodes) == 24 and len({node["colour"] for node in nodes}) == 24
    _check_labels_fit(layout, nodes)
    # at tau 0 they form one group of 6^24 joint values: past a browser's exact numbers, shown as text
    app.slider(key="data_tau").set_value(0.0).run()
    assert not app.exception
    joint = _table(app, "joint domain")["joint domain"].tolist()
    assert joint == [f"{6**24:,}"]


def test_data_page_tables_blank_bins_name_columns_and_separate_thousands(app: AppTest) -> None:
    app.selectbox(key="side_dataset").set_value("adult").run()
    app.switch_page("views/data.py").run()
    assert not app.exception
    attributes = _table(app, "attribute", "kind", "bins").set_index("attribute")
    kinds = attributes["kind"]
    assert set(kinds) == {"numeric", "nominal", "binary"}
    assert attributes.loc[kinds == "numeric", "bins"].eq(8).all()
    assert attributes.loc[kinds != "numeric", "bins"].isna().all()  # bins do nothing there: blank, shown "—"
    [editor] = [d for d in app.dataframe if "bins" in d.value.columns]
    assert editor.proto.placeholder == "—"
    assert attributes.loc["workclass", "missing"] == 2799  # a number, shown with a separator like the info
    assert any("2,799" in i.value for i in app.info)
    for column in ("missing", "levels", "joint domain"):
        assert _column_config(app, column)["type_config"]["format"] == "%,d", column
    pairs = _table(app, "nmi")
    assert list(pairs.columns) == ["attribute 1", "attribute 2", "nmi"]


def test_declared_public_domains_are_shown_used_and_what_falls_outside_is_counted(app: AppTest) -> None:
    app.switch_page("views/data.py").run()
    state = app.session_state["mdp_app_state"]
    state.ranges = {"chol": (150.0, 350.0), "sex": (0.0, 1.0)}  # as the schema editor writes them
    state.categories = {"cp": ("0", "1", "2"), "chol": ("1",)}  # chol's is moot: numeric
    app.run()
    assert not app.exception
    attributes = _table(app, "attribute", "public min", "public max", "levels").set_index("attribute")
    assert tuple(attributes.loc["chol", ["public min", "public max"]]) == (150.0, 350.0)
    assert attributes.loc["chol", "levels"] == 8  # every bin of the range, empty ones too
    assert attributes.loc["sex", ["public min", "public max"]].isna().all()  # not numeric: blank
    df = core.load_dataset("heart")
    beyond = int(((df["chol"] < 150) | (df["chol"] > 350)).sum())
    said = f"'chol' ({beyond} beyond 150..350, set to the nearer end)"
    assert any(said in plain(i.value) for i in app.info)
    assert _column_config(app, "public min")["help"].startswith("A range known without looking")
    assert attributes.loc["cp", "levels"] == 4  # the three declared and 'other'
    table = _table(app, "attribute", "public categories").set_index("attribute")["public categories"]
    assert table["cp"] == "0, 1, 2" and pd.isna(table["chol"])
    other = int((~df["cp"].astype(str).isin(["0", "1", "2"])).sum())  # independent: by the labels' text
    assert any(
        f"'cp' ({other} not among its categories, released as 'other')" in plain(i.value) for i in app.info
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
    info = " ".join(plain(i.value) for i in app.sidebar.info)
    assert "**ID** (identifier-like)" in info and "**Datum** (date (dd.mm.yyyy))" in info
    assert "**Notiz** (free text)" in info
    assert any("decimal comma: Einkommen, Größe" in plain(c.value) for c in app.sidebar.caption)
    dropped = int(np.isnan(truth["age"]).sum())
    assert [plain(w.value) for w in app.sidebar.warning] == [
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
    assert plain(app.warning[0].value).startswith(f"{dropped} of 800 rows are left out")
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
    errors = [plain(e.value) for e in app.sidebar.error]
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
    notes = [plain(c.value) for c in app.sidebar.caption]
    sampled = "big.csv.gz has 70,000 rows; using a uniform random sample of 60,000 rows (seed 0) to stay"
    assert any(note.startswith(sampled) for note in notes)
    assert "**row** (identifier-like)" in plain(app.sidebar.info[0].value)  # a running row number: a row key


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
        errors = [plain(e.value) for e in app.sidebar.error]
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


def test_the_groups_caption_counts_one_group_in_the_singular() -> None:
    """Audit of uploads: a small table without target read "The DepHDP page groups the same 4 attributes:
    1 groups."."""
    nmi = pd.DataFrame(np.full((3, 3), 0.9), index=list("abc"), columns=list("abc"))
    text = dephdp_groups_caption(nmi, 0.1, 1, {"a": 2, "b": 2, "c": 2}, target=None, max_group_domain=512)
    assert "This page: 1 group over all 3 attributes." in text
    assert "The DepHDP page groups the same 3 attributes: 1 group." in text
    assert "exceeds 512 values at its weakest edge: 1 group." in text


def test_pages_say_a_loaded_table_is_unusable_instead_of_asking_to_load_one(app: AppTest) -> None:
    """An upload whose every column is excluded (two constant columns) is loaded: the playground, leakage
    and sweep pages said "Load a dataset first", which the user had just done."""
    _upload(app, "const.csv", ("k,m\n" + "same,5\n" * 30).encode())
    assert not app.exception
    for page in (
        "views/mechanisms.py",
        "views/leakage.py",
        "views/sweep.py",
        "views/dephdp.py",
        "views/release.py",
    ):
        app.switch_page(page).run()
        assert not app.exception, page
        shown = [plain(i.value) for i in app.main.info]
        assert len(shown) == 1, (page, shown)
        assert shown[0].startswith("**const.csv** is loaded, but this page cannot use it."), (page, shown)
        assert "every column is excluded (k: constant; m: constant)" in shown[0], page
        assert "Data & dependencies" in shown[0] and "Load a" not in shown[0], page


def test_the_leakage_page_says_a_one_attribute_table_has_too_few(app: AppTest) -> None:
    rows = "".join(f"{i % 4},same\n" for i in range(40))
    _upload(app, "one.csv", ("level,const\n" + rows).encode())
    app.switch_page("views/leakage.py").run()
    assert not app.exception
    shown = [plain(i.value) for i in app.main.info]
    assert shown == [
        "**one.csv** is loaded, but this page needs at least 2 attributes and only 1 is usable (level). "
        "Fix it on the *Data & dependencies* page, or load another table in the sidebar."
    ]


def test_the_nmi_pairs_table_is_as_tall_as_its_rows(app: AppTest, monkeypatch) -> None:
    """Two attributes, one pair: the table kept 300 px, seven empty rows under the one pair."""
    import streamlit as st

    heights: dict[str, object] = {}
    shown = st.dataframe

    def spy(data=None, *args, **kwargs):
        if isinstance(data, pd.DataFrame) and "attribute 1" in data.columns:
            heights["pairs"] = (len(data), kwargs.get("height"))
        return shown(data, *args, **kwargs)

    monkeypatch.setattr(st, "dataframe", spy)
    rows = "".join(f"{i % 3},{'xy'[i % 2]}\n" for i in range(50))
    _upload(app, "two.csv", ("a,c\n" + rows).encode())
    app.switch_page("views/data.py").run()
    assert not app.exception
    assert heights["pairs"] == (1, 38 + 35)
    app.selectbox(key="side_dataset").set_value("heart").run()
    assert heights["pairs"] == (91, 300)  # 14 attributes: 91 pairs, scrolled


def test_levels_and_re_include_say_what_they_do(app: AppTest) -> None:
    """Heart's chol has 8 bins but 7 levels, unexplained; re-including a whole-number identifier brought it
    back numeric while the help promised 'identifiers ... as nominal attributes'."""
    app.switch_page("views/data.py").run()
    assert "fewer levels than bins" in _column_config(app, "levels")["help"]
    key = app.session_state[STATE].dataset_key
    assert "a whole-number identifier as numeric" in app.multiselect(key=f"data_include_{key}").help


def test_the_overview_states_the_check_in_words_not_a_function_name(app: AppTest) -> None:
    intro = app.markdown[0].value
    assert "mdp_violation" not in intro and "1e-9" not in intro
    assert "no probability ratio between two records may exceed e^(ε·d) by more than 10⁻⁹" in intro


def test_the_sidebar_names_why_each_column_is_excluded_in_whole(app: AppTest) -> None:
    """The reason was cut at its first ':', so a timestamp column read "(date and time (yyyy-mm-dd hh)"."""
    app.run()
    stamps = "\n".join(f"2024-01-{1 + i % 28:02d} 0{i % 10}:15:00,{i % 3},{i % 5}" for i in range(60))
    _upload(app, "times.csv", f"when,a,b\n{stamps}\n".encode())
    (said,) = [plain(i.value) for i in app.sidebar.info if "Excluded, never released" in i.value]
    assert "**when** (date and time (yyyy-mm-dd hh:mm:ss))" in said
