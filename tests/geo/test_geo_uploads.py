"""Bad map uploads: every one ends in a DataError that says what is wrong, or loads the whole map.

Each test writes its own tiny input (OpenStreetMap XML or graphml) and runs it through what the geo page
calls for an upload: ``load_road_network`` and, where it loads, ``build_problem`` at depth 1.
"""

from __future__ import annotations

import bz2
from pathlib import Path

import numpy as np
import pytest

from mdp_core.errors import DataError
from mdp_core.geo import build_problem, load_road_network

Node = tuple[int, float | str, float | str]  # id, lat, lon
Way = tuple[int, list[int], str]  # id, node refs, highway class


def _osm(path: Path, nodes: list[Node], ways: list[Way], *, ways_first: bool = False) -> Path:
    """Write OpenStreetMap XML with these nodes and highway ways."""
    node_xml = [f'<node id="{i}" version="1" lat="{lat}" lon="{lon}"/>' for i, lat, lon in nodes]
    way_xml = [
        f'<way id="{w}" version="1">'
        + "".join(f'<nd ref="{r}"/>' for r in refs)
        + f'<tag k="highway" v="{hw}"/></way>'
        for w, refs, hw in ways
    ]
    body = "\n".join(way_xml + node_xml if ways_first else node_xml + way_xml)
    path.write_text(f'<?xml version="1.0" encoding="UTF-8"?>\n<osm version="0.6">\n{body}\n</osm>\n')
    return path


#: A 3 x 2 street grid near Helsinki: nodes 1..6, two east-west and three north-south ways.
GRID_NODES: list[Node] = [
    (1 + 2 * i + j, 60.165 + 0.001 * j, 24.94 + 0.002 * i) for i in range(3) for j in range(2)
]
GRID_WAYS: list[Way] = [(10, [1, 3, 5], "residential"), (11, [2, 4, 6], "residential")] + [
    (12 + i, [1 + 2 * i, 2 + 2 * i], "residential") for i in range(3)
]


def _depth1(net) -> None:  # type: ignore[no-untyped-def]
    problem = build_problem(net, seed_n=12, depth=1, n_tasks=60, rng=np.random.default_rng(0))
    assert np.isfinite(problem.loss).all()


def test_grid_helper_loads(tmp_path: Path) -> None:
    net = load_road_network(_osm(tmp_path / "grid.osm", GRID_NODES, GRID_WAYS))
    assert net.n_nodes == 2  # the two T-junctions (corners have two neighbours and are contracted)
    _depth1(net)


@pytest.mark.parametrize("bad", ["abc", "nan", "inf"])
def test_coordinates_that_are_not_numbers(tmp_path: Path, bad: str) -> None:
    # before: osmium.InvalidLocationError escaped (not a DataError)
    nodes = [(1, bad, 24.94), *GRID_NODES[1:]]
    with pytest.raises(DataError, match=r"node whose coordinates are not numbers .*numeric lat and lon"):
        load_road_network(_osm(tmp_path / "bad.osm", nodes, GRID_WAYS))


@pytest.mark.parametrize(("lat", "lon"), [(95.0, 24.94), (60.165, 200.0)])
def test_node_off_the_globe_is_named(tmp_path: Path, lat: float, lon: float) -> None:
    # before: the node was dropped as if clipped from the extract, and the map silently lost its roads
    nodes = [(1, lat, lon), *GRID_NODES[1:]]
    with pytest.raises(DataError, match=r"node 1 of the map 'off\.osm' lies outside the globe"):
        load_road_network(_osm(tmp_path / "off.osm", nodes, GRID_WAYS))


def test_negative_node_ids_are_refused(tmp_path: Path) -> None:
    # before: JOSM's unsaved (negative) nodes had no location, and the map lost every way through them
    nodes = [(-i, lat, lon) for i, lat, lon in GRID_NODES]
    ways = [(w, [-r for r in refs], hw) for w, refs, hw in GRID_WAYS]
    with pytest.raises(DataError, match=r"negative ids .*osmium renumber"):
        load_road_network(_osm(tmp_path / "josm.osm", nodes, ways))


def test_ways_without_their_nodes_say_so(tmp_path: Path) -> None:
    # before: "contains no drivable road ways", though it has five
    path = _osm(tmp_path / "unsorted.osm", GRID_NODES, GRID_WAYS, ways_first=True)
    with pytest.raises(DataError, match=r"has 5 drivable road ways, but none of the nodes they reference"):
        load_road_network(path)


