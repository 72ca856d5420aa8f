"""Real-file guard rails (issue 11 "Real files", DESIGN.md "Data-prep guard rails").

Every file is built here, shaped like what people upload: a penguins-like export (NA strings, blanks,
constant columns, an individual ID, dates, sparse comments), a European ``;`` / decimal-comma / latin-1 file
with an ID column, dates, free text and a quoted header, a survey export and a census extract. Tests check
the outcome (kinds, exclusion reasons, row counts, parsed values), each against the values the builder wrote.
"""

from __future__ import annotations

import gzip
import io
import time

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from messy_files import european, penguins_like

import mdp_core as core
from mdp_core import DataError
from mdp_core.data.guards import detect_date


def _file(raw: bytes, name: str = "upload.csv") -> io.BytesIO:
    buf = io.BytesIO(raw)
    buf.name = name
    return buf


def _load(raw: bytes, name: str = "upload.csv", seed: int = 0) -> tuple[pd.DataFrame, core.LoadReport]:
    return core.load_dataset_report(_file(raw, name), seed=seed)


# ------------------------------------------------------------------------------------------ penguins
def test_penguins_like_keeps_rows_and_excludes_what_must_not_be_released() -> None:
    raw, truth = penguins_like()
    df, report = _load(raw, "penguins_raw.csv")
    assert df.shape == (344, 17) and report.target is None
    schema = core.infer_schema(df)
    reasons = schema.excluded_reasons
    assert set(reasons) == {"Region", "Stage", "Individual ID", "Date Egg", "Comments"}
    assert reasons["Region"].startswith("constant") and reasons["Stage"].startswith("constant")
    assert reasons["Individual ID"].startswith("identifier-like: 190 distinct values in 344 rows (55%")
    assert reasons["Date Egg"].startswith("date (mm/dd/yy)")
    assert reasons["Comments"].startswith("free text")
    assert dict(schema.kinds) == {
        "studyName": "nominal",
        "Sample Number": "numeric",
        "Species": "nominal",
        "Island": "nominal",
        "Clutch Completion": "binary",
        "Culmen Length (mm)": "numeric",
        "Culmen Depth (mm)": "numeric",
        "Flipper Length (mm)": "numeric",
        "Body Mass (g)": "numeric",
        "Sex": "binary",
        "Delta 15 N (o/oo)": "numeric",
        "Delta 13 C (o/oo)": "numeric",
    }
    enc = core.discretize(df, schema)
    # only rows with a missing *numeric* value are left out (today: 310 of 344 vanished)
    assert enc.dropped_rows == int(truth["numeric_missing"].sum())
    assert len(enc.codes) == 344 - enc.dropped_rows
    assert enc.dropped_rows < 40
    kept = ~truth["numeric_missing"]
    assert list(enc.levels["Sex"]) == ["FEMALE", "MALE", "missing"]
    assert int((enc.codes["Sex"] == 2).sum()) == int(truth["sex_missing"][kept].sum())
    warning = enc.warnings[0]
    assert warning.startswith(f"{enc.dropped_rows} of 344 rows are left out because a numeric attribute")
    assert "'Delta 15 N (o/oo)' (14 missing)" in warning and "'Delta 13 C (o/oo)' (13 missing)" in warning
    assert "'Sex' (11)" in enc.warnings[1]
    assert set(enc.columns) == set(schema.columns)  # excluded columns never reach the encoding


def test_excluding_a_sparse_numeric_column_keeps_its_rows() -> None:
    raw, _ = penguins_like()
    df, _ = _load(raw)
    enc = core.discretize(df, core.infer_schema(df, exclude=["Delta 15 N (o/oo)", "Delta 13 C (o/oo)"]))
    assert enc.dropped_rows == 2  # rows 3 and 271 miss every measurement
    schema = core.infer_schema(df, exclude=["Delta 15 N (o/oo)"])
    assert schema.excluded_reasons["Delta 15 N (o/oo)"] == "excluded by you"


