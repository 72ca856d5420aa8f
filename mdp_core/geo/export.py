"""Exporting a geo mechanism so a GIS user can place it back on the map (DESIGN.md "Geo ... export").

- :func:`export_geojson` targets and outputs as WGS84 lon/lat points with the mechanism's metadata.
- :func:`save_mechanism` .npz with targets_km, outputs_km, matrix, eps, plus the projection (crs, origin
  in metres and lon/lat) and the same metadata (JSON string).

km coordinates are relative to the network's origin: projected metres = 1000 km + ``origin_m`` in
``crs`` (a UTM zone for maps read from OpenStreetMap); pyproj inverts that to lon/lat. Synthetic networks
(``crs == "local"``) fall back to the affine fit of :meth:`RoadNetwork.to_lonlat`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from mdp_core.errors import DataError
from mdp_core.geo.extension import GeoMechanism
from mdp_core.geo.grid import GeoGrid
from mdp_core.geo.roads import RoadNetwork
from mdp_core.mechanisms.verify import VIOLATION_TOL

if TYPE_CHECKING:
    from mdp_core.geo.compare import GeoComparison

__all__ = [
    "check_metadata",
    "export_geojson",
    "km_to_lonlat",
    "load_mechanism",
    "mechanism_metadata",
    "save_mechanism",
]

_PACKAGES = ("numpy", "scipy", "highspy", "osmium", "pyproj")


def check_metadata(comp: GeoComparison, method: str) -> dict[str, object]:
    """``method``'s privacy check in ``comp`` as an export's ``metadata.privacy_check`` states it
    (``private``: :meth:`GeoComparison.private`)."""
    return {
        "private": comp.private(method),
        "max_excess": float(comp.max_excess[method]),
        "violation_ratio": float(comp.violation_ratio[method]),
        "pairs": "every pair of targets"
        if comp.all_pairs.get(method)
        else "nearest neighbours and sampled pairs",
        "tolerance": VIOLATION_TOL,
    }


def km_to_lonlat(points_km: np.ndarray, network: RoadNetwork) -> np.ndarray:
    """WGS84 lon/lat (degrees) of km points in ``network``'s frame, shape (k, 2)."""
    pts = np.asarray(points_km, dtype=np.float64).reshape(-1, 2)
    if network.crs in {"", "local", "None"}:
        return network.to_lonlat(pts)
    import pyproj

    transformer = pyproj.Transformer.from_crs(network.crs, "EPSG:4326", always_xy=True)
    lon, lat = transformer.transform(
        pts[:, 0] * 1000.0 + network.origin_m[0], pts[:, 1] * 1000.0 + network.origin_m[1]
    )
    return np.column_stack([lon, lat])


def mechanism_metadata(
    mech: GeoMechanism,
    network: RoadNetwork,
    *,
    grid: GeoGrid | None = None,
    seed: int | None = None,
    check: Mapping[str, object] | None = None,
) -> dict[str, object]:
    """Method, city, eps (1/km), depth, seed cells, seed, projection, package versions and ``privacy_check``
    (JSON-able). ``check``: the result of the mechanism's privacy check (``private``, ``max_excess``, ...),
    written as given so that a file never claims eps for a mechanism that failed it (LP-A is not
    eps-mDP on the fine grid); None: not checked by the caller (``privacy_check`` is null)."""
    versions: dict[str, str | None] = {}
    for name in _PACKAGES:
        try:
            versions[name] = importlib_metadata.version(name)
        except importlib_metadata.PackageNotFoundError:
            versions[name] = None
    origin_ll = km_to_lonlat(np.zeros((1, 2)), network)[0]
    return {
        "method": mech.method,
        "variant": mech.info.get("variant"),
        "city": network.name,
        "eps_per_km": float(mech.eps),
        "calibration": _calibration(mech),
        "depth": None if grid is None else int(grid.depth),
        "seed_cells": None if grid is None else [int(c) for c in grid.cells],
        "seed_spacing_km": None if grid is None else float(grid.h0),
        "seed": None if seed is None else int(seed),
        "targets": int(mech.matrix.shape[0]),
        "outputs": int(mech.matrix.shape[1]),
        "crs": network.crs,
        "origin_m": [float(v) for v in network.origin_m],
        "origin_lonlat": [float(v) for v in origin_ll],
        "versions": versions,
        "attribution": "© OpenStreetMap contributors (ODbL)",
        "privacy_check": None if check is None else dict(check),
    }


def _calibration(mech: GeoMechanism) -> dict[str, float] | None:
    """A calibrated mechanism's nominal budget and exact eps over all pairs (1/km), else None."""
    if "nominal_eps" not in mech.info:
        return None
    return {
        "nominal_eps_per_km": float(mech.info["nominal_eps"]),  # type: ignore[arg-type]
        "actual_eps_per_km": float(mech.info["actual_eps"]),  # type: ignore[arg-type]
    }


