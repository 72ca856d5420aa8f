"""DepHDP on heart: cold pipeline time, slider-change compute time, and the held-out evaluation against the
four baselines at eps in {1, 2, 5, 10} (000 Sec. IV-A, mean +- 1.96 sd over R privatisations of the test
split) for the prediction task (mean record loss |f(x) - f(y)|) and the entropy task (000 Case III: change of
marginal entropies, joint entropy and total correlation, nats)."""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

import mdp_core as core

EVAL_EPS = (1, 2, 5, 10)


def _timings(fit: core.Encoded, config: core.DepHDPConfig) -> list[dict]:
    cache: dict = {}  # the page's store plays this role; the core keeps no cache of its own
    t0 = time.perf_counter()
    res = core.run_dephdp(fit, config, cache=cache)
    rows = [
        {
            "case": f"cold pipeline ({config.task}, heart fit split)",
            "seconds": time.perf_counter() - t0,
            "groups": len(res.groups),
            "opt_groups": res.selection.count("OPT"),
            "largest OPT profile": max((p.domain_size for p in res.profiles if p.opt_channels), default=0),
            "held-out R2": res.surrogate.r2_heldout,
            "zero betas": sum(b == 0 for b in res.surrogate.betas),
        }
    ]
    for label, change in (
        ("eps 1 -> 3", {"eps": 3.0}),
        ("tau_dpn 0.2 -> 0.5", {"tau_dpn": 0.5}),
        ("tau_dim 300 -> 10", {"tau_dim": 10}),
        ("score radial -> mse", {"score": "mse"}),
    ):
        t0 = time.perf_counter()
        core.run_dephdp(fit, replace(config, **change), cache=cache)
        rows.append({"case": f"slider: {label}", "seconds": time.perf_counter() - t0})
    return rows


def _evaluation(enc: core.Encoded, config: core.DepHDPConfig, reps: int) -> list[dict]:
    t0 = time.perf_counter()
    ev = core.evaluate_dephdp(enc, config, eps_values=EVAL_EPS, repetitions=reps, seed=0)
    seconds = (time.perf_counter() - t0) / len(EVAL_EPS)
    rows = []
    for eps in EVAL_EPS:
        sub = ev.table[ev.table.eps == eps].set_index("method")
        row: dict = {"case": f"{config.task} held-out loss eps={eps} (R={reps})"}
        for m in core.METHODS_EVALUATED:
            row[m] = f"{sub.loc[m, 'mean']:.4f}+-{1.96 * sub.loc[m, 'sd']:.4f}"
        ours = sub.loc["DepHDP", "mean"]
        for ref in ("ALC+RMP", "ALC+DPN"):
            row[f"vs {ref}"] = f"{100 * (sub.loc[ref, 'mean'] - ours) / sub.loc[ref, 'mean']:.1f}% lower"
        best = min(core.BASELINES, key=lambda m: sub.loc[m, "mean"])
        row["vs best baseline"] = (
            f"{100 * (sub.loc[best, 'mean'] - ours) / sub.loc[best, 'mean']:.1f}% ({best})"
        )
        row["seconds"] = seconds
        rows.append(row)
    return rows


def run(quick: bool = False) -> list[dict]:
    df = core.load_dataset("heart")
    enc = core.discretize(df, core.infer_schema(df, target="target"))
    fit, _ = core.split_encoded(enc, 0.625, np.random.default_rng(0))
    reps = 5 if quick else 20
    rows: list[dict] = []
    for task in ("prediction", "entropy"):
        config = core.DepHDPConfig(eps=1.0, task=task)
        rows += _timings(fit, config)
        rows += _evaluation(enc, config, reps)
    return rows
