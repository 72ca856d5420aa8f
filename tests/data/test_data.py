"""mdp_core.data: loading (every bad-input case), schema inference, discretisation."""

from __future__ import annotations

import gzip
import io

import numpy as np
import pandas as pd
import pytest

import mdp_core as core
from mdp_core import DataError


def _file(raw: bytes, name: str = "upload.csv") -> io.BytesIO:
    buf = io.BytesIO(raw)
    buf.name = name
    return buf


def test_loads_csv_tsv_semicolon_and_gzip() -> None:
    expected = pd.DataFrame({"a": [1, 2, 3], "b": ["x", "y", "z"]})
    for raw in (b"a,b\n1,x\n2,y\n3,z\n", b"a\tb\n1\tx\n2\ty\n3\tz\n", b"a;b\n1;x\n2;y\n3;z\n"):
        df = core.load_dataset(_file(raw))
        pd.testing.assert_frame_equal(df, expected, check_dtype=False)
    gz = core.load_dataset(_file(gzip.compress(b"a,b\n1,x\n2,y\n3,z\n"), "d.csv.gz"))
    pd.testing.assert_frame_equal(gz, expected, check_dtype=False)


@pytest.mark.parametrize(
    ("raw", "match"),
    [
        (b"", "empty"),
        (b"   \n\n", "empty"),
        (b"\x00\x01\x02binary\x00junk", "not a text file"),
        (b"a\n1\n2\n3\n", "1 column"),
        (b"a,b\n", "0 data row"),
        (b"a,b\n1,2\n", "1 data row"),
        (b"a,a\n1,2\n3,4\n", "duplicate column"),
        (b"a,,c\n1,2,3\n4,5,6\n", "blank name"),
        (b"\x1f\x8b\x08junk", "cannot be decompressed"),
    ],
)
def test_bad_input_raises_actionable_error(raw: bytes, match: str) -> None:
    with pytest.raises(DataError, match=match):
        core.load_dataset(_file(raw))


def test_unknown_sample_and_wrong_type() -> None:
    with pytest.raises(DataError, match="no such file or sample"):
        core.load_dataset("no-such-dataset")
    with pytest.raises(TypeError, match="source must be"):
        core.load_dataset(42)  # type: ignore[arg-type]


def test_too_large_file_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("mdp_core.data.io.MAX_FILE_BYTES", 100)
    with pytest.raises(DataError, match="larger than 200 MB"):
        core.load_dataset(_file(b"a,b\n" + b"1,2\n" * 100))


def test_large_table_is_uniformly_sampled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("mdp_core.data.io.INTERACTIVE_ROW_LIMIT", 50)
    raw = b"a,b\n" + b"".join(f"{i},{i % 7}\n".encode() for i in range(500))
    df, report = core.load_dataset_report(_file(raw), seed=3)
    assert len(df) == 50 and report.sampled and report.original_rows == 500
    assert "uniform random sample of 50" in report.notes[0]
    assert df["a"].is_monotonic_increasing  # original order kept
    again, _ = core.load_dataset_report(_file(raw), seed=3)
    pd.testing.assert_frame_equal(df, again)


def test_infer_schema_kinds(small_table: pd.DataFrame) -> None:
    schema = core.infer_schema(small_table, target="flag")
    assert dict(schema.kinds) == {
        "a": "ordinal",
        "a2": "ordinal",
        "x": "numeric",
        "colour": "nominal",
        "flag": "binary",
    }
    assert schema.target == "flag"
    assert schema.with_kinds({"a": "nominal"}).kind("a") == "nominal"
    with pytest.raises(DataError, match="target 'nope'"):
        core.infer_schema(small_table, target="nope")
    with pytest.raises(DataError, match="unknown columns"):
        schema.with_kinds({"zzz": "nominal"})
    with pytest.raises(DataError, match="kind of 'a'"):
        schema.with_kinds({"a": "fuzzy"})


def test_discretize_codes_levels_and_distances(small_table: pd.DataFrame) -> None:
    enc = core.discretize(small_table, core.infer_schema(small_table), bins=4)
    assert list(enc.codes.columns) == list(small_table.columns)
    for col in enc.columns:
        codes = enc.codes[col].to_numpy()
        m = enc.domain_sizes[col]
        assert codes.min() == 0 and codes.max() == m - 1 and len(np.unique(codes)) == m  # every level used
        d = enc.components[col]
        assert d.shape == (m, m) and np.allclose(d, d.T) and np.all(np.diag(d) == 0) and d.max() <= 1.0
    assert enc.domain_sizes["x"] <= 4
    np.testing.assert_allclose(enc.components["colour"], 1 - np.eye(3))
    np.testing.assert_allclose(enc.components["a"][0], [0, 0.25, 0.5, 0.75, 1.0])
    # numeric: bin centres, distance = gap / range of centres
    centres = enc.levels["x"]
    np.testing.assert_allclose(enc.components["x"], np.abs(centres[:, None] - centres) / np.ptp(centres))
    # decode maps codes back to values near the original
    decoded = enc.decode(enc.codes)
    assert (decoded["colour"] == small_table["colour"]).all()
    assert (
        np.abs(decoded["x"].to_numpy(float) - small_table["x"]).max() <= np.ptp(small_table["x"]) / 8 + 1e-9
    )


