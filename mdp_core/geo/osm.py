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

__all__ = [
    "DRIVE_CLASSES",
    "MAX_BZ2_BYTES",
    "MAX_EXTENT_M",
    "MAX_UTM_OFFSET_M",
    "OsmRoads",
    "check_projected",
    "read_osm_roads",
    "utm_crs",
]

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
#: pyosmium's integer coordinate of a location that was never set (a node missing from the file).
_UNDEFINED = 2_147_483_647
#: File name endings and the pyosmium format read from them (checked in this order, lower case).
_FORMATS = ((".osm.pbf", "pbf"), (".pbf", "pbf"), (".osm.bz2", "osm.bz2"), (".osm", "osm"), (".xml", "osm"))
#: A ``.bz2`` map may unpack to at most this many bytes (or 100 x its size, if that is larger).
MAX_BZ2_BYTES = 256 * 2**20
#: Road-node references read from a map at most (the 15 km city has 23,760): each costs ~0.5 kB until the
#: ways are simplified, and a 152 kB .pbf of 4 M references took 2.15 GB before the node limit refused it.
MAX_WAY_REFS = 1_000_000
#: Largest east-west distance (m) of a road node from its UTM zone's central meridian (scale error ~1.3 %).
MAX_UTM_OFFSET_M = 1_000_000.0
#: Largest span (m, the longer side of the bounding box): a city or a region. Across more, e^(eps d) of the
#: far ends overflows float64 at the page's budgets (audit: a 5,017 km map left EM "not private" by
#: underflow, and the LPs failed on infinities).
MAX_EXTENT_M = 100_000.0


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
    refs, missing_refs : int
        Node references of those ways, and how many of them are not in the file (a clipped extract: the
        way is split there).
    """

    lonlat: np.ndarray
    xy_m: np.ndarray
    edges: np.ndarray
    lengths_m: np.ndarray
    paths_lonlat: list[list[list[float]]]
    crs: str
    ways: int
    refs: int = 0
    missing_refs: int = 0


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
        ``.osm.pbf`` / ``.pbf``, ``.osm`` / ``.xml`` or ``.osm.bz2`` (the format comes from the name, in any
        letter case).
    roads : {"drive", "all"}
        Drivable classes only (default) or every ``highway=*`` way.

    Raises
    ------
    DataError
        Unreadable file, a node with coordinates that are not numbers or out of range, node ids osmium
        cannot place (negative ids of unsaved edits), a ``.bz2`` that expands past :data:`MAX_BZ2_BYTES`, or
        no road ways left after filtering (with the reason: no such ways, or their nodes are not in the file).
    """
    import osmium

    if roads not in {"drive", "all"}:
        raise DataError(f"roads must be 'drive' or 'all', got {roads!r}")
    path = Path(path)
    fmt = _format(path)
    if fmt.endswith(".bz2"):
        _check_bz2(path)
    ways: list[tuple[np.ndarray, np.ndarray]] = []  # (node ids, lon/lat) per kept way, split at gaps
    kept = refs = missing = negative = 0
    kind = "drivable road" if roads == "drive" else "highway"
    try:
        processor = (
            osmium.FileProcessor(osmium.io.File(str(path), fmt), osmium.osm.NODE | osmium.osm.WAY)
            .with_locations()
            .with_filter(osmium.filter.EntityFilter(osmium.osm.WAY))
            .with_filter(osmium.filter.KeyFilter("highway"))
        )
        for way in processor:
            if not _keep_way(dict(way.tags), roads):
                continue
            kept += 1
            ids, coords = [], []
            for ref in way.nodes:  # type: ignore[union-attr]  # a Way, by the handler's filter
                loc = ref.location
                refs += 1
                if refs > MAX_WAY_REFS:
                    raise DataError(
                        f"the map {path.name!r} has more than {MAX_WAY_REFS:,} {kind} node references, "
                        "far more than a city (the 15 km Baltimore extract has about 24,000). Cut a smaller "
                        "area (e.g. 'osmium extract --bbox') and upload it again."
                    )
                if loc.valid():
                    ids.append(ref.ref)
                    coords.append((loc.lon, loc.lat))
                    continue
                if loc.x != _UNDEFINED or loc.y != _UNDEFINED:  # in the file, but off the globe
                    raise DataError(
                        f"node {ref.ref} of the map {path.name!r} lies outside the globe (lat "
                        f"{loc.lat_without_check():g}, lon {loc.lon_without_check():g}; latitudes run "
                        "from -90 to 90 and longitudes from -180 to 180). Fix or remove that node and upload "
                        "again."
                    )
                missing += 1
                negative += ref.ref < 0
                if len(ids) > 1:  # a missing node splits the way
                    ways.append((np.array(ids, dtype=np.int64), np.array(coords)))
                ids, coords = [], []
            if len(ids) > 1:
                ways.append((np.array(ids, dtype=np.int64), np.array(coords)))
    except DataError:
        raise
    except osmium.InvalidLocationError as exc:
        raise DataError(
            f"the map {path.name!r} has a node whose coordinates are not numbers ({exc}). Every node needs a "
            "numeric lat and lon: fix the file (or export it again) and upload it again."
        ) from exc
    except (RuntimeError, OSError, ValueError) as exc:
        raise DataError(
            f"could not read the map file {path.name!r}: {type(exc).__name__}: {exc}. "
            "Expected OpenStreetMap data (.osm.pbf, .osm or .osm.bz2) with highway ways."
        ) from exc
    if negative:
        raise DataError(
            f"{negative:,} node references of the {kind} ways in {path.name!r} use negative ids (new, "
            "unsaved objects of an editor such as JOSM), which the reader cannot place. Renumber the file "
            "(e.g. 'osmium renumber') or upload it to OpenStreetMap and download it again."
        )
    if not ways:
        if kept == 0:
            raise DataError(f"the map {path.name!r} contains no {kind} ways")
        if missing == refs:
            raise DataError(
                f"the map {path.name!r} has {kept:,} {kind} ways, but none of the nodes they reference is in "
                "the file (or the nodes come after the ways). Export the area with its nodes, nodes first as "
                "OpenStreetMap files are ordered (e.g. 'osmium sort'), and upload it again."
            )
        gaps = f" ({missing:,} of their {refs:,} node references are not in the file)" if missing else ""
        raise DataError(
            f"the map {path.name!r} has {kept:,} {kind} way(s), but none joins two different nodes{gaps}: "
            "there is no road to travel on. Upload an extract with connected streets."
        )
    return _simplify(ways, kept, missing_refs=missing, refs=refs, name=f"the map {path.name!r}")


