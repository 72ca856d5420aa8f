"""mdp_core.mechanisms.lp: the exact LP-optimal mechanism, chain-free pairs, repair and the eps path."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hst
from scipy.optimize import linprog
from scipy.sparse import lil_matrix
from scipy.sparse.csgraph import shortest_path

import mdp_core as core
from mdp_core.mechanisms import _pricing


def random_metric(rng: np.random.Generator, n: int) -> np.ndarray:
    w = rng.uniform(0.1, 1.0, (n, n))
    w = (w + w.T) / 2
    np.fill_diagonal(w, 0)
    return shortest_path(w)


def grid_metric(k: int, p: float) -> np.ndarray:
    pts = np.array([(i, j) for i in range(k) for j in range(k)], dtype=float)
    diff = np.abs(pts[:, None, :] - pts[None, :, :])
    return (diff**p).sum(axis=2) ** (1 / p)


def loop_lp(prior: np.ndarray, loss: np.ndarray, d: np.ndarray, eps: float) -> float:
    """Independent reference: the full LP of 000 Eq. 3 built row by row in a loop, solved by linprog."""
    n, m = loss.shape
    A = lil_matrix((n * (n - 1) * m, n * m))
    r = 0
    for x in range(n):
        for x2 in range(n):
            if x != x2:
                for y in range(m):
                    A[r, x * m + y] = 1.0
                    A[r, x2 * m + y] = -np.exp(eps * d[x, x2])
                    r += 1
    A_eq = lil_matrix((n, n * m))
    for x in range(n):
        for y in range(m):
            A_eq[x, x * m + y] = 1.0
    cost = np.array([prior[x] * loss[x, y] for x in range(n) for y in range(m)])
    res = linprog(cost, A_ub=A.tocsr(), b_ub=np.zeros(r), A_eq=A_eq.tocsr(), b_eq=np.ones(n), method="highs")
    assert res.status == 0
    return float(res.fun)


@pytest.mark.parametrize("seed", range(6))
def test_matches_independent_full_lp_on_random_metrics(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(3, 9)), int(rng.integers(2, 9))
    d = random_metric(rng, n)
    prior = rng.dirichlet(np.ones(n))
    loss = rng.uniform(0, 1, (n, m))
    eps = float(rng.uniform(0.2, 6))
    res = core.optimal_mechanism(prior, loss, d, eps)
    assert res.success, res.message
    assert res.objective == pytest.approx(loop_lp(prior, loss, d, eps), abs=1e-7)
    assert res.matrix.shape == (n, m)
    np.testing.assert_allclose(res.matrix.sum(axis=1), 1.0, atol=1e-12)
    assert res.violation <= 1e-9
    assert core.mdp_violation(res.matrix, d, eps) == res.violation


@pytest.mark.parametrize(("k", "p", "eps"), [(3, 2.0, 1.0), (4, 2.0, 3.0), (4, 1.0, 2.0)])
def test_matches_independent_full_lp_on_grids(k: int, p: float, eps: float) -> None:
    d = grid_metric(k, p) / (k - 1)
    n = k * k
    prior = np.full(n, 1 / n)
    f = np.arange(n) % k + np.arange(n) // k
    loss = np.abs(f[:, None] - f[None, :]).astype(float)
    res = core.optimal_mechanism(prior, loss, d, eps)
    assert res.success
    assert res.objective == pytest.approx(loop_lp(prior, loss, d, eps), abs=1e-7)
    assert res.rows < res.full_rows


def test_matches_qif() -> None:
    qif = pytest.importorskip("qif")
    rng = np.random.default_rng(11)
    n = 8
    d = random_metric(rng, n)
    prior = rng.dirichlet(np.ones(n))
    loss = rng.uniform(0, 1, (n, n))
    eps = 1.3
    C = np.asarray(
        qif.mechanism.d_privacy.min_loss_given_d(
            prior, n, lambda a, b: eps * d[a, b], lambda a, b: loss[a, b]
        )
    )
    res = core.optimal_mechanism(prior, loss, d, eps)
    assert res.objective == pytest.approx(float(prior @ (C * loss).sum(axis=1)), abs=1e-7)


def test_chain_free_pairs() -> None:
    # ordinal chain: only neighbours
    x = np.arange(6, dtype=float)
    a, b = core.chain_free_pairs(np.abs(x[:, None] - x[None, :]))
    assert sorted(zip(a.tolist(), b.tolist(), strict=True)) == [(i, i + 1) for i in range(5)]
    # l1 grid: the 4-neighbours; l2 grid: primitive directions only (no (0, 2) step)
    a, b = core.chain_free_pairs(grid_metric(3, 1.0))
    assert a.size == 12
    a, b = core.chain_free_pairs(grid_metric(3, 2.0))
    steps = {
        (abs(int(j) // 3 - int(i) // 3), abs(int(j) % 3 - int(i) % 3)) for i, j in zip(a, b, strict=True)
    }
    assert steps == {(0, 1), (1, 0), (1, 1), (1, 2), (2, 1)}
    # nominal: every pair
    a, _ = core.chain_free_pairs(1 - np.eye(5))
    assert a.size == 10


def test_path_equals_cold_solves_and_is_monotone() -> None:
    d = grid_metric(4, 2.0) / 3
    n = 16
    rng = np.random.default_rng(5)
    prior = rng.dirichlet(np.ones(n))
    loss = rng.uniform(0, 1, (n, n))
    grid = [0.3, 0.8, 1.5, 3.0, 6.0]
    ticks: list[float] = []
    path = core.optimal_mechanisms(prior, loss, d, grid, progress=lambda f, _m: ticks.append(f))
    assert ticks[-1] == 1.0
    for eps, res in zip(grid, path, strict=True):
        cold = core.optimal_mechanism(prior, loss, d, eps)
        assert res.success and res.eps == eps
        assert res.objective == pytest.approx(cold.objective, abs=1e-9)
        assert core.mdp_violation(res.matrix, d, eps) <= 1e-9
    objs = [r.objective for r in path]
    assert np.all(np.diff(objs) <= 1e-9)


class _StoppedError(Exception):
    """What a page's stop raises from the progress callback."""


