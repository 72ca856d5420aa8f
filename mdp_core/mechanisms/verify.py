"""The one verifier and the one repair of eps-mDP mechanisms on finite domains.

:func:`mdp_violation` is the exact check every mechanism the product shows or exports passes
(``<= VIOLATION_TOL``); :func:`repair_mechanism` turns an almost-feasible LP solution into an exactly
private one (log-Lipschitz lower envelope, ENGINEERING.md "LP tolerances versus ratio constraints").
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from mdp_core._validation import (
    as_float_array,
    check_distance_matrix,
    check_eps,
)
from mdp_core.errors import DataError

__all__ = ["VIOLATION_TOL", "mdp_violation", "repair_mechanism"]


# Elements per temporary block in the chunked O(n^2 m) / O(n m^2) loops (~64 MB of float64).
#: A mechanism is accepted when ``mdp_violation(P, dist_in, eps) <= VIOLATION_TOL`` (DESIGN.md).
VIOLATION_TOL = 1e-9

# Elements per temporary block in the chunked O(n^2 m) loops (~64 MB of float64).
_BLOCK = 8_000_000


def mdp_violation(P: ArrayLike, dist_in: ArrayLike, eps: float) -> float:
    """Exact worst excess of the mDP constraint: ``max_{x != x', y} |ln P[x,y] - ln P[x',y]| - eps d(x,x')``.

    Pairs where both entries are 0 contribute 0 (no information); a pair with exactly one zero contributes
    ``+inf`` (the ratio is unbounded). A value ``<= 1e-9`` means the eps-mDP guarantee holds (000 Eq. 3
    constraint, for every pair of inputs). The scan is exact over all ``x, x', y`` and chunked so that the
    temporaries stay near 64 MB (``n = 5000`` fits in memory; time grows as ``n^2 |Y|``).

    Parameters
    ----------
    P : array (|X|, |Y|)
        Mechanism (non-negative; rows need not be normalised).
    dist_in : array (|X|, |X|)
        Input distances (symmetric, zero diagonal).
    eps : float
        Privacy budget > 0.

    Returns
    -------
    float
        The maximum excess; ``-inf`` when there is a single input.
    """
    P_arr = as_float_array(P, "P", ndim=2)
    if np.any(P_arr < 0):
        raise DataError("P must be non-negative")
    d = check_distance_matrix(dist_in, "dist_in", check_triangle=False)
    if d.shape[0] != P_arr.shape[0]:
        raise DataError(f"dist_in must be {P_arr.shape[0]} x {P_arr.shape[0]}, got {d.shape}")
    eps = check_eps(eps)
    n = P_arr.shape[0]
    if n < 2:
        return float("-inf")
    zero = P_arr == 0
    mixed = zero.any(axis=0) & ~zero.all(axis=0)
    if np.any(mixed):
        return float("inf")  # some column has one zero and one positive entry
    L = np.log(P_arr[:, ~zero.all(axis=0)])
    if L.shape[1] == 0:
        return 0.0  # every pair is "both zero"
    # max over ordered pairs of max_y (L[x, y] - L[x', y]) - eps d(x, x'); the order covers |.|.
    worst = float("-inf")
    m = L.shape[1]
    step = max(1, _BLOCK // (n * m))
    for start in range(0, n, step):
        rows = L[start : start + step]
        gap = (rows[:, None, :] - L[None, :, :]).max(axis=2) - eps * d[start : start + step]
        idx = np.arange(rows.shape[0])
        gap[idx, start + idx] = -np.inf  # x == x'
        worst = max(worst, float(gap.max()))
    return worst


def repair_mechanism(
    Z: ArrayLike, dist_in: ArrayLike, eps: float, *, max_rounds: int = 50
) -> tuple[np.ndarray, float, int]:
    """Make an (almost feasible) LP solution exactly eps-mDP.

    Per output column ``v`` the log-Lipschitz lower envelope ``v'_x = min_x' v_x' exp(eps d(x, x'))`` is
    the largest vector below ``v`` with ``v'_x <= exp(eps d(x, x')) v'_x'`` for every pair (exact for any
    metric, computed in log space). Normalising the rows then moves ``ln P[x, y] - ln P[x', y]`` by
    ``ln s_x' - ln s_x`` (row sums ``s``), which is of the order of the solver's row violations (~1e-9 or
    less); envelope and normalisation are repeated until :func:`~mdp_core.mechanisms.mdp_violation` is
    ``<= 1e-12`` (each round removes only the mass that breaks a ratio, so the objective moves by about
    the solver tolerance). Exact zeros in a column with positive entries are first raised to the least
    value the other entries allow; an all-zero column stays zero.

    Parameters
    ----------
    Z : array (|X|, |Y|)
        Non-negative solver output (rows summing to about 1).
    dist_in : array (|X|, |X|)
        Input metric.
    eps : float
        Budget.
    max_rounds : int
        Envelope/normalise rounds before giving up.

    Returns
    -------
    (P, violation, rounds)
        Row-stochastic matrix, its exact :func:`mdp_violation`, and the rounds used.
    """
    V = np.clip(as_float_array(Z, "Z", ndim=2), 0.0, None)
    d = check_distance_matrix(dist_in, "dist_in", check_triangle=False)
    eps = check_eps(eps)
    n, m = V.shape
    with np.errstate(divide="ignore"):
        L = np.log(V)
    step = max(1, _BLOCK // (n * n))
    # First raise every entry to the least value its column's other entries allow (the log-Lipschitz upper
    # extension from below, max_x' L_x' - eps d(x, x')). A solver returns entries below its tolerance as
    # exact zeros (e^{-eps d} ~ 1e-8 far from an output at large eps), and the envelope below would then
    # empty the whole column (one zero forces zeros everywhere): the 15 km city's seed LP at eps ln 2 / 0.2
    # lost rows that way. The raise adds about the solver's tolerance in mass.
    for start in range(0, m, step):
        block = L[:, start : start + step]
        raised = (block[None, :, :] - eps * d[:, :, None]).max(axis=1)
        L[:, start : start + step] = np.maximum(block, raised)
    viol = float("inf")
    rounds = 0
    while rounds < max_rounds:
        rounds += 1
        # Round 1 takes the envelope at eps itself. If normalising then breaks a ratio (row sums that
        # differ by the solver's tolerance, seen on grids at large eps), later rounds take it at a budget a
        # little below eps, growing 4x per round (1e-9 relative, ..., at most 1e-5): the slack
        # eps * margin * d then absorbs the row-sum spread, so the loop ends in a few rounds.
        margin = 0.0 if rounds == 1 else min(1e-9 * 4.0 ** (rounds - 2), 1e-5)
        eps_env = eps * (1.0 - margin)
        for start in range(0, m, step):
            block = L[:, start : start + step]  # (n, k)
            L[:, start : start + step] = (block[None, :, :] + eps_env * d[:, :, None]).min(axis=1)
        top = L.max(axis=1, keepdims=True)
        if not np.all(np.isfinite(top)):
            break  # some row lost all its mass
        L -= top + np.log(np.exp(L - top).sum(axis=1, keepdims=True))  # normalise rows in log space
        viol = mdp_violation(np.exp(L), d, eps)
        if viol <= 1e-12:
            break
    return np.exp(L), viol, rounds
