"""run_dephdp end to end on heart: composition, verification, baselines, caching, surrogate, privatize."""

from __future__ import annotations

import json
import pickle
import time
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

import mdp_core as core
from mdp_core import DataError, DepHDPConfig, budget_norm, dual_exponent, mdp_violation, run_dephdp
from mdp_core.dephdp.config import Note


@pytest.fixture(scope="module")
def fit() -> core.Encoded:
    df = core.load_dataset("heart")
    enc = core.discretize(df, core.infer_schema(df, target="target"))
    return core.split_encoded(enc, 0.625, np.random.default_rng(0))[0]


@pytest.fixture(scope="module")
def cache() -> dict:
    """One profile cache for the module (the core keeps none of its own)."""
    return {}


@pytest.fixture(scope="module")
def result(fit: core.Encoded, cache: dict) -> core.DepHDPResult:
    return run_dephdp(fit, DepHDPConfig(eps=2.0), cache=cache)


def test_groups_partition_the_released_attributes(result: core.DepHDPResult, fit: core.Encoded) -> None:
    flat = [a for g in result.groups for a in g]
    assert sorted(flat) == sorted(c for c in fit.columns if c != "target")
    assert all(pr.domain_size <= result.config.max_group_domain for pr in result.profiles)


@pytest.mark.parametrize("p", [1.0, 2.0, np.inf])
def test_composition_and_every_channel_verified(fit: core.Encoded, p: float) -> None:
    res = run_dephdp(fit, DepHDPConfig(eps=1.5, p=p, tau_dpn=0.5))
    q = dual_exponent(p)
    assert budget_norm(res.eps_used, q) <= 1.5 * (1 + 1e-12)
    for pr, P, e in zip(res.profiles, res.mechanism.channels, res.mechanism.eps, strict=True):
        np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-12)
        assert mdp_violation(P, pr.dist, e) <= 1e-9
    for name, b in res.baselines.items():
        assert budget_norm(b.eps, q) <= 1.5 * (1 + 1e-12), name
        assert res.value <= b.value + 1e-12, name


def test_selection_follows_eq24(result: core.DepHDPResult) -> None:
    cfg = result.config
    for pr, sel in zip(result.profiles, result.selection, strict=True):
        expect = pr.domain_size <= min(cfg.tau_dim, cfg.opt_max_domain) and pr.radial <= cfg.tau_dpn
        assert sel == ("OPT" if expect else "DPN")
        if "OPT" in pr.curves:  # OPT never worse than EM + remap, which is never worse than EM
            assert np.all(pr.curves["OPT"] <= pr.curves["RMP"] + 1e-9)
        assert np.all(pr.curves["RMP"] <= pr.curves["DPN"] + 1e-9)


def test_sandwich_and_realised_value(result: core.DepHDPResult) -> None:
    a = result.allocation
    assert a.lower_bound <= a.value + 1e-12
    assert result.lower_bound <= result.value
    K = len(result.profiles)
    idx = np.searchsorted(result.eps_grid, result.eps_used)
    s = result.surrogate
    expect = s.beta0 + float(np.dot(s.betas, result.curves[np.arange(K), idx]))
    assert result.value == pytest.approx(expect)


def test_threshold_changes_reuse_cached_profiles(
    fit: core.Encoded, result: core.DepHDPResult, cache: dict
) -> None:
    t0 = time.perf_counter()
    res = run_dephdp(fit, replace(result.config, eps=5.0, tau_dpn=0.9, tau_dim=20, score="mse"), cache=cache)
    assert time.perf_counter() - t0 < 2.0
    assert all(a is b for a, b in zip(res.profiles, result.profiles, strict=True))


def test_no_cache_means_no_shared_state(fit: core.Encoded) -> None:
    cfg = DepHDPConfig(eps=2.0, **FAST)
    a, b = run_dephdp(fit, cfg), run_dephdp(fit, cfg)
    assert all(x is not y for x, y in zip(a.profiles, b.profiles, strict=True))  # nothing global was reused
    np.testing.assert_array_equal(a.eps_used, b.eps_used)
    assert a.value == b.value