@pytest.mark.parametrize("kind", ["general", "tree rays"])
def test_progress_after_every_master_solve_and_a_stop_from_it(kind: str) -> None:
    """The playground's LP runs as a background job: its bar moves and its stop lands between two master
    solves (not after the whole LP)."""
    rng = np.random.default_rng(11)
    d = random_tree_metric(rng, 9) if kind == "tree rays" else random_metric(rng, 9)
    loss = rng.uniform(0, 1, (9, 14))
    prior = rng.dirichlet(np.ones(9))
    ticks: list[tuple[float, str]] = []
    res = core.optimal_mechanism(prior, loss, d, 1.5, progress=lambda f, m: ticks.append((f, m)))
    assert res.success and res.extra["pricing"] == kind and res.rounds >= 2
    assert [m.split(":")[0] for _f, m in ticks] == [f"round {k}" for k in range(1, res.rounds + 1)]
    fractions = [f for f, _m in ticks]
    assert fractions[0] >= 0 and np.all(np.diff(fractions) >= 0) and fractions[-1] <= 1

    def stop_in_round_two(_f: float, message: str) -> None:
        if message.startswith("round 2"):
            raise _StoppedError

    with pytest.raises(_StoppedError):
        core.optimal_mechanism(prior, loss, d, 1.5, progress=stop_in_round_two)
    path: list[str] = []
    core.optimal_mechanisms(prior, loss, d, [0.5, 1.5], progress=lambda _f, m: path.append(m))
    assert path[0].startswith("OPT at eps = 0.5, round 1") and path[-1] == "OPT at eps = 1.5"


@settings(max_examples=15, deadline=None)
@given(n=hst.integers(2, 7), eps=hst.floats(0.05, 10), seed=hst.integers(0, 2**31), tree=hst.booleans())
def test_properties(n: int, eps: float, seed: int, tree: bool) -> None:
    rng = np.random.default_rng(seed)
    d = random_tree_metric(rng, n) if tree else random_metric(rng, n)
    prior = rng.dirichlet(np.ones(n))
    loss = rng.uniform(0, 1, (n, n))
    res = core.optimal_mechanism(prior, loss, d, eps)
    assert res.success
    assert np.all(res.matrix >= 0)
    np.testing.assert_allclose(res.matrix.sum(axis=1), 1.0, atol=1e-12)
    assert core.mdp_violation(res.matrix, d, eps) <= 1e-9
    em = core.exponential_mechanism(d, eps)
    remap = core.bayesian_remap(em, prior, loss)
    assert res.objective <= core.expected_loss(remap, prior, loss) + 1e-9
    assert core.expected_loss(remap, prior, loss) <= core.expected_loss(em, prior, loss) + 1e-12
    assert core.optimal_mechanism(prior, loss, d, 1.5 * eps).objective <= res.objective + 1e-9


def test_repair_makes_a_perturbed_solution_private() -> None:
    d = grid_metric(3, 2.0) / 2
    n = 9
    prior = np.full(n, 1 / n)
    loss = 1 - np.eye(n)
    res = core.optimal_mechanism(prior, loss, d, 2.0)
    noisy = res.matrix + np.random.default_rng(0).uniform(0, 1e-8, res.matrix.shape)
    noisy[0, np.argmax(res.matrix[0])] += 1e-4  # a clear violation
    assert core.mdp_violation(noisy, d, 2.0) > 1e-9
    P, viol, rounds = core.repair_mechanism(noisy, d, 2.0)
    assert viol <= 1e-9 and rounds >= 1
    np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-12)
    assert core.expected_loss(P, prior, loss) == pytest.approx(res.objective, abs=1e-4)


def test_repair_gives_up_when_the_violation_stops_falling(monkeypatch: pytest.MonkeyPatch) -> None:
    from mdp_core.mechanisms import verify

    d = grid_metric(3, 2.0) / 2
    P = np.full((9, 4), 0.25)
    stalled = iter([3e-3, 2e-3, 2.5e-3, 2e-3, 2.1e-3, 2.2e-3, 2e-3, 1e-13])  # stalls from round 2
    monkeypatch.setattr(verify, "mdp_violation", lambda *_: next(stalled))
    _, viol, rounds = verify.repair_mechanism(P, d, 2.0)
    assert (rounds, viol) == (7, 2e-3)  # five rounds after the least violation, not 50