def test_dates_written_in_several_formats_are_excluded_and_can_come_back_by_month() -> None:
    """Perf audit: dates written three ways (2019-01-01, 02.01.2019, January 03, 2019) parsed by no single
    format, so the guard rails let 112 exact dates out as a nominal column."""
    days = pd.date_range("2019-01-01", periods=120, freq="D")
    ways = ["%Y-%m-%d", "%d.%m.%Y", "%B %d, %Y"]
    written = [d.strftime(ways[i % 3]) for i, d in enumerate(days)]
    raw = "visit,score\n" + "".join(f'"{w}",{i % 5}\n' for i, w in enumerate(written))
    df, _ = _load(raw.encode())
    schema = core.infer_schema(df)
    assert schema.excluded_reasons["visit"].startswith("date (written in several formats): exact dates")
    by_month = core.discretize(df, core.infer_schema(df, include={"visit": "month"}))
    expected = [d.strftime("%Y-%m") for d in days]  # each value read in its own format
    assert list(by_month.decode(by_month.codes)["visit"]) == expected
    # versions, times of day and codes stay what they are
    for values in (["1.2.3", "1.2.4", "2.0.1"], ["12:30", "13:45", "2020-01-01"], ["A1", "B2", "C3"]):
        assert detect_date(pd.Series(values * 10)) is None


def test_dates_can_be_reincluded_as_ordinal_month_or_year() -> None:
    raw, _ = european(rows=300)
    df, _ = _load(raw)
    by_month = core.infer_schema(df, include={"Datum": "month"})
    assert by_month.kind("Datum") == "ordinal" and "Datum" not in by_month.excluded_reasons
    enc = core.discretize(df, by_month)
    kept = df["Alter"].notna()  # the only numeric gap
    expected = pd.to_datetime(df["Datum"], format="%d.%m.%Y").dt.strftime("%Y-%m")[kept]
    assert list(enc.levels["Datum"]) == sorted(expected.unique())
    assert (enc.decode(enc.codes)["Datum"].to_numpy() == expected.to_numpy()).all()
    by_year = core.discretize(df, core.infer_schema(df, include={"Datum": "year"}))
    assert list(by_year.levels["Datum"]) == [str(y) for y in range(2015, 2025)]
    with pytest.raises(DataError, match="include it by month or year, not 'hour'"):
        core.infer_schema(df, include={"Datum": "hour"})


def test_reincluded_identifier_and_user_kinds() -> None:
    raw, _ = european(rows=300)
    df, _ = _load(raw)
    schema = core.infer_schema(df, include=["ID"])
    assert schema.kind("ID") == "nominal"
    with pytest.raises(DataError, match=r"\['Notiz'\] are excluded; include them"):
        schema.with_kinds({"Notiz": "nominal"})
    with pytest.raises(DataError, match="target 'Notiz' is excluded \\(free text"):
        core.infer_schema(df, target="Notiz")
    with pytest.raises(DataError, match="unknown columns \\['nope'\\]"):
        core.infer_schema(df, include=["nope"])


# ------------------------------------------------------------------------------------------ European file
def test_european_semicolon_decimal_comma_latin1_file() -> None:
    raw, truth = european()
    df, report = _load(raw, "kunden.csv")
    assert report.encoding == "cp1252" and report.separator == ";" and report.target is None
    assert list(df.columns) == ["ID", "Alter", "Einkommen", "Geschlecht", "Datum", "Notiz", "Stufe", "Größe",
                                "Zufrieden"]  # fmt: skip
    assert "Quotes removed from header name(s) 'Alter'." in report.notes
    assert "Read as numbers with a decimal comma: Einkommen, Größe." in report.notes
    assert pd.api.types.is_float_dtype(df["Einkommen"])
    np.testing.assert_allclose(df["Einkommen"].to_numpy(), truth["income"], rtol=0, atol=1e-9)
    np.testing.assert_allclose(df["Größe"].to_numpy(), truth["height"], rtol=0, atol=1e-12)
    assert df["Alter"].isna().sum() == np.isnan(truth["age"]).sum()
    assert df["Notiz"].str.contains("ü").any()  # latin-1 text decoded, not mojibake
    schema = core.infer_schema(df)
    reasons = schema.excluded_reasons
    assert list(reasons) == ["ID", "Datum", "Notiz"]
    assert reasons["ID"].startswith("identifier-like: 800 distinct values in 800 rows")
    assert reasons["Datum"].startswith("date (dd.mm.yyyy)")
    assert reasons["Notiz"].startswith("free text")
    assert schema.kind("Einkommen") == "numeric" and schema.kind("Größe") == "numeric"
    assert schema.kind("Stufe") == "nominal" and schema.kind("Zufrieden") == "ordinal"
    enc = core.discretize(df, schema)
    assert enc.domain_sizes["Einkommen"] <= 8  # binned, not 549 nominal levels
    assert enc.dropped_rows == int(np.isnan(truth["age"]).sum())  # 'Alter' is the only numeric gap
    assert list(enc.levels["Geschlecht"]) == ["d", "m", "w", "missing"]
    assert "ID" not in enc.codes.columns and "Notiz" not in enc.codes.columns


