"""Multi-resolution grid over a road network and its extension tree (seed 004, Sec. 5.1).

A seed grid of square cells (side ``h0`` km, ``seed_n`` cells along the longer side of the network's bounding
box) is refined ``depth`` times by 2 x 2, so the finest spacing is ``h0 / 2**depth``. Vertices are addressed
by integer *fine* coordinates ``(i, j)`` (units of the finest spacing); seed vertices are those with ``i`` and
``j`` multiples of ``2**depth``. The target domain keeps the finest vertices within ``keep_km`` of a road
node; a level-r cell is retained when it contains a target (its children are its retained 2 x 2 subcells),
which gives the extension tree of seed 004 Sec. 5.1 (a forest rooted at the retained seed cells).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from mdp_core.errors import DataError
from mdp_core.geo.roads import RoadNetwork

__all__ = ["GeoGrid", "build_grid", "tree_levels"]


@dataclass(frozen=True, eq=False)
class GeoGrid:
    """Seed grid + retained finest vertices (targets) + candidate outputs.

    Attributes
    ----------
    origin_km : tuple of float
        Position (km) of fine vertex (0, 0).
    h0 : float
        Seed spacing in km.
    cells : tuple of int
        Seed cells along x and y: the seed grid has ``(cells[0] + 1) x (cells[1] + 1)`` vertices.
    depth : int
        Refinement levels L; finest spacing ``h0 / 2**L``.
    fine_ij : ndarray of int, shape (n, 2)
        Fine coordinates of the targets (sorted by i, then j).
    outputs : ndarray of int
        Seed indices (C order over the seed vertices, ``s = i * (cells[1] + 1) + j``) used as outputs.
    """

    origin_km: tuple[float, float]
    h0: float
    cells: tuple[int, int]
    depth: int
    fine_ij: np.ndarray = field(repr=False)
    outputs: np.ndarray = field(repr=False)
    keep_km: float = 0.0

    @property
    def scale(self) -> int:
        """Fine steps per seed cell, ``2**depth``."""
        return 2**self.depth

    @property
    def h_fine(self) -> float:
        """Finest spacing in km."""
        return self.h0 / self.scale

    @property
    def seed_shape(self) -> tuple[int, int]:
        """Seed vertices along x and y."""
        return self.cells[0] + 1, self.cells[1] + 1

    @property
    def n_targets(self) -> int:
        """Number of target vertices."""
        return int(self.fine_ij.shape[0])

    @property
    def targets_km(self) -> np.ndarray:
        """Target positions in km, shape (n, 2)."""
        return np.asarray(self.origin_km) + self.fine_ij * self.h_fine

    @property
    def seeds_km(self) -> np.ndarray:
        """All seed vertex positions in km (C order), shape (S, 2)."""
        sx, sy = self.seed_shape
        ii, jj = np.meshgrid(np.arange(sx), np.arange(sy), indexing="ij")
        return np.asarray(self.origin_km) + np.column_stack([ii.ravel(), jj.ravel()]) * self.h0

    @property
    def outputs_km(self) -> np.ndarray:
        """Output positions in km, shape (m, 2)."""
        return self.seeds_km[self.outputs]


def build_grid(
    network: RoadNetwork,
    *,
    seed_n: int = 12,
    depth: int = 2,
    keep_km: float | None = None,
) -> GeoGrid:
    """Lay a seed grid over the network's bounding box and refine it ``depth`` times (2 x 2 per level).

    Parameters
    ----------
    network : RoadNetwork
        The city (projected, km).
    seed_n : int
        Seed cells along the longer side (2..40); the other side gets as many cells of the same size as
        needed to cover the box (the grid is centred on it).
    depth : int
        Refinement levels (0..5): depth 4 from 12 seed cells gives 193 fine vertices along that side.
    keep_km : float, optional
        A fine vertex is a target when a road node lies within this distance; default
        ``max(0.05, h_fine)`` km. Outputs are the seed vertices with a road node within ``h0 / sqrt 2``.

    Returns
    -------
    GeoGrid
    """
    if not isinstance(network, RoadNetwork):
        raise TypeError(f"network must be a RoadNetwork, got {type(network).__name__}")
    if not isinstance(seed_n, int | np.integer) or not 2 <= seed_n <= 40:
        raise DataError(f"seed_n must be an integer in 2..40, got {seed_n!r}")
    if not isinstance(depth, int | np.integer) or not 0 <= depth <= 5:
        raise DataError(f"depth must be an integer in 0..5, got {depth!r}")
    width, height = network.extent_km
    h0 = max(width, height) / seed_n
    if h0 <= 0:
        raise DataError("the road network has zero extent")
    cells = (max(1, math.ceil(width / h0 - 1e-9)), max(1, math.ceil(height / h0 - 1e-9)))
    origin = ((width - cells[0] * h0) / 2.0, (height - cells[1] * h0) / 2.0)
    scale = 2**depth
    h_fine = h0 / scale
    keep = max(0.05, h_fine) if keep_km is None else float(keep_km)
    if not keep > 0:
        raise DataError(f"keep_km must be positive, got {keep_km!r}")
    ii, jj = np.meshgrid(np.arange(cells[0] * scale + 1), np.arange(cells[1] * scale + 1), indexing="ij")
    fine = np.column_stack([ii.ravel(), jj.ravel()])
    near = network.distance_to_roads(np.asarray(origin) + fine * h_fine) <= keep
    if not near.any():
        raise DataError("no grid vertex lies near a road: increase keep_km")
    sx, sy = cells[0] + 1, cells[1] + 1
    si, sj = np.meshgrid(np.arange(sx), np.arange(sy), indexing="ij")
    seeds_km = np.asarray(origin) + np.column_stack([si.ravel(), sj.ravel()]) * h0
    outputs = np.flatnonzero(network.distance_to_roads(seeds_km) <= max(keep, h0 / math.sqrt(2)))
    return GeoGrid(
        origin_km=(float(origin[0]), float(origin[1])),
        h0=float(h0),
        cells=cells,
        depth=int(depth),
        fine_ij=fine[near],
        outputs=outputs,
        keep_km=keep,
    )


def tree_levels(grid: GeoGrid) -> list[np.ndarray]:
    """Retained cells per level r = 0..depth as (k, 2) integer cell coordinates (units of ``h0 / 2**r``).

    A level-r cell ``(a, b)`` covers fine coordinates ``[a * 2**(L-r), (a + 1) * 2**(L-r)]`` (closed) in i
    and likewise in j; it is retained when it contains a target. The parent of ``(a, b)`` is
    ``(a // 2, b // 2)``, so every retained cell's parent is retained (a forest over the seed cells).
    """
    levels = []
    for r in range(grid.depth + 1):
        size = 2 ** (grid.depth - r)
        limit = np.array(grid.cells) * 2**r - 1
        found: set[tuple[int, int]] = set()
        for di in (0, -1):
            for dj in (0, -1):
                cell = np.column_stack([(grid.fine_ij[:, 0] // size) + di, (grid.fine_ij[:, 1] // size) + dj])
                on_edge_i = (grid.fine_ij[:, 0] % size == 0) | (di == 0)
                on_edge_j = (grid.fine_ij[:, 1] % size == 0) | (dj == 0)
                ok = on_edge_i & on_edge_j & (cell >= 0).all(axis=1) & (cell <= limit).all(axis=1)
                found.update(map(tuple, cell[ok].tolist()))
        levels.append(np.array(sorted(found), dtype=np.int64).reshape(-1, 2))
    return levels
