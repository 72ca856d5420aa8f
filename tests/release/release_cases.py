"""Constructed release cases: an identifier column, decimals and a binary target (shared by tests/release)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

import mdp_core as core

FAST = {"grid_points": 8, "opt_max_domain": 8, "calibration_pairs": 200, "max_contexts": 20}


@dataclass
class Case:
    df: pd.DataFrame
    encoded: core.Encoded
    result: core.DepHDPResult


def make_table(n: int = 120, seed: int = 7) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 4, n)
    return pd.DataFrame(
        {
            "patient_id": [f"P{i:04d}" for i in range(n)],
            "a": a,
            "a2": 2 * a + rng.integers(0, 2, n),
            "dose": np.round(rng.uniform(10.0, 25.0, n), 3),  # three decimals, e.g. 17.825
            "colour": rng.choice(["red", "green", "blue"], n),
            "target": (a + rng.integers(0, 2, n) >= 2).astype(np.int64),
        }
    )


def schema_without_id(df: pd.DataFrame) -> core.Schema:
    inferred = core.infer_schema(df.drop(columns=["patient_id"]), target="target")
    return inferred