def test_thousands_and_decimal_conventions() -> None:
    # English: quoted "1,234,567.5"; European: 1.234.567,5; spaced: 1 234 567,5; the column decides
    raw = b'a,b,c\n"1,234,567.5",0.125,1\n"2,000",1.5,2\n"12",2.25,3\n'
    df, _ = _load(raw)
    assert df["a"].tolist() == [1234567.5, 2000.0, 12.0] and df["b"].tolist() == [0.125, 1.5, 2.25]
    raw = "a;b;c\n1.234.567,5;1 234,5;x\n2.000;2\u00a0000,25;y\n12;3;z\n".encode()
    df, _ = _load(raw)
    assert df["a"].tolist() == [1234567.5, 2000.0, 12.0] and df["b"].tolist() == [1234.5, 2000.25, 3.0]
    # ambiguous "1.500" follows the file: European when another column has decimal commas ...
    df, _ = _load(b"a;b\n1.500;0,5\n2.250;1,5\n")
    assert df["a"].tolist() == [1500, 2250]
    # ... English in a comma file
    df, _ = _load(b"a,b\n1.500,x\n2.250,y\n")
    assert df["a"].tolist() == [1.5, 2.25]


def test_stray_tokens_in_a_number_column_become_missing_with_a_note() -> None:
    rows = "".join(f"{i * 1.5},{'k.A.' if i == 7 else i % 3}\n" for i in range(40))
    df, report = _load(("x,y\n" + rows).replace("10.5,", "unbekannt,").encode())
    assert pd.api.types.is_float_dtype(df["x"]) and df["x"].isna().sum() == 1
    assert "x: 1 value(s) are not numbers ('unbekannt') and count as missing." in report.notes


def test_codes_with_leading_zeros_are_kept_as_text_with_a_note() -> None:
    """Browser audit: zip codes 00100, 00200 were read as the numbers 100, 200 (an ordinal attribute), so
    the release published other codes. Fixed-width digit codes with a leading zero stay text; numbers with
    a stray zero-padded value (05 among 5, 10) and decimals (0.5) stay numbers."""
    zips, months = ["00100", "00200", "01200", "10300"] * 10, list(range(1, 13)) * 4
    counts = ["5", "05", "10", "7"]
    rows = "".join(f"{zips[i]},{months[i]:02d},{counts[i % 4]},{0.5 * i}\n" for i in range(40))
    df, report = _load(("zip,month,n,x\n" + rows).encode())
    assert df["zip"].tolist()[:4] == ["00100", "00200", "01200", "10300"]
    assert df["month"].iloc[0] == "01" and sorted(df["month"].unique())[-1] == "12"
    assert pd.api.types.is_integer_dtype(df["n"]) and pd.api.types.is_float_dtype(df["x"])
    assert "Kept as text, codes with leading zeros (00100 is not 100): zip, month." in report.notes
    kinds = dict(core.infer_schema(df).kinds)
    assert kinds["zip"] == "nominal" and kinds["n"] == "ordinal"
    encoded = core.discretize(df, core.infer_schema(df))
    assert set(encoded.levels["zip"]) == {"00100", "00200", "01200", "10300"}  # the codes are the levels


