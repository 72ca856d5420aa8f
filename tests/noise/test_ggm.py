"""Tests for mdp_core.noise: the generalized Gaussian mechanism (seed 003)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate
from scipy.optimize import brentq
from scipy.special import gammaln
from scipy.stats import gennorm, norm

from mdp_core import DataError
from mdp_core.noise import (
    ggm_delta,
    ggm_delta_vector_bounds,
    ggm_moment,
    ggm_pdf,
    ggm_sample,
    ggm_scale,
    ggm_scale_curve,
    ggm_scale_vector,
    ggm_second_moment,
    ggm_tolerance,
    select_shape,
    shape_heatmap,
)
from mdp_core.noise.scalar import _boundary


# ----------------------------------------------------------------------------- independent references
def analytic_gaussian_sigma(eps: float, delta: float, sens: float) -> float:
    """Balle & Wang (2018), Thm 8: smallest sigma with
    Phi(D/(2s) - eps s/D) - e^eps Phi(-D/(2s) - eps s/D) <= delta, solved by bisection on log sigma."""

    def excess(log_s: float) -> float:
        s = np.exp(log_s)
        a, c = sens / (2 * s), eps * s / sens
        return norm.cdf(a - c) - np.exp(eps) * norm.cdf(-a - c) - delta

    return float(np.exp(brentq(excess, -30, 30, xtol=1e-15, rtol=1e-15)))


def hockey_stick_quad(p: float, b: float, eps: float, sens: float) -> float:
    """int (f(z) - e^eps f(z - D))_+ dz by adaptive quadrature on the densities (no half-line assumption)."""

    def integrand(z: float) -> float:
        return max(0.0, gennorm.pdf(z, p, scale=b) - np.exp(eps) * gennorm.pdf(z - sens, p, scale=b))

    lo, hi = -60 * b - sens, 60 * b + sens
    points = sorted({0.0, sens, sens / 2})
    total, _ = integrate.quad(integrand, lo, hi, points=points, limit=500, epsabs=1e-14, epsrel=1e-11)
    return total


# ----------------------------------------------------------------------------- closed forms
@pytest.mark.parametrize(("eps", "delta", "sens"), [(1.0, 0.01, 3.0), (0.1, 0.1, 1.0), (5.0, 1e-12, 2.0)])
def test_laplace_closed_form(eps: float, delta: float, sens: float) -> None:
    b = ggm_scale(1.0, eps, delta, sens)
    assert b == pytest.approx(sens / (eps - 2 * np.log1p(-delta)), rel=1e-11)
    assert hockey_stick_quad(1.0, b, eps, sens) == pytest.approx(delta, rel=1e-6)


@pytest.mark.parametrize(
    ("eps", "delta", "sens"),
    [
        (1.0, 0.01, 3.0),
        (0.1, 0.1, 1.0),
        (5.0, 1e-12, 1.0),
        (0.01, 1e-12, 1.0),
        (20.0, 1e-5, 2.0),
        (2.0, 0.5, 1.0),
    ],
)
def test_gaussian_equals_analytic_gaussian_mechanism(eps: float, delta: float, sens: float) -> None:
    b = ggm_scale(2.0, eps, delta, sens)
    assert b / np.sqrt(2) == pytest.approx(analytic_gaussian_sigma(eps, delta, sens), rel=1e-9)


@pytest.mark.parametrize("eps", [0.05, 1.0, 30.0])
def test_uniform_closed_form_ignores_eps(eps: float) -> None:
    assert ggm_scale(np.inf, eps, 0.01, 3.0) == pytest.approx(150.0, rel=1e-11)
    assert ggm_delta(np.inf, 150.0, eps, 3.0) == pytest.approx(0.01)
    assert ggm_delta(np.inf, 1.0, eps, 3.0) == 1.0


@pytest.mark.parametrize("p", [1.0, 1.3, 2.5, 6.0])
@pytest.mark.parametrize(("eps", "b"), [(1.0, 2.0), (0.2, 5.0), (3.0, 1.1)])
def test_exact_delta_matches_quadrature(p: float, eps: float, b: float) -> None:
    assert ggm_delta(p, b, eps, 3.0) == pytest.approx(hockey_stick_quad(p, b, eps, 3.0), rel=1e-7, abs=1e-14)


def _delta_by_grid(p: float, b: float, eps: float) -> float:
    """The hockey stick integrated on a fine grid (no cdf): max(f(z) - e^eps f(z - 1), 0), scale b."""
    z = np.linspace(-b - 1.5, b + 2.5, 4_000_001)
    log_c = np.log(p / (2 * b)) - gammaln(1 / p)
    f0, f1 = np.exp(log_c - np.abs(z / b) ** p), np.exp(log_c - np.abs((z - 1) / b) ** p)
    return float(integrate.trapezoid(np.maximum(f0 - np.exp(eps) * f1, 0.0), z))


@pytest.mark.parametrize("p", [300.0, 1000.0, 1e4])
@pytest.mark.parametrize("b", [0.6, 0.82, 3.0])
def test_exact_delta_for_large_shapes(p: float, b: float) -> None:
    # |u|^p underflows near the centre (p = 500, |u| = 0.2): the cdf there was taken as 1/2, so
    # ggm_delta(500, 0.818) read 0.499 instead of 0.611 and ggm_scale(500, 1, 0.6) was not private
    assert ggm_delta(p, b, 1.0) == pytest.approx(_delta_by_grid(p, b, 1.0), abs=2e-3)


def test_scale_for_large_shapes_is_feasible() -> None:
    b = ggm_scale(500.0, 1.0, 0.6)
    assert _delta_by_grid(500.0, b, 1.0) <= 0.6 + 1e-4
    assert ggm_scale(1e4, 1.0, 0.3) == pytest.approx(
        ggm_scale(np.inf, 1.0, 0.3), rel=1e-3
    )  # b -> 1/(2 delta)


@pytest.mark.parametrize("p", [1.0 + 1e-6, 1.2, 2.0, 4.0, 12.0])
@pytest.mark.parametrize("h", [0.05, 0.7, 3.0])
def test_privacy_loss_region_is_a_half_line(p: float, h: float) -> None:
    eps = 0.8
    s, capped = _boundary(np.array([h]), np.array([eps]), np.array([p]))
    x_star = h / 2 - s[0]
    if capped[0]:  # p ~ 1 and h < eps: the boundary lies beyond |x|^p = 2000, where the mass is < e^-2000
        assert h < eps
        assert abs(x_star) ** p >= 2000 * (1 - 1e-9)
        assert abs(x_star - h) ** p - abs(x_star) ** p < eps
        return
    z = np.linspace(x_star - 5, x_star + 5, 20001)
    loss = np.abs(z - h) ** p - np.abs(z) ** p  # ln f(z)/f(z - h), units of b
    assert np.all(np.diff(loss) <= 1e-12)  # non-increasing
    assert np.all(loss[z < x_star - 1e-9] > eps)
    assert np.all(loss[z > x_star + 1e-9] < eps)
    assert abs(x_star - h) ** p - abs(x_star) ** p == pytest.approx(eps, rel=1e-12)


# ----------------------------------------------------------------------------- feasibility and monotonicity
@pytest.mark.parametrize("p", [1.0, 1.0 + 1e-9, 1.001, 1.5, 2.0, 3.7, 10.0, 60.0, 1000.0])
@pytest.mark.parametrize(("eps", "delta"), [(1.0, 0.01), (0.05, 0.2), (8.0, 1e-12)])
def test_scale_is_feasible_and_minimal(p: float, eps: float, delta: float) -> None:
    b = ggm_scale(p, eps, delta, 3.0)
    assert np.isfinite(b) and b > 0
    assert ggm_delta(p, b, eps, 3.0) <= delta
    assert ggm_delta(p, b * (1 - 1e-7), eps, 3.0) > delta


def test_shape_limits_are_continuous() -> None:
    lap = ggm_scale(1.0, 1.0, 1e-12, 1.0)
    assert ggm_scale(1.0 + 1e-9, 1.0, 1e-12, 1.0) == pytest.approx(lap, rel=1e-6)
    uni = ggm_scale(np.inf, 1.0, 0.01, 1.0)
    assert ggm_scale(1000.0, 1.0, 0.01, 1.0) == pytest.approx(uni, rel=0.1)
    assert ggm_scale(1000.0, 1.0, 0.01, 1.0) < uni


@settings(max_examples=25, deadline=None)
@given(
    p=st.floats(1.0, 15.0),
    eps=st.floats(0.01, 10.0),
    delta=st.floats(1e-10, 0.5),
    factor=st.floats(1.05, 3.0),
)
def test_scale_decreases_in_delta_and_eps(p: float, eps: float, delta: float, factor: float) -> None:
    b = ggm_scale(p, eps, delta)
    assert ggm_scale(p, eps, min(delta * factor, 0.99)) < b
    assert ggm_scale(p, eps * factor, delta) < b
    assert ggm_scale(p, eps, delta, sensitivity=factor) == pytest.approx(factor * b, rel=1e-10)


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((2.0, 0.0, 0.01), "eps"),
        ((2.0, -1.0, 0.01), "eps"),
        ((2.0, 1.0, 0.0), "delta"),
        ((2.0, 1.0, 1.0), "delta"),
        ((2.0, 1.0, 1.5), "delta"),
        ((0.5, 1.0, 0.01), "p must be in"),
        ((float("nan"), 1.0, 0.01), "p must be in"),
    ],
)
def test_bad_input_raises(args: tuple[float, float, float], match: str) -> None:
    with pytest.raises(DataError, match=match):
        ggm_scale(*args)


def test_bad_types_and_options_raise() -> None:
    with pytest.raises(TypeError, match="p must be a number"):
        ggm_scale("two", 1.0, 0.01)  # type: ignore[arg-type]
    with pytest.raises(DataError, match="sensitivity"):
        ggm_scale(2.0, 1.0, 0.01, sensitivity=0.0)
    with pytest.raises(DataError, match="criterion"):
        select_shape(1.0, 0.01, criterion="median")
    with pytest.raises(DataError, match="tolerance t"):
        select_shape(1.0, 0.01, criterion="tolerance")
    with pytest.raises(DataError, match="p_max"):
        select_shape(1.0, 0.01, p_max=1.0)


# ----------------------------------------------------------------------------- moments and sampling
@pytest.mark.parametrize("p", [1.0, 1.7, 2.0, 5.0])
def test_moments_and_tolerance_match_gennorm(p: float) -> None:
    b = 1.7
    assert ggm_second_moment(p, b) == pytest.approx(gennorm.var(p, scale=b), rel=1e-12)
    m3 = integrate.quad(lambda z: 2 * z**3 * gennorm.pdf(z, p, scale=b), 0, np.inf)[0]
    assert ggm_moment(p, b, 3.0) == pytest.approx(m3, rel=1e-8)
    assert ggm_tolerance(p, b, 0.9) == pytest.approx(gennorm.cdf(0.9, p, scale=b) * 2 - 1, rel=1e-12)
    assert ggm_pdf(0.4, p, b) == pytest.approx(gennorm.pdf(0.4, p, scale=b), rel=1e-12)


def test_uniform_moments_and_sampling() -> None:
    assert ggm_second_moment(np.inf, 3.0) == pytest.approx(3.0)
    assert ggm_tolerance(np.inf, 2.0, 0.5) == pytest.approx(0.25)
    z = ggm_sample(np.inf, 2.0, 10_000, np.random.default_rng(1))
    assert np.all(np.abs(z) <= 2.0)
    z = ggm_sample(3.0, 2.0, 200_000, np.random.default_rng(2))
    assert np.mean(z**2) == pytest.approx(ggm_second_moment(3.0, 2.0), rel=0.02)


# ----------------------------------------------------------------------------- shape selection (003 Sec. 6.1)
def test_reproduces_table_2_of_003() -> None:
    """(eps, delta, Delta) = (1, 0.01, 3): p = 1.0649, E|Z|^2 = 16.71, 3.40 % below Laplace."""
    choice = select_shape(1.0, 0.01, 3.0)
    assert choice.p == pytest.approx(1.0649, abs=5e-4)
    assert choice.second_moment == pytest.approx(16.71, abs=5e-3)
    assert choice.classical_p == 1.0
    assert choice.classical_second_moment == pytest.approx(ggm_second_moment(1.0, ggm_scale(1.0, 1, 0.01, 3)))
    assert choice.improvement == pytest.approx(0.0340, abs=5e-5)
    assert choice.bracket[0] <= choice.p <= choice.bracket[1]
    assert ggm_delta(choice.p, choice.scale, 1.0, 3.0) <= 0.01


@pytest.mark.parametrize(
    ("eps", "delta", "improvement", "p_ref"),
    [(0.25, 0.01, 0.1731, None), (0.1, 0.1, 0.2053, 4.6316)],
)
def test_reproduces_largest_improvements_of_003(eps: float, delta: float, improvement: float, p_ref) -> None:
    choice = select_shape(eps, delta, 3.0)
    assert choice.improvement == pytest.approx(improvement, abs=5e-5)
    assert choice.classical_p == 2.0
    if p_ref is not None:
        assert choice.p == pytest.approx(p_ref, abs=0.01)  # the objective is flat here: +-0.01 in p


@pytest.mark.parametrize(("eps", "delta"), [(0.5, 0.05), (2.0, 1e-3), (0.1, 0.3)])
def test_selection_beats_a_fine_full_grid(eps: float, delta: float) -> None:
    choice = select_shape(eps, delta, 1.0, p_max=10.0)
    grid = np.round(np.arange(1.0, 10.0001, 0.01), 2)
    values = [ggm_second_moment(p, ggm_scale(p, eps, delta)) for p in grid[::5]]
    values += [ggm_second_moment(np.inf, ggm_scale(np.inf, eps, delta))]
    assert choice.second_moment <= min(values) * (1 + 1e-9)


def test_selection_is_invariant_to_sensitivity_and_tends_to_laplace() -> None:
    a, b = select_shape(0.5, 0.02, 1.0), select_shape(0.5, 0.02, 7.0)
    assert a.p == pytest.approx(b.p, abs=1e-4)
    assert a.improvement == pytest.approx(b.improvement, abs=1e-9)
    assert select_shape(1.0, 1e-10).p == pytest.approx(1.0, abs=0.01)  # 003 Thm 5.3: delta -> 0


def test_other_criteria() -> None:
    m2 = select_shape(1.0, 0.01, 3.0, criterion="moment", m=2.0)
    assert m2.p == pytest.approx(select_shape(1.0, 0.01, 3.0).p, abs=1e-3)
    m1 = select_shape(1.0, 0.01, 3.0, criterion="moment", m=1.0)
    assert m1.objective == pytest.approx(ggm_moment(m1.p, m1.scale, 1.0), rel=1e-9)
    tol = select_shape(0.1, 0.1, 1.0, criterion="tolerance", t=4.38)
    assert tol.objective == pytest.approx(1 - ggm_tolerance(tol.p, tol.scale, 4.38), abs=1e-12)
    for p in (1.0, 2.0, np.inf):  # never worse than any classical shape
        assert tol.objective <= 1 - ggm_tolerance(p, ggm_scale(p, 0.1, 0.1), 4.38) + 1e-12


def test_heatmap_agrees_with_select_shape() -> None:
    eps, delta = np.array([0.1, 1.0, 4.0]), np.array([1e-6, 0.01, 0.1])
    seen = []
    hm = shape_heatmap(eps, delta, 3.0, progress=lambda f, _m: seen.append(f))
    assert hm.p.shape == (3, 3) and seen[-1] == 1.0 and seen == sorted(seen)
    for i, d in enumerate(delta):
        for j, e in enumerate(eps):
            ref = select_shape(e, d, 3.0)
            assert hm.improvement[i, j] == pytest.approx(ref.improvement, abs=2e-4)
            assert hm.second_moment[i, j] >= ref.second_moment * (1 - 1e-9)


# ----------------------------------------------------------------------------- vector queries (003 3.5-3.6)
def test_vector_one_coordinate_and_uniform_are_exact() -> None:
    v = ggm_scale_vector(1.5, 1.0, 0.01, [0.0, 3.0, 0.0], rng=np.random.default_rng(0))
    assert v.exact and v.alpha == 0.0
    assert v.scale == pytest.approx(ggm_scale(1.5, 1.0, 0.01, 3.0))
    u = ggm_scale_vector(np.inf, 1.0, 0.01, [1.0, 2.0], rng=np.random.default_rng(0))
    assert 1 - (1 - 1 / (2 * u.scale)) * (1 - 2 / (2 * u.scale)) == pytest.approx(0.01, rel=1e-9)


def test_vector_gaussian_scale_is_private_and_close_to_exact() -> None:
    rng = np.random.default_rng(3)
    v = ggm_scale_vector(
        2.0, 1.0, 0.009, [1.0, 2.0], rng=rng, alpha=1e-3, n_samples=100_000, method="monte_carlo"
    )
    exact = ggm_scale(2.0, 1.0, 0.009, np.sqrt(5.0))  # p = 2 depends on ||Delta||_2 only (003 Prop. 3.4)
    assert not v.exact and v.total_delta == pytest.approx(0.01)
    assert exact <= v.scale <= 1.06 * exact
    assert v.delta_upper <= 0.009


def test_vector_scale_certified_by_fresh_samples() -> None:
    rng = np.random.default_rng(4)
    v = ggm_scale_vector(1.3, 1.0, 0.01, [1.0, 2.0], rng=rng, alpha=1e-3, n_samples=100_000)
    mean, lower, upper = ggm_delta_vector_bounds(1.3, v.scale, 1.0, [1.0, 2.0], rng=np.random.default_rng(9))
    assert lower <= mean <= upper
    assert mean <= 0.01
    with pytest.raises(DataError, match="non-zero"):
        ggm_scale_vector(1.3, 1.0, 0.01, [0.0, 0.0], rng=rng)
    with pytest.raises(TypeError, match="rng"):
        ggm_scale_vector(1.3, 1.0, 0.01, [1.0, 2.0], rng=42)  # type: ignore[arg-type]


def test_scale_curve_matches_scalar_scale() -> None:
    ps = np.array([1.0, 1.5, 2.0, 7.0, np.inf])
    curve = ggm_scale_curve(ps, 0.7, 1e-4, 2.0)
    assert curve == pytest.approx([ggm_scale(p, 0.7, 1e-4, 2.0) for p in ps], rel=1e-10)
    with pytest.raises(DataError, match="p_values"):
        ggm_scale_curve([0.5, 2.0], 1.0, 0.01)


def test_reproduces_tolerance_example_of_003_sec_6_8() -> None:
    """(eps, delta, t) = (0.1, 0.10, 4.38), Delta = 1: p* = 7.99, H_t 94.62 % against 87.61 % (Gaussian)."""
    choice = select_shape(0.1, 0.1, 1.0, criterion="tolerance", t=4.38)
    assert choice.p == pytest.approx(7.99, abs=0.01)
    assert choice.classical_p == 2.0
    assert 1 - choice.objective == pytest.approx(0.9462, abs=5e-5)
    assert 1 - choice.classical_objective == pytest.approx(0.8761, abs=5e-5)
