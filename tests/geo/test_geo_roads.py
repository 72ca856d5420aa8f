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
    assert net.n_nodes == 8  # simplification (as osmnx) drops the 4 degree-2 corners
    # blocks: 0.002 deg lon at 60.165 N ~ 111.0 m, 0.001 deg lat ~ 111.3 m; 3 x 3 + 4 x 2 blocks of street
    assert net.adjacency.sum() / 2 == pytest.approx(9 * 0.1110 + 8 * 0.1113, rel=0.01)
    assert net.crs == "EPSG:32635"  # UTM zone 35 N holds 24.94 E
    packed = tmp_path / "tiny.osm.bz2"
    packed.write_bytes(bz2.compress(path.read_bytes()))
    assert load_road_network(packed).n_nodes == 8


def _to_pbf(xml: Path, pbf: Path) -> Path:
    import osmium

    with osmium.SimpleWriter(str(pbf)) as writer:
        for obj in osmium.FileProcessor(str(xml)):
            writer.add(obj)
    return pbf


def test_pbf_equals_xml_and_lengths_match_geodesics(tmp_path: Path, write_osm) -> None:  # type: ignore[no-untyped-def]
    xml = write_osm(tmp_path / "grid.osm", 5, 4)
    pbf = _to_pbf(xml, tmp_path / "grid.osm.pbf")
    a, b = load_road_network(xml), load_road_network(pbf)
    assert a.n_nodes == b.n_nodes == 5 * 4 - 4
    assert np.allclose(a.xy_km, b.xy_km) and np.allclose(a.lonlat, b.lonlat)
    assert (a.adjacency != b.adjacency).nnz == 0
    # total street length against geodesic lengths on the WGS84 ellipsoid (pyproj.Geod)
    from pyproj import Geod

    geod = Geod(ellps="WGS84")
    lat = 60.165 + 0.001 * np.arange(4)
    east = sum(geod.inv(24.94, la, 24.942, la)[2] for la in lat) * 4  # 4 blocks per row
    north = sum(geod.inv(24.94, 60.165 + 0.001 * j, 24.94, 60.166 + 0.001 * j)[2] for j in range(3)) * 5
    expected = (east + north) / 1000.0
    assert a.adjacency.sum() / 2 == pytest.approx(expected, rel=1e-3)  # UTM scale error < 0.05 % here


def _osm_with_footway_and_gap(path: Path) -> Path:
    """Two residential streets crossing, a footway leaving the crossing, and a way with a missing node."""
    nodes = {1: (60.165, 24.940), 2: (60.165, 24.944), 3: (60.163, 24.942), 4: (60.167, 24.942)}
    nodes.update({5: (60.165, 24.942), 6: (60.169, 24.942), 7: (60.170, 24.946), 8: (60.171, 24.946)})
    body = [f'<node id="{k}" version="1" lat="{la}" lon="{lo}"/>' for k, (la, lo) in nodes.items()]
    ways = [
        ([1, 5, 2], "residential", ""),
        ([3, 5, 4], "residential", ""),
        ([4, 6], "footway", ""),
        ([4, 99, 7, 8], "primary", ""),  # node 99 is not in the extract: the way continues at 7
        ([5, 8], "service", '<tag k="service" v="parking_aisle"/>'),
    ]
    for wid, (refs, cls, extra) in enumerate(ways, start=1):
        nds = "".join(f'<nd ref="{r}"/>' for r in refs)
        body.append(f'<way id="{wid}" version="1">{nds}<tag k="highway" v="{cls}"/>{extra}</way>')
    path.write_text('<?xml version="1.0"?>\n<osm version="0.6">\n' + "\n".join(body) + "\n</osm>\n")
    return path


def test_road_filter_and_trimmed_references(tmp_path: Path) -> None:
    path = _osm_with_footway_and_gap(tmp_path / "mixed.osm")
    drive = load_road_network(path)  # files default to drivable roads
    every = load_road_network(path, roads="all")
    # drive: the crossing (5 nodes, 4 edges); the primary way is cut at the missing node, leaving 7-8 alone
    assert drive.n_nodes == 5 and drive.adjacency.nnz == 8
    # all: footway 4-6 and parking aisle 5-8 join; 4 and 8 now have two neighbours and are contracted
    # (5-4-6 and 5-8-7 become single edges): kept nodes 1, 2, 3, 5, 6, 7
    assert every.n_nodes == 6 and every.adjacency.nnz == 10
    assert every.adjacency.sum() > drive.adjacency.sum()
    assert load_road_network(path, roads="drive").n_nodes == 5
    with pytest.raises(DataError, match="roads must be"):
        load_road_network(path, roads="cars")


def test_graphml_still_loads(tmp_path: Path, write_osm) -> None:  # type: ignore[no-untyped-def]
    import osmnx as ox

    xml = write_osm(tmp_path / "g.osm", 4, 3)
    graph = ox.graph_from_xml(xml, retain_all=False)
    ox.save_graphml(graph, tmp_path / "g.graphml")
    net = load_road_network(tmp_path / "g.graphml")
    assert net.n_nodes == 8
    assert net.adjacency.sum() / 2 == pytest.approx(load_road_network(xml).adjacency.sum() / 2, rel=5e-3)


def test_city_scale_pbf_loads_in_seconds(baltimore: Path) -> None:
    import time

    start = time.perf_counter()
    net = load_road_network(baltimore)
    seconds = time.perf_counter() - start
    assert seconds < 5.0, f"loading took {seconds:.1f} s"
    assert net.crs == "EPSG:32618"  # UTM 18 N holds Baltimore (76.6 W)
    assert 4000 < net.n_nodes < 5000  # drivable roads, simplified, largest component
    # README: lat 39.219-39.347, lon -76.664 to -76.482
    assert np.all((net.lonlat[:, 0] > -76.665) & (net.lonlat[:, 0] < -76.481))
    assert np.all((net.lonlat[:, 1] > 39.218) & (net.lonlat[:, 1] < 39.348))
    width, height = net.extent_km
    assert 7.5 < width < 9.5 and 7.0 < height < 8.5
    assert np.isfinite(net.travel_km([0])).all()
    assert load_road_network(baltimore, roads="all").n_nodes > net.n_nodes


def test_bad_map_files_give_clear_errors(tmp_path: Path) -> None:
    bad = tmp_path / "broken.osm"
    bad.write_bytes(b"\x00\x01 not xml at all")
    with pytest.raises(DataError, match=r"could not read the map file 'broken\.osm'"):
        load_road_network(bad)
    with pytest.raises(DataError, match="map file not found"):
        load_road_network(tmp_path / "missing.osm.bz2")
    with pytest.raises(DataError, match="map file not found"):
        load_road_network(tmp_path / "city.osm.pbf")
    notes = tmp_path / "notes.csv"
    notes.write_text("a,b\n")
    with pytest.raises(DataError, match="unsupported map file"):
        load_road_network(notes)
    empty = tmp_path / "empty.osm"
    empty.write_text('<?xml version="1.0"?><osm version="0.6"></osm>')
    with pytest.raises(DataError, match="contains no drivable road ways"):
        load_road_network(empty)
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