def test_numbers_past_float64s_range_become_missing_with_a_note() -> None:
    """'1e309' reads as inf: it was kept, and binning the column then failed with "centres contains NaN or
    infinite values", which blocked the whole table (fuzzing, stop 54)."""
    rows = "".join(f"{i % 7 + 0.5},{i % 3}\n" for i in range(40))
    df, report = _load(("x,y\n" + rows + "1e309,1\n-2e400,2\n").encode())
    assert df["x"].isna().sum() == 2 and np.isfinite(df["x"].dropna()).all()
    assert "x: 2 value(s) are not numbers ('1e309', '-2e400') and count as missing." in report.notes
    encoded = core.discretize(df, core.infer_schema(df))
    assert np.isfinite(encoded.components["x"]).all() and (encoded.codes["x"] >= 0).all()


@given(st.lists(st.floats(-1e9, 1e9, allow_nan=False).map(lambda v: round(v, 2)), min_size=2, max_size=30))
def test_european_numbers_round_trip(values: list[float]) -> None:
    def eu(v: float) -> str:
        s = f"{abs(v):,.2f}".replace(",", "_").replace(".", ",").replace("_", ".")
        return ("-" if v < 0 else "") + s

    raw = "n;k\n" + "".join(f"{eu(v)};{i % 2}\n" for i, v in enumerate(values))
    df, _ = _load(raw.encode("latin-1"))
    np.testing.assert_allclose(df["n"].to_numpy(float), values, rtol=0, atol=1e-6)


# ------------------------------------------------------------------------------------------ surveys, census
def test_survey_export_utf8_bom_tabs_likert_kept_comments_and_respondent_excluded() -> None:
    rng = np.random.default_rng(3)
    likert = ["Strongly disagree", "Disagree", "Neither agree nor disagree", "Agree", "Strongly agree"]
    lines = ["RespondentId\tStarted\tQ1 satisfaction\tQ2 age group\tQ3 comments\tWeight"]
    for i in range(500):
        how = rng.choice(["very", "not", "quite"])
        comment = "" if rng.random() < 0.7 else f"the staff was {how} helpful {i}"
        lines.append(
            f"{1000 + i}\t2024-03-{int(rng.integers(1, 29)):02d} {int(rng.integers(0, 24)):02d}:15:00\t"
            f"{rng.choice(likert)}\t{rng.choice(['18-29', '30-44', '45-64', '65+'])}\t{comment}\t"
            f"{rng.uniform(0.5, 2):.3f}"
        )
    raw = b"\xef\xbb\xbf" + "\n".join(lines).encode()
    df, report = _load(raw, "survey.tsv")
    assert report.encoding == "utf-8-sig" and report.separator == "\t" and df.columns[0] == "RespondentId"
    schema = core.infer_schema(df)
    reasons = schema.excluded_reasons
    assert reasons["RespondentId"].startswith("identifier-like: a different whole number in each of the 500")
    assert reasons["Started"].startswith("date and time (yyyy-mm-dd hh:mm:ss)")
    assert reasons["Q3 comments"].startswith("free text")
    assert schema.kind("Q1 satisfaction") == "nominal" and schema.kind("Q2 age group") == "nominal"
    assert schema.kind("Weight") == "numeric"
    enc = core.discretize(df, core.infer_schema(df, include={"Started": "month"}))
    assert list(enc.levels["Started"]) == ["2024-03"]


def test_census_extract_quoted_headers_and_values_thousands_gzip() -> None:
    rng = np.random.default_rng(5)
    regions = [f"Region {k}" for k in range(12)]
    lines = ["'county','region','popul','median_income','year'"]
    popul = rng.integers(1_000, 3_000_000, 240)
    for i in range(240):
        income = int(rng.integers(20_000, 90_000))
        lines.append(f"'C{i:03d}','{regions[i % 12]}',\"{popul[i]:,}\",\"{income:,}\",2020")
    raw = gzip.compress(("\n".join(lines) + "\n").encode())
    df, report = _load(raw, "census.csv.gz")
    assert list(df.columns) == ["county", "region", "popul", "median_income", "year"]
    assert df["popul"].tolist() == popul.tolist() and df["region"].iloc[0] == "Region 0"
    unquoted = "Quotes removed from header name(s) 'county', 'region', 'popul'"
    assert any(n.startswith(unquoted) for n in report.notes)
    schema = core.infer_schema(df)
    assert schema.excluded_reasons["county"].startswith("identifier-like")
    assert schema.excluded_reasons["year"].startswith("constant")
    assert schema.kind("popul") == "numeric" and schema.kind("region") == "nominal"


