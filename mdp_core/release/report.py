"""One self-contained HTML report per scenario: what was released, how, why this budget, and the proof.

Sections: the budget in plain words (odds sentence, posterior table, composition with the numbers), data
summary, dependency graph (NMI edges above tau_group), groups and mechanisms, budget split with the
sandwich bound (Proposition 2 of :data:`~mdp_core.release.audit.PAPER`), verification of every channel,
utility versus non-private with 95 % CIs and the "which eps" answer with its frontier, leakage per
attribute, the release checks, the audit record (as JSON, also embedded in
``<script type="application/json" id="audit-record">``) and package versions. plotly.js is inlined once
(plotly's offline bundle); the page references no external URL, so it opens offline and fetches nothing.
The text a reader sees cites results in words (the paper by its title) and names mechanisms as the pages
do (:func:`~mdp_core.release.audit.mechanism_name`); the title is the scenario's name or the caller's
``title`` (the page: the settings in words).
"""

from __future__ import annotations

import html
import json
import math
from typing import Any

import numpy as np
import pandas as pd

from mdp_core._text import share
from mdp_core.dephdp import SCORE_HEADERS
from mdp_core.errors import DataError

from .audit import PAPER
from .decide import Decision
from .figures import METHOD_COLORS, frontier_figure, information_figure, report_figures
from .outcome import ScenarioOutcome, evaluate_scenario, majority_clause
from .posterior import PRIORS, budget_sentence, posterior_bound, whole_record_note
from .scenarios import Scenario