def test_the_task_surrogate_reports_every_group_and_can_be_stopped(fit: core.Encoded) -> None:
    """Audit: on 300 columns the surrogate's fit took 45 s after the profiles' last report, so the page's
    bar stood still and its stop button did nothing for a minute."""
    cfg = DepHDPConfig(eps=2.0, **FAST)
    heard: list[tuple[float, str]] = []
    stage = core.dephdp.dephdp_profiles(fit, cfg, progress=lambda f, m: heard.append((f, m)))
    fractions = [f for f, _ in heard]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0  # the bar never goes back
    fitting = [(f, m) for f, m in heard if m.startswith("task surrogate")]
    k = len(stage.groups)
    assert [m for _, m in fitting] == [f"task surrogate: group {i} of {k}" for i in range(1, k + 1)]
    assert all(0.9 <= f < 1.0 for f, _ in fitting)

    def stop(fraction: float, message: str) -> None:
        if message.startswith("task surrogate: group 2"):
            raise KeyboardInterrupt("stopped")

    with pytest.raises(KeyboardInterrupt, match="stopped"):
        core.dephdp.dephdp_profiles(fit, cfg, progress=stop)


def test_stage_one_object_is_reused_and_checked(fit: core.Encoded) -> None:
    cfg = DepHDPConfig(eps=2.0, **FAST)
    stage = core.dephdp.dephdp_profiles(fit, cfg)
    assert stage.settings == cfg.profile_settings() == replace(cfg, eps=7.0, tau_dpn=0.9).profile_settings()
    direct = run_dephdp(fit, cfg)
    again = run_dephdp(fit, replace(cfg, eps=2.0), profiles=stage)
    assert again.value == direct.value
    assert all(p is q for p, q in zip(again.profiles, stage.profiles, strict=True))
    with pytest.raises(DataError, match="other settings"):
        run_dephdp(fit, replace(cfg, tau_group=0.3), profiles=stage)


def test_record_task_surrogate_is_exact(fit: core.Encoded) -> None:
    res = run_dephdp(fit, DepHDPConfig(eps=2.0, task="record", opt_max_domain=8, calibration_pairs=400))
    s = res.surrogate  # the squared record distance is the sum of the group losses
    assert s.r2_heldout == pytest.approx(1.0, abs=1e-9)
    np.testing.assert_allclose(s.betas, 1.0, atol=1e-6)
    assert s.beta0 == pytest.approx(0.0, abs=1e-9)


def test_privatize_keeps_domains(result: core.DepHDPResult, fit: core.Encoded) -> None:
    out = result.privatize(fit.codes, np.random.default_rng(1))
    assert list(out.columns) == [c for c in fit.columns if c != "target"]
    for c in out.columns:
        assert out[c].between(0, fit.domain_sizes[c] - 1).all()
    with pytest.raises(DataError, match="lacks"):
        result.privatize(fit.codes.drop(columns=["age"]), np.random.default_rng(1))


def test_config_validation() -> None:
    with pytest.raises(DataError, match="tau_dpn"):
        DepHDPConfig(tau_dpn=2.0)
    with pytest.raises(DataError, match="task"):
        DepHDPConfig(task="nope")
    with pytest.raises(TypeError, match="Encoded"):
        run_dephdp("heart", DepHDPConfig())  # type: ignore[arg-type]


FAST = {"opt_max_domain": 4, "grid_points": 8, "calibration_pairs": 300, "max_contexts": 60}
ISSUE_TARGETS = {"heart": ["target", "slope", "cp", "sex"], "wine": ["type", "citric_acid"]}