def test_repair_returns_its_best_round_not_its_last(monkeypatch: pytest.MonkeyPatch) -> None:
    """The playground's LP on heart (restecg x thalach x slope, l_inf, squared loss, eps 5) was reported
    "could not certify": round 1 of the repair reached 5.4e-12 (private), the later rounds' margins made it
    worse (8.8e-7), and the repair returned its last round."""
    from mdp_core.mechanisms import verify

    d = grid_metric(3, 2.0) / 2
    rng = np.random.default_rng(4)
    Z = rng.dirichlet(np.ones(4), size=9)
    seen: list[np.ndarray] = []
    worse = iter([5e-12, 4e-9, 2e-8, 9e-8, 3e-7, 9e-7, 2e-6])

    def violation(P: np.ndarray, *_: object) -> float:
        seen.append(P.copy())
        return next(worse)

    monkeypatch.setattr(verify, "mdp_violation", violation)
    P, viol, rounds = verify.repair_mechanism(Z, d, 2.0)
    assert (viol, rounds) == (5e-12, 6) and len(seen) == 6
    np.testing.assert_array_equal(P, seen[0])


def _heart_group(cols: list[str], p: float) -> tuple[np.ndarray, np.ndarray]:
    """The playground's domain of ``cols`` on heart (8 bins): metric and empirical prior."""
    df = core.load_dataset("heart")
    enc = core.discretize(df, core.infer_schema(df, target="target"), bins=8)
    d = core.product_distance([enc.components[c] for c in cols], p)
    joint = core.joint_codes(enc.codes[cols].to_numpy(), [enc.domain_sizes[c] for c in cols])
    return d, np.bincount(joint, minlength=d.shape[0]) / len(joint)


def assert_certified(res: core.MechanismResult, prior: np.ndarray, d: np.ndarray, eps: float) -> None:
    """Private, row-stochastic, no worse than EM + remap (a private mechanism), and within the message's
    distance of the certified lower bound."""
    assert res.success, res.message
    assert core.mdp_violation(res.matrix, d, eps) <= 1e-9
    np.testing.assert_allclose(res.matrix.sum(axis=1), 1.0, atol=1e-12)
    remap = core.bayesian_remap(core.exponential_mechanism(d, eps), prior, d**2)
    assert res.objective <= core.expected_loss(remap, prior, d**2) + 1e-12
    gap = res.objective - res.extra["lower_bound"]
    assert -1e-9 <= gap <= 1e-3 * res.objective  # the bound is below, and close
    assert res.message.startswith("Optimal" if gap <= 1e-6 * res.objective + 1e-9 else "Near-optimal")


def test_the_playground_lp_that_repair_gave_up_on_is_certified() -> None:
    d, prior = _heart_group(["restecg", "thalach", "slope"], np.inf)
    assert_certified(core.optimal_mechanism(prior, d**2, d, 5.0), prior, d, 5.0)


@pytest.mark.parametrize(
    ("cols", "p", "eps"), [(["age", "cp", "exang"], 2.0, 20.0), (["age", "sex", "ca"], 1.0, 15.0)]
)
def test_large_budgets_whose_factors_pass_the_solvers_range_are_solved(
    cols: list[str], p: float, eps: float
) -> None:
    """Heart, three attributes, eps 15-20 (the playground's slider reaches 20): factors exp(eps d) up to
    1e15-1e20. HiGHS rejected whole batches of rows (a coefficient above 1e15) and failed ("Solve error",
    "pricing LP failed") in 9 of 21 cases; rows past 1e9 are now left to the repair (1e6 on a retry)."""
    d, prior = _heart_group(cols, p)
    assert eps * d.max() > 25
    assert_certified(core.optimal_mechanism(prior, d**2, d, eps), prior, d, eps)


def test_rows_past_the_factor_limit_never_enter_the_lps() -> None:
    from mdp_core.mechanisms._colgen import ColumnGeneration
    from mdp_core.mechanisms._pricing import _LPPricer

    rng = np.random.default_rng(8)
    d = random_metric(rng, 10)
    a, b = core.chain_free_pairs(d)
    free = _LPPricer(d, a, b, max_log_factor=0.0)  # every row past the limit: only the box is left
    free.set_eps(1.0)
    w = rng.normal(size=10)
    assert free.price(w)[0] == pytest.approx(w[w < 0].sum(), abs=1e-12)
    loss, prior = rng.uniform(0, 1, (10, 10)), rng.dirichlet(np.ones(10))
    limit = 1.0 * np.median(d[d > 0])
    model = ColumnGeneration(prior, loss, d, a, b, np.arange(10), None, limit)
    raw = model.solve(1.0, time_limit=30, max_rounds=200)
    assert raw.ok and model.rows > 0
    assert np.all(model.pd[model.row_pair] <= limit)
    full = core.optimal_mechanism(prior, loss, d, 1.0)
    assert raw.lower_bound <= full.objective + 1e-9  # a relaxation: still a lower bound
    assert raw.lp_objective <= full.objective + 1e-9