# ------------------------------------------------------------------------------------------ targets
def test_targets_documented_for_samples_never_guessed_for_files() -> None:
    assert {n: core.load_dataset_report(n)[1].target for n in core.list_datasets()} == {
        "heart": "target",
        "adult": "income",
        "wine": "quality",
    }
    _, report = _load(b"a,b,target\n1,2,0\n3,4,1\n")
    assert report.target is None  # even a column named "target" is not picked for the user
    assert core.infer_schema(pd.DataFrame({"a": [1, 2], "b": [3, 4]})).target is None


# ------------------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    ("raw", "match"),
    [
        (b"", "is empty"),
        (gzip.compress(b"", mtime=0), "is empty"),
        (b"PK\x03\x04\x14\x00\x06\x00", r"Excel workbook \(.xlsx\); save the sheet as CSV"),
        (b"%PDF-1.7\n", "a PDF document"),
        (bytes(range(256)) * 4, "not a text file"),
        (gzip.compress(bytes(range(256)) * 4, mtime=0), "not a text file"),
        (b"a;b;c\n1;2;3\n", "1 data row"),
        (b"only\n1\n2\n", "1 column"),
        (b"'a',a,b\n1,2,3\n4,5,6\n", r"duplicate column name\(s\) \['a'\]"),
        (b"a, ,c\n1,2,3\n4,5,6\n", r"column 2 \(counting from 1\) has a blank name; give every column"),
        (b"a,,,d\n1,x,y,2\n3,z,w,4\n", r"columns 2, 3 \(counting from 1\) have a blank name"),
        (b"a,b\n1,2\n3,4,5\n", "every row needs as many comma-separated fields as the header"),
    ],
)
def test_bad_files_give_actionable_errors(raw: bytes, match: str) -> None:
    with pytest.raises(DataError, match=match):
        _load(raw)


def test_trailing_separator_empty_rows_and_empty_columns() -> None:
    raw = b"a;b;c;\n1;x;;\n;;;\n2;y;;\n3;x;;\n"
    df, report = _load(raw)
    assert list(df.columns) == ["a", "b", "c"] and len(df) == 3
    assert "Dropped 1 empty column(s) without a header (a trailing separator?)." in report.notes
    assert "Dropped 1 empty row(s)." in report.notes
    assert core.infer_schema(df).excluded_reasons == {"c": "empty: the column has no values"}


def test_utf16_and_windows_1252() -> None:
    df, report = _load("a\tb\nÄpfel\t1\nBirnen\t2\n".encode("utf-16"))
    assert report.encoding == "utf-16" and df["a"].tolist() == ["Äpfel", "Birnen"]
    df, report = _load("Preis;Währung\n3,50;€\n4,20;€\n".encode("cp1252"))
    assert report.encoding == "cp1252" and df["Währung"].tolist() == ["€", "€"]
    assert df["Preis"].tolist() == [3.5, 4.2]


@pytest.mark.parametrize("breaker", ["\x0b", "\u2028", "\x85", "\x1e"])
def test_in_cell_line_breaks_do_not_split_a_sampled_tables_rows(breaker: str) -> None:
    """Audit: a 100,000-row FileMaker export (\\x0b line breaks inside cells) came back as 100,100 rows,
    56 of them shifted one column left, and its note column read as numbers: str.splitlines split the
    sampled rows at characters that do not end a CSV row."""
    n = 100_000
    notes = [f"line one{breaker}line two" if i % 1000 == 0 else "plain" for i in range(n)]
    raw = "id,score,note\n" + "".join(f"{i},{i % 7},{notes[i]}\n" for i in range(n))
    df, report = _load(raw.encode())
    assert report.sampled and report.original_rows == n and len(df) == core.INTERACTIVE_ROW_LIMIT
    assert set(df["note"]) == {"plain", f"line one{breaker}line two"}  # text, every value intact
    assert (df["score"] == df["id"] % 7).all()  # no value moved to another column


