"""Public core functions refuse bad input with a DataError (or TypeError) naming the argument, instead of a
raw Python / numpy exception, a hang or a silent NaN (audit of the core's public API)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import mdp_core as core
import mdp_core.geo as geo
from mdp_core.errors import DataError
from mdp_core.noise import ggm_sample, ggm_scale_curve, select_shape, shape_heatmap, vector_shape_grid
from mdp_core.release import budget_sentence, odds_factor

CHAIN = np.abs(np.subtract.outer(range(3), range(3))).astype(float)


# ----------------------------------------------------------------------------- 1. optimal_mechanism
@pytest.mark.parametrize("limit", [0, -1, math.inf, math.nan])
def test_optimal_mechanism_refuses_a_time_limit_that_is_not_positive(limit: float) -> None:
    with pytest.raises(DataError, match="time_limit must be a positive finite number"):
        core.optimal_mechanism(np.ones(3) / 3, CHAIN, CHAIN, 1.0, time_limit=limit)
    with pytest.raises(DataError, match="time_limit must be a positive finite number"):
        core.optimal_mechanisms(np.ones(3) / 3, CHAIN, CHAIN, [1.0], time_limit=limit)


# ----------------------------------------------------------------------------- 2. odds in words
def test_odds_factor_past_float64_is_inf_not_overflow() -> None:
    assert odds_factor(709.0) == pytest.approx(math.exp(709.0))
    assert odds_factor(710) == math.inf  # e^710 > 1.8e308 (documented)
    assert odds_factor(1.0, 1e6) == math.inf


def test_budget_sentence_words_astronomical_factors_from_the_exponent() -> None:
    log10 = 1000 / math.log(10)  # e^1000 = 10^434.29... = 1.97 x 10^434
    assert math.floor(log10) == 434 and f"{10 ** (log10 - 434):.2g}" == "2"
    assert "a factor of about 2 × 10^434 (e^(ε·d) = e^(1 × 1000))" in budget_sentence(1.0, 1000)
    assert "a factor of about 1.8 × 10^308 " in budget_sentence(709.78)  # e^709.78 = 1.797e308
    assert "a factor of about 10^(4.34e+307)" in budget_sentence(1e300, 1e8)  # 1e308 / ln 10
    assert "more than 10^(10^308)" in budget_sentence(1e300, 1e10)  # eps d itself overflows
    assert "a factor of 2.72 " in budget_sentence(1.0)  # unchanged below 1,000


# ----------------------------------------------------------------------------- 3. shape grids
@pytest.mark.parametrize("step", [0, -1])
def test_vector_shape_grid_refuses_a_step_that_is_not_positive(step: float) -> None:
    with pytest.raises(DataError, match="step must be a positive finite number"):
        vector_shape_grid(3, step)


def test_vector_shape_grid_refuses_a_step_of_too_many_shapes() -> None:
    with pytest.raises(DataError, match=r"step must lie in \[0.001, 1\]"):
        vector_shape_grid(3, 1e-9)


def test_select_shape_refuses_a_search_too_large_to_finish() -> None:
    with pytest.raises(DataError, match=r"p_max must lie in \(1, 1000\]"):
        select_shape(1.0, 1e-5, p_max=1e6)  # hung > 120 s
    with pytest.raises(DataError, match=r"coarse_step must be at least 0\.01"):
        select_shape(1.0, 1e-5, coarse_step=1e-9)  # MemoryError
    with pytest.raises(DataError, match="p_tol must be a positive finite number"):
        select_shape(1.0, 1e-5, p_tol=-1.0)  # the zoom never ended
    with pytest.raises(DataError, match=r"p_max must lie in \(1, 1000\]"):
        shape_heatmap([1.0], [0.01], p_max=1e6)


# ----------------------------------------------------------------------------- 4. ggm sample / curve
def test_ggm_sample_refuses_a_negative_size() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(DataError, match="size must be a count >= 0"):
        ggm_sample(2, 1.0, -1, rng)
    with pytest.raises(DataError, match="size must be a count >= 0"):
        ggm_sample(np.inf, 1.0, (2, -3), rng)
    assert ggm_sample(2, 1.0, (2, 3), rng).shape == (2, 3)


def test_ggm_scale_curve_names_non_numeric_shapes() -> None:
    with pytest.raises(TypeError, match="p_values must be numbers"):
        ggm_scale_curve(["a"], 1.0, 0.01)


# ----------------------------------------------------------------------------- 5. encode_table
TABLE = pd.DataFrame({"a": [1.5, 2.0, 3.25, 4.0, 5.5] * 8, "b": list("xyzwv") * 8})


def test_encode_table_refuses_repeated_column_names() -> None:
    with pytest.raises(DataError, match=r"column names must be unique: \['b'\] occur more than once"):
        core.encode_table(pd.concat([TABLE, TABLE[["b"]]], axis=1))


def test_encode_table_refuses_column_names_that_are_not_text() -> None:
    with pytest.raises(DataError, match=r"column names must be text, got \[0, 1\].*astype\(str\)"):
        core.encode_table(TABLE.set_axis([0, 1], axis=1))


def test_encode_table_names_the_column_with_infinite_values() -> None:
    bad = TABLE.assign(a=TABLE["a"].replace(3.25, np.inf))
    with pytest.raises(DataError, match=r"column 'a' has 8 infinite value\(s\)"):
        core.encode_table(bad)


# ----------------------------------------------------------------------------- 6. population metrics
A = np.array([[0, 1], [1, 2], [2, 0]])
B = np.array([[0, 0], [1, 1], [2, 1]])


@pytest.mark.parametrize("metric", [core.marginal_tv, core.entropy_loss, core.population_metrics])
def test_population_metrics_refuse_empty_and_flat_tables(metric: object) -> None:
    with pytest.raises(DataError, match=r"true_codes must be a 2-D table .* got shape \(0, 2\)"):
        metric(np.zeros((0, 2), int), np.zeros((0, 2), int))  # type: ignore[operator]
    with pytest.raises(DataError, match=r"true_codes must be a 2-D table .* got shape \(2,\)"):
        metric(np.array([0, 1]), np.array([1, 0]))  # type: ignore[operator]


def test_population_metrics_refuse_negative_codes_and_other_attributes() -> None:
    with pytest.raises(DataError, match="true_codes must hold codes >= 0, got -1"):
        core.entropy_loss(np.array([[0, -1]]), np.array([[0, 1]]))
    with pytest.raises(DataError, match="must have the same attributes"):
        core.marginal_tv(A, B[:, :1])


def test_entropy_change_accepts_dataframes_like_its_siblings() -> None:
    expected = core.entropy_change(A, B)
    assert core.entropy_change(pd.DataFrame(A), pd.DataFrame(B)) == pytest.approx(expected)
    assert core.population_metrics(pd.DataFrame(A), pd.DataFrame(B))["entropy_change"] == pytest.approx(
        expected
    )


# ----------------------------------------------------------------------------- 7. helpers
def test_convex_envelopes_refuse_points_that_do_not_match() -> None:
    with pytest.raises(DataError, match="x and y must have the same length, got 3 and 2"):
        core.greatest_convex_minorant(np.arange(3.0), np.arange(2.0))
    with pytest.raises(DataError, match="x must be strictly ascending"):
        core.greatest_convex_minorant(np.array([2.0, 1, 0]), np.array([0.0, 1, 0]))  # was [0, 0, 0]


def test_pl_value_refuses_an_empty_grid_and_a_budget_per_row_mismatch() -> None:
    with pytest.raises(DataError, match="eps_grid must not be empty"):
        core.pl_value(np.array([]), np.array([]), np.array([1.0]))
    with pytest.raises(DataError, match=r"eps must have one budget per row of values \(1\), got 2"):
        core.pl_value(np.array([1.0, 2.0]), np.array([[0.0, 1.0]]), np.array([1.0, 1.5]))
    assert core.pl_value(np.array([1.0, 2.0]), np.array([[0.0, 1.0]]), np.array([1.5])) == pytest.approx(
        [0.5]
    )


def test_product_distance_refuses_a_non_square_component() -> None:
    with pytest.raises(
        DataError, match=r"components\[0\] must be a square distance matrix, got shape \(2, 3\)"
    ):
        core.product_distance([np.ones((2, 3))])


def test_joint_codes_refuses_codes_out_of_range() -> None:
    with pytest.raises(
        DataError, match=r"codes of attribute 1 must lie in 0..1 \(sizes\[1\] = 2\), got 5..5"
    ):
        core.joint_codes(np.array([[0, 5]]), [2, 2])


def test_group_domain_size_names_the_missing_attribute() -> None:
    with pytest.raises(DataError, match=r"domain_sizes has no size for attribute\(s\) \['a'\]"):
        core.group_domain_size(("a",), {})


def test_remap_matrix_refuses_shapes_that_do_not_match() -> None:
    with pytest.raises(DataError, match=r"remap_matrix needs .* got shapes \(2, 2\), \(3,\) and \(2, 2\)"):
        geo.remap_matrix(np.ones((2, 2)) / 2, np.ones(3) / 3, np.ones((2, 2)))


# ----------------------------------------------------------------------------- 8. DepHDPConfig
def test_dephdp_config_refuses_text_for_a_number() -> None:
    with pytest.raises(TypeError, match="eps must be a number, got str '1'"):
        core.DepHDPConfig(eps="1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"grid_points must be an integer, got float 8\.5"):
        core.DepHDPConfig(grid_points=8.5)  # type: ignore[arg-type]


def test_dephdp_config_caps_grid_points() -> None:
    with pytest.raises(DataError, match=r"grid_points in \[3, 500\]"):
        core.DepHDPConfig(grid_points=10**6)  # hung
    assert core.DepHDPConfig(grid_points=np.int64(500), seed=np.int64(1)).eps_grid.size == 500


# ----------------------------------------------------------------------------- 9. geo / allocation knobs
def test_axis_budget_at_p_inf_is_the_limit() -> None:
    assert geo.axis_budget(1.0, math.inf) == 0.25  # eps/2 shared by two axes under l_inf (q = 1)
    assert geo.axis_budget(1.0, 1e12) == pytest.approx(0.25)
    with pytest.raises(DataError, match="p must be >= 1"):
        geo.axis_budget(1.0, math.nan)


def test_largest_floor_refuses_a_negative_eps() -> None:
    with pytest.raises(DataError, match=r"eps must be a positive finite number, got -1\.0"):
        core.largest_floor(np.array([1.0, 2.0]), 2, -1.0, 2.0)


def test_chain_free_pairs_refuses_a_negative_tolerance() -> None:
    with pytest.raises(DataError, match=r"rtol must lie in \[0, 0.001\)"):
        core.chain_free_pairs(CHAIN, rtol=-1)