def test_a_numerical_failure_is_retried_with_fewer_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    from mdp_core.mechanisms import _pricing
    from mdp_core.mechanisms._colgen import ColumnGeneration, MasterSolution

    limits: list[float] = []
    solve = ColumnGeneration.solve

    def fails_at_the_first_limit(self: ColumnGeneration, *args: object, **kwargs: object) -> MasterSolution:
        limits.append(self.max_log_factor)
        if self.max_log_factor == _pricing.MAX_LOG_FACTOR:
            return MasterSolution(ok=False, status="Solve error", rounds=1)
        return solve(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ColumnGeneration, "solve", fails_at_the_first_limit)
    rng = np.random.default_rng(9)
    d = random_metric(rng, 8)
    prior, loss = rng.dirichlet(np.ones(8)), rng.uniform(0, 1, (8, 8))
    eps = 16.0 / d.max()  # past the retry's limit (ln 1e6 = 13.8), within the first one
    res = core.optimal_mechanism(prior, loss, d, eps)
    assert limits == [_pricing.MAX_LOG_FACTOR, _pricing.RETRY_LOG_FACTOR]
    assert res.success and core.mdp_violation(res.matrix, d, eps) <= 1e-9
    limits.clear()
    core.optimal_mechanism(prior, loss, d, 10.0 / d.max())  # below the retry's limit: no retry helps
    assert limits == [_pricing.MAX_LOG_FACTOR]


def test_repair_keeps_columns_whose_far_entries_the_solver_rounded_to_zero() -> None:
    """At large eps an output's far entries are e^{-eps d} ~ 1e-13: a solver returns them as exact zeros.
    One zero forces the whole column to zero under the envelope alone (rows lost all their mass); the
    repair raises them to the least value the column allows, certifies, and keeps the objective."""
    n, eps = 30, 4.0
    d = np.abs(np.subtract.outer(np.arange(n), np.arange(n))).astype(float)
    em = core.exponential_mechanism(d, eps)  # eps/2-mDP per output column, every column positive
    rounded = np.where(em < 1e-9, 0.0, em)
    assert (rounded == 0).any(axis=0).all()  # every column has a zero
    P, viol, _ = core.repair_mechanism(rounded, d, eps)
    assert np.isfinite(P).all() and viol <= 1e-12
    np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(P, em, atol=1e-8)


def test_limits_fail_softly() -> None:
    d = 1 - np.eye(4)
    res = core.optimal_mechanism(np.full(4, 0.25), np.ones((4, 4)), d, 1.0, max_inputs=3)
    assert not res.success and res.status == "size limit"
    assert "limited to 3" in res.message and np.isnan(res.objective)
    path = core.optimal_mechanisms(np.full(4, 0.25), np.ones((4, 4)), d, [1, 2], max_variables=8)
    assert [r.success for r in path] == [False, False] and "variables" in path[0].message


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (([0.5, 0.5], np.ones((2, 2)), np.ones((2, 3)), 1.0), "dist_in must be square"),
        (([0.5, 0.5], np.ones((2, 2)), [[0, 1], [0.5, 0]], 1.0), "dist_in must be symmetric"),
        (([1 / 3] * 3, np.ones((3, 3)), [[0, 1, 5], [1, 0, 1], [5, 1, 0]], 1.0), "triangle inequality"),
        (([1.5, -0.5], np.ones((2, 2)), 1 - np.eye(2), 1.0), "prior must be non-negative"),
        (([0.5, 0.5], [[0, np.nan], [1, 0]], 1 - np.eye(2), 1.0), "loss contains NaN"),
        (([0.5, 0.5], np.ones((2, 2)), 1 - np.eye(2), 0.0), "eps must be a positive"),
        (([0.5, 0.5], np.ones((2, 2)), 1 - np.eye(2), -1.0), "eps must be a positive"),
        (([0.5, 0.5], np.ones((3, 2)), 1 - np.eye(2), 1.0), "dist_in must be 3 x 3"),
    ],
)
def test_bad_input(args: tuple, match: str) -> None:
    with pytest.raises(core.DataError, match=match):
        core.optimal_mechanism(*args)


def test_bad_grid() -> None:
    with pytest.raises(core.DataError, match="eps_grid"):
        core.optimal_mechanisms([0.5, 0.5], np.ones((2, 2)), 1 - np.eye(2), [1.0, 1.0])


# -- column generation (mdp_core.mechanisms._colgen) ------------------------------------------------


def cone_lp(w: np.ndarray, d: np.ndarray, eps: float, *, root: int | None = None) -> float:
    """Brute force: min <w, v> over the log-Lipschitz cone, all ordered pairs, with v_root = 1 or v <= 1."""
    n = w.size
    i, j = np.nonzero(~np.eye(n, dtype=bool))
    A = np.zeros((i.size, n))
    A[np.arange(i.size), i] = 1.0
    A[np.arange(i.size), j] -= np.exp(eps * d[i, j])
    if root is None:
        res = linprog(w, A_ub=A, b_ub=np.zeros(i.size), bounds=(0, 1), method="highs")
    else:
        e = np.zeros((1, n))
        e[0, root] = 1.0
        res = linprog(w, A_ub=A, b_ub=np.zeros(i.size), A_eq=e, b_eq=[1.0], bounds=(0, None), method="highs")
    assert res.status == 0
    return float(res.fun)