def test_a_million_rows_are_sampled_fast() -> None:
    n = 1_000_000
    rng = np.random.default_rng(0)
    ages, incomes = rng.integers(18, 90, n), rng.integers(0, 200_000, n)
    body = "\n".join(map("{},{},{}".format, range(n), ages, incomes))
    raw = ("id,age,income\n" + body + "\n").encode()
    start = time.perf_counter()
    df, report = _load(raw, "big.csv", seed=4)
    seconds = time.perf_counter() - start
    assert report.sampled and report.original_rows == n and len(df) == core.INTERACTIVE_ROW_LIMIT
    assert report.notes[-1].startswith("big.csv has 1,000,000 rows; using a uniform random sample of 60,000")
    ids = df["id"].to_numpy()
    assert np.all(np.diff(ids) > 0)  # original order kept
    np.testing.assert_array_equal(df["age"].to_numpy(), ages[ids])  # rows intact
    assert seconds < 10.0, seconds  # ~1-2 s on an idle 2-core machine
    again, _ = _load(raw, "big.csv", seed=4)
    pd.testing.assert_frame_equal(df, again)


def test_percent_and_currency_signs_are_read_as_numbers() -> None:
    raw = "Anteil;Preis;Gruppe\n12,5 %;€ 1.234,50;a\n7 %;€ 12,00;b\n;€ 3;c\n100 %;€ 0,99;a\n".encode("cp1252")
    df, report = _load(raw)
    assert df["Anteil"].tolist()[:2] == [12.5, 7.0] and np.isnan(df["Anteil"].iloc[2])
    assert df["Preis"].tolist() == [1234.5, 12.0, 3.0, 0.99]
    assert "Anteil: the unit sign '%' was removed to read the values as numbers." in report.notes
    assert "Preis: the unit sign '€' was removed to read the values as numbers." in report.notes
    df, _ = _load(b'price,n\n"$1,234.50",1\n$7,2\n$0.5,3\n')
    assert df["price"].tolist() == [1234.5, 7.0, 0.5]


def test_a_file_without_header_row_is_refused_with_the_fix() -> None:
    with pytest.raises(DataError, match=r"the first row \(5.1, 3.5, 1.4, 0.2, \.\.\.\) looks like data"):
        _load(b"5.1,3.5,1.4,0.2,1\n4.9,3.0,1.4,0.2,1\n4.7,3.2,1.3,0.2,2\n")


def test_a_mostly_missing_numeric_column_is_excluded_not_dropping_most_rows() -> None:
    rng = np.random.default_rng(2)
    sparse = ["" if i % 5 else f"{rng.normal():.3f}" for i in range(100)]  # 80 of 100 missing
    rows = "".join(f"{rng.integers(0, 4)},{rng.normal():.3f},{v}\n" for v in sparse)
    df, _ = _load(("g,x,lab_value\n" + rows).encode())
    schema = core.infer_schema(df)
    assert schema.excluded_reasons == {
        "lab_value": "mostly missing: 80 of 100 values are missing, and a row without a number is left out; "
        "include it only if losing those rows is fine"
    }
    assert len(core.discretize(df, schema).codes) == 100
    enc = core.discretize(df, core.infer_schema(df, include=["lab_value"]))
    assert enc.dropped_rows == 80 and enc.warnings[0].startswith("80 of 100 rows are left out")


_CELLS = ["", "NA", "1", "2", "3.5", "1.234,5", "1,5", "-", ".", "x", "y", "hello world foo", "2020-01-02",
          "01.02.2020", "12:30", "'q'", "€ 3", "50 %", "ID1", "TRUE", "é", "1e5", "  ", '"a,b"',
          "0.125"]  # fmt: skip
_NAMES = ["a", "b", "'c'", "Größe", "id", "x y", "e"]


