"""audit_record: every DESIGN.md field, JSON round trip, numbers recomputed independently."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math

import numpy as np
import pytest
from release_cases import Case

import mdp_core as core
from mdp_core.release import AUDIT_FIELDS, audit_record, dataset_fingerprint, privatise


def test_round_trip_and_every_field(case: Case) -> None:
    out = privatise(case.df, case.result, encoded=case.encoded, rng=np.random.default_rng(0))
    rec = audit_record(case.df, case.encoded, case.result, seed=11, dataset="constructed", privatised=out)
    assert json.loads(json.dumps(rec, allow_nan=False)) == rec
    assert set(AUDIT_FIELDS) <= set(rec)
    for field in ("fingerprint", "rows", "columns", "schema", "target", "groups", "composition",
                  "verification", "seed", "versions", "timestamp"):  # fmt: skip
        assert rec[field] not in (None, "", [], {}), field
    assert rec["rows"] == 120 and rec["rows_released"] == 120 and rec["seed"] == 11
    assert rec["columns_excluded"] == ["patient_id"]
    assert rec["target"] == "target" and rec["target_released"] is True
    assert {"numpy", "pandas", "scipy", "python", "mdp_core"} <= set(rec["versions"])
    assert dt.datetime.fromisoformat(rec["timestamp"]).tzinfo is not None


def test_fingerprint_is_sha256_of_the_canonical_csv(case: Case) -> None:
    expected = hashlib.sha256(case.df.to_csv(index=False, lineterminator="\n").encode()).hexdigest()
    assert dataset_fingerprint(case.df) == expected
    changed = case.df.copy()
    changed.loc[0, "a"] = 99
    assert dataset_fingerprint(changed) != expected


def test_groups_budgets_and_composition_with_the_numbers(case: Case) -> None:
    rec = audit_record(case.df, case.encoded, case.result, seed=0, target_eps=0.5)
    mech = case.result.mechanism
    assert [g["attributes"] for g in rec["groups"]] == [list(g) for g in mech.groups] + [["target"]]
    assert [g["eps"] for g in rec["groups"][:-1]] == pytest.approx(list(mech.eps))
    # named as the pages name them: DepHDP's calibrated EM ("CAL") is its DPN (browser audit: "(CAL)")
    assert [g["mechanism"] for g in rec["groups"]] == [{"CAL": "DPN"}.get(k, k) for k in mech.kinds] + ["RR"]
    assert "CAL" in mech.kinds  # the premise: the case has such a group
    comp = rec["composition"]
    q = 2.0  # p = 2
    assert comp["q"] == q and comp["p"] == 2.0 and comp["eps"] == 2.0
    features = math.sqrt(sum(e * e for e in mech.eps))
    assert comp["norm_features"] == pytest.approx(features, rel=1e-12)
    assert comp["holds"] is (features <= 2.0 + 1e-12)
    assert comp["norm"] == pytest.approx(math.sqrt(features**2 + 0.25), rel=1e-12)
    assert "||(" in comp["statement"]
    assert comp["rule"] == (
        "||eps_k||_q <= eps: a record's budget is the l_q norm of its groups' budgets, q the conjugate of "
        "the record metric's p (1/p + 1/q = 1); Theorem 1 of “Beyond Monolithic Perturbation: Heterogeneous "
        "Mechanism Design for Multi-Attribute Metric Differential Privacy”"
    )  # the paper by its title, not an internal code ("000 Theorem 1")


def test_verification_recomputed_per_channel(case: Case) -> None:
    rec = audit_record(case.df, case.encoded, case.result, seed=0)
    mech = case.result.mechanism
    assert len(rec["verification"]) == len(mech.groups) + 1
    for entry, g, P, e in zip(rec["verification"], mech.groups, mech.channels, mech.eps, strict=False):
        dist = core.product_distance([case.encoded.components[a] for a in g], 2.0)
        assert entry["max_violation"] == pytest.approx(core.mdp_violation(P, dist, float(e)), abs=1e-15)
        assert entry["verified"] is True
        assert entry["tolerance"] == core.VIOLATION_TOL  # the JSON states what "verified" allows
    assert rec["verification"][-1]["channel"] == "target"


def test_dropped_target_and_infinite_p_stay_json(case: Case) -> None:
    from dataclasses import replace

    res = core.run_dephdp(case.encoded, replace(case.result.config, p=math.inf))
    rec = audit_record(case.df, case.encoded, res, seed=0, include_target=False)
    assert json.loads(json.dumps(rec, allow_nan=False)) == rec
    assert rec["composition"]["p"] == "inf" and rec["composition"]["q"] == 1.0
    assert rec["target_released"] is False and "target" in rec["columns_excluded"]
    assert rec["composition"]["holds"] is True


def test_bad_input(case: Case) -> None:
    with pytest.raises(TypeError, match="df must be a pandas DataFrame"):
        audit_record([1, 2], case.encoded, case.result, seed=0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="result must be a DepHDPResult"):
        audit_record(case.df, case.encoded, object(), seed=0)  # type: ignore[arg-type]


def test_the_scope_says_the_order_and_the_draws_only_when_it_knows_them(case: Case) -> None:
    from mdp_core.release.audit import KEPT_ORDER_NOTE, ORDER_NOTE, SEEDED_NOTE, UNSEEDED_NOTE

    out = privatise(case.df, case.result, encoded=case.encoded, rng=np.random.default_rng(0))  # table order
    plain = audit_record(case.df, case.encoded, case.result, seed=0, privatised=out)["scope"]["statement"]
    assert not any(note in plain for note in (ORDER_NOTE, KEPT_ORDER_NOTE, SEEDED_NOTE, UNSEEDED_NOTE))
    said = audit_record(
        case.df, case.encoded, case.result, seed=0, privatised=out, shuffled=False, release_seed=4
    )
    assert KEPT_ORDER_NOTE in said["scope"]["statement"] and said["scope"]["statement"].endswith(SEEDED_NOTE)
    assert said["release_seed"] == 4


def test_composition_does_not_hold_when_the_groups_overspend(case: Case) -> None:
    """(mutation audit, stop 67) a record that always said "holds": True passed every release test."""
    import dataclasses

    mech = case.result.mechanism
    over = dataclasses.replace(
        case.result, mechanism=dataclasses.replace(mech, eps=np.asarray(mech.eps) * 3.0)
    )
    record = audit_record(case.df, case.encoded, over, seed=0, include_target=False)
    q = core.dual_exponent(case.result.config.p)
    assert core.budget_norm(3.0 * np.asarray(mech.eps), q) > case.result.config.eps  # independent
    assert record["composition"]["holds"] is False
