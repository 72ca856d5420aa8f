"""User text shown in Markdown is escaped (security audit: a file named ``![f](https:evil.example).csv``
made the browser fetch https://evil.example/, and ``**``, ``$`` or ``:red[…]`` in a name spoofed emphasis and
formulas in privacy sentences); and a CSV download whose text cells start like a spreadsheet formula says so.

An uploaded file's name, its column names and category values, a loaded configuration's or scenarios file's
name and the messages quoting them are all the upload's author's: none may form an image, a link, emphasis,
LaTeX or a directive in any element the pages draw (AppTest's ``.value`` is the Markdown source)."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator

import numpy as np
import pandas as pd
import pytest
import streamlit as st
from markdown_it import MarkdownIt
from pagewait import rerun_until  # tests/app is on sys.path (rootdir conftest layout)
from streamlit.testing.v1 import AppTest

from ui.markdown import JOINER, md
from ui.widgets import formula_cells

EVIL_FILE = "![f](http://evil.example/x.png).csv"
EVIL_COL = "![c](http://evil.example/c.png)"
STAR_COL = "a*b_c"
TARGET = "[t](http://evil.example/t) :red[y]"
ID_COL = "[id](https://evil.example/id)"  # unique values: excluded as identifier-like, and named for it
EVIL_VALUES = ("![v](http://evil.example/v.png)", "**bold**", "$x^2$", '=HYPERLINK("http://evil.example")')
FAST = {"opt_max_domain": 4, "grid_points": 8, "calibration_pairs": 300, "max_contexts": 60}

# an image or a link Markdown would form: "![" or "](" not escaped by a backslash, or a literal autolink
UNSAFE = re.compile(r"(?<!\\)!(?<!\\)\[|(?<!\\)\]\(|https?://|www\.evil")
TEXT_ELEMENTS = ("title", "header", "subheader", "markdown", "caption", "info", "warning", "error", "success")
WIDGETS = ("selectbox", "multiselect", "radio", "slider", "select_slider", "button", "toggle", "checkbox")


@pytest.fixture(autouse=True)
def empty_store() -> Iterator[None]:
    st.cache_resource.clear()
    yield
    st.cache_resource.clear()


def evil_csv(rows: int = 240, seed: int = 3) -> bytes:
    rng = np.random.default_rng(seed)
    kind = rng.integers(0, len(EVIL_VALUES), rows)
    frame = pd.DataFrame(
        {
            EVIL_COL: [EVIL_VALUES[k] for k in kind],
            STAR_COL: rng.integers(0, 40, rows) + 10 * kind,
            TARGET: np.where(rng.random(rows) < 0.2 + 0.2 * kind, "yes", "no"),
            ID_COL: [f"u{i:05d}" for i in range(rows)],
        }
    )
    return frame.to_csv(index=False).encode()


def shown(app: AppTest) -> list[str]:
    """Every Markdown source the run drew: text elements, and widget labels (Markdown too)."""
    texts = [str(e.value) for kind in TEXT_ELEMENTS for e in app.get(kind)]
    texts += [str(w.label) for kind in WIDGETS for w in app.get(kind) if getattr(w, "label", None)]
    return texts


def assert_escaped(app: AppTest, where: str) -> list[str]:
    assert not app.exception, app.exception
    texts = shown(app)
    unsafe = [t for t in texts if UNSAFE.search(t)]
    assert not unsafe, f"{where}: unescaped user text in {unsafe}"
    return texts


def upload(app: AppTest) -> AppTest:
    app.selectbox(key="side_dataset").set_value("Upload CSV/TSV…").run()
    app.file_uploader(key="side_upload").set_value((EVIL_FILE, evil_csv(), "text/csv")).run()
    assert not app.exception and not app.sidebar.error
    key = app.session_state["mdp_app_state"].dataset_key
    app.selectbox(key=f"side_target_{key}").set_value(TARGET).run()
    return app


def test_names_from_an_upload_are_shown_literally_on_every_page(app: AppTest) -> None:
    upload(app)
    texts = assert_escaped(app, "home")
    joined = "\n".join(texts)
    assert f"Loaded **{md(EVIL_FILE)}**" in joined  # the project's own bold still works around the name
    assert (
        f"**{md(ID_COL)}** ({md('identifier-like')})" in joined
    )  # the excluded column, named in the sidebar
    assert f"Working on **{md(EVIL_FILE)}**" in joined

    app.switch_page("views/data.py").run()
    texts = assert_escaped(app, "data")
    assert any(f"never releases the target **{md(TARGET)}**" in t for t in texts)

    app.switch_page("views/leakage.py").run()
    assert app.selectbox(key="leak_target").value == EVIL_COL
    assert app.selectbox(key="leak_other").value == STAR_COL
    texts = assert_escaped(app, "leakage")
    odds = next(t for t in texts if t.startswith("In plain words: releasing"))
    assert md(EVIL_COL) in odds and md(STAR_COL) in odds and "a\\*b\\_c" in odds

    app.switch_page("views/mechanisms.py").run()
    app.multiselect(key="mech_attrs").set_value([EVIL_COL, TARGET]).run()
    texts = assert_escaped(app, "mechanisms")
    joined = "\n".join(texts)
    assert f"A joint value is written {md(EVIL_COL + ' · ' + TARGET)}." in joined
    assert any(md(v) in joined for v in EVIL_VALUES)  # the closest values, named in the budget note

    app.switch_page("views/release.py").run()
    assert_escaped(app, "release")
    bad_name = "![s](http://evil.example/s.png) **x**.json"
    app.file_uploader(key="rel_scenarios_upload").set_value(
        (bad_name, b"{not json", "application/json")
    ).run()
    texts = assert_escaped(app, "release, scenarios")
    assert any(e.value.startswith(f"Could not load {md(bad_name)}: ") for e in app.error)


def test_dephdp_names_errors_and_formula_cells(app: AppTest) -> None:
    upload(app)
    app.switch_page("views/dephdp.py").run()
    assert_escaped(app, "dephdp")
    bad = "![b](http://evil.example/b.png).json"
    app.file_uploader(key="dep_config_upload").set_value((bad, b'{"tau_dpn": 7}', "application/json")).run()
    assert_escaped(app, "dephdp, bad configuration")
    assert any(e.value.startswith(f"Could not load {md(bad)}: ") for e in app.error)
    good = "![g](http://evil.example/g.png).json"
    app.file_uploader(key="dep_config_upload").set_value(
        (good, json.dumps({"task": "record", **FAST}).encode(), "application/json")
    ).run()
    assert [s.value for s in app.success] == [f"Loaded {md(good)}."]
    app.button(key="dep_compute").click().run()
    rerun_until(app, lambda: "dep_profiles_stop" not in [b.key for b in app.button], 120, "the profiles")
    texts = assert_escaped(app, "dephdp, computed")
    # the privatised split keeps the upload's '=HYPERLINK(…)' values as they are, and the page says so
    note = [t for t in texts if "may run such a cell as a formula" in t]
    assert len(note) == 1 and re.match(r"[\d,]+ cells? of this CSV start", note[0])


# --- md() and the formula counter ------------------------------------------------------------------------

NASTY = [
    "![f](https:evil.example).csv",
    "**bold** __b__ *i* _i_ `code` ~~s~~ $x^2$ $$y$$ :red[red] :material/home: :smile:",
    "<img src=x onerror=alert(1)> &amp; &#58; <https://evil.example/a> [l]: https://evil.example/r",
    "# heading",
    "- item",
    "+ item",
    "1. one",
    "> quote",
    "a|b|c",
    "a\\*b \\ \\\\ end\\",
    "http://evil.example/x www.evil.example mail a@evil.example HTTPS://EVIL.EXAMPLE",
    "{=} ( ) [ ] ! #",
]


def commonmark_text(source: str) -> str:
    """The text CommonMark shows for inline ``source`` that forms no markup: every backslash escape of an
    ASCII punctuation character read as the character (spec 2.4), the invisible word joiner dropped."""
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", source).replace(JOINER, "")


@pytest.mark.parametrize("text", NASTY)
def test_md_escapes_every_markdown_character(text: str) -> None:
    escaped = md(text)
    assert commonmark_text(escaped) == text  # shown literally, nothing lost
    bare = re.sub(r"\\.", "", escaped)  # what is left once the escaped characters are taken out
    assert not re.search(r"[\\`*_{}\[\]()<>#+\-.!|~$:=&]", bare), bare
    assert not re.search(r"(?i)https?://|www\.|@\w", escaped.replace("\\", ""))  # no literal autolink


def test_md_keeps_plain_text_and_flattens_lines() -> None:
    assert md("age") == "age"
    assert md("Größe 2") == "Größe 2"
    assert md("a_b.csv") == "a\\_b\\.csv"
    assert md("two\nlines") == "two lines"
    assert md(ValueError("bad $x$")) == "bad \\$x\\$"


def test_md_renders_literally_through_a_commonmark_renderer() -> None:
    renderer = MarkdownIt("gfm-like")  # GitHub's dialect with its literal autolinks (linkify)
    for text in NASTY:
        rendered = renderer.render(md(text)).strip().removeprefix("<p>").removesuffix("</p>")
        assert "<" not in rendered, rendered  # no tag: no image, link, emphasis, code, list or heading
        assert html.unescape(rendered).replace(JOINER, "") == text


def test_formula_cells_counts_text_cells_and_names_not_numbers() -> None:
    table = pd.DataFrame(
        {
            "=name": ['=HYPERLINK("http://evil.example")', "+1+1", "-1.5", "plain", "@SUM(1+1)", "\tx", None],
            "number": [-1, 2, 3, 4, 5, 6, 7],
            "floats": [-1.5, 2.0, 3.0, 4.0, 5.0, 6.0, np.nan],
            "text": pd.array(["-a", "b", "c", "d", "e", "\rf", None], dtype="string"),
            "category": pd.Categorical(["=1", "a", "a", "a", "a", "a", "a"]),
            "flag": [True] * 7,
        }
    )
    # the header, =HYPERLINK, +1+1, @SUM, tab; -a, carriage return; =1 ("-1.5" is a number, kept out)
    assert formula_cells(table) == 8
    assert formula_cells(pd.DataFrame({"age": [-3, 40], "sex": ["F", "M"]})) == 0
    assert formula_cells(pd.DataFrame({"x": ["-", "a-b"]})) == 1