def test_loop_cul_de_sac_and_lone_ring_are_kept(tmp_path: Path) -> None:
    # a loop road hanging off a street (1-2-3-4-1, tail 4-5): before, the loop vanished (2 nodes left)
    square: list[Node] = [(1, 60.1, 24.9), (2, 60.1, 24.902), (3, 60.101, 24.902), (4, 60.101, 24.9)]
    lollipop = _osm(
        tmp_path / "lollipop.osm",
        [*square, (5, 60.102, 24.9)],
        [(1, [1, 2, 3, 4, 1], "residential"), (2, [4, 5], "residential")],
    )
    net = load_road_network(lollipop)
    drawn = {tuple(p) for path in net.paths_lonlat for p in path}
    assert {(lon, lat) for _, lat, lon in square} <= drawn
    assert net.n_nodes == 3
    # the far corner of the loop is reachable over the loop: travel from the tail's end > 2 sides
    far = int(np.argmin(np.hypot(net.lonlat[:, 0] - 24.902, net.lonlat[:, 1] - 60.1)))
    assert np.hypot(*(net.lonlat[far] - [24.902, 60.1])) < 0.0015
    _depth1(net)
    # a map that is one roundabout: before, "contains no roads between distinct nodes"
    ring = load_road_network(_osm(tmp_path / "ring.osm", square, [(1, [1, 2, 3, 4, 1], "residential")]))
    assert ring.n_nodes == 2 and len(ring.paths_lonlat) == 2
    perimeter = sum(np.hypot(*np.diff(np.asarray(p), axis=0).T).sum() for p in ring.paths_lonlat)
    assert perimeter == pytest.approx(2 * 0.002 + 2 * 0.001)
    _depth1(ring)


def test_bz2_bomb_is_refused_quickly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # before: the XML parser read every unpacked byte (300 MB from 310 bytes: 4 s; a few kB: minutes)
    import mdp_core.geo.osm as osm

    monkeypatch.setattr(osm, "MAX_BZ2_BYTES", 1 << 20, raising=False)
    bomb = tmp_path / "bomb.osm.bz2"
    bomb.write_bytes(bz2.compress(b'<?xml version="1.0"?><osm version="0.6">' + b" " * (8 << 20) + b"</osm>"))
    with pytest.raises(DataError, match=r"'bomb\.osm\.bz2' unpacks to more than 1 MB .*compression bomb"):
        load_road_network(bomb)
    garbage = tmp_path / "gz.osm.bz2"
    garbage.write_bytes(b"\x1f\x8b\x08\x00 not bzip2 at all")
    with pytest.raises(DataError, match=r"not a complete bzip2 file"):
        load_road_network(garbage)


def test_a_map_of_too_many_road_nodes_is_refused_while_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, write_osm
) -> None:  # type: ignore[no-untyped-def]
    # security audit: a 152 kB .pbf of 4 M road-node references took 2.15 GB before the node limit refused it
    import mdp_core.geo.osm as osm

    path = write_osm(tmp_path / "grid.osm", 6, 5)  # 5 ways of 6 nodes and 6 of 5: 60 references
    load_road_network(path)
    monkeypatch.setattr(osm, "MAX_WAY_REFS", 59)
    with pytest.raises(DataError, match=r"'grid\.osm' has more than 59 drivable road node references"):
        load_road_network(path)


def test_map_across_the_antimeridian_gets_its_own_utm_zone(tmp_path: Path) -> None:
    # before: the mean longitude of 179.9 E and 179.9 W is 0, so Fiji was projected in UTM zone 31 (3 E)
    nodes: list[Node] = [(1, -17.0, 179.99), (2, -17.0, -179.99), (3, -17.01, -179.99), (4, -17.01, 179.99)]
    net = load_road_network(
        _osm(tmp_path / "fiji.osm", nodes, [(1, [1, 2, 3], "primary"), (2, [2, 4], "primary")])
    )
    assert net.crs in {"EPSG:32701", "EPSG:32760"}
    assert net.extent_km == pytest.approx((2.13, 1.11), abs=0.05)  # bounding box, grid convergence ~1 deg