def export_geojson(
    mech: GeoMechanism,
    network: RoadNetwork,
    *,
    grid: GeoGrid | None = None,
    seed: int | None = None,
    check: Mapping[str, object] | None = None,
) -> dict[str, object]:
    """GeoJSON FeatureCollection: one Point per target and per output (WGS84 lon/lat) + ``metadata``.

    Each feature's properties give ``kind`` ("target" / "output"), ``index`` (row / column of the
    matrix) and ``x_km``, ``y_km`` (the mechanism's own frame). The matrix itself is not embedded (it can
    have millions of entries): it is in the .npz of :func:`save_mechanism`, rows/columns in this order.
    """
    if not isinstance(mech, GeoMechanism):
        raise TypeError(f"mech must be a GeoMechanism, got {type(mech).__name__}")
    if not isinstance(network, RoadNetwork):
        raise TypeError(f"network must be a RoadNetwork, got {type(network).__name__}")
    features = []
    for kind, pts in (("target", mech.targets_km), ("output", mech.outputs_km)):
        ll = km_to_lonlat(pts, network)
        for k, ((lon, lat), (x, y)) in enumerate(zip(ll.tolist(), np.asarray(pts).tolist(), strict=True)):
            features.append(
                {
                    "type": "Feature",
                    "geometry": {"type": "Point", "coordinates": [round(lon, 7), round(lat, 7)]},
                    "properties": {"kind": kind, "index": k, "x_km": x, "y_km": y},
                }
            )
    return {
        "type": "FeatureCollection",
        "features": features,
        "metadata": mechanism_metadata(mech, network, grid=grid, seed=seed, check=check),
    }


def save_mechanism(
    mech: GeoMechanism,
    path: str | os.PathLike[str],
    *,
    network: RoadNetwork | None = None,
    grid: GeoGrid | None = None,
    seed: int | None = None,
    check: Mapping[str, object] | None = None,
) -> Path:
    """Write ``mech`` to ``path`` (.npz, compressed): targets_km, outputs_km, matrix, eps (scalar).

    With ``network`` also ``crs`` (str), ``origin_m`` and ``origin_lonlat`` (the km origin in projected
    metres and in WGS84 degrees) and ``metadata`` (the JSON of :func:`mechanism_metadata`), so the km
    coordinates map back to the map: metres = 1000 km + origin_m in ``crs``.

    Only verified mechanisms should be exported; every constructor in mdp_core.geo returns repaired,
    normalised matrices (rows sum to 1 within 1e-12). Returns the path written (``.npz`` appended if
    missing, as numpy does).
    """
    if not isinstance(mech, GeoMechanism):
        raise TypeError(f"mech must be a GeoMechanism, got {type(mech).__name__}")
    path = Path(path)
    if path.suffix != ".npz":
        path = path.with_name(path.name + ".npz")
    if not path.parent.exists():
        raise DataError(f"folder does not exist: {path.parent}")
    extra: dict[str, np.ndarray] = {}
    if network is not None:
        meta = mechanism_metadata(mech, network, grid=grid, seed=seed, check=check)
        extra = {
            "crs": np.array(network.crs),
            "origin_m": np.asarray(network.origin_m, dtype=np.float64),
            "origin_lonlat": np.asarray(meta["origin_lonlat"], dtype=np.float64),
            "metadata": np.array(json.dumps(meta)),
        }
    np.savez_compressed(
        path,
        targets_km=np.asarray(mech.targets_km, dtype=np.float64),
        outputs_km=np.asarray(mech.outputs_km, dtype=np.float64),
        matrix=np.asarray(mech.matrix, dtype=np.float64),
        eps=np.float64(mech.eps),
        **extra,  # type: ignore[arg-type]  # numpy's stub types **kwds as bool
    )
    return path


def load_mechanism(path: str | os.PathLike[str]) -> GeoMechanism:
    """Read a file written by :func:`save_mechanism` (seconds = 0; the method its metadata names, else
    "loaded"; the metadata, when there is some, as ``info["metadata"]``)."""
    try:
        with np.load(path) as data:
            meta = json.loads(str(data["metadata"])) if "metadata" in data.files else None
            return GeoMechanism(
                targets_km=data["targets_km"],
                outputs_km=data["outputs_km"],
                matrix=data["matrix"],
                eps=float(data["eps"]),
                seconds=0.0,
                method=str(meta["method"]) if meta else "loaded",
                info={} if meta is None else {"metadata": meta},
            )
    except (OSError, KeyError, ValueError) as exc:
        raise DataError(f"not a saved geo mechanism: {path} ({exc})") from exc
