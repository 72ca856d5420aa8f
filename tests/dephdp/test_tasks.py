"""Tasks: gamma(U(x), U(y)) against direct computation; population metrics."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mdp_core as core
from mdp_core import DataError, make_task
from mdp_core.dephdp.tasks import _row_ids


@pytest.fixture(scope="module")
def heart() -> core.Encoded:
    df = core.load_dataset("heart")
    return core.discretize(df, core.infer_schema(df, target="target"))


def test_record_task_is_sum_of_squared_component_distances(heart: core.Encoded) -> None:
    task = make_task("record", heart)
    assert "target" not in task.attributes
    codes = heart.codes[list(task.attributes)].to_numpy()
    rng = np.random.default_rng(0)
    y = codes[rng.permutation(len(codes))]
    expected = sum(heart.components[a][codes[:, j], y[:, j]] ** 2 for j, a in enumerate(task.attributes))
    np.testing.assert_allclose(task.loss(codes, y), expected, atol=1e-12)


def test_mismatch_is_fraction_of_changed_attributes(heart: core.Encoded) -> None:
    task = make_task("mismatch", heart)
    codes = heart.codes[list(task.attributes)].to_numpy()
    y = codes.copy()
    y[:, 0] = (y[:, 0] + 1) % heart.domain_sizes[task.attributes[0]]
    y[:5, 1] = (y[:5, 1] + 1) % heart.domain_sizes[task.attributes[1]]
    expected = ((codes != y).sum(axis=1)) / len(task.attributes)
    np.testing.assert_allclose(task.loss(codes, y), expected, atol=1e-12)


def test_prediction_model_predicts_the_target(heart: core.Encoded) -> None:
    task = make_task("prediction", heart)
    codes = heart.codes[list(task.attributes)].to_numpy()
    u = task.utility(codes).ravel()
    y = heart.codes["target"].to_numpy()
    assert np.all((u > 0) & (u < 1))
    assert np.mean((u > 0.5) == (y == 1)) > 0.8  # a sensible model of the target on its training data
    assert np.all(task.loss(codes, codes) == 0)


def test_threshold_task_and_errors(heart: core.Encoded) -> None:
    task = make_task("threshold", heart, attribute="age", threshold=55)
    codes = heart.codes[list(task.attributes)].to_numpy()
    above = (heart.levels["age"][codes[:, 0]] >= 55).astype(float)
    np.testing.assert_allclose(task.utility(codes).ravel(), above)
    with pytest.raises(DataError, match="must be one of"):
        make_task("nope", heart)
    no_target = core.discretize(core.load_dataset("heart"), core.infer_schema(core.load_dataset("heart")))
    with pytest.raises(DataError, match="target"):
        make_task("prediction", no_target)


def test_population_metrics() -> None:
    a = np.array([[0, 0], [1, 1], [0, 1], [1, 0]])
    assert core.population_metrics(a, a) == {
        "marginal_tv": 0.0,
        "entropy_change": 0.0,
        "total_correlation_change": 0.0,
    }
    b = np.array([[0, 0], [0, 0], [0, 1], [1, 0]])
    # both marginals move from (1/2, 1/2) to (3/4, 1/4): TV 1/4 each
    assert core.marginal_tv(a, b) == pytest.approx(0.25)
    h = lambda p: -sum(x * np.log(x) for x in p if x > 0)  # noqa: E731
    assert core.entropy_change(a, b) == pytest.approx(abs(h([0.5, 0.5]) - h([0.75, 0.25])))
    # a's columns are independent (TC 0); b's joint is (1/2, 1/4, 1/4)
    tc_b = 2 * h([0.75, 0.25]) - h([0.5, 0.25, 0.25])
    assert core.population_metrics(a, b) == pytest.approx(
        {
            "marginal_tv": 0.25,
            "entropy_change": h([0.5, 0.5]) - h([0.75, 0.25]),
            "total_correlation_change": tc_b,
        }
    )
    assert core.total_correlation_change(a, b) == pytest.approx(tc_b)


def test_entropy_task_is_surprisal_change(heart: core.Encoded) -> None:
    task = make_task("entropy", heart)
    assert task.population == "entropy" and "target" not in task.attributes
    codes = heart.codes[list(task.attributes)].to_numpy()
    n = len(codes)
    surprisal = []
    for j, a in enumerate(task.attributes):  # independent: -ln((count + 1/2) / (n + m/2)) per value
        m = heart.domain_sizes[a]
        counts = np.array([(codes[:, j] == v).sum() for v in range(m)])
        surprisal.append(-np.log((counts + 0.5) / (n + 0.5 * m)))
    rng = np.random.default_rng(3)
    y = np.column_stack([rng.integers(0, heart.domain_sizes[a], n) for a in task.attributes])
    expected = sum(np.abs(s[codes[:, j]] - s[y[:, j]]) for j, s in enumerate(surprisal))
    np.testing.assert_allclose(task.loss(codes, y), expected, atol=1e-12)
    assert task.evaluation_loss(codes, y) == pytest.approx(core.entropy_loss(codes, y))
    assert make_task("record", heart).evaluation_loss(codes, y) == pytest.approx(
        np.mean(make_task("record", heart).loss(codes, y))
    )


def test_entropy_loss_by_hand() -> None:
    a = np.array([[0, 0], [1, 1], [0, 1], [1, 0]])  # marginals (1/2, 1/2), 4 distinct rows
    b = np.array([[0, 0], [0, 0], [0, 1], [1, 0]])  # marginals (3/4, 1/4), rows {00 x2, 01, 10}
    h = lambda p: -sum(x * np.log(x) for x in p if x > 0)  # noqa: E731
    dh = abs(h([0.5, 0.5]) - h([0.75, 0.25]))
    joint_a, joint_b = np.log(4), h([0.5, 0.25, 0.25])
    tc_a, tc_b = 2 * h([0.5, 0.5]) - joint_a, 2 * h([0.75, 0.25]) - joint_b
    assert core.entropy_loss(a, b) == pytest.approx(2 * dh + abs(joint_a - joint_b) + abs(tc_a - tc_b))
    assert core.entropy_loss(a, a) == 0.0


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 40).flatmap(
        lambda n: st.lists(st.lists(st.integers(0, 2**40), min_size=n, max_size=n), min_size=1, max_size=6)
    )
)
def test_row_ids_group_records_exactly_like_unique_rows(columns: list[list[int]]) -> None:
    # wide codes (up to 2^40 per column) force the dense re-numbering that keeps the radix inside int64
    codes = np.array(columns, dtype=np.int64).T
    ids = _row_ids(codes)
    _, inverse = np.unique(codes, axis=0, return_inverse=True)
    same_row = inverse.reshape(-1)[:, None] == inverse.reshape(-1)[None, :]
    assert np.array_equal(ids[:, None] == ids[None, :], same_row)


@pytest.mark.parametrize("name", ["record", "prediction", "threshold"])
def test_scores_are_the_bias_plus_each_attributes_table_row(heart: core.Encoded, name: str) -> None:
    task = make_task(name, heart)
    codes = heart.codes[list(task.attributes)].to_numpy()
    expected = task.bias + sum(table[codes[:, j]] for j, table in enumerate(task.tables))  # independent
    np.testing.assert_allclose(task.scores(codes), expected, atol=1e-12)
    assert task.scores(codes[:0]).shape == (0, task.tables[0].shape[1])


def test_a_loss_given_the_true_records_utility_is_the_same_and_unchanged_records_lose_nothing(
    heart: core.Encoded,
) -> None:
    task = make_task("record", heart)
    codes = heart.codes[list(task.attributes)].to_numpy()
    y = codes.copy()
    y[::3, 2] = (y[::3, 2] + 1) % heart.domain_sizes[task.attributes[2]]
    direct = task.gamma(task.utility(codes), task.utility(y))
    losses = task.loss(codes, y, task.utility(codes))
    np.testing.assert_allclose(losses, direct, atol=1e-12)
    assert np.all(losses[1::3] == 0) and np.all(losses[::3] > 0)
    assert task.evaluation_loss(codes, y, task.utility(codes)) == pytest.approx(np.mean(direct))


def test_codes_outside_a_domain_are_refused(heart: core.Encoded) -> None:
    task = make_task("record", heart)
    codes = heart.codes[list(task.attributes)].to_numpy()
    bad = codes.copy()
    bad[0, 0] = heart.domain_sizes[task.attributes[0]]  # would alias the next attribute's first row
    with pytest.raises(DataError, match="codes must lie in"):
        task.scores(bad)
    bad[0, 0] = -1
    with pytest.raises(DataError, match="codes must lie in"):
        task.scores(bad)
    with pytest.raises(DataError, match="same shape"):
        task.loss(codes, codes[:-1])


def test_prediction_label_of_a_three_class_target_whose_largest_class_sorts_last() -> None:
    # codes 0 / 1 / 2 at 10 / 10 / 80 %: nothing is above the median (2), so "> median" had no positives
    # and the OPT LPs optimised solver noise; the rule then takes ">= median"
    df = core.load_dataset("heart").drop(columns="target")
    rng = np.random.default_rng(3)
    df["label"] = rng.choice(["a", "b", "z"], size=len(df), p=[0.1, 0.1, 0.8])
    encoded = core.discretize(df, core.infer_schema(df, target="label"))
    t = encoded.codes["label"].to_numpy()
    assert np.median(t) == t.max() == 2
    labels = core.prediction_labels(encoded, encoded.codes)
    np.testing.assert_array_equal(labels, (t == 2).astype(np.int64))
    task = make_task("prediction", encoded)
    u = task.utility(encoded.codes[list(task.attributes)].to_numpy()).ravel()
    assert abs(u.mean() - np.mean(t == 2)) < 0.05  # fitted to the 80 % positives, not to none


@pytest.mark.parametrize(
    ("codes", "expected"),
    [
        ([0, 1, 2, 2, 2], [0, 0, 1, 1, 1]),  # median = top code: at or above it
        ([0, 0, 0, 1, 2], [0, 0, 0, 1, 1]),  # above the median (000)
        ([0, 1, 1, 1, 1, 1, 3], [0, 0, 0, 0, 0, 0, 1]),  # 14 % above: still the 000 rule
        ([0, 1, 1, 0], [0, 1, 1, 0]),  # binary: the top code
    ],
)
def test_positive_target_is_above_the_median_unless_nothing_is(codes: list[int], expected: list[int]) -> None:
    from mdp_core.dephdp.tasks import positive_target

    t = np.array(codes)
    np.testing.assert_array_equal(positive_target(t, t), np.array(expected, dtype=bool))
