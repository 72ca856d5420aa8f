"""Loading road networks offline, bad files, travel distances, grids and the extension tree."""

from __future__ import annotations

import bz2
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
from scipy.sparse.csgraph import dijkstra

from mdp_core.errors import DataError
from mdp_core.geo import build_grid, grid_road_network, load_road_network, tree_levels
from mdp_core.geo.roads import DEFAULT_CITY


def test_embedded_city_loads_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    net = load_road_network("default")
    assert DEFAULT_CITY.exists()
    assert 2000 < net.n_nodes < 3000  # data/README.md: 2,526 nodes in the largest component
    width, height = net.extent_km
    assert 0.8 < width < 1.3 and 1.4 < height < 2.0  # about 1.0 km x 1.7 km
    assert np.all(np.abs(net.lonlat[:, 0] - 24.944) < 0.02) and np.all(
        np.abs(net.lonlat[:, 1] - 60.171) < 0.02
    )
    assert np.isfinite(net.travel_km([0])).all()  # connected
    assert len(net.paths_lonlat) > 1000


def test_small_osm_file_and_bz2(tmp_path: Path, write_osm) -> None:  # type: ignore[no-untyped-def]
    path = write_osm(tmp_path / "tiny.osm", 4, 3)
    net = load_road_network(path)
    assert net.n_nodes == 8  # osmnx simplification drops the 4 degree-2 corners
    # blocks: 0.002 deg lon at 60.165 N ~ 111.0 m, 0.001 deg lat ~ 111.3 m; 3 x 3 + 4 x 2 blocks of street
    assert net.adjacency.sum() / 2 == pytest.approx(9 * 0.1110 + 8 * 0.1113, rel=0.01)
    packed = tmp_path / "tiny.osm.bz2"
    packed.write_bytes(bz2.compress(path.read_bytes()))
    assert load_road_network(packed).n_nodes == 8


def test_bad_map_files_give_clear_errors(tmp_path: Path) -> None:
    bad = tmp_path / "broken.osm"
    bad.write_bytes(b"\x00\x01 not xml at all")
    with pytest.raises(DataError, match=r"could not read the map file 'broken\.osm'"):
        load_road_network(bad)
    with pytest.raises(DataError, match="map file not found"):
        load_road_network(tmp_path / "missing.osm.bz2")
    with pytest.raises(DataError, match="unsupported map file"):
        load_road_network(tmp_path / "city.pbf")
    with pytest.raises(TypeError, match="source"):
        load_road_network(3)  # type: ignore[arg-type]


def test_place_name_offline_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import osmnx as ox

    def offline(*args: object, **kwargs: object) -> None:
        raise ConnectionError("no route to host")

    monkeypatch.setattr(ox, "geocode_to_gdf", offline)
    with pytest.raises(DataError, match="needs internet access"):
        load_road_network("Kallio, Helsinki")


def test_travel_distances_match_networkx(city) -> None:  # type: ignore[no-untyped-def]
    graph = nx.from_scipy_sparse_array(city.adjacency)
    ref = nx.single_source_dijkstra_path_length(graph, 0, weight="weight")
    ours = city.travel_km([0])[0]
    assert np.allclose([ref[i] for i in range(city.n_nodes)], ours, atol=1e-12)
    assert np.allclose(ours, dijkstra(city.adjacency, indices=0, directed=False))


def test_grid_shape_targets_and_tree(city) -> None:  # type: ignore[no-untyped-def]
    grid = build_grid(city, seed_n=4, depth=3)
    width, height = city.extent_km
    assert grid.h0 == pytest.approx(max(width, height) / 4)
    assert grid.cells[0] == 4 and grid.cells[1] == int(np.ceil(height / grid.h0 - 1e-9))
    assert grid.h_fine == pytest.approx(grid.h0 / 8)
    # every target is within keep_km of a road node; every fine vertex that is, is a target
    assert np.all(city.distance_to_roads(grid.targets_km) <= grid.keep_km)
    levels = tree_levels(grid)
    assert len(levels) == 4
    for r in range(1, 4):
        parents = {tuple(c) for c in levels[r - 1].tolist()}
        assert all((a // 2, b // 2) in parents for a, b in levels[r].tolist())
    # every target is a corner of a retained finest cell
    finest = {tuple(c) for c in levels[-1].tolist()}
    for i, j in grid.fine_ij.tolist():
        assert any((i - di, j - dj) in finest for di in (0, 1) for dj in (0, 1))


def test_grid_rejects_bad_arguments(city) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(DataError, match="seed_n"):
        build_grid(city, seed_n=1)
    with pytest.raises(DataError, match="depth"):
        build_grid(city, depth=9)
    with pytest.raises(TypeError, match="network"):
        build_grid("city")  # type: ignore[arg-type]
    with pytest.raises(DataError, match="nx_, ny"):
        grid_road_network(1, 5)