__all__ = ["METHOD_COLORS", "build_report", "frontier_figure", "information_figure", "report_figures"]

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1100px;margin:2em auto;
padding:0 1em;color:#222;line-height:1.45}
h1{font-size:1.6em}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.8em}
table{border-collapse:collapse;margin:.6em 0;font-size:.92em}td,th{border:1px solid #ccc;padding:.25em .6em;
text-align:left}th{background:#f4f4f4}.answer{background:#eef6ee;border-left:4px solid #2a7;padding:.6em 1em}
.flag{background:#fff4e5;border-left:4px solid #e90;padding:.6em 1em}.muted{color:#666;font-size:.9em}
pre{background:#f7f7f7;padding:1em;overflow:auto;max-height:30em;font-size:.8em}
"""


def _esc(x: object) -> str:
    return html.escape(str(x))


def _table(df: pd.DataFrame, floatfmt: str = "{:.4g}") -> str:
    head = "".join(f"<th>{_esc(c)}</th>" for c in df.columns)
    rows = []
    for _, r in df.iterrows():
        cells = []
        for v in r:
            if isinstance(v, (float, np.floating)):
                cells.append(f"<td>{'' if math.isnan(v) else floatfmt.format(v)}</td>")
            else:
                cells.append(f"<td>{_esc(v)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _json_script(obj: object) -> str:
    # no <, > or & inside the script element: "<!--<script>" in a column name made the rest of the page
    # part of this element (a blank report, an unparsable record); JSON reads the escapes back as the text
    text = json.dumps(obj, indent=1, allow_nan=False)
    text = text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
    return f'<script type="application/json" id="audit-record">{text}</script>'


def build_report(
    scenario: Scenario | ScenarioOutcome,
    *,
    data: pd.DataFrame | None = None,
    decision: Decision | None = None,
    repetitions: int = 10,
    source_rows: int | None = None,
    title: str | None = None,
) -> str:
    """One self-contained HTML document for ``scenario`` (run on ``data`` unless an outcome is given).

    Parameters
    ----------
    scenario : Scenario or ScenarioOutcome
        What to report on.
    data : DataFrame, optional
        The table (needed when ``scenario`` has not been run).
    decision : Decision, optional
        A "which eps" answer (:func:`mdp_core.release.which_eps`) to include with its frontier.
    repetitions : int
        Utility repetitions when the scenario is run here.
    source_rows : int, optional
        The file's rows when ``data`` is a uniform sample of them (stated in the report and the audit).
    title : str, optional
        The report's title; default: the scenario's name.
    """
    from plotly.offline import get_plotlyjs

    if isinstance(scenario, Scenario):
        if data is None:
            raise DataError("pass data= (the table) to report on a scenario that has not been run")
        o = evaluate_scenario(scenario, data, repetitions=repetitions, source_rows=source_rows)
    elif isinstance(scenario, ScenarioOutcome):
        o = scenario
    else:
        raise TypeError(f"scenario must be a Scenario or ScenarioOutcome, got {type(scenario).__name__}")
    if decision is not None and not isinstance(decision, Decision):
        raise TypeError(f"decision must be a Decision (see which_eps), got {type(decision).__name__}")
    figs = report_figures(o, decision)
    name = o.scenario.name if title is None else title
    parts = [_body(o, decision, figs, name)]
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>mDP Lab report: {_esc(name)}</title><style>{_CSS}</style>"
        f"<script>{get_plotlyjs()}</script>{_json_script(o.audit)}</head><body>{''.join(parts)}</body></html>"
    )


def _figure_html(name: str, fig: Any) -> str:
    div = fig.to_html(
        full_html=False, include_plotlyjs=False, config={"displayModeBar": False, "responsive": True}
    )
    return f'<div class="figure" data-figure="{_esc(name)}">{div}</div>'


def _body(o: ScenarioOutcome, decision: Decision | None, figs: dict[str, Any], name: str) -> str:
    s, res, audit = o.scenario, o.result, o.audit
    comp, u = audit["composition"], o.utility
    eps = float(res.config.eps)
    record = float(comp["total_with_target"] or eps)  # a record's whole budget: the target's channel too
    out = [
        f"<h1>Release report: {_esc(name)}</h1>",
        f"<p class='muted'>Dataset <b>{_esc(s.dataset)}</b> · "
        f"SHA-256 {_esc(audit['fingerprint']['value'])} · "
        f"generated {_esc(audit['timestamp'])} · mdp_core {_esc(audit['versions']['mdp_core'])}</p>",
        "<h2>What is protected, in plain words</h2>",
        "<p>Local privacy, per record: every record is randomised on its own before it leaves, so whoever "
        "receives the release (an analyst, a partner, an attacker who knows everything else about the "
        "person) learns only a bounded amount about that record: exactly so for a record that did not tune "
        "the channels (see Records released below). Records that are close in the record metric "
        "(same values except one attribute that moves a little) are hard to tell apart; records far apart "
        "less so.</p>",
        f"<p><b>Records released.</b> {_esc(audit['scope']['statement'])}</p>",
        f"<p>{_esc(whole_record_note(eps, record))}<b>{_esc(budget_sentence(record))}</b> Distance 1 is the "
        "largest change of one attribute.</p>",
        _table(
            pd.DataFrame(
                {
                    "attacker's prior": [share(p) for p in PRIORS],
                    f"largest posterior (ε = {record:.4g}, d = 1)": [
                        share(posterior_bound(p, record)) for p in PRIORS
                    ],
                }
            )
        ),
        f"<p>Composition of the group budgets: a record's budget is the ℓ_q norm of its groups' budgets, "
        f"q the conjugate of the record metric's p (ℓ_p record metric with p = {comp['p']}, so "
        f"q = {comp['q']}; Theorem 1 of {_esc(PAPER)}): <b>{_esc(_unstopped(comp['statement']))}</b>.</p>",
    ]
    if res.config.min_group_eps > 0:
        out.append(
            f"<p>Budget floor: every group got at least ε = {res.floor:.3g} (the first grid budget at or "
            f"above the requested {res.config.min_group_eps:g}).</p>"
        )
    if decision is not None:
        strict = o.scenario.release_rows == "held_out"
        tuning = ", on the records that tune the channels only" if strict else ""
        out += [
            "<h2>Which ε?</h2>",
            # green only for an answer; a target met by the majority label, or not met, is a flag
            f"<div class='{'answer' if decision.choice.met and not decision.uninformative else 'flag'}'>"
            f"{_esc(decision.sentence)}</div>",
            f"<p class='muted'>{_esc(_unstopped(decision.choice.reason).replace('eps = ', 'ε = '))}. "
            "Sweep: DepHDP and four baselines, "
            f"{decision.frontier['n'].max()} repetitions per point, {decision.seconds:.1f} s{tuning}.</p>",
            _figure_html("frontier", figs["frontier"]),
        ]
    schema = pd.DataFrame(
        {
            "column": [c for c, _ in o.encoded.schema.kinds],
            "kind": [k for _, k in o.encoded.schema.kinds],
            "levels / bins": [len(o.encoded.levels[c]) for c, _ in o.encoded.schema.kinds],
            "released": ["yes" if c in o.released.columns else "no" for c, _ in o.encoded.schema.kinds],
        }
    )
    target_note = "released through its own channel" if audit["target_released"] else "not released"
    out += [
        "<h2>Data</h2>",
        f"<p>{audit['rows']:,} rows × {len(audit['columns'])} columns; "
        f"{audit['rows_released']:,} rows released. Target: {_esc(audit['target'])} ({target_note}). "
        f"Never released: {_esc(_never_released(audit))}.</p>",
        _table(schema),
        "<h2>Dependency graph</h2>",
        _figure_html("dependencies", figs["dependencies"]),
        "<h2>Groups and mechanisms</h2>",
        _method_paragraph(res.method),
        _table(res.scores[list(SCORE_HEADERS)].rename(columns=SCORE_HEADERS)),
        "<p class='muted'>Joint values: how many value combinations the group's attributes take. Radial fit "
        "and MSE-likeness (0-1): how well distance-based noise suits the group's loss. Mechanism: DPN "
        "(distance-based noise) or OPT (the LP-optimal one for this loss). Weight β: the group's weight in "
        "the task-loss surrogate (0: the task does not use it). Budget ε_k: the group's share of ε.</p>",
        "<h2>Budget split</h2>",
        _figure_html("budget", figs["budget"]),
        f"<p>Surrogate expected loss {res.value:.4g}. Allocating the budget on the convex envelopes of the "
        f"groups' loss–budget curves gives a lower bound, {res.lower_bound:.4g} (Proposition 2 of "
        f"{_esc(PAPER)}): no allocation on these curves does better than that, and this one is within "
        f"{res.rel_err:.1%} of it (sandwich bound).</p>",
        "<h2>Verification of every channel</h2>",
        _table(
            pd.DataFrame(
                {
                    "channel": [v["channel"] for v in audit["verification"]],
                    "ε": [g["eps"] for g in audit["groups"]],
                    "result": [
                        "verified" if v["verified"] else "NOT verified" for v in audit["verification"]
                    ],
                }
            )
        ),
        "<p class='muted'>Each channel P was checked with mdp_violation: for every pair of inputs and every "
        "output, |ln P[x,y] − ln P[x′,y]| ≤ ε·d(x,x′) + 10⁻⁹.</p>",
        "<h2>Utility versus non-private</h2>",
        f"<p>{_esc(u['metric'])} ({_esc(u['unit'])}) on the {u['test_rows']} held-out records: "
        f"<b>{u['mean']:.3f}</b> (95 % band {u['lo']:.3f}–{u['hi']:.3f}) against {u['reference']:.3f} "
        "without privacy"
        + (f", i.e. {u['relative']:.1%} of non-private" if not math.isnan(u["relative"]) else "")
        + _esc(majority_clause(u))
        + ".</p>",
        _figure_html("utility", figs["utility"]),
        "<h2>What the release keeps of each column</h2>",
        "<p>The share of each column's information (entropy) that its released value keeps about the true "
        "value, for this table: 0 % when the released column says nothing about it (one constant value, or "
        "values close to random), 100 % when it determines it.</p>",
        _figure_html("information", figs["information"]),
        "<h2>Leakage per attribute</h2>",
        "<p>Upper bound on what the release reveals about each attribute, counting what correlated "
        "attributes released through other channels give away (each bounded through its dependence on "
        "the attribute: the Dependency Triad estimate of correlated leakage), in nats; "
        "e^bound is the largest factor by which an attacker's odds about that attribute can move.</p>",
        _figure_html("leakage", figs["leakage"]),
        "<h2>Release checks</h2>",
    ]
    msgs = o.check.messages
    out.append(
        "".join(f"<div class='flag'>{_esc(m)}</div>" for m in msgs)
        if msgs
        else "<p>No degenerate output found.</p>"
    )
    out += [
        "<h2>Audit record</h2>",
        "<p class='muted'>The same JSON is embedded in this file as "
        '<code>&lt;script id="audit-record" type="application/json"&gt;</code>.</p>',
        f"<pre>{_esc(json.dumps(audit, indent=1))}</pre>",
        "<h2>Versions</h2>",
        _table(
            pd.DataFrame({"package": list(audit["versions"]), "version": list(audit["versions"].values())})
        ),
    ]
    return "".join(out)


def _unstopped(text: str) -> str:
    """``text`` without its closing full stop, for a sentence that goes on (no "..")."""
    return text.rstrip().rstrip(".")


def _method_paragraph(method: str) -> str:
    """Which channels release the features, when they are not DepHDP's own choice."""
    if method == "DepHDP":
        return ""
    return (
        f"<p>Released by the baseline <b>{_esc(method)}</b> instead of DepHDP's choice: the same groups, "
        "each through the baseline's channel at the baseline's budget (the table's mechanism and ε_k). "
        "The surrogate loss below is the baseline's; the lower bound is DepHDP's, below every baseline.</p>"
    )


def _never_released(audit: dict) -> str:
    """Excluded columns with the guard rail's reason where there is one ("ID (identifier-like)")."""
    reasons = audit.get("exclusion_reasons", {})
    parts = [f"{c} ({reasons[c]})" if c in reasons else c for c in audit["columns_excluded"]]
    return ", ".join(parts) or "none"
