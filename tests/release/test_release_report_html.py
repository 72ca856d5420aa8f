"""build_report (one self-contained HTML file) and the CLI, on the constructed case (no browser here; the
Chromium test is tests/browser/test_report.py)."""

from __future__ import annotations

import html
import json
import math
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from release_cases import FAST, make_table

import mdp_core as core
from mdp_core.release import (
    Decision,
    Scenario,
    UtilityTarget,
    build_report,
    dataset_fingerprint,
    evaluate_scenario,
    report_figures,
    save_scenarios,
)
from mdp_core.release.__main__ import main
from mdp_core.sweep import EpsChoice


def scenario(df: pd.DataFrame) -> Scenario:
    return Scenario(
        "constructed", "constructed.csv", core.DepHDPConfig(eps=2.0, **FAST), dataset_fingerprint(df),
        target="target", exclude=("patient_id",), bins=(("dose", 4),),
    )  # fmt: skip


def _choice() -> EpsChoice:
    reason = "eps = 2 is the smallest budget"
    return EpsChoice(2.0, 0.81, (0.79, 0.83), True, reason, settings={"method": "DepHDP"})


def fake_decision() -> Decision:
    rows = [
        {"method": m, "eps": e, "n": 5, "utility_mean": 0.6 + 0.02 * e, "utility_ci_lo": 0.55 + 0.02 * e,
         "utility_ci_hi": 0.65 + 0.02 * e}
        for m in ("DepHDP", "SPL+DPN") for e in (0.5, 1.0, 2.0, 5.0)
    ]  # fmt: skip
    return Decision(_choice(), pd.DataFrame(rows), UtilityTarget(), "accuracy", 0.85, 3.2, "constructed")


