"""Declared public domains: ranges of numeric columns and categories of the others, levels that depend on no
record (:func:`mdp_core.discretize`, :mod:`mdp_core.data.public`)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mdp_core as core
from mdp_core.errors import DataError

SCHEMA = core.Schema(kinds=(("age", "numeric"), ("city", "nominal")))


def table() -> pd.DataFrame:
    return pd.DataFrame(
        {"age": [23.0, 31.0, 47.0, 52.0, 130.0, -4.0], "city": ["a", "b", "a", "c", "a", "b"]}
    )


def test_the_bins_cut_the_declared_range_and_every_bin_is_a_level() -> None:
    enc = core.discretize(table(), SCHEMA, bins=4, ranges={"age": (0, 120)})
    np.testing.assert_array_equal(enc.levels["age"], [15.0, 45.0, 75.0, 105.0])  # empty 75 kept
    assert list(enc.decode(enc.codes)["age"]) == [15.0, 45.0, 45.0, 45.0, 105.0, 15.0]
    np.testing.assert_allclose(enc.components["age"][0], [0.0, 1 / 3, 2 / 3, 1.0])
    assert enc.ranges == {"age": (0.0, 120.0)} and enc.outside_public == (("age", 2),)
    assert (
        "Values outside a declared public domain: 'age' (2 beyond 0..120, set to the nearer end)."
        in enc.warnings
    )
    without = core.discretize(table(), SCHEMA, bins=4)
    assert without.ranges == {} and without.levels["age"][0] == pytest.approx(-4 + 134 / 8)


@settings(max_examples=50, deadline=None)
@given(
    ages=st.lists(st.floats(-50, 200, allow_nan=False), min_size=2, max_size=20),
    victim=st.floats(-1e9, 1e9, allow_nan=False),
)
def test_no_record_moves_the_levels_of_a_column_with_a_public_range(ages: list[float], victim: float) -> None:
    df = pd.DataFrame({"age": ages, "city": ["a"] * len(ages)})
    enc = core.discretize(df, SCHEMA, bins=5, ranges={"age": (0, 100)})
    changed = df.copy()
    changed.loc[0, "age"] = victim
    again = core.discretize(changed, SCHEMA, bins=5, ranges={"age": (0, 100)})
    np.testing.assert_array_equal(again.levels["age"], enc.levels["age"])
    np.testing.assert_array_equal(again.codes["age"].to_numpy()[1:], enc.codes["age"].to_numpy()[1:])
    edges = np.linspace(0, 100, 6)  # independent: the bin of each value, clipped into the range
    expected = np.clip(np.searchsorted(edges, np.clip(ages, 0, 100), side="right") - 1, 0, 4)
    np.testing.assert_array_equal(enc.codes["age"].to_numpy(), expected)


@pytest.mark.parametrize(
    ("ranges", "message"),
    [
        ({"city": (0, 1)}, "a public range is for a numeric attribute; 'city' is not one"),
        ({"age": (5, 5)}, r"two finite numbers lo < hi, got \(5, 5\)"),
        ({"age": (0, float("inf"))}, "two finite numbers lo < hi"),
        ({"height": (0, 1)}, "'height' is not one"),
        ({"age": (-1e308, 1e308)}, "two finite numbers lo < hi"),  # its width overflows
    ],
)
def test_a_bad_public_range_is_refused(ranges: dict, message: str) -> None:
    with pytest.raises(DataError, match=message):
        core.discretize(table(), SCHEMA, ranges=ranges)


def test_the_recipe_ignores_ranges_of_columns_that_are_not_numeric() -> None:
    enc = core.encode_table(table(), kinds={"age": "ordinal"}, ranges={"age": (0, 120)})
    assert enc.ranges == {} and len(enc.levels["age"]) == 6
    enc = core.encode_table(table(), kinds={"age": "numeric"}, ranges=[("age", 0.0, 120.0)], bins={"age": 4})
    assert enc.ranges == {"age": (0.0, 120.0)} and len(enc.levels["age"]) == 4


def test_a_held_out_row_is_binned_on_the_public_range() -> None:
    split = core.encode_held_out(
        table(), np.arange(3), lambda part: core.discretize(part, SCHEMA, bins=4, ranges={"age": (0, 120)})
    )
    held = split.encoded.decode(split.encoded.codes.iloc[split.held_out])["age"]
    assert list(held) == [45.0, 105.0, 15.0]  # 52, 130 (beyond: the top bin), -4 (the bottom one)
    assert "age" not in dict(split.outside)  # counted with the declared domain's, not as "nearest"
    assert split.encoded.outside_public == (("age", 2),)


def test_public_categories_are_the_levels_in_their_order_with_other_last() -> None:
    df = pd.DataFrame(
        {"age": [1.0, 2.0, 3.0, 4.0], "grade": [2.0, 1.0, np.nan, 9.0], "city": ["b", "z", "a", "b"]}
    )
    schema = core.Schema(kinds=(("age", "numeric"), ("grade", "ordinal"), ("city", "nominal")))
    enc = core.discretize(df, schema, categories={"grade": ["1", "2", "3"], "city": ["b", "a", "c"]})
    assert list(enc.levels["city"]) == ["b", "a", "c", "other"]  # c and other: no record, still levels
    assert list(enc.codes["city"]) == [0, 3, 1, 0]  # the unseen z is released as other
    assert list(enc.levels["grade"]) == ["1", "2", "3", "other"]
    assert list(enc.codes["grade"]) == [1, 0, 3, 3]  # 2.0 matches "2"; missing and 9 are other
    np.testing.assert_allclose(enc.components["grade"][0], [0, 1 / 3, 2 / 3, 1])  # ranks in declared order
    np.testing.assert_array_equal(enc.components["city"], 1 - np.eye(4))
    assert enc.outside_public == (("grade", 2), ("city", 1))
    assert any("'city' (1 not among its categories, released as 'other')" in w for w in enc.warnings)
    named = core.discretize(df, schema, categories={"city": ["other", "b"]})
    assert list(named.levels["city"]) == ["other", "b", "(other)"]


@settings(max_examples=40, deadline=None)
@given(cities=st.lists(st.sampled_from(["a", "b", "c", "rare", None]), min_size=2, max_size=15))
def test_no_record_moves_the_levels_of_a_column_with_public_categories(cities: list) -> None:
    schema = core.Schema(kinds=(("city", "nominal"),))
    declared = {"city": ["a", "b", "c"]}
    df = pd.DataFrame({"city": cities})
    enc = core.discretize(df, schema, categories=declared)
    changed = df.copy()
    changed.loc[0, "city"] = "rare"
    again = core.discretize(changed, schema, categories=declared)
    np.testing.assert_array_equal(again.levels["city"], enc.levels["city"])
    np.testing.assert_array_equal(again.codes["city"].to_numpy()[1:], enc.codes["city"].to_numpy()[1:])


def test_bad_public_categories_are_refused() -> None:
    with pytest.raises(
        DataError, match="public categories are for a nominal, binary or ordinal attribute; 'age'"
    ):
        core.discretize(table(), SCHEMA, categories={"age": ["1"]})
    with pytest.raises(DataError, match="must be distinct non-empty labels"):
        core.discretize(table(), SCHEMA, categories={"city": ["a", "a"]})
    with pytest.raises(DataError, match="must be distinct non-empty labels"):
        core.discretize(table(), SCHEMA, categories={"city": []})


def test_a_held_out_row_takes_the_public_categories_rule() -> None:
    schema = core.Schema(kinds=(("city", "nominal"),))
    df = pd.DataFrame({"city": ["a", "a", "b", "rare", None, "c"]})
    recipe = lambda part: core.discretize(part, schema, categories={"city": ["a", "b", "c"]})  # noqa: E731
    split = core.encode_held_out(df, np.arange(3), recipe)
    assert list(split.encoded.levels["city"]) == ["a", "b", "c", "other"]
    assert list(split.encoded.decode(split.encoded.codes.iloc[split.held_out])["city"]) == [
        "other",
        "other",
        "c",
    ]
    assert split.outside == () and split.encoded.outside_public == (("city", 2),)


def test_a_range_the_records_barely_fill_is_said() -> None:
    enc = core.discretize(table(), SCHEMA, bins=8, ranges={"age": (1000, 2000)})  # every value below it
    assert enc.codes["age"].nunique() == 1
    assert any("'age' (1 of 8)" in w and "A narrower range, or more bins" in w for w in enc.warnings)
    assert not any(
        "fill few bins" in w for w in core.discretize(table(), SCHEMA, ranges={"age": (-5, 131)}).warnings
    )


def test_values_and_labels_match_by_number_whatever_the_file_reading_made_of_them() -> None:
    """Audit: a column of 01, 02 read as integers sent every record to 'other' (one record "zz" kept it as
    text and matched), and labels 1.0, 2.0 matched no value."""
    schema = core.Schema(kinds=(("x", "nominal"),))
    as_read = [
        pd.DataFrame({"x": [1, 2, 1]}),
        pd.DataFrame({"x": ["01", "02", "01"]}),
        pd.DataFrame({"x": [1.0, 2.0, 1.0]}),
    ]
    for df in as_read:
        enc = core.discretize(df, schema, categories={"x": ["01", "02"]})
        assert list(enc.codes["x"]) == [0, 1, 0] and enc.outside_public == ()
    enc = core.discretize(pd.DataFrame({"x": [1, 2, 2.5, 3]}), schema, categories={"x": [1.0, 2.0, 2.5]})
    assert list(enc.codes["x"]) == [0, 1, 2, 3] and list(enc.levels["x"]) == ["1.0", "2.0", "2.5", "other"]
    with pytest.raises(DataError, match="01 and 1 are one label"):
        core.discretize(as_read[0], schema, categories={"x": ["01", "1"]})
    odd = core.discretize(as_read[0], schema, categories={"x": ["other", "(other)"]})
    assert list(odd.levels["x"]) == ["other", "(other)", "((other))"]  # one name per level


def test_a_declared_column_s_missing_values_are_said_once_as_other() -> None:
    """Audit: a declared column's missing values were also reported as a 'missing' level it does not have."""
    df = pd.DataFrame({"grade": [1.0, 2.0, np.nan, 3.0], "city": ["a", None, "b", "a"]})
    schema = core.Schema(kinds=(("grade", "ordinal"), ("city", "nominal")))
    enc = core.discretize(df, schema, categories={"grade": ["1", "2", "3"]})
    assert any("'grade' (1 not among its categories, released as 'other')" in w for w in enc.warnings)
    kept = [w for w in enc.warnings if w.startswith("Missing values kept")]
    assert kept == ["Missing values kept as a 'missing' level: 'city' (1)."]


def test_each_value_matches_by_its_own_text_in_a_mixed_column() -> None:
    from mdp_core.data.public import categorised_column

    values = pd.Series([True, 1, 1.0, "1", " 1 ", np.nan, pd.NA, None, "True", 2.5, "2.50"], dtype=object)
    code, levels, _, moved = categorised_column(values, "nominal", ("1", "True", "2.5"))
    assert list(code) == [1, 0, 0, 0, 0, 3, 3, 3, 1, 2, 2]  # True is not 1; every missing value is 'other'
    assert list(levels) == ["1", "True", "2.5", "other"] and moved == 3