@pytest.mark.parametrize("shared", [False, True], ids=["no-cache", "shared-cache"])
@pytest.mark.parametrize("dataset", ["heart", "wine"])
def test_every_column_can_be_the_target(dataset: str, shared: bool) -> None:
    """Failure 1 of issue 11: another target column used to meet profiles cached for the old target
    (IndexError in Task.scores, "tuple.index(x): x not in tuple" in group_profile). With one cache shared
    across targets every column is tried; without, the columns of the issue."""
    df = core.load_dataset(dataset)
    df = df.sample(min(len(df), 400), random_state=0).reset_index(drop=True)  # the bug is not about size
    cache: dict | None = {} if shared else None
    cfg = DepHDPConfig(eps=3.0, tau_dpn=0.5, max_group_domain=64, **FAST)
    for target in [None, *df.columns] if shared else ISSUE_TARGETS[dataset]:
        enc = core.discretize(df, core.infer_schema(df, target=target))
        for task in ("prediction",) if target is not None else ("record",):
            res = run_dephdp(enc, replace(cfg, task=task), cache=cache)
            released = [c for c in df.columns if c != target]
            assert sorted(a for g in res.groups for a in g) == sorted(released), (target, task)
            assert res.task.attributes == tuple(released)
            assert budget_norm(res.eps_used, dual_exponent(cfg.p)) <= cfg.eps * (1 + 1e-12)
            for pr, P, e in zip(res.profiles, res.mechanism.channels, res.mechanism.eps, strict=True):
                assert mdp_violation(P, pr.dist, e) <= 1e-9, (target, pr.attributes)
            out = res.privatize(enc.codes, np.random.default_rng(0))
            assert list(out.columns) == released


def test_budget_floor_keeps_every_group_above_it(fit: core.Encoded) -> None:
    cfg = DepHDPConfig(eps=2.0, **FAST)
    plain = run_dephdp(fit, cfg)
    # groups with beta_k = 0 get the budget the weighted ones leave, not the grid minimum (audit)
    assert not plain.starved and plain.floor == cfg.eps_grid[0]
    assert (
        budget_norm(plain.eps_used, 2.0)
        <= 2.0
        < budget_norm(plain.eps_used + 0.27 * plain.eps_used.min(), 2.0)
    )
    floor = 0.3
    res = run_dephdp(fit, replace(cfg, min_group_eps=floor))
    first = cfg.eps_grid[np.searchsorted(cfg.eps_grid, floor)]
    assert res.floor == first and (res.eps_used >= first).all() and not res.starved
    assert budget_norm(res.eps_used, dual_exponent(2.0)) <= 2.0 * (1 + 1e-12)
    for pr, P, e in zip(res.profiles, res.mechanism.channels, res.mechanism.eps, strict=True):
        assert mdp_violation(P, pr.dist, e) <= 1e-9
    for b in res.baselines.values():
        assert (b.eps >= first).all() and res.value <= b.value + 1e-12
    K = len(res.groups)
    with pytest.raises(DataError, match=r"lower the budget floor \(min_group_eps\) to at most 0\.571 or"):
        run_dephdp(
            fit, replace(cfg, min_group_eps=1.0)
        )  # 9 groups x 1.0 > 2 in l2 norm; 0.571 is the largest grid budget within 2 / 3
    assert K == 9
    with pytest.raises(DataError, match="min_group_eps must lie in"):
        DepHDPConfig(min_group_eps=-0.1)


def _marginal_entropy_change(prior: np.ndarray, P: np.ndarray, sizes: tuple[int, ...]) -> float:
    """Independent: sum over the group's attributes of |H(prior marginal) - H(output marginal)|."""
    out = prior @ P
    total = 0.0
    for ax in range(len(sizes)):
        pm, qm = np.zeros(sizes[ax]), np.zeros(sizes[ax])
        for x, idx in enumerate(np.ndindex(*sizes)):
            pm[idx[ax]] += prior[x]
            qm[idx[ax]] += out[x]
        h = lambda p: -sum(v * np.log(v) for v in p if v > 0)  # noqa: E731
        total += abs(h(pm) - h(qm))
    return total


