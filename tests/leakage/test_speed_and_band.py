"""Exact CPL* on wide, sparse conditionals (many levels, few rows) and the uncertainty band of CPL* across
sources (moved from ui/leakage.py into mdp_core.leakage): issue 11, responsiveness of the leakage page."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mdp_core as core
from mdp_core.leakage import conditional, cpl_exact, cpl_source_band, source_conditionals


def all_points_cpl(cond: np.ndarray, eps: np.ndarray) -> np.ndarray:
    """Reference: every ordered pair, every top-k prefix over ALL b entries (no pruning), max ratio."""
    c = np.expm1(eps)[:, None]
    best = np.zeros(eps.size)
    a = cond.shape[0]
    for x in range(a):
        g = cond[x]
        for xp in range(a):
            if xp == x:
                continue
            gp = cond[xp]
            with np.errstate(divide="ignore", invalid="ignore"):
                key = np.where(gp > 0, g / np.where(gp > 0, gp, 1.0), np.where(g > 0, np.inf, 0.0))
            order = np.argsort(-key, kind="stable")
            A, B = np.cumsum(g[order]), np.cumsum(gp[order])
            best = np.maximum(best, np.log((1 + c * A) / (1 + c * B)).max(axis=1))
    return np.minimum(np.maximum(best, 0.0), eps)


def sparse_table(rows: int = 800, levels: tuple[int, int] = (224, 202), seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 6, rows)
    t = np.where(rng.random(rows) < 0.5, (base * 7) % levels[0], rng.integers(0, levels[0], rows))
    o = np.where(rng.random(rows) < 0.5, (base * 5) % levels[1], rng.integers(0, levels[1], rows))
    _, t = np.unique(t, return_inverse=True)
    _, o = np.unique(o, return_inverse=True)
    return pd.DataFrame({"t": t, "o": o})


def test_wide_sparse_conditional_is_exact_and_fast() -> None:
    """A (224 x 202)-level pair from an 800-row table took 31 s (all a^2 b prefix points); now < 1 s."""
    cond = conditional(sparse_table(), "t", "o")
    eps = np.array([0.05, 0.5, 2.0, 8.0])
    start = time.perf_counter()
    fast = cpl_exact(cond, eps)
    assert time.perf_counter() - start < 2.0
    sub = cond[:60]  # the reference is slow: check exactness on a 60-row slice (rows renormalised)
    assert cpl_exact(sub, eps) == pytest.approx(all_points_cpl(sub, eps), abs=1e-12)
    assert fast == pytest.approx(all_points_cpl(cond, eps), abs=1e-12)


@settings(max_examples=40, deadline=None)
@given(
    a=st.integers(2, 12),
    b=st.integers(2, 30),
    density=st.floats(0.05, 1.0),
    seed=st.integers(0, 10_000),
)
def test_pruned_hull_equals_all_prefix_points(a: int, b: int, density: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    raw = rng.random((a, b)) ** 3 * (rng.random((a, b)) < density)
    raw[raw.sum(axis=1) == 0, 0] = 1.0
    cond = raw / raw.sum(axis=1, keepdims=True)
    eps = np.geomspace(1e-3, 30.0, 9)
    assert cpl_exact(cond, eps) == pytest.approx(all_points_cpl(cond, eps), abs=1e-12)


def test_source_band_is_the_range_of_per_source_cpl() -> None:
    rng = np.random.default_rng(3)
    codes = pd.DataFrame(
        {"t": rng.integers(0, 4, 400), "o": rng.integers(0, 5, 400), "g": rng.integers(0, 3, 400)}
    )
    codes.loc[codes["g"] == 2, "t"] = np.minimum(codes.loc[codes["g"] == 2, "t"], 2)  # level 3 absent in g=2
    sources = source_conditionals(codes, "t", "o", groups="g")
    assert np.isnan(sources[2]).any()
    eps = np.array([0.1, 1.0, 5.0])
    lo, hi = cpl_source_band(sources, eps)
    nominal = np.nanmean(sources, axis=0)
    nominal /= nominal.sum(axis=1, keepdims=True)
    per = []
    for s in sources:
        filled = np.where(np.isnan(s).any(axis=1, keepdims=True), nominal, s)
        per.append([all_points_cpl(filled, np.array([e]))[0] for e in eps])
    per = np.array(per)
    assert lo == pytest.approx(per.min(axis=0), abs=1e-12) and hi == pytest.approx(per.max(axis=0), abs=1e-12)
    assert np.all(lo <= hi) and np.all(hi <= eps)
    assert core.cpl_source_band is cpl_source_band and "cpl_source_band" in core.__all__
    with pytest.raises(core.DataError, match="sources"):
        cpl_source_band(sources[:1], eps)


@settings(max_examples=200, deadline=None)
@given(
    a=st.integers(1, 9),
    b=st.integers(1, 10),
    density=st.floats(0.05, 1.0),
    power=st.sampled_from([1.0, 3.0, 8.0]),
    seed=st.integers(0, 10_000),
)
def test_known_conditional_fast_path_matches_the_box_scan(
    a: int, b: int, density: float, power: float, seed: int
) -> None:
    """The O(a b) + BLAS triad for a known conditional equals the (a x a x b) scan with an empty box: alpha
    and gamma and delta to rounding, phi never below it (safe side), exactly 0 for identical rows."""
    from mdp_core.leakage.triad import _pair_parameters, _pair_parameters_known

    rng = np.random.default_rng(seed)
    raw = rng.random((a, b)) ** power * (rng.random((a, b)) < density)
    raw[raw.sum(axis=1) == 0, 0] = 1.0
    if a > 1 and rng.random() < 0.3:
        raw[-1] = raw[0]
    p = raw / raw.sum(axis=1, keepdims=True)
    ref, fast = _pair_parameters(p, p), _pair_parameters_known(p)
    assert fast[0] == pytest.approx(ref[0], abs=1e-13) and fast[3] == pytest.approx(ref[3], abs=1e-13)
    assert ref[1] <= fast[1] <= ref[1] + 1e-13  # phi carries a safe-side slack
    # delta (a mass that multiplies e^eps) carries none: equal to the scan up to the rounding of a b-term sum
    assert fast[2] == pytest.approx(ref[2], rel=(b + 2) * 2.3e-16, abs=1e-300)
    if np.allclose(p, p[0], atol=0.0, rtol=0.0):
        assert fast == (0.0, 0.0, 0.0, 0.0)


def test_wide_table_triads_are_fast() -> None:
    """All 210 ordered pairs of a 15-column, 800-row table with up to 224 levels: DT model 14.5 s before."""
    rng = np.random.default_rng(0)
    base = rng.integers(0, 6, 800)
    codes = {}
    for i, m in enumerate([300, 250, 200, 120, 80, 60, 40, 30, 12, 8, 6, 5, 4, 3, 2]):
        raw = np.where(rng.random(800) < 0.5, (base * 7) % m, rng.integers(0, m, 800))
        codes[f"c{i}"] = np.unique(raw, return_inverse=True)[1]
    start = time.perf_counter()
    model = core.pairwise_leakage(pd.DataFrame(codes), method="dt")
    assert time.perf_counter() - start < 12
    assert np.all(model.alpha >= 0) and np.all((model.delta >= 0) & (model.delta <= 1))


def test_all_pairs_check_the_table_once_not_once_per_pair(monkeypatch: pytest.MonkeyPatch) -> None:
    """Audit of uploads: a 300-column table took 281 s for all pairs, 3/4 of it checking the same pandas
    columns again for each of the 89,700 pairs (60 columns: 3.2 s, now 0.9 s)."""
    import mdp_core.leakage.calibration as calibration
    import mdp_core.leakage.cpl as cpl

    rng = np.random.default_rng(1)
    codes = pd.DataFrame({f"c{i}": rng.integers(0, 2 + i, 60) for i in range(6)})
    checks: list[tuple[str, ...]] = []
    for module in (cpl, calibration):
        real = module._check_codes
        monkeypatch.setattr(
            module, "_check_codes", lambda c, *cols, real=real: checks.append(cols) or real(c, *cols)
        )
    model = core.pairwise_leakage(codes, method="dt")
    assert checks == [tuple(codes.columns)]
    for j, k in ((0, 1), (5, 2)):  # the same triads as from the checked conditional of each pair
        triad = core.dependency_triad(conditional(codes, f"c{k}", f"c{j}"))
        assert (model.alpha[j, k], model.delta[j, k]) == (triad.alpha, triad.delta)
