"""Which target pairs carry privacy rows: nearest neighbours, axis neighbours, Yao sectors and spanners.

Used by the lower bound (:mod:`mdp_core.geo.bounds`: any subset of the rows is a relaxation) and by the
spanner LP mechanism (:mod:`mdp_core.geo.spanner`: rows on a t-spanner at eps / t imply every pair).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import shortest_path
from scipy.spatial import cKDTree

from mdp_core.errors import DataError

__all__ = ["YAO_CONES", "relaxation_pairs", "spanner_pairs", "yao_pairs"]

#: Angular sectors of the Yao graph whose pairs join the relaxation (:func:`relaxation_pairs`).
YAO_CONES = 12
_CHUNK = 512


def relaxation_pairs(
    targets_km: np.ndarray,
    neighbours: int = 8,
    fine_ij: np.ndarray | None = None,
    cones: int = YAO_CONES,
) -> np.ndarray:
    """Undirected target pairs (a < b): each target with its ``neighbours`` nearest, its axis neighbours and
    its nearest target in each of ``cones`` sectors (:func:`yao_pairs`; 0: none).

    The sectors matter where targets are irregular (cells without roads, representatives): there the
    nearest neighbours cluster in a few directions and paths through them are long, which loosens the
    relaxation most at large eps (15 km city, depth 2, eps 1.5, 60 s: 0.960 km with the sectors, 0.909
    without).

    Parameters
    ----------
    targets_km : ndarray, shape (n, 2)
    neighbours : int
        Nearest targets per target (Euclidean).
    fine_ij : ndarray of int, shape (n, 2), optional
        Integer grid coordinates; when given, targets one grid step apart along an axis are paired too.
    """
    pts = np.asarray(targets_km, dtype=np.float64)
    n = len(pts)
    k = min(int(neighbours), n - 1)
    parts = []
    if k > 0:
        _, idx = cKDTree(pts).query(pts, k=k + 1)
        parts.append(np.column_stack([np.repeat(np.arange(n), k), idx[:, 1:].ravel()]))
    if fine_ij is not None and n > 1:
        ij = np.asarray(fine_ij, dtype=np.int64)
        key = {tuple(v): i for i, v in enumerate(ij.tolist())}
        for di, dj in ((1, 0), (0, 1)):
            near = [
                (i, key[(a + di, b + dj)]) for i, (a, b) in enumerate(ij.tolist()) if (a + di, b + dj) in key
            ]
            if near:
                parts.append(np.array(near, dtype=np.int64))
    if cones and n > 1:
        parts.append(yao_pairs(pts, cones))
    if not parts:
        return np.empty((0, 2), dtype=np.int64)
    pairs = np.sort(np.concatenate(parts), axis=1)
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    return np.unique(pairs, axis=0)


def yao_pairs(points_km: np.ndarray, cones: int = 12) -> np.ndarray:
    """Undirected pairs (a < b) of the Yao graph: each point with its nearest point in each angular sector.

    Parameters
    ----------
    points_km : ndarray, shape (n, 2)
    cones : int
        Equal sectors around each point (more sectors: smaller dilation, more edges).
    """
    pts = np.asarray(points_km, dtype=np.float64)
    n = len(pts)
    if cones < 3:
        raise DataError(f"cones must be at least 3, got {cones}")
    found = []
    for lo in range(0, n, _CHUNK):
        rows = np.arange(lo, min(lo + _CHUNK, n))
        delta = pts[None, :, :] - pts[rows, None, :]
        dist = np.hypot(delta[..., 0], delta[..., 1])
        dist[np.arange(len(rows)), rows] = np.inf
        sector = (np.floor((np.arctan2(delta[..., 1], delta[..., 0]) + np.pi) * cones / (2 * np.pi))).astype(
            np.int64
        ) % cones
        for k in range(cones):
            in_k = np.where(sector == k, dist, np.inf)
            nearest = in_k.argmin(axis=1)
            ok = np.isfinite(in_k[np.arange(len(rows)), nearest])
            found.append(np.column_stack([rows[ok], nearest[ok]]))
    if not found:
        return np.empty((0, 2), dtype=np.int64)
    return np.unique(np.sort(np.concatenate(found), axis=1), axis=0)


def spanner_pairs(
    points_km: np.ndarray, dilation: float = 1.1, *, cones: int = 12
) -> tuple[np.ndarray, float]:
    """Edges (a < b) of a ``dilation``-spanner of the points and its exact dilation ``max d_G / d``.

    The Yao graph, then the shortest pairs whose path is longer than ``dilation`` times their distance,
    a twentieth of them per round, until none is (module docstring). Edges only shorten paths, so a pair
    within the dilation stays within it: after the first round only the endpoints of the pairs still
    above it need their shortest paths again (15 km city at depth 3, 3,469 points: 22 rounds, 17-19 s
    against 86 s with all-pairs paths every round; the same edges). One last all-pairs pass measures the
    exact dilation.
    """
    pts = np.asarray(points_km, dtype=np.float64)
    n = len(pts)
    if not dilation > 1.0:
        raise DataError(f"dilation must be above 1, got {dilation}")
    if n < 2:
        return np.empty((0, 2), dtype=np.int64), 1.0
    dist = np.linalg.norm(pts[:, None, :] - pts[None, :, :], axis=2)
    if np.any(dist[np.triu_indices(n, 1)] <= 0):
        raise DataError("two targets share a position; the spanner needs distinct points")
    np.fill_diagonal(dist, 1.0)  # a point's path to itself is 0: ratio 0, never long
    pairs = yao_pairs(pts, cones)
    sources = np.arange(n)
    while True:
        ratio = _path_ratios(dist, pairs, sources)
        at, to = np.nonzero(ratio > dilation)
        if len(at) == 0:
            break
        long = np.unique(np.sort(np.column_stack([sources[at], to]), axis=1), axis=0)
        shortest = np.argsort(dist[long[:, 0], long[:, 1]])[: max(1, len(long) // 20)]
        pairs = np.unique(np.concatenate([pairs, long[shortest]]), axis=0)
        sources = np.unique(long)
    if len(sources) < n:
        ratio = _path_ratios(dist, pairs, np.arange(n))
    return pairs, float(max(ratio.max(), 1.0))


def _path_ratios(dist: np.ndarray, pairs: np.ndarray, sources: np.ndarray) -> np.ndarray:
    """Shortest-path length over distance from each of ``sources`` to every point, in the graph of
    ``pairs`` weighted by ``dist`` (whose diagonal is 1)."""
    n = len(dist)
    weights = dist[pairs[:, 0], pairs[:, 1]]
    graph = sp.coo_matrix((weights, (pairs[:, 0], pairs[:, 1])), shape=(n, n)).tocsr()
    return shortest_path(graph, directed=False, indices=sources) / dist[sources]
