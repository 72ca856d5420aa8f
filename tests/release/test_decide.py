"""which_eps: the answer is the smallest grid budget whose CI meets the target (checked by a brute-force
scan of the frontier it returns), stated in words; unreachable targets say so."""

from __future__ import annotations

import pytest
from release_cases import FAST, Case

import mdp_core as core
from mdp_core.release import UtilityTarget, posterior_bound, which_eps

GRID = (0.5, 2.0, 20.0)


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
    meets = [e for e in GRID if dep.loc[e, "utility_ci_lo"] >= 0.55]
    if meets:
        assert d.choice.met and d.choice.eps == meets[0]
        assert d.choice.ci[0] == pytest.approx(dep.loc[meets[0], "utility_ci_lo"])
        assert f"ε = {meets[0]:.3g} ({method})" in d.sentence and "95 % CI" in d.sentence
        assert f"{posterior_bound(0.5, meets[0]):.1%}" in d.sentence
    else:
        assert not d.choice.met and "not reachable below ε = 20" in d.sentence
    assert d.metric == "accuracy" and 0 < d.reference <= 1 and d.seconds > 0


def test_unreachable_target_is_said_plainly(case: Case) -> None:
    d = _run(case, UtilityTarget("relative", 1.5))  # 150 % of non-private: never
    assert not d.choice.met and d.choice.eps == 20.0
    assert d.target_value == pytest.approx(1.5 * d.reference)
    assert "not reachable below ε = 20" in d.sentence


def test_relative_target_needs_a_reference(case: Case) -> None:
    with pytest.raises(core.DataError, match="relative target needs a higher-is-better metric"):
        which_eps(
            "constructed", UtilityTarget("relative", 0.9), encoded=case.encoded, task="record",
            eps=(1.0, 5.0), repetitions=2, client=False, options=tuple(sorted(FAST.items())),
        )  # fmt: skip
    with pytest.raises(TypeError, match="target must be a UtilityTarget"):
        which_eps("constructed", 0.9, encoded=case.encoded, client=False)  # type: ignore[arg-type]
