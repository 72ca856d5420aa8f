"""which_eps: the answer is the smallest grid budget from which on every budget's CI meets the target
(checked by a brute-force scan of the frontier it returns), stated in words; unreachable targets say so."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from release_cases import FAST, Case

import mdp_core as core
from mdp_core.release import Decision, UtilityTarget, posterior_bound, which_eps
from mdp_core.release import report as rel_report
from mdp_core.sweep import EpsChoice

GRID = (0.5, 2.0, 20.0)


def _choice(**fields: object) -> EpsChoice:
    """An answer as smallest_eps returns it (``reason`` optional here)."""
    return EpsChoice(**{"reason": "r", **fields})  # type: ignore[arg-type]


def _run(case: Case, target: UtilityTarget, method: str = "DepHDP") -> object:
    return which_eps(
        "constructed", target, encoded=case.encoded, eps=GRID, repetitions=3, client=False,
        options=tuple(sorted(FAST.items())), method=method,
    )  # fmt: skip


@pytest.mark.parametrize("method", ["DepHDP", "ALC+DPN"])  # a scenario released by a baseline asks for it
def test_answer_is_the_smallest_budget_meeting_the_target(case: Case, method: str) -> None:
    d = _run(case, UtilityTarget("absolute", 0.55), method)
    dep = d.frontier[d.frontier["method"] == method].set_index("eps").sort_index()
    assert list(dep.index) == list(GRID)
    assert set(d.frontier["method"]) == {"DepHDP", "SPL+DPN", "SPL+RMP", "ALC+DPN", "ALC+RMP"}
    ok = [dep.loc[e, "utility_ci_lo"] >= 0.55 for e in GRID]
    k = len(GRID)
    while k > 0 and ok[k - 1]:  # fixed-sequence: from the top down, stop at the first failure
        k -= 1
    meets = list(GRID[k:])
    if meets:
        assert d.choice.met and d.choice.eps == meets[0]
        assert d.choice.ci[0] == pytest.approx(dep.loc[meets[0], "utility_ci_lo"])
        # 0.55 is below the majority label's rate on this table (0.711): met, but no answer (browser audit)
        assert d.uninformative and d.sentence.startswith("Always predicting the more frequent label")
        assert f"met at ε = {meets[0]:.3g} (accuracy {d.choice.estimate:.3f}, 95 % CI" in d.sentence
        answered = replace(d, majority=None).sentence  # the same answer on a task without a majority label
        assert f"ε = {meets[0]:.3g} ({method})" in answered and "95 % CI" in answered
        p50 = posterior_bound(0.5, meets[0])
        near = "can become near certainty (above 99.9 %)."
        said = f"becomes at most {100 * p50:.1f} %." if p50 <= 0.999 else near
        assert f"A 50 % guess {said}" in answered and "at most > 99.9" not in answered
    else:
        assert not d.choice.met and "not met at" in d.sentence and "ε = 20)" in d.sentence
    assert d.metric == "accuracy" and 0 < d.reference <= 1 and d.seconds > 0


def test_a_guess_made_near_certain_is_said_so() -> None:
    """Browser audit: at eps 20 the answer said "A 50 % guess becomes at most 100.0%" (then "at most >
    99.9 %"); 1 - 2e-9 is near certainty, said so."""
    band = {"utility_mean": 0.9, "utility_ci_lo": 0.89, "utility_ci_hi": 0.91}
    rows = [{"method": "DepHDP", "eps": e, "n": 5, **band} for e in (10.0, 20.0)]
    choice = EpsChoice(
        20.0, 0.9, (0.89, 0.91), True, "eps = 20 is the smallest", settings={"method": "DepHDP"}
    )
    d = Decision(choice, pd.DataFrame(rows), UtilityTarget("absolute", 0.85), "accuracy", 0.95, 1.0, "t")
    assert d.sentence.endswith("A 50 % guess can become near certainty (above 99.9 %).")


def test_unreachable_target_is_said_plainly(case: Case) -> None:
    d = _run(case, UtilityTarget("relative", 1.5))  # 150 % of non-private: never
    assert not d.choice.met and d.choice.eps == 20.0
    assert d.target_value == pytest.approx(1.5 * d.reference)
    assert "not met at any budget tried (up to ε = 20)" in d.sentence


def test_relative_target_needs_a_reference(case: Case, monkeypatch: pytest.MonkeyPatch) -> None:
    """Audit of uploads (no target, so the record task; the page's default target is a share): the sweep ran
    for minutes (a 300-column table) before "a relative target needs a higher-is-better metric"."""
    import mdp_core.sweep

    def no_sweep(*args: object, **kwargs: object) -> None:
        raise AssertionError("the sweep ran before the target was checked")

    monkeypatch.setattr(mdp_core.sweep, "run_sweep", no_sweep)
    with pytest.raises(
        core.DataError,
        match=r"^a share of the non-private utility needs the prediction task; the record task measures the "
        r"mean distance \(lower is better\): give an absolute target instead$",
    ):
        which_eps(
            "constructed", UtilityTarget("relative", 0.9), encoded=case.encoded, task="record",
            eps=(1.0, 5.0), repetitions=2, client=False, options=tuple(sorted(FAST.items())),
        )  # fmt: skip
    with pytest.raises(TypeError, match="target must be a UtilityTarget"):
        which_eps("constructed", 0.9, encoded=case.encoded, client=False)  # type: ignore[arg-type]


def test_a_target_on_a_distance_is_stated_as_at_most() -> None:
    """A lower-is-better metric is met at or below the target (frontier._judge), but the answer read
    "mean_distance ≥ 0.3"."""
    choice = _choice(eps=2.0, met=True, estimate=0.25, ci=(0.2, 0.28), settings={"method": "DepHDP"})
    frontier = pd.DataFrame({"higher_is_better": [False]})
    decision = Decision(choice, frontier, UtilityTarget("absolute", 0.3), "mean_distance", 0.0, 1.0, "t.csv")
    assert decision.sentence.startswith(
        "The smallest budget that keeps mean distance ≤ 0.3 on t.csv is ε = 2"
    )
    assert UtilityTarget("absolute", 0.75).describe("accuracy") == "accuracy ≥ 0.75"


@pytest.mark.parametrize(
    ("metric", "higher", "estimate", "ci", "end"),
    [("accuracy", True, 0.772, (0.757, 0.787), "lower end (0.757)"),
     ("mean_distance", False, 0.28, (0.26, 0.31), "upper end (0.310)")],
)  # fmt: skip
def test_unmet_target_whose_mean_meets_it_says_why(
    metric: str, higher: bool, estimate: float, ci: tuple[float, float], end: str
) -> None:
    """Browser run on heart (95 % of non-private accuracy = 0.767): "not reachable below ε = 20 ... the
    accuracy is 0.772" read as a contradiction; the CI's conservative end is what failed."""
    choice = _choice(eps=20.0, met=False, estimate=estimate, ci=ci, settings={"method": "DepHDP"})
    frontier = pd.DataFrame({"higher_is_better": [higher]})
    target = UtilityTarget("absolute", 0.767 if higher else 0.3)
    sentence = Decision(choice, frontier, target, metric, 0.807, 1.0, "heart").sentence
    assert "not met at any budget tried (up to ε = 20)" in sentence
    assert f"The mean meets the target, but the interval's {end} does not" in sentence
    short = _choice(eps=20.0, met=False, estimate=0.70, ci=(0.69, 0.71), settings={})
    accuracy = pd.DataFrame({"higher_is_better": [True]})
    unmet = Decision(short, accuracy, UtilityTarget("absolute", 0.767), "accuracy", 0.807, 1.0, "h")
    assert "mean meets" not in unmet.sentence  # only said when the mean itself meets the target


def test_budgets_too_small_for_the_floor_are_left_out_and_said(case: Case) -> None:
    """A per-group budget floor (the release page's) is infeasible at small eps (||floor||_q > eps): the
    sweep failed as a whole; now those budgets are left out and the answer says so."""
    config = core.DepHDPConfig(eps=2.0, **FAST)
    groups = len(core.run_dephdp(case.encoded, config).groups)
    grid = config.eps_grid
    floor = float(grid[np.searchsorted(grid, 0.5 / np.sqrt(groups))])  # the first grid point above 0.5's
    assert floor * np.sqrt(groups) <= 2.0  # ... and 2 still allows it (the test's premise)
    with pytest.raises(core.InfeasibleFloorError, match="budget floor") as err:
        core.run_dephdp(case.encoded, replace(config, eps=0.5, min_group_eps=floor))
    assert err.value.largest == grid[grid * np.sqrt(groups) <= 0.5 * (1 + 1e-12)][-1]  # largest that works
    d = which_eps(
        "constructed", UtilityTarget("absolute", 0.0), encoded=case.encoded, eps=GRID, repetitions=2,
        client=False, options=tuple(sorted({**FAST, "min_group_eps": floor}.items())),
    )  # fmt: skip
    assert d.skipped == (0.5,) and set(d.frontier["eps"]) == {2.0, 20.0}
    assert d.choice.eps in (2.0, 20.0)  # judged among the budgets that allow the floor
    assert "were left out (ε = 0.5)" in d.sentence
    with pytest.raises(
        core.DataError, match=r"no budget of the grid \(up to ε = 20\) allows it: a budget floor"
    ):
        which_eps(
            "constructed", UtilityTarget("absolute", 0.0), encoded=case.encoded, eps=(0.5, 20.0),
            repetitions=2, client=False, options=tuple(sorted({**FAST, "min_group_eps": 19.0}.items())),
        )  # fmt: skip


def test_sweep_options_are_the_configs_changed_fields_a_sweep_does_not_set_itself() -> None:
    config = core.DepHDPConfig(eps=3.0, task="record", seed=4, min_group_eps=0.2, grid_points=8)
    assert core.sweep_options(config) == (("grid_points", 8), ("min_group_eps", 0.2))
    assert core.sweep_options(core.DepHDPConfig(eps=7.0)) == ()  # eps is the sweep's own axis
    spec = core.SweepSpec(dataset="heart", options=core.sweep_options(config))  # accepted as options
    assert spec.config(spec.configurations()[0]).min_group_eps == 0.2


@pytest.mark.parametrize(
    ("target", "met", "estimate", "said"),
    [(0.75, True, 0.80, "Always predicting the more frequent label already scores 0.758"),
     (0.80, False, 0.759, "no better than always predicting the more frequent label (0.758)"),
     (0.80, True, 0.82, None), (0.80, False, 0.78, None)],
)  # fmt: skip
def test_an_accuracy_no_better_than_the_majority_label_is_said(
    target: float, met: bool, estimate: float, said: str | None
) -> None:
    """Adult: DepHDP scored 0.758 at every budget, the held-out share of the more frequent label, which
    read as a good private accuracy."""
    choice = _choice(eps=20.0, met=met, estimate=estimate, ci=(estimate - 0.01, estimate + 0.01),
                             settings={"method": "DepHDP"}, reason="r")  # fmt: skip
    frontier = pd.DataFrame({"higher_is_better": [True], "method": ["DepHDP"], "eps": [20.0],
                             "utility_mean": [estimate], "utility_ci_lo": [estimate - 0.01],
                             "utility_ci_hi": [estimate + 0.01]})  # fmt: skip
    d = Decision(choice, frontier, UtilityTarget("absolute", target), "accuracy", 0.85, 1.0, "adult",
                 majority=0.758)  # fmt: skip
    if said is None:
        assert "more frequent label" not in d.sentence
    else:
        assert said in d.sentence
    lines = [s.y0 for s in rel_report.frontier_figure(d).layout.shapes]
    assert 0.758 in lines  # drawn beside the target and the non-private accuracy


def test_which_eps_measures_the_majority_rate_on_the_held_out_records(case: Case) -> None:
    d = _run(case, UtilityTarget("absolute", 0.55))
    spec = core.SweepSpec(dataset="constructed", eps=GRID, repetitions=3, options=tuple(sorted(FAST.items())))
    labels = core.prepare_data(spec, case.encoded).labels
    assert d.majority == pytest.approx(max(labels.mean(), 1 - labels.mean()))
    record = which_eps(
        "constructed", UtilityTarget("absolute", 2.0), encoded=case.encoded, task="record", eps=(20.0,),
        repetitions=2, client=False, options=tuple(sorted(FAST.items())),
    )  # fmt: skip
    assert record.majority is None  # a distance has no majority label


def _wine(target: UtilityTarget, reference: float = 0.818) -> Decision:
    """The browser audit's wine answer: 95 % of non-private is 0.777, met at 0.25 by an accuracy of 0.794,
    the held-out share of the more frequent label."""
    choice = _choice(
        eps=0.25, met=True, estimate=0.794, ci=(0.794, 0.794), settings={"method": "DepHDP"}, reason="r"
    )
    frontier = pd.DataFrame(
        {"higher_is_better": [True], "method": ["DepHDP"], "eps": [0.25], "utility_mean": [0.794],
         "utility_ci_lo": [0.794], "utility_ci_hi": [0.794]}
    )  # fmt: skip
    return Decision(choice, frontier, target, "accuracy", reference, 1.0, "wine", majority=0.794)


def test_a_target_the_majority_label_meets_leads_with_that_and_says_what_to_ask() -> None:
    """Browser audit: the answer opened "The smallest budget … is ε = 0.25" in a green box; that the
    majority label scores 0.794 too came last."""
    d = _wine(UtilityTarget("relative", 0.95))
    assert d.uninformative
    assert d.sentence == (
        "Always predicting the more frequent label already scores 0.794 on these records, without any data "
        "released, so the target accuracy ≥ 95% of non-private (0.777 of 0.818) says nothing about the "
        "release: it is met at ε = 0.25 (accuracy 0.794, 95 % CI 0.794–0.794) whether or not the release "
        "carries anything the task can use, so that ε is no answer. Set a target above 0.799: keep at least "
        "98 % of the non-private accuracy (0.818), or an absolute accuracy above 0.799."
    )
    assert 0.98 * 0.818 > 0.799 >= 0.97 * 0.818  # the smallest whole share above the majority rate
    assert "The smallest budget" not in d.sentence
    fig = rel_report.frontier_figure(d)
    (line,) = [s for s in fig.layout.shapes if s.type == "line" and s.x0 == 0.25]
    assert line.line.color == "#999"  # grey, not the answer's green
    # browser audit: add_vline's own label took x = eps as log10 units on the log axis and squashed every
    # curve into a quarter of the plot: the label sits at log10(eps), the axis keeps its range
    (label,) = [a for a in fig.layout.annotations if a.text.startswith("ε = 0.25")]
    assert label.x == pytest.approx(math.log10(0.25)) and label.xref == "x"
    shown = fig.layout.xaxis.tickvals
    assert min(shown) <= 0.25 and max(shown) <= 10 * d.frontier["eps"].max()
    # a target above the majority rate is an answer again, as is any target on a task without one
    assert not _wine(UtilityTarget("absolute", 0.80)).uninformative
    assert not replace(d, majority=None).uninformative
    assert "The smallest budget that keeps" in replace(d, majority=None).sentence


def test_a_task_no_better_than_the_majority_label_even_without_privacy_says_so() -> None:
    d = _wine(UtilityTarget("relative", 0.95), reference=0.797)  # 98 % would still be below 0.799
    assert d.sentence.endswith(
        "Even without privacy the accuracy is 0.797, hardly better: on this table the prediction task "
        "measures nothing; choose another target column or task."
    )


def _accuracy_answer(**fields: object) -> str:
    choice = _choice(**{"eps": 4.0, "met": True, "estimate": 0.8, "ci": (0.78, 0.82),
                        "settings": {"method": "DepHDP"}, **fields})  # fmt: skip
    frontier = pd.DataFrame({"higher_is_better": [True]})
    return Decision(choice, frontier, UtilityTarget("absolute", 0.75), "accuracy", 0.85, 1.0, "heart",
                    test_rows=114).sentence  # fmt: skip


def test_the_answer_says_what_its_interval_covers_and_what_it_does_not_rest_on() -> None:
    """Decision audit: over 20 seeds (other splits) the heart answer went from ε = 8 to "not met" while
    each interval covered only the release's randomness on one split of 114 records; a budget met at
    the bottom of the grid was called "the smallest"; a dip met below a failing budget was the answer."""
    said = _accuracy_answer()
    assert "is ε = 4 (DepHDP)" in said and "every larger budget tried meets it too." in said
    assert "randomness on these 114 held-out records only: another split of the table" in said
    floor = _accuracy_answer(eps=0.25, grid_floor=True)
    assert "is ε = 0.25 or less (the smallest budget tried meets it)" in floor
    dip = _accuracy_answer(passed_below=(1.0,))
    assert "(ε = 1 met it too, but a larger budget did not" in dip
    assert dip.startswith(
        "The smallest budget from which on every budget tried keeps accuracy ≥ 0.75 on heart"
    )
    unmet = _accuracy_answer(eps=20.0, met=False, estimate=0.7, ci=(0.68, 0.72), passed_below=(2.0,))
    assert "not met at the largest budget tried (ε = 20)" in unmet and "ε = 2 met it too" in unmet
    none = _accuracy_answer(eps=20.0, met=False, estimate=0.76, ci=(math.nan, math.nan))
    assert "95 % CI none: fewer than two draws" in none and "mean meets" not in none


def test_the_release_band_is_a_95_percent_prediction_interval_of_one_draw() -> None:
    """Decision audit: mean -+ 1.96 sd over 10 draws held 90 % of new draws where the page said 95 %."""
    from scipy import stats

    from mdp_core.release.outcome import draw_band

    rng = np.random.default_rng(1)
    vals = list(rng.normal(0.7, 0.02, 10))
    mean, lo, hi = draw_band(vals)
    assert mean == pytest.approx(np.mean(vals))
    scale = np.std(vals, ddof=1) * math.sqrt(1 + 1 / 10)
    assert (lo, hi) == pytest.approx(stats.t.interval(0.95, 9, loc=np.mean(vals), scale=scale), abs=1e-12)
    inside = 0
    for _ in range(4000):
        draws = rng.normal(0.7, 0.02, 11)
        _, lo, hi = draw_band(list(draws[:10]))
        inside += lo <= draws[10] <= hi
    assert 0.935 < inside / 4000 < 0.965
    assert draw_band([0.5]) == (0.5, 0.5, 0.5)
