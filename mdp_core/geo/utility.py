"""Travel-distance utility on the road graph and the geo problem (targets, outputs, prior, loss).

Utility loss (seed 004, Sec. 6, "Utility loss"; DESIGN.md "Geo utility"): for a true location x reported as
y, the expected travel-distance error over task points q,

    L(x, y) = mean_q | d_G(x, q) - d_G(y, q) |        (km),

with d_G the shortest-path distance on the road graph between the road nodes nearest to x, y and q. The
utility of a mechanism M under a prior pi over targets is  U(M) = sum_x pi(x) sum_y M(y | x) L(x, y).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
from scipy.spatial.distance import cdist

from mdp_core._validation import check_eps, check_prior
from mdp_core.errors import DataError
from mdp_core.geo.grid import GeoGrid, build_grid
from mdp_core.geo.roads import RoadNetwork

__all__ = [
    "MAX_EPS_REACH",
    "GeoProblem",
    "build_problem",
    "check_lp_inputs",
    "check_reach",
    "expected_travel_error",
    "travel_loss",
]

#: Largest eps d (eps times the map's diagonal) a comparison builds at: e^(eps d) beyond ~700 overflows
#: float64, and long before, probabilities of e^(-eps d) underflow (then no matrix can show eps-mDP).
MAX_EPS_REACH = 600.0


@dataclass(frozen=True, eq=False)
class GeoProblem:
    """Everything a geo mechanism is built and scored on.

    Attributes
    ----------
    network, grid : the city and its multi-resolution grid.
    prior : ndarray, shape (n,)
        Probability of each target being the true location.
    loss : ndarray, shape (n, m)
        ``L(x, y)`` in km between target x and output y (module docstring).
    task_nodes : ndarray of int
        Road nodes used as task points q.
    """

    network: RoadNetwork
    grid: GeoGrid
    prior: np.ndarray = field(repr=False)
    loss: np.ndarray = field(repr=False)
    task_nodes: np.ndarray = field(repr=False)
    target_nodes: np.ndarray = field(repr=False)
    output_nodes: np.ndarray = field(repr=False)

    @property
    def targets_km(self) -> np.ndarray:
        """Target positions (km), shape (n, 2)."""
        return self.grid.targets_km

    @property
    def outputs_km(self) -> np.ndarray:
        """Output positions (km), shape (m, 2)."""
        return self.grid.outputs_km

    @property
    def cost(self) -> np.ndarray:
        """The LPs' objective ``c[x, y] = pi(x) L(x, y)`` (km), shape (n, m): a mechanism's utility is
        ``sum(c * P)``."""
        return self.prior[:, None] * self.loss

    def target_distances_km(self) -> np.ndarray:
        """Euclidean distances (km) between all targets, shape (n, n): the metric of eps-mDP here
        (n^2 floats: the full-domain LPs that need it cap n)."""
        return cdist(self.targets_km, self.targets_km)  # no (n, n, 2) temporary: 1.3 GB at depth 4 of a city

    def restricted(self, targets: np.ndarray) -> GeoProblem:
        """The problem on the targets with these indices only, the prior conditioned on them (same
        outputs). The targets must carry positive prior mass."""
        prior = self.prior[targets]
        return replace(
            self,
            grid=replace(self.grid, fine_ij=self.grid.fine_ij[targets]),
            prior=prior / prior.sum(),
            loss=self.loss[targets],
            target_nodes=self.target_nodes[targets],
        )


def travel_loss(
    network: RoadNetwork, x_nodes: np.ndarray, y_nodes: np.ndarray, task_nodes: np.ndarray
) -> np.ndarray:
    """``L[a, b] = mean_q |d_G(x_a, q) - d_G(y_b, q)|`` in km, computed once per distinct x node.

    Parameters
    ----------
    network : RoadNetwork
    x_nodes, y_nodes, task_nodes : int arrays of road-node indices.

    Returns
    -------
    ndarray, shape (len(x_nodes), len(y_nodes)), float64.
    """
    x_nodes = np.asarray(x_nodes, dtype=np.int64)
    y_nodes = np.asarray(y_nodes, dtype=np.int64)
    dist = network.travel_km(task_nodes)  # (k, n_nodes), undirected graph -> d(q, v) = d(v, q)
    ux, inverse = np.unique(x_nodes, return_inverse=True)
    dy = dist[:, y_nodes]  # (k, m)
    out = np.empty((len(ux), len(y_nodes)))
    chunk = max(1, 4_000_000 // max(1, dist.shape[0] * len(y_nodes)))
    for start in range(0, len(ux), chunk):
        dx = dist[:, ux[start : start + chunk]]  # (k, c)
        out[start : start + chunk] = np.abs(dx[:, :, None] - dy[:, None, :]).mean(axis=0)
    return out[inverse]


def expected_travel_error(matrix: np.ndarray, prior: np.ndarray, loss: np.ndarray) -> float:
    """``sum_x prior[x] sum_y matrix[x, y] loss[x, y]`` in km (the expected travel-distance error)."""
    matrix = np.asarray(matrix, dtype=np.float64)
    if matrix.shape != np.shape(loss) or matrix.shape[0] != len(prior):
        raise DataError(f"matrix {matrix.shape}, loss {np.shape(loss)} and prior {len(prior)} do not match")
    return float(np.einsum("x,xy,xy->", prior, matrix, loss))


def build_problem(
    network: RoadNetwork,
    *,
    seed_n: int = 12,
    depth: int = 2,
    n_tasks: int = 60,
    prior: str | np.ndarray = "uniform",
    keep_km: float | None = None,
    rng: np.random.Generator | None = None,
) -> GeoProblem:
    """Grid + task points + prior + loss matrix for one city.

    Parameters
    ----------
    network : RoadNetwork
    seed_n, depth, keep_km : see :func:`mdp_core.geo.build_grid`.
    n_tasks : int
        Task points q: road nodes drawn uniformly without replacement (all nodes when fewer).
    prior : {"uniform", "roads"} or array
        ``"uniform"`` over targets; ``"roads"`` proportional to the number of road nodes whose nearest
        target is x (plus one, so every target keeps positive weight); or an explicit vector.
    rng : numpy.random.Generator, optional
        Draws the task points (default ``default_rng(0)``).
    """
    if not isinstance(n_tasks, int | np.integer) or n_tasks < 1:
        raise DataError(f"n_tasks must be a positive integer, got {n_tasks!r}")
    rng = np.random.default_rng(0) if rng is None else rng
    grid = build_grid(network, seed_n=seed_n, depth=depth, keep_km=keep_km)
    targets = grid.targets_km
    target_nodes = network.nearest_nodes(targets)
    output_nodes = network.nearest_nodes(grid.outputs_km)
    tasks = np.sort(rng.choice(network.n_nodes, size=min(int(n_tasks), network.n_nodes), replace=False))
    if isinstance(prior, str):
        if prior == "uniform":
            pi = np.full(len(targets), 1.0 / len(targets))
        elif prior == "roads":
            from scipy.spatial import cKDTree

            owner = cKDTree(targets).query(network.xy_km)[1]
            counts = np.bincount(owner, minlength=len(targets)) + 1.0
            pi = counts / counts.sum()
        else:
            raise DataError(f"prior must be 'uniform', 'roads' or an array, got {prior!r}")
    else:
        pi = check_prior(prior, len(targets))
    loss = travel_loss(network, target_nodes, output_nodes, tasks)
    return GeoProblem(
        network=network,
        grid=grid,
        prior=pi,
        loss=loss,
        task_nodes=tasks,
        target_nodes=target_nodes,
        output_nodes=output_nodes,
    )


def check_lp_inputs(problem: GeoProblem, eps: float, time_limit: float) -> float:
    """The checked eps (1/km) of an LP built on ``problem`` within ``time_limit`` seconds.

    Raises TypeError when ``problem`` is not a GeoProblem, DataError for a bad eps or time limit, or an eps
    too large for the map (:func:`check_reach`).
    """
    if not isinstance(problem, GeoProblem):
        raise TypeError(f"problem must be a GeoProblem, got {type(problem).__name__}")
    eps = check_eps(eps)
    if not (np.isfinite(time_limit) and time_limit > 0):
        raise DataError(f"time_limit must be positive seconds, got {time_limit!r}")
    check_reach(problem, eps)  # the LPs' ratios e^(eps d) must stay finite (eps 600 / km: a raw LAPACK error)
    return eps


def check_reach(problem: GeoProblem, eps: float) -> None:
    """DataError when eps (1/km) times the map's diagonal (km) exceeds :data:`MAX_EPS_REACH`."""
    reach = float(np.hypot(*np.ptp(problem.targets_km, axis=0)))
    if eps * reach > MAX_EPS_REACH:
        raise DataError(
            f"at ε = {eps:.3g}/km, places {reach:,.0f} km apart on this map differ by e^(ε·d) = "
            f"e^{eps * reach:,.0f}, beyond what numbers can hold: choose ε ≤ {MAX_EPS_REACH / reach:.3g}/km "
            "or a smaller map"
        )


def check_same_outputs(coarse: GeoProblem, fine: GeoProblem, use: str) -> None:
    """DataError unless ``coarse`` (a grid one level coarser) has the outputs of ``fine``: what carries a
    coarser grid's solution over to a finer one (``use``: what it would have done)."""
    if not np.array_equal(coarse.outputs_km, fine.outputs_km):
        raise DataError(f"the coarser grid has other outputs than this one: {use}")


def check_target_count(n: int, limit: int, solver: str, advice: str) -> None:
    """DataError when a full-domain LP (``solver``, e.g. "the spanner LP") would get more than ``limit``
    targets: their cost grows as n^2 m or faster."""
    if n > limit:
        raise DataError(f"{solver} takes at most {limit:,} targets (this grid has {n:,}); {advice}")