def test_world_spanning_map_is_refused(tmp_path: Path) -> None:
    # before: infinite projected coordinates, then ValueError "cannot convert float NaN to integer"
    nodes: list[Node] = [(1, 0.0, -90.0), (2, 0.0, 0.0), (3, 0.0, 90.0), (4, 10.0, 0.0)]
    path = _osm(tmp_path / "world.osm", nodes, [(1, [1, 2, 3], "motorway"), (2, [2, 4], "motorway")])
    with pytest.raises(DataError, match=r"'world\.osm' is too wide for one map projection"):
        load_road_network(path)
    nodes = [(1, 36.0, -9.0), (2, 50.0, 10.0), (3, 70.0, 30.0), (4, 45.0, 40.0)]  # Lisbon .. Caspian
    path = _osm(tmp_path / "europe.osm", nodes, [(1, [1, 2, 3], "motorway"), (2, [2, 4], "motorway")])
    with pytest.raises(DataError, match=r"reach 2,\d{3} km from the central meridian"):
        load_road_network(path)


def test_upper_case_suffix_loads(tmp_path: Path) -> None:
    # before: "Could not detect file format" (pyosmium reads the format from a lower-case suffix)
    net = load_road_network(_osm(tmp_path / "CITY.OSM", GRID_NODES, GRID_WAYS))
    assert net.n_nodes == 2  # the two T-junctions (corners have two neighbours and are contracted)


def _graphml(
    path: Path, nodes: dict[int, tuple[float, float]], edges: list[tuple[int, int]], **graph: str
) -> Path:
    """Write an osmnx graphml: nodes id -> (x, y), edges without a length (the loader measures them)."""
    import networkx as nx
    import osmnx as ox

    g = nx.MultiDiGraph(**graph)
    for n, (x, y) in nodes.items():
        g.add_node(n, x=x, y=y)
    for u, v in edges:
        g.add_edge(u, v)
    ox.save_graphml(g, path)
    return path


SQUARE = {1: (24.9, 60.1), 2: (24.902, 60.1), 3: (24.902, 60.101), 4: (24.9, 60.101), 5: (24.901, 60.102)}
SQUARE_EDGES = [(1, 2), (2, 3), (3, 4), (4, 1), (4, 5), (3, 5)]


def test_graphml_that_is_not_an_osmnx_road_graph(tmp_path: Path) -> None:
    import networkx as nx

    # before: KeyError 'x' (a plain networkx graph)
    nx.write_graphml(nx.path_graph(3), tmp_path / "plain.graphml")
    with pytest.raises(DataError, match=r"not an osmnx road graph: every node needs numeric x and y"):
        load_road_network(tmp_path / "plain.graphml")
    # before: RuntimeError 'Unable to determine UTM CRS' (lat 123) and osmnx ValidationError (x = NaN)
    for bad, name in (((24.9, 123.0), "lat.graphml"), ((float("nan"), 60.1), "nan.graphml")):
        path = _graphml(tmp_path / name, {**SQUARE, 1: bad}, SQUARE_EDGES, crs="epsg:4326")
        with pytest.raises(DataError, match=r"has nodes that are not on the globe"):
            load_road_network(path)


def test_graphml_without_crs_or_projected_loads_in_degrees(tmp_path: Path) -> None:
    from pyproj import Transformer

    # before: KeyError 'crs'; lon/lat graphs without it are read as WGS84
    plain = load_road_network(_graphml(tmp_path / "nocrs.graphml", SQUARE, SQUARE_EDGES))
    assert plain.n_nodes == 5
    _depth1(plain)
    # before: a projected graph's metres were taken as lon/lat (lonlat 385686, 6671563), breaking the drawing
    to_utm = Transformer.from_crs("EPSG:4326", "EPSG:32635", always_xy=True)
    metres = {n: to_utm.transform(*ll) for n, ll in SQUARE.items()}
    projected = load_road_network(_graphml(tmp_path / "utm.graphml", metres, SQUARE_EDGES, crs="EPSG:32635"))
    np.testing.assert_allclose(np.sort(projected.lonlat, axis=0), np.sort(plain.lonlat, axis=0), atol=1e-9)
    np.testing.assert_allclose(projected.adjacency.toarray(), plain.adjacency.toarray(), rtol=1e-6)
    assert all(abs(lon) <= 180 and abs(lat) <= 90 for path in projected.paths_lonlat for lon, lat in path)


def test_graphml_negative_length_is_measured(tmp_path: Path) -> None:
    import networkx as nx

    from mdp_core.geo import network_from_graph

    g = nx.MultiDiGraph()
    g.add_node(1, x=0.0, y=0.0)
    g.add_node(2, x=300.0, y=400.0)
    g.add_edge(1, 2, length=-50.0)  # before: clamped to 1 mm, a shortcut through the city
    assert network_from_graph(g, name="t").adjacency[0, 1] == pytest.approx(0.5)