def test_entropy_task_profiles_and_exact_surrogate(fit: core.Encoded) -> None:
    res = run_dephdp(fit, DepHDPConfig(eps=2.0, task="entropy", tau_dpn=0.5))
    s = res.surrogate
    assert s.pairs == 0 and s.beta0 == 0.0 and s.betas == (1.0,) * len(res.groups)
    pr = max(
        res.profiles, key=lambda q: len(q.sizes) if q.domain_size <= 60 else 0
    )  # a multi-attribute group
    i = 10
    for kind in ("DPN", "RMP", "CAL"):
        assert pr.curves[kind][i] == pytest.approx(
            _marginal_entropy_change(pr.prior, pr.channel(kind, i), pr.sizes), abs=1e-12
        )
    np.testing.assert_array_equal(pr.curves["CAL"], np.minimum(pr.curves["DPN"], pr.curves["RMP"]))
    for q in res.profiles:
        if "OPT" in q.curves:
            assert np.all(q.curves["OPT"] <= q.curves["CAL"] + 1e-12)
            assert q.curves["OPT"][i] == pytest.approx(
                _marginal_entropy_change(q.prior, q.channel("OPT", i), q.sizes), abs=1e-12
            )
    q = dual_exponent(2.0)
    assert budget_norm(res.eps_used, q) <= 2.0 * (1 + 1e-12)
    for b in res.baselines.values():
        assert res.value <= b.value + 1e-12


def test_record_task_calibrated_remapping_is_remapping(result: core.DepHDPResult) -> None:
    for pr in result.profiles:  # remapping is Bayes-optimal post-processing for a record loss
        assert pr.use_remap.all()
        np.testing.assert_array_equal(pr.curves["CAL"], pr.curves["RMP"])
    assert all(k in ("OPT", "CAL") for k in result.mechanism.kinds)


def test_opt_profiles_are_time_bounded(fit: core.Encoded) -> None:
    """A group's LPs share opt_seconds; points that run out keep EM (+ remap) and the notes say so."""
    cfg = DepHDPConfig(eps=2.0, tau_dpn=1.0, opt_max_domain=8, grid_points=8, calibration_pairs=300)
    t0 = time.perf_counter()
    res = run_dephdp(fit, replace(cfg, opt_seconds=1e-4))
    assert time.perf_counter() - t0 < 60.0
    starved_lp = [pr for pr in res.profiles if "OPT" in pr.curves and "LPs failed" in pr.opt_message]
    assert starved_lp and any("ran out of their share of the group's LP time" in n for n in res.notes)
    assert {n.kind for n in res.notes if "LPs failed" in n} == {"lp_time"}
    for pr in starved_lp:
        np.testing.assert_array_less(pr.curves["OPT"] - 1e-12, pr.curves["CAL"] + 1e-12)
    for pr, P, e in zip(res.profiles, res.mechanism.channels, res.mechanism.eps, strict=True):
        assert mdp_violation(P, pr.dist, e) <= 1e-9
    assert run_dephdp(fit, cfg).notes == tuple(n for n in run_dephdp(fit, cfg).notes if "LPs failed" not in n)
    with pytest.raises(DataError, match="opt_seconds must be > 0"):
        DepHDPConfig(opt_seconds=0)


def test_notes_say_what_they_are_about_and_keep_it_through_pickling(
    result: core.DepHDPResult, fit: core.Encoded, cache: dict
) -> None:
    """A page leaves out the notes it says in its own words by their kind, never by their wording."""
    cfg = DepHDPConfig(eps=2.0, tau_dim=300)  # above opt_max_domain (48): the cap is noted
    notes = run_dephdp(fit, cfg, cache=cache).notes
    assert cfg.tau_dim > cfg.opt_max_domain and len(result.groups) > result.components  # heart splits
    assert [n.kind for n in notes] == ["tau_dim_cap", "grouping"]
    assert notes[0] == f"tau_dim capped at {cfg.opt_max_domain} (largest group with an OPT profile)"
    assert notes[1].startswith("The NMI graph at tau_group = 0.1 has")
    for note in notes:  # results are pickled into the page's store and profile caches
        back = pickle.loads(pickle.dumps(note))
        assert (back, back.kind, type(back)) == (note, note.kind, Note)
    assert json.loads(json.dumps(list(notes))) == [str(n) for n in notes]  # the audit record's JSON