def test_one_self_contained_file_with_every_section() -> None:
    df = make_table()
    out = evaluate_scenario(scenario(df), df, repetitions=3)
    page = build_report(out, decision=fake_decision())
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    # plotly.js inlined exactly once, nothing loaded from elsewhere
    assert page.count("plotly.js v") >= 1 and page.count("<script>/**") <= 1
    assert not re.search(r"""<(script|link|img|iframe)[^>]+(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "cdn.plot.ly/plotly" not in page.split("</script>", 1)[1]
    for heading in ("What is protected, in plain words", "Which ε?", "Data", "Dependency graph",
                    "Groups and mechanisms", "Budget split", "Verification of every channel",
                    "Utility versus non-private", "What the release keeps of each column",
                    "Leakage per attribute", "Release checks", "Audit record",
                    "Versions"):  # fmt: skip
        assert f"<h2>{heading}</h2>" in page, heading
    figures = re.findall(r'data-figure="([a-z]+)"', page)
    assert figures == ["frontier", "dependencies", "budget", "utility", "information", "leakage"]
    assert "sandwich bound" in page and "odds" in page


def test_audit_record_is_embedded_as_json() -> None:
    df = make_table()
    out = evaluate_scenario(scenario(df), df, repetitions=2)
    page = build_report(out)
    m = re.search(r'<script type="application/json" id="audit-record">(.*?)</script>', page, re.S)
    assert m is not None
    embedded = json.loads(m.group(1).replace("<\\/", "</"))
    assert embedded == json.loads(json.dumps(out.audit))
    assert embedded["fingerprint"]["value"] == dataset_fingerprint(df)
    assert 'data-figure="frontier"' not in page  # no decision, no frontier


def test_the_groups_table_speaks_the_pages_words() -> None:
    """Browser audit: the report's groups table showed the frame's keys (domain_size, mse_likeness, eps_k)
    and a bare count under "attributes"; it now has the DepHDP page's headers and a legend."""
    df = make_table()
    out = evaluate_scenario(scenario(df), df, repetitions=2)
    page = html.unescape(build_report(out))
    head = "".join(f"<th>{h}</th>" for h in core.SCORE_HEADERS.values())
    assert head == (
        "<th>group</th><th>joint values</th><th>radial fit</th><th>MSE-likeness</th><th>mechanism</th>"
        "<th>weight β</th><th>budget ε_k</th>"
    )
    assert head in page and "<th>domain_size</th>" not in page and "<th>attributes</th>" not in page
    assert "Weight β: the group's weight in the task-loss surrogate" in page


def _posterior(eps: float) -> float:
    return 0.5 * math.exp(eps) / (0.5 * math.exp(eps) + 0.5)


def test_posterior_table_numbers_in_the_page() -> None:
    """Browser audit: with the target released (its own channel) the plain words and the posterior table
    spoke of the features' ε = 12 beside a record budget of 16.97: they now take the record's whole budget."""
    df = make_table()
    features_only = build_report(replace(scenario(df), include_target=False), data=df, repetitions=2)
    assert f"{100 * _posterior(2.0):.1f} %" in features_only and "released too" not in features_only
    out = evaluate_scenario(scenario(df), df, repetitions=2)
    budgets = [g["eps"] for g in out.audit["groups"]]  # the feature groups' and the target's (ε = 2)
    assert out.audit["groups"][-1]["attributes"] == ["target"] and budgets[-1] == 2.0
    record = float(np.linalg.norm(budgets, 2))  # the l_2 record metric: budgets compose by their l_2 norm
    assert 2.0 < record == pytest.approx(out.audit["composition"]["total_with_target"], rel=1e-12)
    page = build_report(out)
    assert f"{100 * _posterior(record):.1f} %" in page and f"{100 * _posterior(2.0):.1f} %" not in page
    said = f"a record's whole budget is {record:.4g}; the feature columns alone use at most ε = 2"
    assert said in html.unescape(page)
    with pytest.raises(core.DataError, match="pass data="):
        build_report(scenario(df))


def test_cli_writes_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    df = make_table()
    data = tmp_path / "constructed.csv"
    df.to_csv(data, index=False)
    loaded = core.load_dataset(data)
    scen = Scenario(
        "from-file", "constructed.csv", core.DepHDPConfig(eps=2.0, **FAST), dataset_fingerprint(loaded),
        target="target", exclude=tuple(c for c in ("patient_id",) if c in loaded.columns),
        bins=(("dose", 4),),
    )  # fmt: skip
    spec = tmp_path / "s.json"
    save_scenarios([scen], spec)
    out = tmp_path / "r.html"
    assert main(["report", str(spec), "--data", str(data), "--out", str(out), "--repetitions", "2"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["scenario"] == "from-file" and summary["bytes"] == len(out.read_bytes())
    assert summary["rows_read"] == summary["rows_in_source"] == len(loaded)  # not sampled: every row
    assert "<h2>Audit record</h2>" in out.read_text()
    assert main(["report", str(spec), "--data", str(data), "--out", str(out), "--scenario", "nope"]) == 2
    assert "no scenario named 'nope'" in capsys.readouterr().err
    args = ["report", str(spec), "--data", str(data), "--out", str(out), "--repetitions", "2"]
    assert main([*args, "--method", "ALC+DPN"]) == 0  # overrides the scenario's DepHDP
    page = out.read_text()
    assert "Released by the baseline <b>ALC+DPN</b>" in page and '"method": "ALC+DPN"' in page
    with pytest.raises(SystemExit):
        main([*args, "--method", "OPT"])
    assert "invalid choice: 'OPT'" in capsys.readouterr().err
    assert main([*args, "--rows", "held-out"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["release_rows"] == "held_out"
    page = out.read_text()
    assert "<b>Records released.</b> Only the 45 held-out records are released; the 75 that tuned" in page
    assert '"rows_released": 45' in page
    assert main([*args, "--release-seed", "3"]) == 0 and '"release_seed": 3' in out.read_text()
    assert "recorded release seed" in out.read_text()


def test_cli_which_eps_sweeps_the_scenarios_own_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CLI's which-eps swept DepHDP's defaults, not the scenario's (its budget floor, grid, ...)."""
    import mdp_core.release

    df = make_table()
    data = tmp_path / "constructed.csv"
    df.to_csv(data, index=False)
    config = core.DepHDPConfig(eps=2.0, min_group_eps=0.1, **FAST)
    scen = Scenario(
        "floored", "constructed.csv", config, dataset_fingerprint(core.load_dataset(data)), target="target"
    )
    spec = tmp_path / "s.json"
    save_scenarios([scen], spec)
    seen: dict[str, object] = {}

    def fake(*args: object, **kwargs: object) -> None:
        seen.update(kwargs)
        raise core.DataError("stopped by the test")

    monkeypatch.setattr(mdp_core.release, "which_eps", fake)
    out = tmp_path / "r.html"
    assert main(["report", str(spec), "--data", str(data), "--out", str(out), "--which-eps", "0.5"]) == 2
    assert "stopped by the test" in capsys.readouterr().err
    assert seen["options"] == (("calibration_pairs", 200), ("grid_points", 8), ("max_contexts", 20),
                               ("min_group_eps", 0.1), ("opt_max_domain", 8))  # fmt: skip
    assert len(seen["encoded"].codes) == len(df)  # type: ignore[attr-defined]
    args = ["report", str(spec), "--data", str(data), "--out", str(out), "--which-eps", "0.5"]
    assert main([*args, "--rows", "held-out"]) == 2
    assert len(seen["encoded"].codes) == 75  # type: ignore[attr-defined]  # the tuning records alone


def test_the_cli_summary_says_when_the_file_was_sampled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Perf audit: the summary line of a file over the interactive row limit did not say that only a
    sample of its rows was released (the report did)."""
    df = make_table()
    data = tmp_path / "t.csv"
    df.to_csv(data, index=False)
    monkeypatch.setattr("mdp_core.data.io.INTERACTIVE_ROW_LIMIT", 80)
    monkeypatch.setattr("mdp_core.release.build_report", lambda *a, **k: "<html></html>")
    out = tmp_path / "r.html"
    assert main(["report", "--data", str(data), "--target", "target", "--out", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert len(df) > 80 and summary["rows_read"] == 80 and summary["rows_in_source"] == len(df)


def test_the_cli_refuses_a_missing_folder_and_a_file_without_target_before_the_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Docs audit: a missing --out folder ended the whole run in a FileNotFoundError traceback (exit 1);
    a --data file without --target said "choose one on the data page" to a command-line user."""
    data = tmp_path / "t.csv"
    make_table().to_csv(data, index=False)
    built: list[object] = []
    monkeypatch.setattr("mdp_core.release.build_report", lambda *a, **k: built.append(a) or "")
    missing = tmp_path / "no_such_folder" / "r.html"
    assert main(["report", "--dataset", "heart", "--out", str(missing)]) == 2
    assert f"the folder of --out does not exist: {missing.parent}" in capsys.readouterr().err
    assert main(["report", "--data", str(data), "--out", str(tmp_path / "r.html")]) == 2
    assert "the prediction task needs a target column: pass --target COLUMN" in capsys.readouterr().err
    assert not built  # both refused before any work


def test_the_report_states_the_budget_floor_and_what_which_eps_left_out() -> None:
    df = make_table()
    base = scenario(df)
    plain = build_report(evaluate_scenario(base, df, repetitions=2))
    assert "Budget floor" not in plain
    floored = evaluate_scenario(
        replace(base, config=replace(base.config, min_group_eps=0.1)), df, repetitions=2
    )
    grid = floored.result.eps_grid
    assert (
        floored.result.floor == grid[np.searchsorted(grid, 0.1)] and floored.result.mechanism.eps.min() >= 0.1
    )
    page = build_report(floored, decision=replace(fake_decision(), skipped=(0.5,)))
    assert f"every group got at least ε = {floored.result.floor:.3g} (the first grid budget" in page
    assert "were left out (ε = 0.5)" in page
    assert "on the records that tune the channels only" not in page
    strict = evaluate_scenario(replace(base, release_rows="held_out"), df, repetitions=2)
    assert "s, on the records that tune the channels only.</p>" in build_report(
        strict, decision=fake_decision()
    )


def _visible(page: str) -> str:
    """The report's text a reader sees: no scripts (plotly.js, the embedded record), no tags."""
    text = re.sub(r"<script.*?</script>", " ", page, flags=re.S)
    text = re.sub(r"<pre>.*?</pre>", " ", text, flags=re.S)  # the audit record, checked on its own
    return html.unescape(re.sub(r"<[^>]+>", "", text))


PAPER = (
    "“Beyond Monolithic Perturbation: Heterogeneous Mechanism Design for Multi-Attribute Metric "
    "Differential Privacy”"
)


def test_the_report_says_its_results_in_words_and_names_mechanisms_as_the_pages() -> None:
    """Browser audit: the title read "Release report: current" (the page's placeholder), the text cited
    "(000 Theorem 1, …)" and "lower bound of 000 Prop. 2", the budget bars said "(CAL)" where the title
    and the table say DPN, a small bar's label "0.00634 (OPT)" was unreadable, and a sentence ended "..\""""
    df = make_table()
    out = evaluate_scenario(scenario(df), df, repetitions=2)
    statement = out.audit["composition"]["statement"]
    assert statement.endswith(".")  # the premise of the "..": the target released, a full sentence
    page = build_report(out, decision=fake_decision(), title="ε = 2, prediction on constructed.csv")
    assert "<title>mDP Lab report: ε = 2, prediction on constructed.csv</title>" in page
    assert "<h1>Release report: ε = 2, prediction on constructed.csv</h1>" in page
    assert "<h1>Release report: constructed</h1>" in build_report(out)  # no title: the scenario's name
    text = _visible(page)
    for code in ("000 ", "001 ", "Prop. 2", "(CAL)", "..", "eps = "):
        assert code not in text, code
    assert (
        "Composition of the group budgets: a record's budget is the ℓ_q norm of its groups' budgets, q the "
        "conjugate of the record metric's p (ℓ_p record metric with p = 2.0, so q = 2.0; Theorem 1 of "
        f"{PAPER}): {statement}"
    ) in text
    assert (
        "Allocating the budget on the convex envelopes of the groups' loss–budget curves gives a lower bound"
    ) in text
    assert f"(Proposition 2 of {PAPER}): no allocation on these curves does better than that" in text
    assert "the Dependency Triad estimate of correlated leakage" in text
    assert "ε = 2 is the smallest budget. Sweep:" in text  # the "which eps" reason, in the page's words
    assert "(red: OPT, the LP optimum; blue: DPN, distance-based noise)" in page
    mech = out.result.mechanism
    assert "CAL" in mech.kinds  # the premise: a group with DepHDP's calibrated EM, the pages' DPN
    bars = report_figures(out)["budget"].data[0]
    kinds = [{"CAL": "DPN"}.get(k, k) for k in mech.kinds]
    assert list(bars.text) == [f"{e:.3g} ({k})" for e, k in zip(mech.eps, kinds, strict=True)]
    assert bars.textposition == "outside" and bars.cliponaxis is False  # never squeezed into a small bar
    assert list(bars.customdata) == list(bars.text) and "%{customdata}" in bars.hovertemplate


def test_a_target_the_majority_label_meets_is_flagged_not_answered_in_the_report() -> None:
    df = make_table()
    out = evaluate_scenario(scenario(df), df, repetitions=2)
    met = build_report(out, decision=fake_decision())
    assert "<div class='answer'>The smallest budget" in met
    majority = replace(fake_decision(), majority=0.84)  # target 0.95 × 0.85 = 0.8075 ≤ 0.845
    page = build_report(out, decision=majority)
    assert "<div class='flag'>Always predicting the more frequent label already scores 0.840" in page
    assert "<div class='answer'>" not in page


def test_markup_in_names_keeps_the_report_whole() -> None:
    """Security audit: a column (or file) named "<!--<script>" turned the rest of the page into the audit
    record's script element: no heading visible, and the record no longer parsed."""
    evil = "<!--<script>"
    df = make_table().rename(columns={"colour": evil})
    sc = replace(scenario(df), name=f"s{evil}", dataset=f"a{evil}.csv")
    page = build_report(evaluate_scenario(sc, df, repetitions=2))
    m = re.search(r'<script type="application/json" id="audit-record">(.*?)</script>', page, re.S)
    assert m is not None and "<" not in m.group(1) and ">" not in m.group(1)
    record = json.loads(m.group(1))
    assert evil in json.dumps(record) and f"a{evil}.csv" in json.dumps(record)
    assert page.rstrip().endswith("</html>") and page.count("<h2>") >= 10