def test_disconnected_map_is_refused_or_the_cut_is_noted(tmp_path: Path) -> None:
    # 30 separate streets: before, one of them (2 of 60 nodes) silently became "the map"
    nodes: list[Node] = []
    ways: list[Way] = []
    for k in range(30):
        nodes += [(100 + 2 * k, 60.1 + 0.01 * k, 24.9), (101 + 2 * k, 60.1 + 0.01 * k, 24.905)]
        ways.append((k + 1, [100 + 2 * k, 101 + 2 * k], "residential"))
    with pytest.raises(
        DataError, match=r"fall apart into 30 unconnected parts; the largest holds only 2 of 60"
    ):
        load_road_network(_osm(tmp_path / "streets.osm", nodes, ways))
    # the grid plus one street far away: the street goes, and the network says so
    far: list[Node] = [(100, 60.3, 25.2), (101, 60.3, 25.205)]
    net = load_road_network(
        _osm(tmp_path / "two.osm", GRID_NODES + far, [*GRID_WAYS, (99, [100, 101], "primary")])
    )
    assert net.n_nodes == 2
    assert net.notes == (
        "Kept the largest connected road network: 2 of 4 road nodes (50.0%); 2 nodes in 1 separate part(s) "
        "are not connected to it and are left out.",
    )
    assert load_road_network(_osm(tmp_path / "grid.osm", GRID_NODES, GRID_WAYS)).notes == ()


def test_clipped_extract_is_noted(tmp_path: Path) -> None:
    # node 6 is not in the file (clipped): way 11 and way 14 end at node 4; before, nothing said so
    net = load_road_network(_osm(tmp_path / "clipped.osm", GRID_NODES[:-1], GRID_WAYS))
    assert any("2 of the 12 node references of the road ways are not in the file" in n for n in net.notes)


def test_map_at_one_point_is_refused_at_load(tmp_path: Path) -> None:
    # before: 5 mm of road loaded (and 0 mm failed only later, in build_problem, with "zero extent")
    for lon in (24.9, 24.9000001):
        path = _osm(tmp_path / "dot.osm", [(1, 60.1, 24.9), (2, 60.1, lon)], [(1, [1, 2], "residential")])
        with pytest.raises(DataError, match=r"'dot\.osm' span only 0\.0\d m .*at least 10 m apart"):
            load_road_network(path)


def test_graphml_zero_length_is_measured(tmp_path: Path) -> None:
    import networkx as nx

    from mdp_core.geo import network_from_graph

    g = nx.MultiDiGraph()
    g.add_node(1, x=0.0, y=0.0)
    g.add_node(2, x=300.0, y=400.0)
    g.add_edge(1, 2, length=0.0)  # audit: every travel distance was 0, and every method's error 0.000 km
    assert network_from_graph(g, name="t").adjacency[0, 1] == pytest.approx(0.5)


def test_a_map_wider_than_a_region_is_refused_with_its_size(tmp_path: Path) -> None:
    """Audit: a town plus one motorway 5,017 km north loaded; EM then underflowed ("not private") and the
    LPs failed on infinities. Now such a map is refused, east-west and north-south alike."""
    north = [*GRID_NODES, (7, 60.165 + 1.0, 24.94)]  # 111 km north of the grid
    ways = [*GRID_WAYS, (20, [2, 7], "motorway")]
    with pytest.raises(
        DataError, match=r"'long\.osm' span \d km east-west and 111 km north-south; a map can span"
    ):
        load_road_network(_osm(tmp_path / "long.osm", north, ways))
    near = [*GRID_NODES, (7, 60.165 + 0.5, 24.94)]  # 56 km: a region, loaded
    _depth1(load_road_network(_osm(tmp_path / "region.osm", near, ways)))


def test_a_budget_too_large_for_the_map_is_refused_by_the_comparison(tmp_path: Path) -> None:
    from mdp_core.geo import compare_methods

    near = [*GRID_NODES, (7, 60.165 + 0.5, 24.94)]
    net = load_road_network(_osm(tmp_path / "region.osm", near, [*GRID_WAYS, (20, [2, 7], "motorway")]))
    problem = build_problem(net, seed_n=6, depth=1, n_tasks=20, rng=np.random.default_rng(0))
    reach = float(np.hypot(*np.ptp(problem.targets_km, axis=0)))
    with pytest.raises(DataError, match=rf"choose ε ≤ {600 / reach:.3g}/km or a smaller map"):
        compare_methods(problem, 700 / reach, methods=("em",))
    comp = compare_methods(problem, 500 / reach, methods=("em",))  # within reach: built and private
    assert comp.max_excess["em"] <= 1e-9