def random_tree_metric(rng: np.random.Generator, n: int) -> np.ndarray:
    w = np.zeros((n, n))
    for k in range(1, n):
        p = int(rng.integers(0, k))
        w[k, p] = w[p, k] = rng.uniform(0.1, 1.0)
    return shortest_path(w, directed=False)


@pytest.mark.parametrize("seed", range(5))
def test_tree_pricing_matches_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 9))
    d = random_tree_metric(rng, n) if seed % 2 else np.abs(np.subtract.outer(*(2 * [rng.random(n).cumsum()])))
    a, b = core.chain_free_pairs(d)
    tree = _pricing.tree_order(n, a, b)
    assert tree is not None and a.size == n - 1
    order, parent, _ = tree
    eps = float(rng.uniform(0.3, 4))
    step = np.zeros(n)
    step[order[1:]] = eps * d[order[1:], parent[order[1:]]]
    W = rng.normal(size=(n, 4))
    g, V = _pricing.tree_pricing(W, order, parent, step)
    for y in range(4):
        assert g[y] == pytest.approx(cone_lp(W[:, y], d, eps, root=int(order[0])), rel=1e-9, abs=1e-9)
        assert W[:, y] @ V[:, y] == pytest.approx(g[y], rel=1e-12, abs=1e-12)  # the ray attains it ...
        assert core.mdp_violation(V[:, [y]], d, eps) <= 1e-12  # ... and lies in the cone


def test_tree_order_rejects_cycles() -> None:
    a, b = core.chain_free_pairs(grid_metric(3, 1.0))
    assert _pricing.tree_order(9, a, b) is None


@pytest.mark.parametrize("seed", range(4))
def test_nominal_pricing_matches_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, c, eps = int(rng.integers(2, 8)), float(rng.uniform(0.2, 2)), float(rng.uniform(0.2, 3))
    d = c * (1 - np.eye(n))
    W = rng.normal(size=(n, 3))
    mu, V = _pricing.nominal_pricing(W, np.exp(eps * c))
    for y in range(3):
        assert min(mu[y], 0.0) == pytest.approx(cone_lp(W[:, y], d, eps), abs=1e-9)
        assert core.mdp_violation(V[:, [y]], d, eps) <= 1e-12


def test_lp_pricer_matches_brute_force() -> None:
    rng = np.random.default_rng(3)
    d = grid_metric(3, 2.0)
    a, b = core.chain_free_pairs(d)
    pricer = _pricing._LPPricer(d, a, b)
    pricer.set_eps(1.1)
    for _ in range(4):
        w = rng.normal(size=9)
        value, _ = pricer.price(w)
        assert value == pytest.approx(cone_lp(w, d, 1.1), abs=1e-9)


def threshold_loss(values: np.ndarray, t: float) -> np.ndarray:
    above = values > t
    return (above[:, None] != above[None, :]).astype(float)


@pytest.mark.parametrize(
    "case", ["chain-threshold", "chain-rect", "nominal-01", "l2-threshold", "random-01", "tree-squared"]
)
def test_column_generation_matches_full_lp(case: str) -> None:
    rng = np.random.default_rng(sum(map(ord, case)))
    if case.startswith("chain"):
        x = np.sort(rng.uniform(0, 3, 9))
        d = np.abs(x[:, None] - x[None, :])
        loss = (
            threshold_loss(x, 1.5) if case == "chain-threshold" else (x[:, None] - np.linspace(0, 3, 5)) ** 2
        )
    elif case == "nominal-01":
        d = 0.7 * (1 - np.eye(7))
        loss = 1 - np.eye(7)
    elif case == "l2-threshold":
        d = grid_metric(3, 2.0)
        loss = threshold_loss(np.arange(9) % 3 + np.arange(9) // 3, 2)
    elif case == "tree-squared":
        d = random_tree_metric(rng, 8)
        loss = d**2
    else:
        d = random_metric(rng, 7)
        loss = 1 - np.eye(7)
    n = d.shape[0]
    prior = rng.dirichlet(np.full(n, 0.7))
    for eps in (0.4, 1.7, 6.0):
        res = core.optimal_mechanism(prior, loss, d, eps)
        assert res.success, res.message
        ref = loop_lp(prior, loss, d, eps)
        assert res.objective == pytest.approx(ref, abs=1e-7)
        # our certificate: lower bound and optimum within 1e-9 (linprog's own optimum is only ~1e-7 exact)
        assert res.extra["lower_bound"] <= ref + 1e-7
        assert res.lp_objective - res.extra["lower_bound"] <= 1e-9
        assert core.mdp_violation(res.matrix, d, eps) <= 1e-9
        inactive = np.ones(loss.shape[1], dtype=bool)
        inactive[res.matrix.max(axis=0) > 0] = False
        assert res.extra["outputs"] >= np.count_nonzero(~inactive)
        assert np.all(res.matrix[:, inactive] == 0.0)


def test_pricing_kinds() -> None:
    x = np.arange(5.0)
    kinds = {
        "tree rays": np.abs(x[:, None] - x[None, :]),
        "nominal floor": 1 - np.eye(5),
        "general": grid_metric(3, 2.0)[:5, :5],
    }
    for kind, d in kinds.items():
        res = core.optimal_mechanism(np.full(5, 0.2), d**2, d, 1.0)
        assert res.extra["pricing"] == kind


@pytest.mark.parametrize("seed", range(5))
def test_floor_master_on_discrete_metrics_matches_the_full_pairwise_lp(seed: int) -> None:
    """Nominal attributes: one floor per output replaces the n (n - 1) privacy rows of its column (the
    pairwise master took 233 s on a 40-level attribute); same optimum as the independent full LP, rows and
    bound certified, along a grid too (the grid's points reuse the previous optimum's outputs)."""
    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(3, 8)), int(rng.integers(2, 8))
    c = float(rng.uniform(0.3, 2.0))
    d = c * (1 - np.eye(n))
    prior = rng.dirichlet(np.full(n, 0.8))
    loss = rng.uniform(0, 1, (n, m))
    grid = np.sort(rng.uniform(0.05, 8.0, 3))
    for res in core.optimal_mechanisms(prior, loss, d, grid):
        assert res.success and res.extra["pricing"] == "nominal floor", res.message
        ref = loop_lp(prior, loss, d, res.eps)
        assert res.objective == pytest.approx(ref, abs=1e-7)
        assert res.extra["lower_bound"] <= ref + 1e-7 and res.objective - res.extra["lower_bound"] <= 1e-9
        assert core.mdp_violation(res.matrix, d, res.eps) <= 1e-9
        assert np.allclose(res.matrix.sum(axis=1), 1.0, atol=1e-12)


