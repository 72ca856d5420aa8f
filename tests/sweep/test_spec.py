"""SweepSpec: validation with clear errors, canonical form, configurations order, JSON round trip."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mdp_core import METHODS_EVALUATED, TASKS, DataError
from mdp_core.sweep import SweepSpec


def test_defaults_and_canonical_form() -> None:
    spec = SweepSpec("heart", eps=[5, 0.5, 2], methods=["ALC+RMP", "DepHDP"])
    assert spec.eps == (0.5, 2.0, 5.0)
    assert spec.methods == ("DepHDP", "ALC+RMP")  # canonical order of METHODS_EVALUATED
    assert spec.task == "prediction" and spec.tasks == ("prediction",)
    assert spec.n_configurations == 3 and spec.n_rows == 3 * 2 * 5


def test_configurations_are_the_product_in_task_index_order() -> None:
    spec = SweepSpec("heart", task=["entropy", "prediction"], eps=[1, 2], tau_dpn=[0.2, 0.5])
    assert spec.task == ("prediction", "entropy")
    configs = spec.configurations()
    assert [c.index for c in configs] == list(range(8))
    assert [(c.task, c.tau_dpn, c.eps) for c in configs[:4]] == [
        ("prediction", 0.2, 1.0),
        ("prediction", 0.2, 2.0),
        ("prediction", 0.5, 1.0),
        ("prediction", 0.5, 2.0),
    ]
    assert {c.task for c in configs[4:]} == {"entropy"}
    cfg = spec.config(configs[5])
    assert (cfg.task, cfg.tau_dpn, cfg.eps, cfg.seed) == ("entropy", 0.2, 2.0, 0)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"eps": []}, DataError, "eps must not be empty"),
        ({"eps": [0, 1]}, DataError, r"every eps value must lie in \(0, "),
        ({"eps": [1, 1]}, DataError, "eps has duplicate values"),
        ({"eps": [float("nan")]}, DataError, "every eps value"),
        ({"eps": "1,2"}, TypeError, "eps must be a list of numbers"),
        ({"eps": [True]}, TypeError, "eps must hold numbers"),
        ({"tau_dpn": [1.5]}, DataError, r"tau_dpn value must lie in \[0, 1\]"),
        ({"tau_group": [-0.1]}, DataError, "tau_group value"),
        ({"task": "forecast"}, DataError, r"unknown task \['forecast'\]"),
        ({"methods": ["DepHDP", "LP"]}, DataError, r"unknown methods \['LP'\]"),
        ({"methods": []}, DataError, "methods must not be empty"),
        ({"repetitions": 1}, DataError, "repetitions must be >= 2"),
        ({"repetitions": 2.5}, TypeError, "repetitions must be an integer"),
        ({"seed": -1}, DataError, "seed must be >= 0"),
        ({"fit_fraction": 1.0}, DataError, r"fit_fraction must lie in \(0, 1\)"),
        ({"p": 0.5}, DataError, "p must be a number >= 1 or inf"),
        ({"score": "best"}, DataError, "score must be 'radial' or 'mse'"),
        ({"options": {"grid_pts": 3}}, DataError, r"unknown options \['grid_pts'\]"),
        ({"options": {"eps": 3}}, DataError, "unknown options"),
        ({"options": {"grid_points": 2}}, DataError, "invalid options for DepHDPConfig"),
        ({"dataset": " "}, DataError, "dataset must be"),
        (
            {"column_bins": {"age": 1}},
            DataError,
            r"column_bins must map column names to integers >= 2, got \{'age': 1\}",
        ),
        ({"kind_overrides": {"age": "float"}}, DataError, "kind_overrides must map column names to kinds"),
        ({"column_ranges": {"age": [9, 1]}}, DataError, r"column_ranges must map column names to \[lo, hi\]"),
        ({"column_ranges": {"age": [0, "x"]}}, DataError, "with finite lo < hi"),
        (
            {"column_categories": {"city": []}},
            DataError,
            "column_categories must map column names to non-empty",
        ),
        (
            {"include": {"day": "week"}},
            DataError,
            "include must map column names to a kind, a date part or null",
        ),
        ({"include": ["day"]}, TypeError, "include must map column names to"),
        ({"exclude": "city"}, TypeError, "exclude must be a list of column names"),
        ({"code": ""}, TypeError, "code must be a code version"),
        ({"code": 12}, TypeError, "code must be a code version"),
    ],
)
def test_invalid_specs_name_the_field(kwargs: dict, error: type[Exception], match: str) -> None:
    args = {"dataset": "heart", **kwargs}
    with pytest.raises(error, match=match):
        SweepSpec(**args)


def test_from_json_rejects_unknown_keys_versions_and_bad_json() -> None:
    with pytest.raises(DataError, match=r"unknown sweep spec keys \['epsilon'\]"):
        SweepSpec.from_dict({"dataset": "heart", "epsilon": [1]})
    with pytest.raises(DataError, match="unsupported sweep spec version 99"):
        SweepSpec.from_dict({"dataset": "heart", "version": 99})
    with pytest.raises(DataError, match="needs a 'dataset'"):
        SweepSpec.from_dict({"eps": [1]})
    with pytest.raises(DataError, match="not valid JSON"):
        SweepSpec.from_json("{eps: [1]")
    with pytest.raises(DataError, match="must be a JSON object"):
        SweepSpec.from_json("[1, 2]")


def test_the_spec_names_the_code_it_was_written_for_only_when_told() -> None:
    from mdp_core.sweep.spec import CODE_VERSION, code_version, loaded_code_version

    assert SweepSpec("heart").to_dict()["code"] is None
    assert SweepSpec.from_dict({"dataset": "heart"}).code is None  # a hand-written spec claims no code
    assert SweepSpec.from_json(SweepSpec("heart", code=CODE_VERSION).to_json()).code == CODE_VERSION
    assert len(CODE_VERSION) == 12 and int(CODE_VERSION, 16) >= 0
    assert loaded_code_version() == CODE_VERSION and code_version() == code_version()


def test_p_inf_round_trips_as_a_string() -> None:
    spec = SweepSpec("heart", p=math.inf)
    assert spec.to_dict()["p"] == "inf"
    assert SweepSpec.from_json(spec.to_json()).p == math.inf


finite = st.floats(min_value=0.01, max_value=50.0, allow_nan=False)
unit = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


@given(
    eps=st.lists(finite, min_size=1, max_size=6, unique=True),
    tau_group=st.lists(unit, min_size=1, max_size=3, unique=True),
    tau_dpn=st.lists(unit, min_size=1, max_size=3, unique=True),
    tasks=st.lists(st.sampled_from(list(TASKS)), min_size=1, max_size=3, unique=True),
    methods=st.lists(st.sampled_from(list(METHODS_EVALUATED)), min_size=1, max_size=5, unique=True),
    reps=st.integers(2, 50),
    seed=st.integers(0, 2**31 - 1),
    p=st.sampled_from([1.0, 2.0, 3.5, math.inf]),
    grid_points=st.integers(3, 40),
)
def test_json_round_trip(
    eps: list[float],
    tau_group: list[float],
    tau_dpn: list[float],
    tasks: list[str],
    methods: list[str],
    reps: int,
    seed: int,
    p: float,
    grid_points: int,
) -> None:
    spec = SweepSpec(
        "adult",
        task=tasks,
        eps=eps,
        tau_group=tau_group,
        tau_dpn=tau_dpn,
        methods=methods,
        repetitions=reps,
        seed=seed,
        p=p,
        options={"grid_points": grid_points},
        include={"when": "month", "id": None},
        exclude=["city"],
        kind_overrides={"age": "ordinal"},
        column_bins={"age": 3},
        column_ranges={"age": [0, 120.5]},
        column_categories={"city": ["Lyon", "Nice"]},
        code="0123456789ab",
    )
    again = SweepSpec.from_json(spec.to_json())
    assert again == spec
    assert hash(again) == hash(spec)
    assert again.configurations() == spec.configurations()


def test_sweeps_do_not_give_the_opt_lps_a_load_dependent_time_budget() -> None:
    from dataclasses import fields

    from mdp_core import DepHDPConfig
    from mdp_core.sweep import SweepSpec

    if "opt_seconds" not in {f.name for f in fields(DepHDPConfig)}:
        pytest.skip("this core has no OPT time budget")
    c = SweepSpec("heart", eps=[1.0]).configurations()[0]
    assert SweepSpec("heart", eps=[1.0]).config(c).opt_seconds == 600.0 * DepHDPConfig().grid_points
    few = SweepSpec("heart", eps=[1.0], options={"grid_points": 5})
    assert few.config(c).opt_seconds == 3000.0
    own = SweepSpec("heart", eps=[1.0], options={"opt_seconds": 12.0})
    assert own.config(c).opt_seconds == 12.0
