"""GeoJSON and .npz exports: WGS84 points inside the city's box that map back to the km grid."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mdp_core.geo import (
    build_problem,
    exponential_geo,
    export_geojson,
    load_mechanism,
    load_road_network,
    save_mechanism,
    tree_extension,
)


@pytest.fixture(scope="module")
def district():  # type: ignore[no-untyped-def]
    net = load_road_network("default")
    problem = build_problem(net, seed_n=6, depth=1, n_tasks=10, rng=np.random.default_rng(0))
    return net, problem


def test_geojson_points_inside_the_city_and_back_to_km(district) -> None:  # type: ignore[no-untyped-def]
    import pyproj

    net, problem = district
    mech = tree_extension(problem, 1.0)
    gj = export_geojson(mech, net, grid=problem.grid, seed=7)
    json.dumps(gj)  # JSON-able
    assert gj["type"] == "FeatureCollection"
    feats = gj["features"]
    targets = [f for f in feats if f["properties"]["kind"] == "target"]
    outputs = [f for f in feats if f["properties"]["kind"] == "output"]
    assert len(targets) == mech.matrix.shape[0] and len(outputs) == mech.matrix.shape[1]
    ll = np.array([f["geometry"]["coordinates"] for f in targets])
    lo, hi = net.lonlat.min(axis=0), net.lonlat.max(axis=0)
    pad = 0.01  # targets lie within keep_km of a road node (< 1 km, < 0.02 deg here)
    assert np.all((ll >= lo - pad) & (ll <= hi + pad))
    # independent inverse: lon/lat -> UTM metres -> km in the network's frame
    fwd = pyproj.Transformer.from_crs("EPSG:4326", gj["metadata"]["crs"], always_xy=True)
    x, y = fwd.transform(ll[:, 0], ll[:, 1])
    km = (np.column_stack([x, y]) - np.asarray(net.origin_m)) / 1000.0
    assert np.allclose(km, mech.targets_km, atol=2e-5)  # 7 decimals of a degree ~ 1 cm
    # and onto the fine grid: integer fine coordinates
    fine = (km - np.asarray(problem.grid.origin_km)) / problem.grid.h_fine
    assert np.allclose(fine, np.round(fine), atol=1e-3)
    meta = gj["metadata"]
    assert meta["method"] == "tree" and meta["eps_per_km"] == 1.0 and meta["depth"] == 1
    assert meta["seed_cells"] == list(problem.grid.cells) and meta["seed"] == 7
    assert meta["city"] == "Helsinki (central)" and meta["crs"] == "EPSG:32635"
    assert meta["versions"]["numpy"] == np.__version__


def test_npz_carries_projection_and_metadata(district, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    net, problem = district
    mech = exponential_geo(problem, 0.5)
    path = save_mechanism(mech, tmp_path / "em", network=net, grid=problem.grid, seed=3)
    with np.load(path) as data:
        assert str(data["crs"]) == net.crs
        assert np.allclose(data["origin_m"], net.origin_m)
        meta = json.loads(str(data["metadata"]))
        assert meta["method"] == "em" and meta["seed"] == 3
        assert np.allclose(data["origin_lonlat"], meta["origin_lonlat"])
        # the origin lies at the south-west of the district's nodes
        assert np.all(data["origin_lonlat"] <= net.lonlat.max(axis=0))
    back = load_mechanism(path)
    assert np.array_equal(back.matrix, mech.matrix) and back.eps == 0.5
    plain = save_mechanism(mech, tmp_path / "plain.npz")  # still works without a network
    with np.load(plain) as data:
        assert "crs" not in data.files


def test_export_rejects_wrong_types(district) -> None:  # type: ignore[no-untyped-def]
    net, problem = district
    with pytest.raises(TypeError, match="mech"):
        export_geojson("m", net)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="network"):
        export_geojson(exponential_geo(problem, 1.0), "net")  # type: ignore[arg-type]