def test_floor_master_past_the_factor_limit_still_returns_a_private_mechanism() -> None:
    # eps c = 35 > FLOOR_LOG_LIMIT: the floors are left out of the master (HiGHS's coefficient limits), so its
    # optimum is the relaxation's; the repair makes it private and the certificate stays a lower bound. At
    # eps c = 25 (past the pairwise rows' limit) the floors are kept and the optimum is proven.
    d = 1 - np.eye(4)
    prior = np.array([0.4, 0.3, 0.2, 0.1])
    for eps, verdict in ((25.0, "Optimal"), (35.0, "")):
        res = core.optimal_mechanism(prior, d, d, eps)
        assert res.success and res.extra["pricing"] == "nominal floor" and res.message.startswith(verdict)
        assert core.mdp_violation(res.matrix, d, eps) <= 1e-9
        assert res.extra["lower_bound"] <= res.objective <= 1e-9


def test_an_lp_with_every_row_past_the_factor_limit_says_so() -> None:
    """Review: a block master left without privacy rows (every factor past the limit) raised KeyError."""
    x = np.arange(5.0)
    d = np.sqrt(np.abs(x[:, None] - x[None, :]))  # not a tree, not discrete: the block master
    res = core.optimal_mechanism(np.full(5, 0.2), d, d, 25.0)
    assert res.success and res.extra["pricing"] == "general" and res.rows == 0
    assert "no privacy rows (all past the solver's factor limit" in res.message
    assert core.mdp_violation(res.matrix, d, 25.0) <= 1e-9


@pytest.mark.parametrize("seed", range(4))
def test_negative_losses_are_certified_without_endless_retries(seed: int) -> None:
    """Review: with a negative optimum the relative "proven" test never held, so each unproven solve retried
    at 0.9 eps, again and again (RecursionError); the verdict read "at most -0 % above"."""
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(0, 3, 7))
    d = np.sqrt(np.abs(x[:, None] - x[None, :]))
    loss = rng.uniform(-1, 0.2, (7, 5))
    prior = rng.dirichlet(np.ones(7))
    res = core.optimal_mechanism(prior, loss, d, 1.3)
    assert res.success and res.objective == pytest.approx(loop_lp(prior, loss, d, 1.3), abs=1e-7)
    assert "-0 %" not in res.message and res.extra["lower_bound"] <= res.objective + 1e-12


def test_inactive_outputs_are_exactly_zero() -> None:
    # a wide loss matrix: many outputs are never worth using, and column generation never activates them
    rng = np.random.default_rng(0)
    d = grid_metric(3, 2.0)
    loss = np.hstack([d**2, 5.0 + rng.uniform(0, 1, (9, 20))])
    res = core.optimal_mechanism(np.full(9, 1 / 9), loss, d, 2.0)
    assert res.success and res.extra["outputs"] < loss.shape[1]
    assert np.all(res.matrix[:, 9:] == 0.0)
    assert res.objective == pytest.approx(loop_lp(np.full(9, 1 / 9), loss, d, 2.0), abs=1e-7)


# -- ray master (mdp_core.mechanisms._rays) and dominated outputs ----------------------------------


@pytest.mark.parametrize("seed", range(4))
def test_ray_master_matches_full_lp_on_trees_with_any_loss(seed: int) -> None:
    # random trees, non-monotone losses, more outputs than inputs: no universal optimality to lean on
    rng = np.random.default_rng(seed)
    n = int(rng.integers(4, 8))
    d = random_tree_metric(rng, n)
    loss = rng.uniform(0, 1, (n, n + 3))
    prior = rng.dirichlet(np.ones(n))
    for eps in (0.3, 2.0, 9.0):
        res = core.optimal_mechanism(prior, loss, d, eps)
        assert res.success and res.extra["pricing"] == "tree rays", res.message
        assert res.rows == 0
        assert res.objective == pytest.approx(loop_lp(prior, loss, d, eps), abs=1e-7)
        assert res.lp_objective - res.extra["lower_bound"] <= 1e-9
        assert core.mdp_violation(res.matrix, d, eps) <= 1e-9


