"""The CLI ``python -m mdp_core.geo bench ... --json`` (DESIGN.md) on the embedded city."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_cli_bench_json_and_npz(tmp_path: Path) -> None:
    out = tmp_path / "tree.npz"
    cmd = [
        sys.executable,
        "-m",
        "mdp_core.geo",
        "bench",
        "--city",
        "default",
        "--depth",
        "1",
        "--eps",
        "1.0",
        "--samples",
        "5000",
        "--bound-seconds",
        "20",
        "--out",
        str(out),
        "--json",
    ]
    run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "HiGHS" not in run.stdout  # the solver's banner is kept off stdout
    lines = run.stdout.strip().splitlines()
    assert len(lines) == 1  # --json: the record is the only (and last) line
    record = json.loads(lines[-1])
    assert {"targets", "outputs", "seconds", "utility_km", "violation_ratio"} <= set(record)
    assert set(record["utility_km"]) == {"tree", "tree_m", "tree_o", "em", "em_remap", "lp_coarse"}
    bound = record["lower_bound"]
    assert 0 < bound <= min(record["utility_km"][k] for k in ("tree", "tree_m", "tree_o", "em", "em_remap"))
    for name, value in record["utility_km"].items():
        if record["violation_ratio"][name] > 0:  # LP-A here: the bound says nothing of it, no gap
            assert name == "lp_coarse" and name not in record["gap"]
            continue
        assert record["gap"][name] == pytest.approx(value / bound - 1, abs=2e-5)
    assert record["worse_than_em_remap"] == [
        k for k in ("tree", "tree_m", "tree_o") if record["utility_km"][k] > record["utility_km"]["em_remap"]
    ]
    assert record["violation_ratio"]["tree"] == 0.0 and record["violation_ratio"]["em"] == 0.0
    assert record["utility_km"]["tree"] < record["utility_km"]["em"]
    with np.load(out) as data:
        assert data["matrix"].shape == (record["targets"], record["outputs"])
        assert float(data["eps"]) == 1.0
        crs = str(data["crs"])
        origin_m, origin_lonlat = data["origin_m"], data["origin_lonlat"]
        meta = json.loads(str(data["metadata"]))
    assert crs.startswith("EPSG:")  # a UTM zone for the embedded OSM district
    assert origin_m.shape == (2,) and origin_lonlat.shape == (2,)
    lon, lat = origin_lonlat
    assert 24.8 < lon < 25.1 and 60.1 < lat < 60.25  # central Helsinki
    assert meta["method"] == "tree" and meta["eps_per_km"] == 1.0 and meta["depth"] == 1
    assert meta["seed"] == 0 and meta["targets"] == record["targets"] and meta["crs"] == crs
    assert meta["origin_lonlat"] == pytest.approx(list(origin_lonlat))


def test_cli_bad_city_is_an_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.osm"
    bad.write_text("<osm>")
    cmd = [sys.executable, "-m", "mdp_core.geo", "bench", "--city", str(bad), "--json"]
    run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 2
    assert "could not read the map file" in run.stderr
