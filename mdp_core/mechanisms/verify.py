"""The one verifier and the one repair of eps-mDP mechanisms on finite domains.

:func:`mdp_violation` is the exact check every mechanism the product shows or exports passes
(``<= VIOLATION_TOL``); :func:`repair_mechanism` turns an almost-feasible LP solution into an exactly
private one (log-Lipschitz lower envelope, ENGINEERING.md "LP tolerances versus ratio constraints");
:func:`raise_repair` does it for a solution computed at a budget a little below eps on a subset of pairs
(raising entries, never lowering them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import numpy as np
from numpy.typing import ArrayLike

from mdp_core._cores import over_blocks
from mdp_core._validation import (
    as_float_array,
    check_distance_matrix,
    check_eps,
)
from mdp_core.errors import DataError

__all__ = ["ROW_SUM_TOL", "VIOLATION_TOL", "mdp_violation", "raise_repair", "repair_mechanism"]


#: Largest |row sum - 1| of a mechanism an LP returns (solver round-off; :func:`mdp_violation` checks
#: ratios only).
ROW_SUM_TOL = 1e-6
#: A mechanism is accepted when ``mdp_violation(P, dist_in, eps) <= VIOLATION_TOL`` (DESIGN.md).
VIOLATION_TOL = 1e-9

# repair_mechanism gives up after this many rounds without a new least violation: on an LP solution that
# breaks left-out rows by 1e-4 (the city's exact optimum, round 2) it stalls from round 6 and the other
# 44 rounds took 6 s (the caller then raises instead, raise_repair).
_STALLED_ROUNDS = 5

# Elements per temporary block in the chunked O(n^2 m) loops (~64 MB of float64).
_BLOCK = 8_000_000

# The check and the extensions take one target x' at a time against the whole (n, m) matrix: rows of m
# contiguous numbers and two (n, m) temporaries, instead of (n, n, k) blocks reduced along their middle
# axis. 3,469 x 117 (the 15 km city at depth 3): extension 2.0-2.3 s against 6.6-8.0 s, check 1.9-2.4
# against 3.9-4.9 s, the same numbers to the bit (the same operations on the same pairs). Only with very
# few outputs is it slower (5,000 x 3: extension 0.7 against 0.4 s). Both go further: the rows
# x in parts of about _PART elements (they stay in cache while every x' passes), the parts on all cores
# (numpy lets go of the GIL): 8,939 x 117 (depth 4) 2.6 s against 6.7 s in one pass, the same bits.
_PART = 60_000
_Result = TypeVar("_Result")


def mdp_violation(P: ArrayLike, dist_in: ArrayLike, eps: float) -> float:
    """Exact worst excess of the mDP constraint: ``max_{x != x', y} |ln P[x,y] - ln P[x',y]| - eps d(x,x')``.

    Pairs where both entries are 0 contribute 0 (no information); a pair with exactly one zero contributes
    ``+inf`` (the ratio is unbounded). Rows are compared as they are (a cone check: scaling a row scales its
    ratios), but a row without mass is no distribution: it gets ``+inf`` (privacy audit, stop 62: an
    all-zero matrix, whose every pair is "both zero", scored 0.0). Check that rows sum to 1 separately
    where that matters (:data:`ROW_SUM_TOL`). A value ``<= 1e-9`` means the eps-mDP guarantee holds (000
    Eq. 3 constraint, for every pair of inputs). The scan is exact over all ``x, x', y``, one ``x'`` at a
    time (two ``n x |Y|`` temporaries; time grows as ``n^2 |Y|``).

    Parameters
    ----------
    P : array (|X|, |Y|)
        Mechanism (non-negative; rows need not be normalised, but each needs some mass).
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
    if P_arr.size and not np.all(P_arr.sum(axis=1) > 0):
        return float("inf")
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
    return max(_over_parts(L, lambda lo, hi: _worst_excess(L, d, eps, lo, hi)))


def _worst_excess(L: np.ndarray, d: np.ndarray, eps: float, lo: int, hi: int) -> float:
    """``max_{x in lo:hi, x' != x, y} L[x, y] - L[x', y] - eps d(x, x')``, one x' at a time."""
    kept, gap, far = L[lo:hi], np.empty_like(L[lo:hi]), (eps * d[lo:hi]).T.copy()
    worst = float("-inf")
    for src in range(len(L)):
        np.subtract(kept, L[src], out=gap)
        excess = gap.max(axis=1) - far[src]
        if lo <= src < hi:
            excess[src - lo] = -np.inf  # x == x'
        worst = max(worst, float(excess.max()))
    return worst


def _over_parts(L: np.ndarray, work: Callable[[int, int], _Result]) -> list[_Result]:
    """``work(lo, hi)`` over parts of the rows of ``L`` of about :data:`_PART` entries, in order; each
    thread of :func:`~mdp_core._cores.over_blocks` takes a run of consecutive parts (module comment on
    the loops)."""
    n = len(L)
    rows = max(1, _PART // max(1, L.shape[1]))
    parts = [(lo, min(lo + rows, n)) for lo in range(0, n, rows)]
    runs = over_blocks(len(parts), lambda first, last: [work(*parts[k]) for k in range(first, last)])
    return [result for run in runs for result in run]


def repair_mechanism(
    Z: ArrayLike, dist_in: ArrayLike, eps: float, *, max_rounds: int = 50
) -> tuple[np.ndarray, float, int]:
    """Make an (almost feasible) LP solution exactly eps-mDP.

    Per output column ``v`` the log-Lipschitz lower envelope ``v'_x = min_x' v_x' exp(eps d(x, x'))`` is
    the largest vector below ``v`` with ``v'_x <= exp(eps d(x, x')) v'_x'`` for every pair (exact for any
    metric, computed in log space). Normalising the rows then moves ``ln P[x, y] - ln P[x', y]`` by
    ``ln s_x' - ln s_x`` (row sums ``s``), which is of the order of the solver's row violations (~1e-9 or
    less); envelope and normalisation are repeated until :func:`~mdp_core.mechanisms.mdp_violation` is
    ``<= 1e-12``, or has not fallen for five rounds (it stalls on solutions that break rows by far more
    than a tolerance), each round removing only the mass that breaks a ratio (the objective moves by about
    the solver tolerance); the round with the least violation is returned. Exact zeros in a column with
    positive entries are first raised to the least value the other entries allow; an all-zero column stays
    zero.

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
        Row-stochastic matrix of the best round, its exact :func:`mdp_violation`, and the rounds used (a
        zero matrix with violation inf when a row lost all its mass in every round).
    """
    V = np.clip(as_float_array(Z, "Z", ndim=2), 0.0, None)
    d = check_distance_matrix(dist_in, "dist_in", check_triangle=False)
    eps = check_eps(eps)
    with np.errstate(divide="ignore"):
        L = np.log(V)
    # First raise every entry to the least value its column's other entries allow (the log-Lipschitz upper
    # extension from below, max_x' L_x' - eps d(x, x')). A solver returns entries below its tolerance as
    # exact zeros (e^{-eps d} ~ 1e-8 far from an output at large eps), and the envelope below would then
    # empty the whole column (one zero forces zeros everywhere): the 15 km city's seed LP at eps ln 2 / 0.2
    # lost rows that way. The raise adds about the solver's tolerance in mass.
    L = _upper_extension(L, d, eps)
    best, kept = float("inf"), np.zeros_like(L)
    rounds = best_round = 0
    while rounds < max_rounds and rounds - best_round < _STALLED_ROUNDS:
        rounds += 1
        # Round 1 takes the envelope at eps itself. If normalising then breaks a ratio (row sums that
        # differ by the solver's tolerance, seen on grids at large eps), later rounds take it at a budget a
        # little below eps, growing 4x per round (1e-9 relative, ..., at most 1e-5): the slack
        # eps * margin * d then absorbs the row-sum spread, so the loop ends in a few rounds.
        margin = 0.0 if rounds == 1 else min(1e-9 * 4.0 ** (rounds - 2), 1e-5)
        eps_env = eps * (1.0 - margin)
        L = _extension(L, d, eps_env, np.minimum)
        top = L.max(axis=1, keepdims=True)
        if not np.all(np.isfinite(top)):
            break  # some row lost all its mass
        L -= top + np.log(np.exp(L - top).sum(axis=1, keepdims=True))  # normalise rows in log space
        viol = mdp_violation(np.exp(L), d, eps)
        if viol < best:  # the margins below can make things worse where many ratios are tight: keep the best
            best, best_round, kept = viol, rounds, np.exp(L)
        if viol <= 1e-12:
            break
    return kept, best, rounds


def _upper_extension(L: np.ndarray, d: np.ndarray, eps: float) -> np.ndarray:
    """Per column, the least log-Lipschitz majorant ``max_x' L[x', y] - eps d(x, x')`` (>= L; -inf stays)."""
    return _extension(L, d, -eps, np.maximum)


def _extension(L: np.ndarray, d: np.ndarray, slope: float, pick: np.ufunc) -> np.ndarray:
    """``pick`` (np.maximum or np.minimum) over x' of ``L[x', y] + slope d(x, x')``, per entry (x, y)."""
    out = L.copy()  # x' = x: d = 0

    def part(lo: int, hi: int) -> None:  # the rows lo:hi against every x' (module comment on the loops)
        kept, shifted = out[lo:hi], np.empty_like(out[lo:hi])
        sloped = (slope * d[lo:hi]).T.copy()  # [x', x]: a contiguous row per x'
        for src in range(len(L)):
            np.add(L[src], sloped[src, :, None], out=shifted)
            pick(kept, shifted, out=kept)

    _over_parts(L, part)
    return out


def _breaks_after_raise(L: np.ndarray, norm: np.ndarray, d: np.ndarray, eps: float, raised: float) -> bool:
    """Whether some ratio of ``exp(L)`` breaks eps by more than 1e-12, where ``L + norm`` (per row) is
    ``raised``-log-Lipschitz in every column (a fresh :func:`_upper_extension`).

    ``L[a] - L[b] <= raised d(a, b) + norm[b] - norm[a]``, so only the pairs whose normaliser gap is
    above ``(eps - raised) d(a, b)`` (less a 1e-9 margin for rounding) can break a ratio: those are
    checked exactly, the rest never (n^2 work instead of n^2 m; the caller confirms a pass with
    :func:`mdp_violation`).
    """
    n, m = L.shape
    live = np.isfinite(L).all(axis=0)  # all-zero columns carry no information
    L = L[:, live]
    worst = float("-inf")
    step = max(1, _BLOCK // max(1, n * m))
    for start in range(0, n, step):
        gap = norm[None, :] - norm[start : start + step, None] - (eps - raised) * d[start : start + step]
        a, b = np.nonzero(gap > -1e-9)
        a += start
        keep = a != b
        a, b = a[keep], b[keep]
        for lo in range(0, len(a), step * n):
            ca, cb = a[lo : lo + step * n], b[lo : lo + step * n]
            excess = (L[ca] - L[cb]).max(axis=1) - eps * d[ca, cb]
            worst = max(worst, float(excess.max(initial=float("-inf"))))
            if worst > 1e-12:
                return True
    return False


def _least_uniform_mix(P: np.ndarray, d: np.ndarray, eps: float) -> float:
    """Least ``beta`` with ``(1 - beta) P + beta / m`` eps-mDP (rows of P sum to 1; module docstring).

    Per pair and output, ``(1 - b)(P[a] - r P[b]) <= b (r - 1) / m`` with ``r = exp(eps d(a, b))``, so
    ``b / (1 - b) >= m * excess / (r - 1)``: the largest such ratio over all pairs gives beta.
    """
    n, m = P.shape
    worst = 0.0
    step = max(1, _BLOCK // (n * m))
    for start in range(0, n, step):
        r = np.exp(eps * d[start : start + step])  # (c, n)
        excess = (P[start : start + step, None, :] - r[:, :, None] * P[None, :, :]).max(axis=2)
        idx = np.arange(r.shape[0])
        excess[idx, start + idx] = 0.0  # a == b
        positive = excess > 0
        if np.any(positive):
            worst = max(
                worst, float((m * excess[positive] / np.expm1(eps * d[start : start + step][positive])).max())
            )
    return worst / (1.0 + worst)


def raise_repair(
    Z: ArrayLike, dist_in: ArrayLike, eps: float, *, slack: float = 0.003, max_rounds: int = 12
) -> tuple[np.ndarray, float, int]:
    """Make an LP solution that kept only some pairs (at budget eps or a little below) exactly eps-mDP.

    Each round raises every column to its least log-Lipschitz majorant at ``(1 - slack) eps`` (the pairs
    the LP left out break their ratios by low entries far from the output; raising them costs less
    utility than lowering the entries near it: 1.077 against 1.122 km on the 15 km city at depth 1, eps
    1.5 / km), then normalises the rows, which moves a ratio by the spread of the row sums; the ``slack``
    absorbs that once the sums settle (4-7 rounds at eps 1.5 / km). Where they settle slowly (small eps
    times short distances: 0.002 left after 15 rounds at depth 2, eps 0.5 / km) :func:`repair_mechanism`
    finishes the job by lowering, at a cost of ~1e-5 km there; if even that fails, the matrix is mixed with
    the uniform mechanism at the least weight that is private (:func:`_least_uniform_mix`, exact in real
    arithmetic, with a 1e-9 relative margin for rounding).

    Parameters
    ----------
    Z : array (|X|, |Y|)
        Non-negative solver output (any positive row sums).
    dist_in : array (|X|, |X|)
        Input metric.
    eps : float
        Budget.
    slack : float
        Relative budget the LP kept back, in (0, 0.5).
    max_rounds : int
        Raise/normalise rounds before the lowering repair takes over.

    Returns
    -------
    (P, violation, rounds)
        Row-stochastic matrix, its exact :func:`mdp_violation` (the caller compares it with
        :data:`VIOLATION_TOL`) and the rounds used (raise rounds plus lowering rounds, plus one for a mix).
    """
    V = np.clip(as_float_array(Z, "Z", ndim=2), 0.0, None)
    d = check_distance_matrix(dist_in, "dist_in", check_triangle=False)
    eps = check_eps(eps)
    if not 0.0 < slack < 0.5:
        raise DataError(f"slack must be in (0, 0.5), got {slack!r}")
    if not isinstance(max_rounds, int | np.integer) or max_rounds < 1:
        raise DataError(f"max_rounds must be a positive integer, got {max_rounds!r}")
    if d.shape[0] != V.shape[0]:
        raise DataError(f"dist_in must be {V.shape[0]} x {V.shape[0]}, got {d.shape}")
    if np.any(V.sum(axis=1) <= 0):
        raise DataError("every row of Z needs positive mass")
    with np.errstate(divide="ignore"):
        L = np.log(V)
    raised = (1.0 - slack) * eps
    for rounds in range(1, max_rounds + 1):
        L = _upper_extension(L, d, raised)
        top = L.max(axis=1)
        norm = top + np.log(np.exp(L - top[:, None]).sum(axis=1))
        L -= norm[:, None]  # normalise rows in log space
        if _breaks_after_raise(L, norm, d, eps, raised):
            continue
        P = np.exp(L)
        viol = mdp_violation(P, d, eps)
        if viol <= 1e-12:
            return P, viol, rounds
    P = np.exp(L)
    P, viol, lowering = repair_mechanism(P, d, eps)
    rounds = max_rounds + lowering
    if viol <= 1e-12:
        return P, viol, rounds
    beta = min(1.0, _least_uniform_mix(P, d, eps) * (1.0 + 1e-9))
    P = (1.0 - beta) * P + beta / P.shape[1]
    return P, mdp_violation(P, d, eps), rounds + 1