@given(
    st.lists(st.sampled_from(_NAMES), min_size=1, max_size=5, unique=True),
    st.lists(st.lists(st.sampled_from(_CELLS), min_size=5, max_size=5), min_size=0, max_size=40),
    st.sampled_from([",", ";", "\t"]),
    st.sampled_from(["utf-8", "cp1252"]),
)
def test_any_messy_table_loads_and_encodes_or_says_why(
    header: list[str], rows: list[list[str]], sep: str, encoding: str
) -> None:
    text = "\n".join(sep.join(r[: len(header)]) for r in [header, *rows]) + "\n"
    try:
        df = core.load_dataset(_file(text.encode(encoding)))
    except DataError:
        return
    assert df.shape[1] == len(header) and 2 <= len(df) <= len(rows)
    try:
        schema = core.infer_schema(df)
        enc = core.discretize(df, schema)
    except DataError as exc:
        assert "every column is excluded" in str(exc) or "fewer than 2 rows remain" in str(exc)
        return
    numeric = [c for c, k in schema.kinds if k == "numeric"]
    assert len(enc.codes) == len(df) - int(df[numeric].isna().any(axis=1).sum()) == len(df) - enc.dropped_rows
    assert set(enc.columns) == set(schema.columns) and not set(enc.columns) & set(schema.excluded_reasons)
    for col in enc.columns:  # every code is a level, every level is used
        assert sorted(enc.codes[col].unique()) == list(range(enc.domain_sizes[col]))


def test_title_lines_comments_and_excel_sep_hint_above_the_header() -> None:
    raw = (
        b"Table 1: Population by county, 2020\n\nSource: census bureau\n"
        b'county,region,popul,income\nA,N,"1,234",5\nB,S,"5,678",6\nC,S,"9,999",7\n'
    )
    df, report = _load(raw)
    assert list(df.columns) == ["county", "region", "popul", "income"]
    assert df["popul"].tolist() == [1234, 5678, 9999]
    skipped = "Skipped 3 line(s) above the header (starting 'Table 1: Population by county, 2020')."
    assert skipped in report.notes
    df, report = _load(b"# exported 2024-05-01\n# by: survey tool\na\tb\n1\t2\n3\t4\n")
    assert df.to_dict("list") == {"a": [1, 3], "b": [2, 4]} and report.separator == "\t"
    df, report = _load(b"sep=;\r\nPreis;Menge\r\n1,5;2\r\n2,25;3\r\n")  # Excel's separator hint
    assert report.separator == ";" and df["Preis"].tolist() == [1.5, 2.25]
    # a header shorter than its rows is not mistaken for a title: the error says what to fix
    with pytest.raises(DataError, match=r"saw 3\); every row needs as many comma-separated"):
        _load(b"a,b\n1,2,3\n4,5,6\n")


def test_embedded_samples_lose_no_column_and_no_row() -> None:
    expected_rows = {"heart": 303, "adult": 48_842, "wine": 6_497}
    for name, rows in expected_rows.items():
        df, report = core.load_dataset_report(name)
        schema = core.infer_schema(df, target=report.target)
        assert schema.excluded == () and schema.columns == tuple(df.columns), name
        enc = core.discretize(df, schema)
        assert len(enc.codes) == rows and enc.dropped_rows == 0, name
    heart = core.discretize(core.load_dataset("heart"), core.infer_schema(core.load_dataset("heart")))
    assert heart.missing == (("ca", 4), ("thal", 2)) and np.isnan(heart.levels["ca"][-1])


def test_mostly_utf8_file_with_a_broken_byte_is_not_read_as_mojibake() -> None:
    raw = ("name,x\n" + "".join(f"Müller{i},{i}\n" for i in range(30))).encode() + b"Bad\xe9name,99\n"
    df, report = _load(raw, "mix.csv")
    assert df["name"].iloc[0] == "Müller0" and df["name"].iloc[-1] == "Bad\ufffdname"
    assert report.notes == ("mix.csv is UTF-8 except for 1 invalid byte(s), shown as \ufffd.",)
    df, report = _load("name,x\nMüller,1\nGröße,2\n".encode("latin-1"), "l1.csv")
    assert df["name"].tolist() == ["Müller", "Größe"]
    assert report.notes == ("l1.csv is not UTF-8; read it as Windows-1252 (Latin-1).",)


