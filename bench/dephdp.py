"""DepHDP on heart (prediction task): cold pipeline time, slider-change compute time, and the held-out
evaluation against the four baselines at eps in {1, 2, 5, 10} (000 Sec. IV-A, mean +- 1.96 sd)."""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

import mdp_core as core
from mdp_core.pipeline import clear_profile_cache


def run(quick: bool = False) -> list[dict]:
    df = core.load_dataset("heart")
    enc = core.discretize(df, core.infer_schema(df, target="target"))
    fit, _ = core.split_encoded(enc, 0.625, np.random.default_rng(0))
    config = core.DepHDPConfig(eps=1.0, task="prediction")
    rows: list[dict] = []
    clear_profile_cache()
    t0 = time.perf_counter()
    res = core.run_dephdp(fit, config)
    rows.append(
        {
            "case": "cold pipeline (heart fit split)",
            "seconds": time.perf_counter() - t0,
            "groups": len(res.groups),
            "opt_groups": res.selection.count("OPT"),
        }
    )
    for label, change in (
        ("eps 1 -> 3", {"eps": 3.0}),
        ("tau_dpn 0.2 -> 0.5", {"tau_dpn": 0.5}),
        ("tau_dim 300 -> 10", {"tau_dim": 10}),
        ("score radial -> mse", {"score": "mse"}),
    ):
        t0 = time.perf_counter()
        core.run_dephdp(fit, replace(config, **change))
        rows.append({"case": f"slider: {label}", "seconds": time.perf_counter() - t0})
    t0 = time.perf_counter()
    core.run_dephdp(fit, replace(config, p=1.0))
    rows.append(
        {
            "case": "p 2 -> 1 (first time: multi-attribute groups recomputed)",
            "seconds": time.perf_counter() - t0,
        }
    )
    reps = 5 if quick else 20
    t0 = time.perf_counter()
    ev = core.evaluate_dephdp(enc, config, eps_values=(1, 2, 5, 10), repetitions=reps, seed=0)
    seconds = time.perf_counter() - t0
    t = ev.table
    for eps in (1, 2, 5, 10):
        sub = t[t.eps == eps].set_index("method")
        row: dict = {"case": f"held-out loss eps={eps} (R={reps})"}
        for m in core.METHODS_EVALUATED:
            row[m] = f"{sub.loc[m, 'mean']:.4f}+-{1.96 * sub.loc[m, 'sd']:.4f}"
        alc = sub.loc["ALC+RMP", "mean"]
        row["vs ALC+RMP"] = f"{100 * (alc - sub.loc['DepHDP', 'mean']) / alc:.1f}% lower"
        row["seconds"] = seconds / 4
        rows.append(row)
    return rows
