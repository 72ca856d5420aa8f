"""Header lines that look like a preamble, and numbers whose thousands separator the file decided.

Audit of uploads (files in memory, shaped like the audit's): R's ``write.table(df, sep=",")`` writes no
header field for the row names, and some exports end every data row (not the header) with a separator: in
both the header is one field shorter than the rows and was skipped as a title line, so the first data row
became the header. A header that starts with ``#`` (``#items``, ``# of visits``) was skipped as a comment.
``1.234`` in a ``;`` file is read as 1234 without a word. Title lines and comments above a header are still
skipped.
"""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest

import mdp_core as core
from mdp_core import DataError

ROW_NAMES_NOTE = (
    "The header has one name fewer than the data rows, whose first field names the row (as R's write.table "
    "writes it): read those fields as a column named 'row names'."
)


def _load(raw: bytes, name: str = "upload.csv") -> tuple[pd.DataFrame, core.LoadReport]:
    buf = io.BytesIO(raw)
    buf.name = name
    return core.load_dataset_report(buf)


def _iris_like(rows: int = 150, seed: int = 9) -> tuple[pd.DataFrame, bytes]:
    """A table and the text R's ``write.table(df, sep=",")`` writes for it (quote=TRUE, row names 1..n)."""
    rng = np.random.default_rng(seed)
    table = pd.DataFrame(
        {
            "Sepal.Length": rng.normal(5.8, 0.8, rows).round(1),
            "Sepal.Width": rng.normal(3.0, 0.4, rows).round(1),
            "Petal.Length": rng.normal(3.7, 1.7, rows).round(1),
            "Species": np.repeat(["setosa", "versicolor", "virginica"], -(-rows // 3))[:rows],
        }
    )
    lines = ['"Sepal.Length","Sepal.Width","Petal.Length","Species"']
    for i, (a, b, c, s) in enumerate(table.itertuples(index=False), start=1):
        lines.append(f'"{i}",{a:.1f},{b:.1f},{c:.1f},"{s}"')
    return table, ("\n".join(lines) + "\n").encode()


# ------------------------------------------------------------------------------- header one field short
def test_r_write_table_row_names_are_a_column_not_a_lost_header() -> None:
    table, raw = _iris_like()
    df, report = _load(raw, "iris_r.csv")
    assert list(df.columns) == ["row names", "Sepal.Length", "Sepal.Width", "Petal.Length", "Species"]
    assert len(df) == 150 and report.original_rows == 150
    assert df["row names"].tolist() == list(range(1, 151))
    pd.testing.assert_frame_equal(df.drop(columns="row names"), table)
    # pandas reads the same file with the row names as its index
    expected = pd.read_csv(io.BytesIO(raw))
    assert expected.index.tolist() == list(range(1, 151))
    np.testing.assert_array_equal(df["Sepal.Length"].to_numpy(), expected["Sepal.Length"].to_numpy())
    assert report.notes == (ROW_NAMES_NOTE,)
    # the guard rails exclude the row names as a row key
    schema = core.infer_schema(df)
    assert schema.excluded_reasons == {
        "row names": "identifier-like: a different whole number in each of the 150 rows (a row key)"
    }
    assert "row names" not in core.discretize(df, schema).codes.columns


def test_r_row_names_counted_quoted_or_text() -> None:
    # write.table(df, sep="\t", quote=FALSE): the default row names 1, 2, 3, ... without quotes
    df, report = _load(b"age\tsex\n1\t30\tf\n2\t41\tm\n3\t52\tf\n")
    assert df.to_dict("list") == {"row names": [1, 2, 3], "age": [30, 41, 52], "sex": ["f", "m", "f"]}
    assert report.notes == ("Fields are separated by tabs.", ROW_NAMES_NOTE)
    # named rows (mtcars-like), quoted as write.table quotes text
    cars = [
        f"{make} {model}"
        for make in ("Mazda", "Fiat", "Merc", "Honda")
        for model in ("RX4", "128", "230", "Civic", "710", "240D")
    ]
    mpg = [round(15 + 0.7 * i, 1) for i in range(24)]
    cyl = [(4, 6, 8)[i % 3] for i in range(24)]
    rows = "".join(f'"{c}",{m},{n}\n' for c, m, n in zip(cars, mpg, cyl, strict=True))
    df, report = _load(('"mpg","cyl"\n' + rows).encode())
    assert df.to_dict("list") == {"row names": cars, "mpg": mpg, "cyl": cyl}
    assert report.notes == (ROW_NAMES_NOTE,)
    assert core.infer_schema(df).excluded_reasons == {
        "row names": "identifier-like: 24 distinct values in 24 rows (100% distinct; more than 50 %)"
    }
    # the same names without quotes (write.table(..., quote=FALSE)): before, the header was skipped as a
    # title and the first car became the header
    df, report = _load(("mpg,cyl\n" + rows.replace('"', "")).encode())
    assert df.to_dict("list") == {"row names": cars, "mpg": mpg, "cyl": cyl}
    assert report.notes == (ROW_NAMES_NOTE,)
    # a column already called "row names" keeps its name
    df, report = _load(b'"row names",b\n"1",x,5\n"2",y,6\n"3",x,7\n')
    assert list(df.columns) == ["row names 2", "row names", "b"] and df["row names 2"].tolist() == [1, 2, 3]
    assert report.notes == (ROW_NAMES_NOTE.replace("'row names'", "'row names 2'"),)


def test_trailing_separator_on_the_data_rows_only_is_dropped_with_a_note() -> None:
    rng = np.random.default_rng(9)
    a, b, c = rng.integers(0, 5, 100), rng.choice(["x", "y"], 100), rng.integers(0, 3, 100)
    body = "".join(f"{x},{y},{z},\n" for x, y, z in zip(a, b, c, strict=True))
    df, report = _load(("a,b,c\n" + body).encode())
    assert list(df.columns) == ["a", "b", "c"] and len(df) == 100 and report.original_rows == 100
    assert (
        df["a"].tolist() == a.tolist() and df["b"].tolist() == b.tolist() and df["c"].tolist() == c.tolist()
    )
    assert report.notes == (
        "Every data row ends with an empty field that the header has no name for (a comma at the end of the "
        "data rows only); dropped that field.",
    )
    df, report = _load(b"a;b;c\n4;y;2;\n1;x;;\n3;x;1;\n")
    assert df.shape == (3, 3) and df["c"].isna().sum() == 1
    assert report.notes[1] == (
        "Every data row ends with an empty field that the header has no name for (a semicolon at the end of "
        "the data rows only); dropped that field."
    )


def test_a_last_field_with_a_value_below_the_first_lines_is_refused_not_dropped() -> None:
    body = "".join(f"{i % 5},{'xy'[i % 2]},{i % 3},{'9' if i == 80 else ''}\n" for i in range(100))
    with pytest.raises(DataError, match=r"column 4 \(counting from 1\) has a blank name; give every column"):
        _load(("a,b,c\n" + body).encode())


@pytest.mark.parametrize(
    "raw",
    [
        b"a,b\n1,2,3\n4,5,6\n",  # first fields neither quoted nor 1, 2, 3, ...
        b"a,b\n1,2,3\n2,5,6\n",  # 1, 2: too few rows to tell a count
        b"a,b\n1,2,3\n1,5,6\n2,4,4\n",  # row names repeat
        b"a,b\n1,2,3\n2,5\n3,4,4\n",  # ragged
    ],
)
def test_other_short_headers_still_get_the_parser_s_error(raw: bytes) -> None:
    with pytest.raises(DataError, match=r"saw 3\); every row needs as many comma-separated fields as the"):
        _load(raw)


# ------------------------------------------------------------------------------------ '#' headers
@pytest.mark.parametrize(
    ("header", "names"),
    [
        ("#items,store,region", ["#items", "store", "region"]),
        ("# of visits,clinic,outcome", ["# of visits", "clinic", "outcome"]),
    ],
)
def test_a_header_starting_with_hash_is_the_header(header: str, names: list[str]) -> None:
    rng = np.random.default_rng(9)
    counts, shops, sides = (
        rng.integers(0, 20, 200),
        rng.choice(["s1", "s2", "s3"], 200),
        rng.choice(["N", "S"], 200),
    )
    body = "".join(f"{n},{s},{r}\n" for n, s, r in zip(counts, shops, sides, strict=True))
    df, report = _load((header + "\n" + body).encode())
    assert list(df.columns) == names and len(df) == 200 and df[names[0]].tolist() == counts.tolist()
    assert report.notes == (f"Read {header!r} as the header, not as a comment: the line below it is data.",)


@pytest.mark.parametrize(
    ("raw", "skipped"),
    [
        (b"#a,b,c\na,b,c\n1,x,3\n4,y,6\n", "#a,b,c"),  # a commented-out header
        (b"# counts, per shop\na,b,c\n1,x,3\n4,y,6\n", "# counts, per shop"),  # fewer fields
        (b"#a,b,c\n# exported 2024\na,b,c\n1,x,3\n4,y,6\n", "#a,b,c"),  # a comment below it
        (b"#,,\na,b,c\n1,x,3\n4,y,6\n", "#,,"),  # no names
        (b"#a,b,2\na,b,c\n1,x,3\n4,y,6\n", "#a,b,2"),  # a number is no name
    ],
)
def test_hash_lines_above_a_header_stay_comments(raw: bytes, skipped: str) -> None:
    df, report = _load(raw)
    assert df.to_dict("list") == {"a": [1, 4], "b": ["x", "y"], "c": [3, 6]}
    lines = raw.count(b"\n") - 3
    assert report.notes == (f"Skipped {lines} line(s) above the header (starting {skipped!r}).",)


def test_a_commented_out_header_above_an_all_text_table_stays_a_comment() -> None:
    df, report = _load(b"#name,group\nname,group\nAnn,x\nBob,y\nCid,x\n")
    assert df.to_dict("list") == {"name": ["Ann", "Bob", "Cid"], "group": ["x", "y", "x"]}
    assert report.notes == ("Skipped 1 line(s) above the header (starting '#name,group').",)


# ------------------------------------------------------------------------------------ title lines
@pytest.mark.parametrize(
    ("raw", "columns", "title"),
    [
        # a title with one field fewer than the table, above a header of names
        (b"Table 1: Population by county, 2020\ncounty,region,popul\nA,N,5\nB,S,6\n",
         ["county", "region", "popul"], "Table 1: Population by county, 2020"),
        # ... above a header of years (numbers over number columns)
        (b"Population by county, 2019-2020\ncounty,2019,2020\nA,123,456\nB,124,457\n",
         ["county", "2019", "2020"], "Population by county, 2019-2020"),
        # ... above an all-text table
        (b"Survey results, spring\nname,group,answer\nAnn,x,yes\nBob,y,no\nCid,x,yes\n",
         ["name", "group", "answer"], "Survey results, spring"),
        # ... above a header with a trailing separator, like its rows
        (b"Shops, north\na,b,c,\n1,x,3,\n4,y,6,\n", ["a", "b", "c"], "Shops, north"),
    ],
)  # fmt: skip
def test_title_lines_one_field_short_are_still_skipped(raw: bytes, columns: list[str], title: str) -> None:
    df, report = _load(raw)
    assert list(df.columns) == columns and len(df) == raw.count(b"\n") - 2
    assert f"Skipped 1 line(s) above the header (starting {title!r})." in report.notes


# ------------------------------------------------------------------------------- thousands separators
def test_dot_read_as_thousands_separator_is_stated() -> None:
    rng = np.random.default_rng(3)
    amounts = rng.choice(["1.234", "2.500", "3.750", "12.000"], 100)
    body = "".join(
        f"{a};{g};{h}\n"
        for a, g, h in zip(amounts, rng.choice(["a", "b"], 100), rng.integers(0, 4, 100), strict=True)
    )
    df, report = _load(("amt;g;h\n" + body).encode())
    assert df["amt"].tolist() == [int(a.replace(".", "")) for a in amounts]  # the separator decides: European
    first = amounts[0]
    assert report.notes == (
        "Fields are separated by semicolons.",
        "Read '.' as a thousands separator (European convention, as the semicolon separator suggests) in "
        f"amt ({first} read as {int(first.replace('.', ''))}); these values would also read with '.' as a "
        "decimal point.",
    )


def test_thousands_notes_name_what_decided_and_stay_silent_when_the_values_decide() -> None:
    # another column's decimal commas decide
    df, report = _load(b"a;b;c\n1.500;0,5;7.250\n2.250;1,5;8.000\n")
    assert df["a"].tolist() == [1500, 2250] and df["c"].tolist() == [7250, 8000]
    assert report.notes[-1] == (
        "Read '.' as a thousands separator (European convention, as in the file's other number columns) in "
        "a (1.500 read as 1500), c (7.250 read as 7250); these values would also read with '.' as a decimal "
        "point."
    )
    # ',' in a tab file: English unless the file says otherwise
    df, report = _load(b"n\tk\n1,500\tx\n2,250\ty\n")
    assert df["n"].tolist() == [1500, 2250]
    assert report.notes == (
        "Fields are separated by tabs.",
        "Read ',' as a thousands separator (English convention, the default unless fields are separated by "
        "semicolons) in n (1,500 read as 1500); these values would also read with ',' as a decimal comma.",
    )
    # the values decide (1.234,5 reads only as European, 0.125 only as English): no such note
    df, report = _load(b"a;b\n1.234,5;x\n2.000;y\n")
    assert df["a"].tolist() == [1234.5, 2000.0]
    assert report.notes == ("Fields are separated by semicolons.", "Read as numbers with a decimal comma: a.")
    df, report = _load(b"a;b\n0.125;x\n1.500;y\n")
    assert df["a"].tolist() == [0.125, 1.5] and report.notes == ("Fields are separated by semicolons.",)
    # '.' read as a decimal point in a comma file: nothing was read as thousands
    df, report = _load(b"a,b\n1.500,x\n2.250,y\n")
    assert df["a"].tolist() == [1.5, 2.25] and report.notes == ()


def test_the_decimal_mark_read_is_reported_and_kept_for_the_release() -> None:
    """A ';' file with decimal commas is released as it was read (browser audit: ',' and '.' came out)."""
    from ui.data import select_upload
    from ui.state import AppState

    raw = "größe;stufe\n1,72;hoch\n1,80;mittel\n1,65;hoch\n".encode()
    df, report = _load(raw)
    assert (report.separator, report.decimal) == (";", ",") and df["größe"].tolist() == [1.72, 1.8, 1.65]
    assert _load(b"a,b\n1.5,x\n2.5,y\n")[1].decimal == "."
    state = AppState()
    select_upload(state, raw, "werte.csv")
    assert (state.csv_separator, state.csv_decimal) == (";", ",")