def _format(path: Path) -> str:
    """pyosmium's format name for ``path`` from its (case-insensitive) suffix; ``osm`` when unknown."""
    name = path.name.lower()
    for suffix, fmt in _FORMATS:
        if name.endswith(suffix):
            return fmt
    return "osm"


def _check_bz2(path: Path) -> None:
    """DataError when a bzip2 file expands past :data:`MAX_BZ2_BYTES` (or 100 x its own size, if larger).

    bzip2 packs long runs of one byte a million to one, so a few hundred bytes can unpack to gigabytes that
    the XML parser then reads for minutes. The check streams the file in 1 MiB pieces (memory stays small;
    about 0.3 s per 100 MB unpacked) and stops at the limit.
    """
    import bz2

    limit = max(MAX_BZ2_BYTES, 100 * path.stat().st_size)
    total = 0
    try:
        with bz2.open(path, "rb") as fh:
            while piece := fh.read(1 << 20):
                total += len(piece)
                if total > limit:
                    raise DataError(
                        f"the map {path.name!r} unpacks to more than {limit / 1e6:,.0f} MB from "
                        f"{path.stat().st_size:,} bytes: that is not an OpenStreetMap extract (a compression "
                        "bomb or padding). Upload the .osm.pbf or .osm.bz2 of the area instead."
                    )
    except DataError:
        raise
    except (OSError, EOFError, ValueError) as exc:
        raise DataError(
            f"could not read the map file {path.name!r}: it is not a complete bzip2 file ({exc}). "
            "Expected OpenStreetMap data (.osm.pbf, .osm or .osm.bz2) with highway ways."
        ) from exc


