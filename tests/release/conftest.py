"""Fixtures of tests/release: the constructed case configured once per session."""

from __future__ import annotations

import pytest
from release_cases import FAST, Case, make_table, schema_without_id

import mdp_core as core


@pytest.fixture(scope="session")
def case() -> Case:
    df = make_table()
    enc = core.discretize(df, schema_without_id(df), bins=4)
    res = core.run_dephdp(enc, core.DepHDPConfig(eps=2.0, **FAST))
    return Case(df, enc, res)
