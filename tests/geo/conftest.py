"""Small synthetic cities for fast geo tests (no network, no osmnx needed except for the XML tests)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from mdp_core.geo import RoadNetwork, build_problem, grid_road_network
from mdp_core.geo.utility import GeoProblem


@pytest.fixture(scope="session")
def city() -> RoadNetwork:
    return grid_road_network(7, 5, spacing_km=0.2, rng=np.random.default_rng(3))


@pytest.fixture(scope="session")
def small_problem(city: RoadNetwork) -> GeoProblem:
    return build_problem(city, seed_n=5, depth=2, n_tasks=12, rng=np.random.default_rng(1))


BALTIMORE = Path(__file__).resolve().parents[3] / "shared" / "data" / "baltimore.osm.pbf"


@pytest.fixture
def baltimore() -> Path:
    """The 15 km city extract in ../shared (never copied into the repository); skips when absent."""
    if not BALTIMORE.exists():
        pytest.skip(f"city extract not found at {BALTIMORE} (../shared/data is absent)")
    return BALTIMORE


@pytest.fixture
def write_osm() -> Callable[..., Path]:
    """The :func:`_write_osm` helper (a fixture, so test modules need not import conftest)."""
    return _write_osm


def _write_osm(path: Path, nx_: int = 4, ny: int = 3) -> Path:
    """A tiny valid OSM XML: an nx_ x ny street grid near Helsinki, all ways tagged highway=residential."""
    nodes, ways = [], []
    nid = lambda i, j: 1000 + i * ny + j  # noqa: E731
    for i in range(nx_):
        for j in range(ny):
            lat, lon = 60.165 + 0.001 * j, 24.94 + 0.002 * i
            nodes.append(f'<node id="{nid(i, j)}" version="1" lat="{lat:.6f}" lon="{lon:.6f}"/>')
    wid = 1
    for j in range(ny):
        refs = "".join(f'<nd ref="{nid(i, j)}"/>' for i in range(nx_))
        ways.append(f'<way id="{wid}" version="1">{refs}<tag k="highway" v="residential"/></way>')
        wid += 1
    for i in range(nx_):
        refs = "".join(f'<nd ref="{nid(i, j)}"/>' for j in range(ny))
        ways.append(f'<way id="{wid}" version="1">{refs}<tag k="highway" v="residential"/></way>')
        wid += 1
    body = "\n".join(nodes + ways)
    path.write_text(f'<?xml version="1.0" encoding="UTF-8"?>\n<osm version="0.6">\n{body}\n</osm>\n')
    return path
