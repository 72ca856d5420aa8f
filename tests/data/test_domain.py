"""A held-out table coded in the fitting rows' levels (:func:`mdp_core.encode_held_out`)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mdp_core as core
from mdp_core.errors import DataError


def _recipe(schema: core.Schema, bins: int = 4):
    return lambda part: core.discretize(part, schema, bins=bins)


def table() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "dose": [1.0, 2.0, 3.0, 4.0, 5.0, 9.0, -3.0, 2.6],
            "grade": [1, 2, 3, 2, 2, 7, 2, None],
            "city": ["a", "b", "a", "a", "c", "z", None, "b"],
        }
    )


SCHEMA = core.Schema(kinds=(("dose", "numeric"), ("grade", "ordinal"), ("city", "nominal")))
FIT = np.arange(5)  # rows 5-7 are held out: 9.0 and -3.0 lie beyond the range, grade 7 and city "z" unseen


def test_the_fitting_rows_keep_their_own_encoding_and_levels() -> None:
    split = core.encode_held_out(table(), FIT, _recipe(SCHEMA))
    alone = core.discretize(table().iloc[FIT], SCHEMA, bins=4)
    pd.testing.assert_frame_equal(split.encoded.codes.iloc[split.fit].reset_index(drop=True), alone.codes)
    for col in SCHEMA.columns:
        np.testing.assert_array_equal(split.encoded.levels[col], alone.levels[col])
        np.testing.assert_array_equal(split.encoded.components[col], alone.components[col])
    np.testing.assert_array_equal(split.held_out, [5, 6, 7])
    assert split.encoded.input_rows == 8 and split.encoded.dropped_rows == 0


def test_held_out_values_go_to_the_nearest_level_and_are_counted() -> None:
    split = core.encode_held_out(table(), FIT, _recipe(SCHEMA))
    held = split.encoded.decode(split.encoded.codes.iloc[split.held_out])
    centres = split.encoded.levels["dose"]  # bins of width 1 over [1, 5]: centres 1.5 2.5 3.5 4.5
    np.testing.assert_allclose(centres, [1.5, 2.5, 3.5, 4.5])
    assert list(held["dose"]) == [4.5, 1.5, 2.5]  # 9 and -3 to the outermost centres, 2.6 to its own bin
    assert list(held["grade"]) == [3, 2, 2]  # 7 -> nearest level 3; a missing grade -> the most frequent
    assert list(held["city"]) == ["a", "a", "b"]  # unseen and missing cities -> the most frequent, "a"
    assert split.outside == (("dose", 2), ("grade", 2), ("city", 2))
    assert "'dose' (2)" in split.outside_text


def test_a_missing_value_takes_the_missing_level_when_the_fitting_rows_have_one() -> None:
    df = table()
    df.loc[0, "city"] = None
    split = core.encode_held_out(df, FIT, _recipe(SCHEMA))
    assert split.encoded.levels["city"][-1] == core.MISSING_LEVEL
    assert split.encoded.decode(split.encoded.codes.iloc[[6]])["city"].item() == core.MISSING_LEVEL
    assert dict(split.outside)["city"] == 1  # only "z"


def test_a_held_out_row_with_a_missing_number_is_left_out() -> None:
    df = table()
    df.loc[6, "dose"] = np.nan
    split = core.encode_held_out(df, FIT, _recipe(SCHEMA))
    assert len(split.encoded.codes) == 7 and split.encoded.dropped_rows == 1
    np.testing.assert_array_equal(split.held_out, [5, 6])  # rows 5 and 7 of the table


@settings(max_examples=60, deadline=None)
@given(
    fitting=st.lists(st.floats(-100, 100, allow_nan=False), min_size=2, max_size=30),
    held=st.lists(st.floats(-300, 300, allow_nan=False), min_size=1, max_size=10),
    victim=st.floats(-1e6, 1e6, allow_nan=False),
)
def test_a_held_out_value_is_coded_at_its_nearest_centre_and_moves_nothing_else(
    fitting: list[float], held: list[float], victim: float
) -> None:
    """The privacy property: a held-out row's value changes no level and no other row's code."""
    schema = core.Schema(kinds=(("x", "numeric"),))
    df = pd.DataFrame({"x": [*fitting, *held, *fitting]})  # the last rows: held-out copies of fitting values
    fit = np.arange(len(fitting))
    split = core.encode_held_out(df, fit, _recipe(schema, bins=5))
    centres = split.encoded.levels["x"]
    codes = split.encoded.codes["x"].to_numpy()
    for value, code in zip(held, codes[len(fitting) : len(fitting) + len(held)], strict=True):
        assert abs(centres[code] - value) == np.min(np.abs(centres - value))  # brute-force nearest
    # a held-out value equal to a fitting one is coded alike, on a bin edge too (audit: 21 of 27,662 were not)
    np.testing.assert_array_equal(codes[-len(fitting) :], codes[: len(fitting)])
    changed = df.copy()
    changed.loc[len(fitting), "x"] = victim
    again = core.encode_held_out(changed, fit, _recipe(schema, bins=5))
    np.testing.assert_array_equal(again.encoded.levels["x"], centres)
    others = np.delete(np.arange(len(df)), len(fitting))
    np.testing.assert_array_equal(again.encoded.codes["x"].to_numpy()[others], codes[others])


def test_bad_fitting_rows_are_refused() -> None:
    with pytest.raises(DataError, match=r"distinct positions in 0\.\.7"):
        core.encode_held_out(table(), np.array([0, 9]), _recipe(SCHEMA))
    with pytest.raises(TypeError, match="1-D array of row positions"):
        core.encode_held_out(table(), np.array([0.5]), _recipe(SCHEMA))


def test_an_unseen_ordinal_label_takes_the_next_level_below_clipped_to_the_lowest() -> None:
    schema = core.Schema(kinds=(("month", "ordinal"),))
    df = pd.DataFrame({"month": ["2019-01", "2019-03", "2019-03", "2019-02", "2018-12", "2020-01"]})
    split = core.encode_held_out(df, np.arange(3), _recipe(schema))
    held = split.encoded.decode(split.encoded.codes.iloc[split.held_out])["month"]
    assert list(held) == ["2019-01", "2019-01", "2019-03"]
    assert split.outside == (("month", 3),)


def test_a_missing_level_exists_only_when_a_kept_fitting_row_is_missing_there() -> None:
    """Audit: a fitting row whose only missing category sat in a row dropped for its missing number made
    the last real level read as the missing one."""
    df = pd.DataFrame(
        {
            "dose": [1.0, 2.0, 3.0, 4.0, np.nan, 5.0, 2.0, 3.0],
            "grade": [1, 2, 3, 2, None, 3, 3, None],
            "city": ["a", "b", "a", "a", None, "b", "a", None],
        }
    )
    split = core.encode_held_out(df, np.arange(6), _recipe(SCHEMA))
    assert list(split.encoded.levels["grade"]) == [1, 2, 3]  # no missing level: row 4 was dropped
    held = split.encoded.decode(split.encoded.codes.iloc[split.held_out])
    assert list(held["grade"]) == [3, 2]  # a real level stays; a missing grade -> the most frequent (2)
    assert list(held["city"]) == ["a", "a"]
    assert split.outside == (("grade", 1), ("city", 1))


def test_dates_are_read_in_the_fitting_rows_format_whatever_a_held_out_value_looks_like() -> None:
    """Audit: one held-out 25/12/2020 switched the whole column from month/day to day/month, and one
    held-out "unknown?" made the release fail."""
    fitting = ["01/02/2020", "03/04/2020", "10/12/2020", "05/06/2020", "07/08/2020", "11/09/2020"]
    df = pd.DataFrame({"when": [*fitting, "10/12/2020", "25/12/2020", "unknown?"]})
    schema = core.infer_schema(df.iloc[:6], include={"when": "month"})
    split = core.encode_held_out(df, np.arange(6), _recipe(schema))
    held = split.encoded.decode(split.encoded.codes.iloc[split.held_out])["when"]
    assert held.iloc[0] == "2020-10"  # month/day, as in the fitting rows
    alone = core.encode_held_out(df.iloc[:7], np.arange(6), _recipe(schema))
    np.testing.assert_array_equal(alone.encoded.codes.to_numpy(), split.encoded.codes.to_numpy()[:7])