def test_released_part_of_a_table_never_has_an_excluded_column() -> None:
    raw, _ = european(rows=120)
    df, _ = _load(raw)
    schema = core.infer_schema(df, target="Stufe", exclude=["Geschlecht"])
    released = schema.released(df)
    assert list(released.columns) == ["Alter", "Einkommen", "Stufe", "Größe", "Zufrieden"]
    assert set(schema.excluded_reasons) == {"ID", "Datum", "Notiz", "Geschlecht"}
    assert schema.with_kinds({"Zufrieden": "nominal"}).excluded == schema.excluded  # edits keep exclusions
    assert schema.with_target(None).excluded == schema.excluded
    enc = core.discretize(df, schema)
    assert list(enc.decode(enc.codes).columns) == list(released.columns)
    with pytest.raises(DataError, match="cannot be both included and excluded"):
        core.Schema(kinds=(("a", "nominal"),), excluded=(("a", "free text"),))


def test_a_constant_column_names_its_value_in_plain_words_not_as_numpy_code() -> None:
    """Audit of uploads: every numeric column constant read "(np.int64(5))" in the exclusion reason."""
    df, _ = _load(b"a,b,group\n5,1.5,x\n5,1.5,y\n5,1.5,x\n")
    reasons = core.infer_schema(df).excluded_reasons
    assert reasons["a"] == "constant: every row has the same value (5), so it carries no information"
    assert reasons["b"].startswith("constant: every row has the same value (1.5),")


def test_spelled_out_missing_values_are_named_in_a_note() -> None:
    """Audit of uploads: an education column with the level 'none' (8,295 of 50,000 rows) became missing
    without a word; the Data page then showed 8,295 missing values the file did not have."""
    raw = b"education,x,y\nnone,1,a\nphd,?,b\nnone,3,\n,,\nmaster,NA,c\n"
    df, report = _load(raw)
    assert int(df["education"].isna().sum()) == 2 and int(df["x"].isna().sum()) == 2
    assert report.notes == (
        "Dropped 1 empty row(s).",
        "Values read as missing: 'none' (2 in education), '?' (1 in x), 'NA' (1 in x). If one of them is a "
        "real value, rename it in the file.",
    )
    _, plain = _load(b"a,b\n1,x\n,y\n3,z\n")  # blanks are missing without a note
    assert plain.notes == ()


def test_a_saved_row_index_without_name_is_dropped_with_a_note() -> None:
    """Audit of uploads: pandas' ``to_csv()`` (index on by default) writes a first column without a name
    that numbers the rows; such a file was refused ("column(s) [1] have a blank name")."""
    table = pd.DataFrame({"age": [30, 41, 52, 63], "sex": ["f", "m", "f", "m"]})
    df, report = _load(table.to_csv().encode())
    assert list(df.columns) == ["age", "sex"] and df["age"].tolist() == [30, 41, 52, 63]
    assert report.notes == (
        "Dropped the first column: it has no name and numbers the rows (a saved row index).",
    )
    with pytest.raises(DataError, match=r"column 1 .* has a blank name"):  # no row index: still refused
        _load(b",age,sex\n7,30,f\n3,41,m\n")


def test_a_table_too_wide_to_hold_is_refused_before_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    # security audit: 2,000 rows x 5,000 columns (20 MB) took 795 MB and 79 s; 15,000 columns 2.5 GB
    import mdp_core.data._parse as parse

    wide = (
        ",".join(f"c{j}" for j in range(1_001)) + "\n" + ",".join("1" * 1_001) + "\n" + ",".join("2" * 1_001)
    )
    with pytest.raises(
        DataError, match=r"wide\.csv has 1,001 columns and 2 rows to read: more than the 1,000"
    ):
        core.load_dataset(_file(wide.encode(), "wide.csv"))
    monkeypatch.setattr(parse, "MAX_CELLS", 3 * 59)
    tall = "a,b,c\n" + "".join(f"{i},{i % 3},x\n" for i in range(60))
    with pytest.raises(DataError, match=r"3 columns and 60 rows to read: .* 177 cells"):
        core.load_dataset(_file(tall.encode(), "tall.csv"))
    assert core.load_dataset(_file(tall[: tall.index("58,")].encode(), "short.csv")).shape == (58, 3)
