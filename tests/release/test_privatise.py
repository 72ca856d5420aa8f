"""privatise (whole table, readable values, identifiers never released) and release_report."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from release_cases import FAST, Case, make_table, schema_without_id

import mdp_core as core
from mdp_core._text import listed
from mdp_core.release import privatise, release_report, target_channel
from mdp_core.release.privatise import ReleaseCheck, column_decimals


def test_whole_table_every_row_every_kept_column(case: Case) -> None:
    out = privatise(case.df, case.result, encoded=case.encoded, rng=np.random.default_rng(1))
    assert len(out) == len(case.df) == 120
    assert list(out.columns) == ["a", "a2", "dose", "colour", "target"]
    assert "patient_id" not in out.columns
    assert not set(case.df["patient_id"]) & set(out.astype(str).to_numpy().ravel())


def test_values_are_labels_and_rounded_bin_centres(case: Case) -> None:
    out = privatise(case.df, case.result, encoded=case.encoded, rng=np.random.default_rng(2))
    assert set(out["colour"]) <= {"red", "green", "blue"}
    assert set(out["target"]) <= {0, 1} and out["target"].dtype == np.int64
    centres = np.round(case.encoded.levels["dose"], 3)
    assert set(out["dose"]) <= set(centres)
    text = out.to_csv(index=False)
    for value in out["dose"]:  # no 17.825000000000003
        assert len(repr(float(value)).split(".")[1]) <= 3
    assert "0000000" not in text


def test_huge_integer_centres_stay_floats_instead_of_overflowing() -> None:
    """Audit: centres >= 2^63 of a 0-decimal column were cast to int64, released as -9223372036854775808."""
    from mdp_core.release.privatise import _rounded_levels

    huge = np.array([1.0e18, 8.3e18, 3.24e19, 4.0e19])
    out = _rounded_levels(huge, 0)
    assert out.dtype == np.float64 and np.array_equal(out, huge)
    small = _rounded_levels(np.array([2.5, 7.5, 9.007199254740992e15]), 0)
    assert small.dtype == np.int64 and list(small) == [2, 8, 9007199254740992]  # exact up to 2^53


def test_target_can_be_dropped_and_rng_is_explicit(case: Case) -> None:
    kw = {"encoded": case.encoded, "include_target": False}
    a = privatise(case.df, case.result, rng=np.random.default_rng(3), **kw)
    b = privatise(case.df, case.result, rng=np.random.default_rng(3), **kw)
    assert "target" not in a.columns
    pd.testing.assert_frame_equal(a, b)
    with pytest.raises(TypeError, match=r"rng must be a numpy\.random\.Generator"):
        privatise(case.df, case.result, encoded=case.encoded, rng=3)  # type: ignore[arg-type]


def test_target_channel_is_verified_randomised_response(case: Case) -> None:
    P = target_channel(case.encoded, 1.5)
    e = np.exp(1.5)
    assert np.allclose(P, np.array([[e, 1], [1, e]]) / (e + 1), rtol=1e-14, atol=0)
    assert core.mdp_violation(P, case.encoded.components["target"], 1.5) <= 1e-9


def test_released_target_matches_its_channel_in_frequency(case: Case) -> None:
    big = pd.concat([case.df] * 40, ignore_index=True)
    enc = core.discretize(big, case.encoded.schema, bins=4)
    out = privatise(big, case.result, encoded=enc, rng=np.random.default_rng(4), target_eps=1.0)
    kept = (out["target"].to_numpy() == big["target"].to_numpy()).mean()
    assert kept == pytest.approx(np.e / (np.e + 1), abs=0.02)  # 4,800 draws: sd ~0.0065


def test_column_decimals() -> None:
    assert column_decimals(pd.Series([1, 2, 3])) == 0
    assert column_decimals(pd.Series([1.5, 2.25])) == 2
    assert column_decimals(pd.Series([17.825, 3.0])) == 3


def test_a_constant_column_is_flagged(case: Case) -> None:
    out = privatise(case.df, case.result, encoded=case.encoded, rng=np.random.default_rng(5))
    out["colour"] = "red"
    check = release_report(case.df, out, result=case.result)
    expected = tuple(c for c in out.columns if out[c].nunique() == 1 and case.df[c].nunique() > 1)
    assert "colour" in expected and check.constant_columns == expected
    assert check.degenerate
    assert any("became constant:" in m and "colour" in m for m in check.messages)
    assert check.columns_excluded == ("patient_id",)


def test_groups_at_the_minimum_budget_are_flagged() -> None:
    df = make_table()
    enc = core.discretize(df, schema_without_id(df), bins=4)
    res = core.run_dephdp(enc, core.DepHDPConfig(eps=0.02, **FAST))  # below K * grid minimum: all at 0.005
    out = privatise(df, res, encoded=enc, rng=np.random.default_rng(6), include_target=False)
    check = release_report(df, out, result=res)
    assert res.eps_grid[0] == 0.005
    pairs = zip(res.mechanism.groups, res.mechanism.eps, strict=True)
    expected = tuple(" + ".join(g) for g, e in pairs if e == 0.005)
    assert expected and check.min_budget_groups == expected
    assert check.degenerate and check.min_budget == 0.005
    betas = zip(res.mechanism.groups, res.surrogate.betas, strict=True)
    zero = tuple(" + ".join(g) for g, b in betas if b == 0)
    assert check.unweighted_groups == tuple(g for g in expected if g in zero)


def test_the_reason_for_the_least_budget_follows_the_task_models_weights() -> None:
    """Audit: "the task model gives them no weight" stood beside a report table showing beta = 0.2 (heart,
    prediction) or 1 for every group (the record task): say it only of the groups weighed 0."""
    base = dict(
        rows_original=10, rows_released=10, columns_released=("a", "b"), columns_excluded=(),
        constant_columns=(), min_budget=0.005, distinct_original=5, distinct_released=5,
    )  # fmt: skip
    none = ReleaseCheck(**base, min_budget_groups=("a", "b"), unweighted_groups=())
    some = ReleaseCheck(**base, min_budget_groups=("a", "b"), unweighted_groups=("b",))
    every = ReleaseCheck(**base, min_budget_groups=("a", "b"), unweighted_groups=("a", "b"))
    texts = [next(m for m in c.messages if "smallest budget" in m) for c in (none, some, every)]
    assert "no weight" not in texts[0] and "gains least from these" in texts[0]
    assert "the task model gives b no weight, and the budget split" in texts[1]
    assert texts[2].endswith("the task model gives them no weight.")
    assert all("nearly random, or one value" in t for t in texts)  # not "close to random" beside constants


def test_healthy_release_is_not_degenerate(case: Case) -> None:
    res = core.run_dephdp(case.encoded, replace(case.result.config, eps=20.0, task="record"))
    out = privatise(case.df, res, encoded=case.encoded, rng=np.random.default_rng(7))
    check = release_report(case.df, out, result=res)
    assert not check.constant_columns and not check.min_budget_groups
    assert check.distinct_released > 1 and not check.degenerate
    assert check.distinct_original == len(case.df.drop(columns="patient_id").drop_duplicates())


def test_missing_rows_are_counted_not_hidden() -> None:
    df = make_table()
    df.loc[[3, 8], "dose"] = np.nan
    enc = core.discretize(df, schema_without_id(df), bins=4)
    res = core.run_dephdp(enc, core.DepHDPConfig(eps=2.0, **FAST))
    out = privatise(df, res, encoded=enc, rng=np.random.default_rng(8))
    check = release_report(df, out, result=res)
    assert len(out) == 118 and check.rows_original == 120
    assert any("2 row(s) with a missing value" in m for m in check.messages)


def test_mismatched_inputs_are_refused(case: Case) -> None:
    with pytest.raises(core.DataError, match="encode this table"):
        privatise(case.df.iloc[:50], case.result, encoded=case.encoded, rng=np.random.default_rng(0))
    other = core.discretize(case.df, core.infer_schema(case.df[["a", "colour", "target"]], target="target"))
    with pytest.raises(core.DataError, match="other columns"):
        privatise(case.df, case.result, encoded=other, rng=np.random.default_rng(0))
    with pytest.raises(core.DataError, match="columns the original lacks"):
        release_report(case.df[["a"]], pd.DataFrame({"zz": [1]}))
    rng = np.random.default_rng(0)
    with pytest.raises(core.DataError, match=r"rows must be distinct positions in 0\.\.119"):
        privatise(case.df, case.result, encoded=case.encoded, rng=rng, rows=np.array([0, 120]))
    with pytest.raises(core.DataError, match="rows must be distinct positions"):
        privatise(case.df, case.result, encoded=case.encoded, rng=rng, rows=np.array([3, 3]))
    with pytest.raises(TypeError, match="rows must be a 1-D array of record positions, got float64"):
        privatise(case.df, case.result, encoded=case.encoded, rng=rng, rows=np.array([0.0, 1.0]))


def test_rows_release_those_records_through_the_same_draws(case: Case) -> None:
    """``rows`` picks records: the same seed gives those records what a release of only them gives."""
    rows = np.array([5, 17, 60, 119])
    some = privatise(case.df, case.result, encoded=case.encoded, rng=np.random.default_rng(3), rows=rows)
    sub = core.rows_of(case.encoded, rows)
    alone = case.result.privatize(sub.codes, np.random.default_rng(3))
    assert len(some) == 4 and list(some.columns) == [c for c in case.df.columns if c in some.columns]
    expected = case.encoded.levels["colour"][alone["colour"].to_numpy()]
    np.testing.assert_array_equal(some["colour"].to_numpy(), expected)


def _kept_by_loops(encoded: core.Encoded, mech: core.ComposedMechanism, attribute: str) -> float:
    """I(X_a; Y_a) / H(X_a) from explicit sums over every (true, released) pair of joint values."""
    k = next(i for i, g in enumerate(mech.groups) if attribute in g)
    group, sizes, P = mech.groups[k], mech.sizes[k], mech.channels[k]
    j = group.index(attribute)
    counts: dict[tuple[int, ...], int] = {}
    for row in encoded.codes[list(group)].itertuples(index=False):
        counts[tuple(row)] = counts.get(tuple(row), 0) + 1
    n = len(encoded.codes)
    pair = np.zeros((sizes[j], sizes[j]))
    for x, c in counts.items():
        xi = int(np.ravel_multi_index(x, sizes))
        for yi in range(P.shape[1]):
            pair[x[j], np.unravel_index(yi, sizes)[j]] += c / n * P[xi, yi]
    pa, pb = pair.sum(axis=1), pair.sum(axis=0)
    mi = sum(
        pair[u, v] * np.log(pair[u, v] / (pa[u] * pb[v])) for u, v in zip(*np.nonzero(pair), strict=True)
    )
    h = -sum(p * np.log(p) for p in pa if p > 0)
    return mi / h


def test_information_kept_is_the_mutual_information_over_the_entropy(case: Case) -> None:
    mech = case.result.mechanism
    kept = core.information_kept(case.encoded, case.result)
    assert list(kept.index) == list(mech.attributes)
    for a in mech.attributes:
        assert kept[a] == pytest.approx(_kept_by_loops(case.encoded, mech, a), abs=1e-12)
    exact = [np.eye(P.shape[0]) for P in mech.channels]  # identity: keeps everything
    constant = [np.tile(np.eye(P.shape[0])[0], (P.shape[0], 1)) for P in mech.channels]  # one value
    for channels, expected in ((exact, 1.0), (constant, 0.0)):
        result = replace(case.result, mechanism=replace(mech, channels=tuple(channels)))
        np.testing.assert_allclose(core.information_kept(case.encoded, result), expected, atol=1e-12)


def test_a_wide_table_s_flags_name_a_dozen_columns_and_count_the_rest() -> None:
    """A 300-column upload filled its warnings with 270 column names (CSV audit, stop 55)."""
    names = tuple(f"c{i}" for i in range(30))
    check = core.ReleaseCheck(100, 100, names, names, names, names, 0.005, 100, 1)
    for message in check.messages[:2] + check.messages[-1:]:
        assert "c11" in message and "c12," not in message and "and 18 more" in message
    assert listed(names[:12]) == ", ".join(names[:12])  # up to the limit: every name


def test_target_channel_refuses_probabilities_float64_rounds_to_zero(case: Case) -> None:
    assert (
        core.mdp_violation(target_channel(case.encoded, 690.0), case.encoded.components["target"], 690.0) <= 0
    )
    with pytest.raises(core.DataError, match="round to 0"):
        target_channel(case.encoded, 800.0)  # its off-diagonal was exactly 0


def test_a_numeric_target_gets_the_exponential_mechanism_at_its_budget() -> None:
    """(mutation audit, stop 67) only a binary target was tested: its EM branch at 2 eps passed every test."""
    df = make_table().drop(columns=["patient_id"])
    enc = core.discretize(df, core.infer_schema(df, target="dose"), bins=4)
    d = enc.components["dose"]
    P = target_channel(enc, 1.5)
    em = np.exp(-0.75 * d)  # exp(-eps d / 2), rows normalised
    np.testing.assert_allclose(P, em / em.sum(axis=1, keepdims=True), rtol=1e-12, atol=0)
    assert core.mdp_violation(P, d, 1.5) <= 1e-9