@pytest.mark.parametrize("method", ["ALC+DPN", "SPL+RMP"])
def test_released_by_a_baseline_releases_its_channels_at_its_budgets(
    result: core.DepHDPResult, method: str
) -> None:
    base, kind = result.baselines[method], method.split("+")[1]
    out = core.released_by(result, method)
    assert out.method == method and out.mechanism.kinds == (kind,) * len(result.groups)
    np.testing.assert_array_equal(out.eps_used, base.eps)
    np.testing.assert_array_equal(out.scores["eps_k"], base.eps)
    assert out.value == base.value and result.lower_bound <= out.value  # DepHDP's bound holds for it too
    assert budget_norm(out.eps_used, dual_exponent(result.config.p)) <= result.config.eps * (1 + 1e-12)
    for pr, P, e in zip(result.profiles, out.mechanism.channels, out.eps_used, strict=True):
        em = core.exponential_mechanism(pr.dist, float(e))  # recomputed here, not taken from the profile
        if kind == "DPN":
            np.testing.assert_allclose(P, em, rtol=0, atol=1e-15)
            assert np.abs(P - P[0]).max() > 0  # EM at eps > 0 never releases one value for every input
        assert mdp_violation(P, pr.dist, float(e)) <= core.VIOLATION_TOL
    assert out.notes[-1].kind == "method" and method in out.notes[-1]
    assert result.method == "DepHDP" and core.released_by(result, "DepHDP") is result
    with pytest.raises(DataError, match=r"method must be 'DepHDP' or one of \['ALC\+DPN'"):
        core.released_by(result, "EM")


def test_floor_offset_is_the_grid_point_the_allocation_uses_and_refuses_what_composition_forbids() -> None:
    config = DepHDPConfig(eps=1.0, min_group_eps=0.3)
    grid = config.eps_grid
    at = int(np.searchsorted(grid, 0.3))  # the first grid budget at or above the floor
    assert core.floor_offset(config, 4) == at and grid[at] >= 0.3 > grid[at - 1]
    assert core.floor_offset(DepHDPConfig(eps=1.0), 50) == 0  # no floor: the grid's first point
    nine = grid[at] * 3.0  # ||(f, ..., f)||_2 for 9 groups = 3 f > 1
    assert nine > 1.0
    with pytest.raises(core.InfeasibleFloorError, match=r"for each of 9 groups needs \|\|eps_k\|\|_q") as err:
        core.floor_offset(config, 9)
    # audit: it named eps / 3 = 0.333, and a floor of 0.3 failed (raised to the grid's 0.356): the largest
    # floor that works is the largest grid budget b with 3 b <= 1, and the floor the message names works
    below = grid[grid * 3.0 <= 1.0 + 1e-12]
    assert err.value.largest == below[-1] == core.largest_floor(grid, 9, 1.0, 2.0) < 1.0 / 3.0
    named = float(str(err.value).split("at most ")[1].split(" ")[0])
    assert (
        named <= err.value.largest
        and grid[core.floor_offset(replace(config, min_group_eps=named), 9)] == below[-1]
    )
    assert core.floor_offset(DepHDPConfig(eps=100.0, min_group_eps=20.0), 1) == len(grid) - 1  # the top
    # not even the grid's smallest budget fits: no floor helps, and the message says so
    with pytest.raises(core.InfeasibleFloorError, match=r"eps = 0.01 is too small for 25 groups") as err:
        core.floor_offset(DepHDPConfig(eps=0.01, p=float("inf")), 25)
    assert err.value.largest == 0.0 and core.largest_floor(grid, 25, 0.01, float("inf")) == 0.0