def test_ray_master_certifies_the_geometric_optimum_in_one_round() -> None:
    # equal steps and a loss non-decreasing in |x - y|: truncated geometric + remap is optimal (GRS 2009)
    n = 40
    x = np.arange(n) / (n - 1)
    d = np.abs(x[:, None] - x[None, :])
    prior = np.random.default_rng(1).dirichlet(np.ones(n))
    for eps in (0.5, 8.0):
        res = core.optimal_mechanism(prior, d**2, d, eps)
        assert res.success and res.rounds == 1
        a = np.exp(-eps * d[0, 1])
        geo = np.exp(-eps * d) * (1 - a) / (1 + a)
        geo[:, 0], geo[:, -1] = a ** np.arange(n) / (1 + a), a ** np.arange(n)[::-1] / (1 + a)
        remapped = core.bayesian_remap(geo, prior, d**2)
        assert res.objective == pytest.approx(core.expected_loss(remapped, prior, d**2), abs=1e-12)


def test_ray_master_falls_back_to_the_block_master(monkeypatch: pytest.MonkeyPatch) -> None:
    from mdp_core.mechanisms import lp

    rng = np.random.default_rng(3)
    d = random_tree_metric(rng, 7)
    loss = rng.uniform(0, 1, (7, 9))
    prior = rng.dirichlet(np.ones(7))
    monkeypatch.setattr(lp, "_RAY_ROUNDS", 1)
    fallback = core.optimal_mechanism(prior, loss, d, 3.0)
    monkeypatch.undo()
    rays = core.optimal_mechanism(prior, loss, d, 3.0)
    assert rays.rounds > 1  # so the one-round budget really did run out
    assert fallback.extra["pricing"] == "tree" and fallback.rows > 0
    assert fallback.objective == pytest.approx(rays.objective, abs=1e-9)


def brute_undominated(loss: np.ndarray) -> set[int]:
    m = loss.shape[1]
    keep = set()
    for y in range(m):
        beaten = any(
            np.all(loss[:, z] <= loss[:, y]) and (np.any(loss[:, z] < loss[:, y]) or z < y)
            for z in range(m)
            if z != y
        )
        if not beaten:
            keep.add(y)
    return keep


@settings(max_examples=40, deadline=None)
@given(hst.integers(1, 6), hst.integers(1, 9), hst.integers(0, 10_000))
def test_undominated_outputs_match_brute_force(n: int, m: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    loss = rng.integers(0, 3, (n, m)).astype(float)  # small integers: many ties and dominations
    from mdp_core.mechanisms._pricing import undominated_outputs

    assert set(undominated_outputs(loss).tolist()) == brute_undominated(loss)


def test_dominated_outputs_get_no_mass_and_do_not_change_the_optimum() -> None:
    rng = np.random.default_rng(5)
    d = random_metric(rng, 6)
    loss = rng.uniform(0, 1, (6, 6))
    wide = np.hstack([loss, loss + 0.1, loss[:, :2]])  # worse copies and exact duplicates
    prior = rng.dirichlet(np.ones(6))
    res = core.optimal_mechanism(prior, wide, d, 1.5)
    assert res.success and res.extra["undominated"] == 6
    assert np.all(res.matrix[:, 6:] == 0.0)
    assert res.objective == pytest.approx(loop_lp(prior, loss, d, 1.5), abs=1e-7)


@pytest.mark.parametrize("seed", range(5))
def test_box_minimum_bound_is_valid_and_beats_the_root_bound(seed: int) -> None:
    from mdp_core.mechanisms._rays import box_minimum_bound

    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 9))
    d = random_tree_metric(rng, n)
    order, parent, _ = _pricing.tree_order(n, *core.chain_free_pairs(d))
    eps = float(rng.uniform(0.3, 6))
    step = np.zeros(n)
    step[order[1:]] = eps * d[order[1:], parent[order[1:]]]
    W = rng.normal(size=(n, 5))
    bound = box_minimum_bound(W, order, parent, step)
    g, _ = _pricing.tree_pricing(W, order, parent, step)
    for y in range(5):
        exact = cone_lp(W[:, y], d, eps)  # brute-force box minimum
        assert np.minimum(g[y], 0) - 1e-12 <= bound[y] <= exact + 1e-9
        # every root's value is a valid bound, and re-rooting computes each exactly
        for r in range(n):
            assert bound[y] >= min(cone_lp(W[:, y], d, eps, root=r), 0.0) - 1e-9