def test_discretize_missing_values_levels_and_dropped_rows() -> None:
    df = pd.DataFrame(
        {
            "x": [1.5, 2.25, 3.0, 4.0, 5.5, None],
            "o": [1, 2, 3, None, 2, 1],
            "s": ["a", None, "b", "c", "a", "b"],
            "b": ["x", "y", "x", "y", None, "x"],
        }
    )
    schema = core.infer_schema(df)
    assert dict(schema.kinds) == {"x": "numeric", "o": "ordinal", "s": "nominal", "b": "binary"}
    enc = core.discretize(df, schema)
    # numeric gap: the row goes (and is counted); other gaps: a level of their own, last
    assert enc.dropped_rows == 1 and len(enc.codes) == 5 and enc.input_rows == 6
    assert list(enc.levels["s"]) == ["a", "b", "c", "missing"] and enc.codes["s"].tolist() == [0, 3, 1, 2, 0]
    assert enc.levels["o"][:3].tolist() == [1.0, 2.0, 3.0] and np.isnan(enc.levels["o"][3])  # stays numeric
    assert enc.codes["o"].tolist() == [0, 1, 2, 3, 1]
    np.testing.assert_allclose(enc.components["o"][3], [1.0, 2 / 3, 1 / 3, 0.0])  # last rank
    assert list(enc.levels["b"]) == ["x", "y", "missing"] and enc.components["b"].shape == (3, 3)
    assert enc.missing == (("x", 1), ("o", 1), ("s", 1), ("b", 1))
    assert enc.warnings == (
        "1 of 6 rows are left out because a numeric attribute is missing: 'x' (1 missing). To keep them, "
        "exclude these columns or set their kind to ordinal or nominal (a 'missing' level).",
        "Missing values kept as a 'missing' level: 'o' (1), 's' (1), 'b' (1).",
        "In ordinal columns ('o') 'missing' is ranked one step above the highest level: with m other levels, "
        "neighbouring levels are then 1/m apart instead of 1/(m - 1).",
    )
    with pytest.raises(DataError, match=r"fewer than 2 rows remain .*\('x' \(5 missing\)\); exclude"):
        core.discretize(df.assign(x=[None] * 5 + [1.0]), schema)


def test_discretize_fingerprint_changes_with_content() -> None:
    df = pd.DataFrame({"a": [1.0, 2.0, None, 4.0], "b": ["x", "y", "x", "y"]})
    enc = core.discretize(df, core.infer_schema(df))
    other = core.discretize(df.assign(b=["x", "x", "x", "y"]), core.infer_schema(df))
    assert enc.fingerprint != other.fingerprint
    assert enc.fingerprint == core.discretize(df, core.infer_schema(df)).fingerprint


def test_discretize_bad_arguments(small_table: pd.DataFrame) -> None:
    schema = core.infer_schema(small_table)
    with pytest.raises(DataError, match="bins for 'x'"):
        core.discretize(small_table, schema, bins={"x": 1})
    with pytest.raises(TypeError, match="schema must be a Schema"):
        core.discretize(small_table, {"a": "ordinal"})  # type: ignore[arg-type]
    with pytest.raises(DataError, match="not in the table"):
        core.discretize(small_table[["a"]], schema)
    with pytest.raises(DataError, match="not numeric"):
        core.discretize(small_table, schema.with_kinds({"colour": "numeric"}))


def test_list_datasets() -> None:
    assert core.list_datasets() == ["heart", "adult", "wine"]


def test_encode_table_is_the_data_page_s_recipe() -> None:
    """encode_table (scenarios and sweep specs) = infer_schema with the choices, kinds, bins (the app)."""
    n = 60
    rng = np.random.default_rng(2)
    df = pd.DataFrame(
        {
            "visit_id": [f"V{i:04d}" for i in range(n)],
            "visit_date": pd.date_range("2022-01-01", periods=n, freq="9D").strftime("%Y-%m-%d"),
            "age": rng.integers(18, 90, n),
            "city": rng.choice(["Lyon", "Paris", "Nice"], n),
            "visits": rng.integers(0, 5, n),
            "target": rng.integers(0, 2, n),
        }
    )
    got = core.encode_table(
        df,
        target="target",
        include={"visit_date": "year"},
        exclude=["city", "visit_id"],  # visit_id: the guard rails exclude it anyway
        kinds={"visits": "nominal", "city": "ordinal"},  # city's override is moot: it is excluded
        bins={"age": 3},
        default_bins=5,
    )
    schema = core.infer_schema(df, target="target", include={"visit_date": "year"}, exclude=["city"])
    want = core.discretize(df, schema.with_kinds({"visits": "nominal"}), bins={"age": 3, "visits": 5})
    assert got.fingerprint == want.fingerprint and got.schema == want.schema
    assert list(got.levels["visit_date"]) == ["2022", "2023"] and len(got.levels["age"]) == 3
    reasons = dict(got.schema.excluded)
    assert reasons["city"] == "excluded by you" and reasons["visit_id"].startswith("identifier-like")
    with pytest.raises(core.DataError, match=r"column\(s\) \['age'\] are both included and excluded"):
        core.encode_table(df, include={"age": None}, exclude=["age"])