def test_a_large_attribute_reports_within_its_loss_matrix_and_every_budget() -> None:
    """Audit: a 4,908-value column sat at 0 % for 217 s and its stop landed 4 minutes later: nothing was
    reported inside a group. Now the loss matrix reports per block and EM + remapping per budget, and a
    stop raised from progress ends the work there."""
    rng = np.random.default_rng(3)
    n = 800  # 200 codes: a quarter distinct, not identifier-like
    codes = [f"c{v:03d}" for v in rng.integers(0, 200, n)]
    df = pd.DataFrame({"code": codes, "a": rng.integers(0, 3, n), "t": rng.integers(0, 2, n)})
    fit = core.discretize(df, core.infer_schema(df, target="t"))
    cfg = DepHDPConfig(eps=2.0, tau_group=0.99, **FAST)
    said: list[tuple[float, str]] = []
    core.dephdp.dephdp_profiles(fit, cfg, progress=lambda f, m: said.append((f, m)))
    fractions = [f for f, _ in said]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    grid = cfg.eps_grid.size
    for k in range(1, grid + 1):
        assert any(m == f"code: EM and remapping, budget {k}/{grid}" for _, m in said), k
    assert any(m.startswith("code: loss matrix, ") for _, m in said)

    class StopError(Exception):
        pass

    seen: list[str] = []

    def stop_at_budget_two(fraction: float, message: str) -> None:
        seen.append(message)
        if message.endswith("budget 2/" + str(grid)):
            raise StopError

    with pytest.raises(StopError):
        core.dephdp.dephdp_profiles(fit, cfg, progress=stop_at_budget_two)
    assert seen[-1] == f"code: EM and remapping, budget 2/{grid}"


def test_budget_the_loss_does_not_use_goes_to_the_groups_it_does_not_weigh() -> None:
    """Audit: at p = 1 every group budget up to eps is free, yet groups the surrogate weighs 0 got the grid's
    smallest (ties went to the lowest budget): wine at eps 20 released two columns at 0.005."""
    from mdp_core.dephdp._allocate import snap_to_grid

    grid = np.geomspace(0.005, 20.0, 36)
    curves = np.vstack([1.0 / (1.0 + grid), 1.0 / (1.0 + grid)])  # both falling
    betas = np.array([1.0, 0.0])  # the task does not use the second group
    at_p1 = snap_to_grid(np.array([5.0, 0.005]), grid, curves, betas, 5.0, float("inf"))
    assert grid[at_p1[0]] <= 5.0 < grid[at_p1[0] + 1] and at_p1[1] == at_p1[0]  # both at eps (rounded down)
    # at p = 2 the weighted group keeps its optimum and the rest of the budget goes to the other one
    before = np.searchsorted(grid, 4.0) - 1
    at_p2 = snap_to_grid(np.array([4.0, 0.005]), grid, curves, betas, 5.0, 2.0)
    assert at_p2[0] >= before and at_p2[1] > 0  # the weighted group first, then what is left
    assert budget_norm(grid[at_p2], 2.0) <= 5.0 < budget_norm(grid[at_p2 + np.array([0, 1])], 2.0)


def test_spl_splits_the_budget_uniformly_on_the_grid(fit: core.Encoded, cache: dict) -> None:
    """Audit: SPL raised the groups whose surrogate loss dropped most (wine, eps 5: seven groups at 1.476 and
    one at 3.004 against a uniform 1.768). Now every group gets the same grid budget, and the first groups
    in order one grid point more while the rule allows."""
    res = run_dephdp(fit, DepHDPConfig(eps=2.0), cache=cache)
    grid, q = res.eps_grid, dual_exponent(2.0)
    for name in ("SPL+DPN", "SPL+RMP"):
        idx = np.searchsorted(grid, res.baselines[name].eps)
        low = idx.min()
        assert set(idx) <= {low, low + 1} and list(idx) == sorted(idx, reverse=True)
        assert budget_norm(grid[np.full(idx.size, low + 1)], q) > 2.0 >= budget_norm(grid[idx], q)