def _simplify(
    ways: list[tuple[np.ndarray, np.ndarray]],
    n_ways: int,
    *,
    missing_refs: int = 0,
    refs: int = 0,
    name: str = "the map",
) -> OsmRoads:
    """Contract chains of degree-2 nodes into single edges, project, measure; see the module docstring."""
    import pyproj
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components

    all_ids = np.concatenate([ids for ids, _ in ways])
    all_ll = np.concatenate([ll for _, ll in ways])
    uniq, first = np.unique(all_ids, return_index=True)
    lonlat = all_ll[first]
    crs = utm_crs(*_centre(lonlat))
    transformer = pyproj.Transformer.from_crs("EPSG:4326", crs, always_xy=True)
    xy = np.column_stack(transformer.transform(lonlat[:, 0], lonlat[:, 1]))
    check_projected(xy, crs, name)
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
    nbrs = [indices[indptr[i] : indptr[i + 1]].tolist() for i in range(n)]
    kept_list = _anchors(connected_components(seg, directed=False)[1], nbrs)
    edges, paths_idx = [], []
    for u in np.flatnonzero(kept_list).tolist():
        for v in nbrs[u]:
            path = _chain(u, v, nbrs, kept_list)
            if u < path[-1]:
                edges.append((u, path[-1]))
                paths_idx.append(path)
    kept = np.array(kept_list, dtype=bool)
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
        refs=refs,
        missing_refs=missing_refs,
    )


def _chain(u: int, v: int, nbrs: list[list[int]], kept: list[bool]) -> list[int]:
    """Node path from kept node ``u`` through ``v`` along degree-2 nodes to the next kept node."""
    path = [u, v]
    prev, cur = u, v
    while not kept[cur]:
        n0, n1 = nbrs[cur]
        prev, cur = cur, (n1 if n0 == prev else n0)
        path.append(cur)
    return path


def _anchors(labels: np.ndarray, nbrs: list[list[int]]) -> list[bool]:
    """Nodes kept by the simplification (``labels``: component of each node): degree != 2, plus enough
    nodes to keep every ring of the map.

    A ring of degree-2 nodes (an isolated roundabout or circuit) gets one node, and a chain that leaves a
    kept node and comes back to it (a loop cul-de-sac, or that ring) gets its middle node kept: otherwise
    the chain would be a self-loop and dropped with all of its road.
    """
    kept = [len(x) != 2 for x in nbrs]
    has_kept = np.zeros(int(labels.max()) + 1, dtype=bool)
    has_kept[labels[np.array(kept, dtype=bool)]] = True
    _, ring_first = np.unique(labels, return_index=True)
    for node in ring_first[~has_kept].tolist():
        kept[node] = True
    for u in [i for i, k in enumerate(kept) if k]:
        for v in nbrs[u]:
            path = _chain(u, v, nbrs, kept)
            if path[-1] == u and len(path) > 2:
                kept[path[len(path) // 2]] = True
    return kept


def _centre(lonlat: np.ndarray) -> tuple[float, float]:
    """Centre (lon, lat) of the nodes; the longitude as a circular mean, so a map across 180 E/W gets the
    UTM zone it lies in, not the one on the far side of the globe."""
    lon = np.radians(lonlat[:, 0])
    mean = float(np.degrees(np.arctan2(np.sin(lon).mean(), np.cos(lon).mean())))
    return mean, float(lonlat[:, 1].mean())


def check_projected(xy_m: np.ndarray, crs: str, name: str = "the map") -> None:
    """DataError unless projected UTM coordinates are finite, span at most :data:`MAX_EXTENT_M` and lie
    within :data:`MAX_UTM_OFFSET_M` of the zone's central meridian (where UTM's scale error stays below
    about 1.3 %; beyond it, and for maps that span a continent or the globe, travel distances would be
    distorted or infinite)."""
    offset = np.abs(np.asarray(xy_m, dtype=np.float64)[:, 0] - 500_000.0)
    if np.isfinite(xy_m).all() and offset.max() <= MAX_UTM_OFFSET_M:
        width, height = np.ptp(xy_m, axis=0)
        if max(width, height) <= MAX_EXTENT_M:
            return
        raise DataError(
            f"the roads of {name} span {width / 1000:,.0f} km east-west and {height / 1000:,.0f} km "
            f"north-south; a map can span at most {MAX_EXTENT_M / 1000:,.0f} km (a city or a region: across "
            "more, a mechanism's probabilities between its far ends are too small for numbers). Upload a "
            "smaller area."
        )
    reach = f"{offset.max() / 1000:,.0f} km from" if np.isfinite(offset.max()) else "too far from"
    raise DataError(
        f"{name} is too wide for one map projection: its roads reach {reach} the central meridian of {crs} "
        f"(at most {MAX_UTM_OFFSET_M / 1000:,.0f} km keeps distances within about 1 %). Upload a city or a "
        "region, not a continent."
    )