def test_ray_path_on_a_tree_equals_cold_solves_up_to_large_eps() -> None:
    # the ray master restarts each grid point from the previous optimum's rays, rescaled to the new eps
    rng = np.random.default_rng(8)
    d = random_tree_metric(rng, 9)
    d /= d.max()  # diameter 1: the reference LP's coefficients stay below exp(20)
    prior = rng.dirichlet(np.ones(9))
    loss = rng.uniform(0, 1, (9, 11))
    grid = np.geomspace(0.05, 20.0, 9)
    path = core.optimal_mechanisms(prior, loss, d, grid)
    for eps, res in zip(grid, path, strict=True):
        assert res.success and res.extra["pricing"] == "tree rays", res.message
        assert res.objective == pytest.approx(loop_lp(prior, loss, d, eps), abs=1e-7)
        assert core.mdp_violation(res.matrix, d, eps) <= 1e-9


def test_warm_start_is_none_when_the_basis_does_not_match_the_master() -> None:
    """Walk failure (playground, heart): a HiGHS basis that does not describe the current master (another
    size: IndexError in warm_start) is never used; warm_start returns None and the next point starts cold."""
    from mdp_core.mechanisms._colgen import ColumnGeneration

    rng = np.random.default_rng(5)
    pts = rng.uniform(0, 1, (12, 2))
    d = np.sqrt(((pts[:, None] - pts[None]) ** 2).sum(-1))
    loss = d**2
    prior = np.full(12, 1 / 12)
    a, b = core.chain_free_pairs(d)
    model = ColumnGeneration(prior, loss, d, a, b, np.arange(3), None)
    assert model.solve(2.0, time_limit=30, max_rounds=200).ok
    assert model.warm_start() is not None
    model.add_rows(np.arange(2), np.zeros(2, dtype=np.int64))  # the model grows; its last basis does not
    model.h.clearSolver()
    assert model.warm_start() is None


def test_a_master_highs_calls_optimal_far_from_the_optimum_is_not_certified_and_is_solved_again() -> None:
    """Audit: adult's marital-status (7 nominal values, 0/1 loss) at eps 20: the LP optimum was reported
    "Optimal" at 0.0447, with a "certified" bound of 0.0447, 160 x EM's loss; the LP's optimum is 1.24e-8.
    Now the active outputs are priced into the bound, and an unproven optimum is solved again from below."""
    prior = np.array([0.135805, 0.000758, 0.458192, 0.012858, 0.329982, 0.031325, 0.03108])
    prior /= prior.sum()
    d = 1.0 - np.eye(7)
    exact = loop_lp(prior, d, d, 20.0)
    r = core.optimal_mechanism(prior, d, d, 20.0)
    assert r.success and r.message.startswith("Optimal")
    assert r.objective == pytest.approx(exact, rel=1e-5)
    assert r.extra["lower_bound"] <= exact * (1 + 1e-6)
    em = core.exponential_mechanism(d, 20.0)
    assert r.objective < float(prior @ (em * d).sum(axis=1))
    assert core.mdp_violation(r.matrix, d, 20.0) <= 1e-9


def test_a_primal_run_past_its_iteration_limit_restarts_from_its_basis_by_the_dual() -> None:
    """The guard for stalled general masters (a nominal x near-copy binary group: 253,831 primal iterations,
    92 s, where the dual took 0.35 s): past the limit, the dual from the starting basis; the same optimum."""
    import time

    import highspy
    import scipy.sparse as sp

    from mdp_core._highs import highs_model, run_until

    cost = np.random.default_rng(4).uniform(1, 2, 60)
    a = sp.random(40, 60, density=0.3, random_state=5, format="csc") + sp.eye(40, 60)

    def model() -> highspy.Highs:  # min c'x, A x >= 1, x >= 0 (bounded: c > 0)
        h = highs_model(a, np.ones(40), np.full(40, highspy.kHighsInf), cost)
        h.setOptionValue("simplex_strategy", 4)
        return h

    plain = model()
    assert run_until(plain, time.perf_counter() + 60) == highspy.HighsModelStatus.kOptimal
    assert plain.getInfo().simplex_iteration_count > 1
    guarded = model()
    status = run_until(guarded, time.perf_counter() + 60, max_primal_iterations=1)
    assert status == highspy.HighsModelStatus.kOptimal
    assert guarded.getOptionValue("simplex_strategy")[1] == 1  # went on by the dual
    assert guarded.getOptionValue("simplex_iteration_limit")[1] == 2**31 - 1  # the limit is lifted again
    assert guarded.getInfo().objective_function_value == pytest.approx(
        plain.getInfo().objective_function_value, rel=1e-9
    )


def test_lagrangian_bound_holds_for_any_row_duals_on_a_nominal_metric() -> None:
    """(mutation audit, stop 67) an active bound that always read 0 passed every test: HiGHS's duals
    were always right. Weak duality holds for any row duals, so duals far from the optimum still bound."""
    from mdp_core.mechanisms._colgen import ColumnGeneration

    rng = np.random.default_rng(0)
    n = 4
    d = 1.0 - np.eye(n)
    prior, loss = np.full(n, 1 / n), rng.uniform(0, 1, (n, n))
    a, b = core.chain_free_pairs(d)
    cg = ColumnGeneration(prior, loss, d, a, b, start=np.arange(n))
    cg.set_eps(1.0)
    cg.add_outputs(np.arange(n))
    u = (prior[:, None] * loss).max(axis=1) + 1.0  # row duals no master optimum would give
    assert u.sum() + cg.active_bound(u) <= loop_lp(prior, loss, d, 1.0) + 1e-9
