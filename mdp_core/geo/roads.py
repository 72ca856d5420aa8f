"""Road networks: load a city (embedded, file, or place name), project to metres, travel distances in km.

A :class:`RoadNetwork` holds what the geo mechanisms need and nothing mutable: node coordinates in a metric
CRS (km), node longitudes/latitudes (for drawing), the undirected road graph as a scipy CSR matrix of edge
lengths (km), and the road polylines in lon/lat (for a pydeck PathLayer). Travel distances are shortest
paths on that graph (``scipy.sparse.csgraph.dijkstra``); locations map to their nearest road node through a
``scipy.spatial.cKDTree`` on the projected coordinates (seed 004, Sec. 6 "Datasets": "each grid vertex is
mapped to its nearest OSM road-network node").

osmnx is imported lazily, inside the loaders, so ``import mdp_core.geo`` stays light.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import networkx as nx
import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components, dijkstra
from scipy.spatial import cKDTree

from mdp_core.errors import DataError

__all__ = [
    "DEFAULT_CITY",
    "MAX_AREA_KM2",
    "MAX_NODES",
    "MIN_CONNECTED_SHARE",
    "MIN_EXTENT_M",
    "RoadNetwork",
    "grid_road_network",
    "largest_component",
    "load_road_network",
    "network_from_graph",
]

#: The embedded city: central Helsinki highway ways (data/README.md), loadable offline.
DEFAULT_CITY = Path(__file__).resolve().parents[2] / "data" / "helsinki.osm.bz2"
#: Largest graph accepted (nodes after simplification): beyond this the distance tables get slow.
MAX_NODES = 60_000
#: Largest place (km^2 of the geocoded boundary) fetched by name.
MAX_AREA_KM2 = 60.0
#: Smallest share of a map's road nodes in its largest connected part (else the upload is refused).
MIN_CONNECTED_SHARE = 0.5
#: Smallest span (m, the longer side of the bounding box) of the kept road nodes.
MIN_EXTENT_M = 10.0


@dataclass(frozen=True, eq=False)
class RoadNetwork:
    """An undirected road graph in km (projected CRS), ready for distances and drawing.

    Attributes
    ----------
    name : str
        Human-readable source ("default", file name or place).
    xy_km : ndarray, shape (n, 2)
        Projected node coordinates in km, shifted so the south-west corner of the bounding box is (0, 0).
    lonlat : ndarray, shape (n, 2)
        Node longitude / latitude in degrees (WGS84).
    adjacency : scipy.sparse.csr_matrix, shape (n, n)
        Symmetric edge lengths in km (shortest parallel edge); the graph is connected.
    paths_lonlat : list of list of [lon, lat]
        One polyline per road edge, for drawing.
    origin_m : tuple of float
        Projected coordinates (metres) of the km origin; ``crs`` names the projection.
    notes : tuple of str
        What the loader left out of the file, in words for the page (parts of the road network not
        connected to the largest one, node references missing from a clipped extract); empty when nothing.
    """

    name: str
    xy_km: np.ndarray
    lonlat: np.ndarray
    adjacency: sp.csr_matrix
    paths_lonlat: list[list[list[float]]] = field(repr=False)
    origin_m: tuple[float, float] = (0.0, 0.0)
    crs: str = "local"
    notes: tuple[str, ...] = ()

    @property
    def n_nodes(self) -> int:
        """Number of road nodes."""
        return int(self.xy_km.shape[0])

    @property
    def extent_km(self) -> tuple[float, float]:
        """Width and height of the bounding box in km."""
        return float(self.xy_km[:, 0].max()), float(self.xy_km[:, 1].max())

    def nearest_nodes(self, points_km: np.ndarray) -> np.ndarray:
        """Index of the nearest road node (Euclidean, projected km) for each point, shape (m,)."""
        pts = np.asarray(points_km, dtype=np.float64).reshape(-1, 2)
        return cKDTree(self.xy_km).query(pts)[1].astype(np.int64)

    def distance_to_roads(self, points_km: np.ndarray) -> np.ndarray:
        """Euclidean distance (km) from each point to its nearest road node."""
        pts = np.asarray(points_km, dtype=np.float64).reshape(-1, 2)
        return cKDTree(self.xy_km).query(pts)[0]

    def travel_km(self, sources: np.ndarray) -> np.ndarray:
        """Shortest-path travel distances (km) from each source node to every node, shape (len, n)."""
        idx = np.asarray(sources, dtype=np.int64).ravel()
        return dijkstra(self.adjacency, directed=False, indices=idx)

    def to_lonlat(self, points_km: np.ndarray) -> np.ndarray:
        """Approximate lon/lat of projected km points (affine fit on the nodes; for drawing only)."""
        pts = np.asarray(points_km, dtype=np.float64).reshape(-1, 2)
        design = np.column_stack([self.xy_km, np.ones(self.n_nodes)])
        coef, *_ = np.linalg.lstsq(design, self.lonlat, rcond=None)
        return np.column_stack([pts, np.ones(len(pts))]) @ coef


def network_from_graph(
    graph: nx.MultiDiGraph | nx.Graph,
    *,
    name: str,
    lonlat: dict[object, tuple[float, float]] | None = None,
    geometry: list[tuple[object, object, list[list[float]]]] | None = None,
    crs: str = "local",
) -> RoadNetwork:
    """Build a :class:`RoadNetwork` from a projected graph (node attrs ``x``, ``y`` in metres).

    Edge lengths come from the ``length`` attribute (metres) or, when missing or negative, the straight node
    distance. Only the largest connected component is kept (travel distances must be finite; see
    :func:`largest_component`). ``lonlat`` maps node ->
    (lon, lat); by default nodes carry ``lon``/``lat`` attributes, else the projected coordinates are used.
    ``geometry`` lists (u, v, lon/lat polyline) per edge for drawing curved roads; default straight segments.
    """
    if graph.number_of_nodes() < 2 or graph.number_of_edges() < 1:
        raise DataError(f"the road network {name!r} has no roads (need at least 2 nodes and 1 edge)")
    nodes = list(graph.nodes)
    index = {node: i for i, node in enumerate(nodes)}
    try:
        xy = np.array([[graph.nodes[n]["x"], graph.nodes[n]["y"]] for n in nodes], dtype=np.float64)
    except KeyError as exc:
        raise DataError(f"the road network {name!r} has nodes without x/y coordinates") from exc
    except (TypeError, ValueError) as exc:
        raise DataError(f"the road network {name!r} has node x/y coordinates that are not numbers") from exc
    if not np.isfinite(xy).all():
        raise DataError(f"the road network {name!r} has node x/y coordinates that are not finite numbers")
    rows, cols, lengths = [], [], []
    for u, v, data in graph.edges(data=True):
        if u == v:
            continue
        length = data.get("length")
        if length is None or not np.isfinite(length) or length <= 0:  # 0 too: every distance was 0 (audit)
            length = float(np.hypot(*(xy[index[u]] - xy[index[v]])))
        rows.append(index[u])
        cols.append(index[v])
        lengths.append(max(float(length), 1e-3) / 1000.0)
    if not rows:
        raise DataError(f"the road network {name!r} has no roads between distinct nodes")
    adjacency = _min_symmetric(np.array(rows), np.array(cols), np.array(lengths), len(nodes))
    keep, notes = largest_component(adjacency, name)
    adjacency = adjacency[keep][:, keep].tocsr()
    xy = xy[keep]
    _check_extent(xy, name)
    kept_nodes = [nodes[i] for i in keep]
    if lonlat is not None:
        ll = np.array([lonlat[n] for n in kept_nodes], dtype=np.float64)
    elif all("lon" in graph.nodes[n] for n in kept_nodes):
        ll = np.array([[graph.nodes[n]["lon"], graph.nodes[n]["lat"]] for n in kept_nodes], dtype=np.float64)
    else:
        ll = xy.copy()
    origin = xy.min(axis=0)
    if geometry is not None:
        kept = set(kept_nodes)
        paths = [coords for u, v, coords in geometry if u in kept and v in kept]
    else:
        coo = sp.triu(adjacency, k=1).tocoo()
        paths = [[ll[i].tolist(), ll[j].tolist()] for i, j in zip(coo.row, coo.col, strict=True)]
    return RoadNetwork(
        name=name,
        xy_km=(xy - origin) / 1000.0,
        lonlat=ll,
        adjacency=adjacency,
        paths_lonlat=paths,
        origin_m=(float(origin[0]), float(origin[1])),
        crs=crs,
        notes=notes,
    )


def largest_component(adjacency: sp.csr_matrix, name: str) -> tuple[np.ndarray, tuple[str, ...]]:
    """Nodes of the largest connected part of a road graph, and a note when other parts are left out.

    Travel distances need one connected graph, so a map's smaller parts (streets cut off at the edge of an
    extract, islands) are dropped; when the largest part holds less than :data:`MIN_CONNECTED_SHARE` of the
    nodes, most of the map would go: a DataError (disjoint areas or fragments in one file), not a silent cut.
    """
    n = adjacency.shape[0]
    count, labels = connected_components(adjacency, directed=False)
    sizes = np.bincount(labels)
    keep = np.flatnonzero(labels == sizes.argmax())
    if count == 1:
        return keep, ()
    share = len(keep) / n
    if share < MIN_CONNECTED_SHARE:
        raise DataError(
            f"the roads of {name!r} fall apart into {count:,} unconnected parts; the largest holds only "
            f"{len(keep):,} of {n:,} road nodes ({share:.0%}), and travel distances need one connected road "
            "network. Upload an extract of one connected area (or, if footpaths join the parts, all roads)."
        )
    return keep, (
        f"Kept the largest connected road network: {len(keep):,} of {n:,} road nodes ({share:.1%}); "
        f"{n - len(keep):,} nodes in {count - 1:,} separate part(s) are not connected to it and are left "
        "out.",
    )


def _check_extent(xy_m: np.ndarray, name: str) -> None:
    """DataError when the kept road nodes span less than :data:`MIN_EXTENT_M` (no room for a grid)."""
    span = float(np.ptp(xy_m, axis=0).max())
    if span < MIN_EXTENT_M:
        raise DataError(
            f"the roads of {name!r} span only {span:.2f} m (all road nodes lie almost at one point); a map "
            f"needs roads at least {MIN_EXTENT_M:.0f} m apart. Upload a larger area."
        )


def _min_symmetric(rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, n: int) -> sp.csr_matrix:
    """Symmetric CSR keeping the shortest of parallel edges (both directions)."""
    r = np.concatenate([rows, cols])
    c = np.concatenate([cols, rows])
    v = np.concatenate([vals, vals])
    order = np.lexsort((v, c, r))
    r, c, v = r[order], c[order], v[order]
    first = np.ones(len(r), dtype=bool)
    first[1:] = (r[1:] != r[:-1]) | (c[1:] != c[:-1])
    return sp.csr_matrix((v[first], (r[first], c[first])), shape=(n, n))


def grid_road_network(
    nx_: int = 8,
    ny: int = 6,
    *,
    spacing_km: float = 0.15,
    jitter_km: float = 0.02,
    drop: float = 0.15,
    rng: np.random.Generator | None = None,
) -> RoadNetwork:
    """A synthetic city: a jittered ``nx_ x ny`` street grid with a fraction ``drop`` of streets removed.

    For tests and offline demos; the lon/lat are a local equirectangular placement near Helsinki.
    """
    if nx_ < 2 or ny < 2:
        raise DataError(f"grid_road_network needs nx_, ny >= 2, got {nx_} x {ny}")
    rng = np.random.default_rng(0) if rng is None else rng
    graph = nx.grid_2d_graph(nx_, ny)
    edges = list(graph.edges)
    removable = rng.random(len(edges)) < drop
    for edge, gone in zip(edges, removable, strict=True):
        if gone:
            graph.remove_edge(*edge)
            if not nx.is_connected(graph):
                graph.add_edge(*edge)
    for node in graph.nodes:
        i, j = node
        x = 1000.0 * (i * spacing_km + rng.uniform(-jitter_km, jitter_km))
        y = 1000.0 * (j * spacing_km + rng.uniform(-jitter_km, jitter_km))
        graph.nodes[node].update(x=x, y=y, lon=24.94 + x / 55_500.0, lat=60.165 + y / 111_200.0)
    return network_from_graph(graph, name=f"synthetic {nx_}x{ny}")


def load_road_network(source: str | os.PathLike[str] = "default", *, roads: str | None = None) -> RoadNetwork:
    """Load a road network: the embedded city, an OpenStreetMap file, an osmnx graphml, or a place name.

    Parameters
    ----------
    source : str or path
        ``"default"`` for the embedded central Helsinki extract (offline); a path to an OpenStreetMap file
        (``.osm.pbf``, ``.osm``, ``.osm.bz2``: read with pyosmium, :mod:`mdp_core.geo.osm`, a 15 km city in
        about a second) or an osmnx ``.graphml``; otherwise a place name geocoded by osmnx (needs internet;
        refused when its area exceeds ``MAX_AREA_KM2``).
    roads : {"drive", "all"}, optional
        Which ``highway=*`` ways make the travel graph of an OpenStreetMap file or place: drivable classes
        (the default for files and places) or all ways. The embedded district defaults to ``"all"`` (its
        file holds the district's highway ways, most of them pedestrian streets). Ignored for graphml.

    Returns
    -------
    RoadNetwork
        Projected to UTM (metres), distances in km, largest connected component; ``crs`` and
        ``origin_m`` (the projected position of the km origin) map km coordinates back to the map.

    Raises
    ------
    DataError
        Missing/unreadable/empty file, no network access for a place name, area or graph too large.
    """
    if not isinstance(source, str | os.PathLike):
        raise TypeError(f"source must be a str or path, got {type(source).__name__}")
    if roads not in {None, "drive", "all"}:
        raise DataError(f"roads must be 'drive' or 'all', got {roads!r}")
    text = os.fspath(source)
    if text == "default":
        if not DEFAULT_CITY.exists():
            raise DataError(f"the embedded city file is missing: {DEFAULT_CITY}")
        return _load_osm(DEFAULT_CITY, name="Helsinki (central)", roads=roads or "all")
    path = Path(text)
    name = path.name.lower()
    if name.endswith((".osm", ".osm.bz2", ".osm.pbf", ".pbf", ".xml")):
        if not path.exists():
            raise DataError(f"map file not found: {path}")
        return _load_osm(path, name=path.name, roads=roads or "drive")
    if name.endswith(".graphml"):
        if not path.exists():
            raise DataError(f"map file not found: {path}")
        return _load_file(path, name=path.name)
    if path.exists() or path.suffix.lower() in {".bz2", ".gz", ".json", ".csv", ".zip"}:
        raise DataError(f"unsupported map file {path.name!r}: use .osm.pbf, .osm, .osm.bz2 or .graphml")
    return _load_place(text, roads=roads or "drive")


def _load_osm(path: Path, *, name: str, roads: str) -> RoadNetwork:
    """pyosmium reader -> largest component -> :class:`RoadNetwork` (no networkx graph on the way)."""
    from mdp_core.geo.osm import read_osm_roads

    osm = read_osm_roads(path, roads=roads)
    if len(osm.edges) == 0:
        raise DataError(f"the map {name!r} contains no roads between distinct nodes")
    lengths = np.maximum(osm.lengths_m, 1e-3) / 1000.0
    keep_edge = osm.edges[:, 0] != osm.edges[:, 1]
    edges = osm.edges[keep_edge]
    n = len(osm.xy_m)
    adjacency = _min_symmetric(edges[:, 0], edges[:, 1], lengths[keep_edge], n)
    keep, notes = largest_component(adjacency, name)
    if osm.missing_refs:
        notes += (
            f"{osm.missing_refs:,} of the {osm.refs:,} node references of the road ways are not in the file "
            "(a clipped extract): those roads end where their nodes are missing.",
        )
    if len(keep) < 2:
        raise DataError(f"the road network {name!r} has no roads (need at least 2 connected nodes)")
    if len(keep) > MAX_NODES:
        raise DataError(
            f"the road network {name!r} has {len(keep):,} nodes; at most {MAX_NODES:,} are handled "
            "interactively (choose a smaller area)"
        )
    mask = np.zeros(n, dtype=bool)
    mask[keep] = True
    xy = osm.xy_m[keep]
    _check_extent(xy, name)
    origin = xy.min(axis=0)
    paths = [
        p for p, (u, v) in zip(osm.paths_lonlat, osm.edges, strict=True) if mask[u] and mask[v] and u != v
    ]
    return RoadNetwork(
        name=name,
        xy_km=(xy - origin) / 1000.0,
        lonlat=osm.lonlat[keep],
        adjacency=adjacency[keep][:, keep].tocsr(),
        paths_lonlat=paths,
        origin_m=(float(origin[0]), float(origin[1])),
        crs=osm.crs,
        notes=notes,
    )


def _load_file(path: Path, *, name: str) -> RoadNetwork:
    """Read OSM XML / graphml with osmnx (no network), keep the largest component, project."""
    import osmnx as ox

    try:
        if path.suffix.lower() == ".graphml":
            graph = ox.load_graphml(path)
        else:
            graph = ox.graph_from_xml(path, retain_all=False)
    except Exception as exc:  # osmnx raises many types for bad files (XML, KeyError, ValueError, ...)
        raise DataError(
            f"could not read the map file {path.name!r}: {type(exc).__name__}: {exc}. "
            "Expected OpenStreetMap XML with highway ways (.osm / .osm.bz2) or an osmnx .graphml."
        ) from exc
    return _project(graph, name=name)


def _project(graph: nx.MultiDiGraph, *, name: str) -> RoadNetwork:
    """Project an osmnx graph (lon/lat, or in the projection its ``crs`` names) to UTM and wrap it."""
    import osmnx as ox
    import pyproj

    from mdp_core.geo.osm import check_projected

    if graph.number_of_nodes() > MAX_NODES:
        raise DataError(
            f"the road network {name!r} has {graph.number_of_nodes():,} nodes; at most {MAX_NODES:,} are "
            "handled interactively (choose a smaller area)"
        )
    if graph.number_of_edges() == 0:
        raise DataError(f"the map {name!r} contains no roads (no highway ways)")
    try:
        xy = np.array([(float(d["x"]), float(d["y"])) for _, d in graph.nodes(data=True)], dtype=np.float64)
        crs = pyproj.CRS(graph.graph.get("crs") or "EPSG:4326")
    except (KeyError, TypeError, ValueError, pyproj.exceptions.CRSError) as exc:
        raise DataError(
            f"the graph {name!r} is not an osmnx road graph: every node needs numeric x and y attributes "
            f"and the graph a known 'crs' ({type(exc).__name__}: {exc}). Save it with osmnx.save_graphml."
        ) from exc
    to_ll = None if crs.is_geographic else pyproj.Transformer.from_crs(crs, "EPSG:4326", always_xy=True)
    ll = xy if to_ll is None else np.column_stack(to_ll.transform(xy[:, 0], xy[:, 1]))
    if not (np.isfinite(ll).all() and (np.abs(ll[:, 0]) <= 180).all() and (np.abs(ll[:, 1]) <= 90).all()):
        raise DataError(
            f"the graph {name!r} has nodes that are not on the globe (longitude outside -180..180, latitude "
            f"outside -90..90, or not finite, in its crs {crs.to_string()}): fix or remove them."
        )
    lonlat = {n: (float(x), float(y)) for n, (x, y) in zip(graph.nodes, ll, strict=True)}
    geometry = []
    for u, v, data in graph.edges(data=True):
        line = data.get("geometry")
        coords = np.asarray(line.coords)[:, :2] if line is not None else np.array([lonlat[u], lonlat[v]])
        if line is not None and to_ll is not None:
            coords = np.column_stack(to_ll.transform(coords[:, 0], coords[:, 1]))
        geometry.append((u, v, np.round(coords, 6).tolist()))
    try:
        graph.graph.setdefault("crs", "EPSG:4326")
        projected = ox.project_graph(graph)
    except Exception as exc:  # osmnx / geopandas raise many types for inconsistent graphs
        raise DataError(f"could not project the graph {name!r}: {type(exc).__name__}: {exc}") from exc
    out_crs = str(projected.graph.get("crs"))
    check_projected(np.array([(d["x"], d["y"]) for _, d in projected.nodes(data=True)]), out_crs, repr(name))
    return network_from_graph(projected, name=name, lonlat=lonlat, geometry=geometry, crs=out_crs)


def _load_place(place: str, *, roads: str = "drive") -> RoadNetwork:
    """Geocode a place and download its drivable network (needs internet; refuses large areas)."""
    import osmnx as ox

    try:
        boundary = ox.geocode_to_gdf(place)
    except Exception as exc:
        raise DataError(
            f"could not look up the place {place!r} ({type(exc).__name__}). Fetching a city by name needs "
            "internet access to OpenStreetMap; offline, use the embedded city or upload an .osm file."
        ) from exc
    area = float(boundary.to_crs(boundary.estimate_utm_crs()).area.sum()) / 1e6
    if area > MAX_AREA_KM2:
        raise DataError(
            f"{place!r} covers {area:,.0f} km^2; at most {MAX_AREA_KM2:.0f} km^2 can be handled (distance "
            "tables and the fine grid grow with the area). Choose a district instead."
        )
    try:
        network_type = "drive" if roads == "drive" else "all"
        graph = ox.graph_from_polygon(boundary.geometry.iloc[0], network_type=network_type)
    except Exception as exc:
        raise DataError(f"could not download the roads of {place!r}: {type(exc).__name__}: {exc}") from exc
    return _project(graph, name=place)
