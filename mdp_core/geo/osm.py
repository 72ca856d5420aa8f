"""Fast OpenStreetMap reader: .osm.pbf / .osm / .osm.bz2 straight to a simplified, projected road graph.

osmnx's XML path (parse every element into Python dicts, build a networkx MultiDiGraph, simplify it edge by
edge, project it through GeoPandas) is what made a 15 km city take most of a minute. Here pyosmium streams
the file once (C++), keeping only ``highway=*`` ways and their node locations; the graph is built from
arrays:

1. road filter: ``roads="drive"`` keeps the classes a car can travel on (osmnx's ``network_type="drive"``
   rule, simplified: motorway .. residential, their ``*_link``, living_street, unclassified, road, and
   ``service`` except parking aisles, driveways, drive-throughs and emergency access; no ``area=yes``; no
   ``access``/``motor_vehicle`` = no/private). ``roads="all"`` keeps every highway way.
2. node references missing from a clipped extract are dropped (the way is split there).
3. simplification as in osmnx: a node is kept unless it has exactly two distinct neighbours (intersections
   and dead ends stay); each chain of dropped nodes between two kept nodes becomes one edge whose length is
   the sum of its projected segment lengths (m) and whose polyline is kept for drawing.
4. projection: the UTM zone of the data's centre (pyproj, WGS84 -> EPSG:326xx / 327xx), as
   ``osmnx.project_graph`` does; lengths are planar distances in that projection.

Oneway tags are ignored: the travel metric is the undirected shortest path (DESIGN.md "Geo utility").
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mdp_core.errors import DataError

__all__ = ["DRIVE_CLASSES", "OsmRoads", "read_osm_roads", "utm_crs"]

#: Highway classes kept for the travel metric (``roads="drive"``).
DRIVE_CLASSES = frozenset(
    {
        "motorway",
        "trunk",
        "primary",
        "secondary",
        "tertiary",
        "unclassified",
        "residential",
        "living_street",
        "road",
        "service",
        "motorway_link",
        "trunk_link",
        "primary_link",
        "secondary_link",
        "tertiary_link",
    }
)
_NO_SERVICE = frozenset(
    {"parking_aisle", "parking", "driveway", "drive-through", "emergency_access", "private"}
)
_NO_ACCESS = frozenset({"no", "private"})


@dataclass(frozen=True, eq=False)
class OsmRoads:
    """A simplified road graph as arrays (before the largest-component cut).

    Attributes
    ----------
    lonlat : ndarray, shape (k, 2)
        Kept nodes (intersections and dead ends), WGS84 degrees.
    xy_m : ndarray, shape (k, 2)
        The same nodes projected to ``crs`` (metres).
    edges : ndarray of int, shape (e, 2)
        Node index pairs (undirected).
    lengths_m : ndarray, shape (e,)
        Edge lengths along the polyline (metres).
    paths_lonlat : list
        One lon/lat polyline per edge (rounded to 1e-6 degrees), for drawing.
    crs : str
        The projection (``"EPSG:326xx"``).
    ways : int
        Highway ways kept by the filter.
    """

    lonlat: np.ndarray
    xy_m: np.ndarray
    edges: np.ndarray
    lengths_m: np.ndarray
    paths_lonlat: list[list[list[float]]]
    crs: str
    ways: int


def utm_crs(lon: float, lat: float) -> str:
    """EPSG code of the UTM zone containing (lon, lat): 326zz north, 327zz south."""
    zone = int(np.floor((lon + 180.0) / 6.0)) % 60 + 1
    return f"EPSG:{32600 + zone if lat >= 0 else 32700 + zone}"


def _keep_way(tags: dict[str, str], roads: str) -> bool:
    """The road filter of the module docstring."""
    highway = tags.get("highway")
    if highway is None:
        return False
    if roads == "all":
        return True
    if highway not in DRIVE_CLASSES or tags.get("area") == "yes":
        return False
    if tags.get("access") in _NO_ACCESS or tags.get("motor_vehicle") in _NO_ACCESS:
        return False
    return not (highway == "service" and tags.get("service") in _NO_SERVICE)


def read_osm_roads(path: str | Path, *, roads: str = "drive") -> OsmRoads:
    """Read the road ways of an OpenStreetMap file with pyosmium and simplify them (module docstring).

    Parameters
    ----------
    path : str or Path
        ``.osm.pbf``, ``.osm`` or ``.osm.bz2`` (pyosmium picks the format from the name).
    roads : {"drive", "all"}
        Drivable classes only (default) or every ``highway=*`` way.

    Raises
    ------
    DataError
        Unreadable file, or no road ways after filtering.
    """
    import osmium

    if roads not in {"drive", "all"}:
        raise DataError(f"roads must be 'drive' or 'all', got {roads!r}")
    path = Path(path)
    ways: list[tuple[np.ndarray, np.ndarray]] = []  # (node ids, lon/lat) per kept way, split at gaps
    try:
        processor = (
            osmium.FileProcessor(str(path), osmium.osm.NODE | osmium.osm.WAY)
            .with_locations()
            .with_filter(osmium.filter.EntityFilter(osmium.osm.WAY))
            .with_filter(osmium.filter.KeyFilter("highway"))
        )
        kept = 0
        for way in processor:
            if not _keep_way(dict(way.tags), roads):
                continue
            kept += 1
            ids, coords = [], []
            for ref in way.nodes:  # type: ignore[union-attr]  # a Way, by the handler's filter
                loc = ref.location
                if loc.valid():
                    ids.append(ref.ref)
                    coords.append((loc.lon, loc.lat))
                elif len(ids) > 1:  # a missing node splits the way
                    ways.append((np.array(ids, dtype=np.int64), np.array(coords)))
                    ids, coords = [], []
                else:
                    ids, coords = [], []
            if len(ids) > 1:
                ways.append((np.array(ids, dtype=np.int64), np.array(coords)))
    except (RuntimeError, OSError, ValueError) as exc:
        raise DataError(
            f"could not read the map file {path.name!r}: {type(exc).__name__}: {exc}. "
            "Expected OpenStreetMap data (.osm.pbf, .osm or .osm.bz2) with highway ways."
        ) from exc
    if not ways:
        kind = "drivable road" if roads == "drive" else "highway"
        raise DataError(f"the map {path.name!r} contains no {kind} ways")
    return _simplify(ways, kept)


def _simplify(ways: list[tuple[np.ndarray, np.ndarray]], n_ways: int) -> OsmRoads:
    """Contract chains of degree-2 nodes into single edges, project, measure; see the module docstring."""
    import pyproj
    import scipy.sparse as sp

    all_ids = np.concatenate([ids for ids, _ in ways])
    all_ll = np.concatenate([ll for _, ll in ways])
    uniq, first = np.unique(all_ids, return_index=True)
    lonlat = all_ll[first]
    centre = lonlat.mean(axis=0)
    crs = utm_crs(float(centre[0]), float(centre[1]))
    transformer = pyproj.Transformer.from_crs("EPSG:4326", crs, always_xy=True)
    xy = np.column_stack(transformer.transform(lonlat[:, 0], lonlat[:, 1]))
    pos = np.searchsorted(uniq, all_ids)
    # consecutive points of each way are road segments; no segment across two ways
    bounds = np.cumsum([0] + [len(ids) for ids, _ in ways])
    inner = np.ones(len(all_ids) - 1, dtype=bool)
    inner[bounds[1:-1] - 1] = False
    a, b = pos[:-1][inner], pos[1:][inner]
    a, b = a[a != b], b[a != b]
    n = len(uniq)
    seg = sp.coo_matrix((np.ones(len(a)), (a, b)), shape=(n, n)).tocsr()
    seg = ((seg + seg.T) > 0).tocsr()
    indptr, indices = seg.indptr, seg.indices
    degree = np.diff(indptr)
    kept = degree != 2
    nbrs = [indices[indptr[i] : indptr[i + 1]].tolist() for i in range(n)]
    kept_list = kept.tolist()
    edges, paths_idx = [], []
    for u in np.flatnonzero(kept).tolist():
        for v in nbrs[u]:
            path = [u, v]
            prev, cur = u, v
            while not kept_list[cur]:
                n0, n1 = nbrs[cur]
                prev, cur = cur, (n1 if n0 == prev else n0)
                path.append(cur)
                if cur == u:
                    break
            if u < cur:
                edges.append((u, cur))
                paths_idx.append(path)
    node_index = np.full(n, -1, dtype=np.int64)
    node_index[kept] = np.arange(int(kept.sum()))
    lengths = np.array([np.hypot(*np.diff(xy[p], axis=0).T).sum() for p in paths_idx], dtype=np.float64)
    ll_round = np.round(lonlat, 6)
    paths = [ll_round[p].tolist() for p in paths_idx]
    pairs = node_index[np.array(edges, dtype=np.int64).reshape(-1, 2)]
    return OsmRoads(
        lonlat=lonlat[kept],
        xy_m=xy[kept],
        edges=pairs,
        lengths_m=lengths,
        paths_lonlat=paths,
        crs=crs,
        ways=n_ways,
    )
