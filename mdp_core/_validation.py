"""Input validation shared by the public functions of mdp_core.

Every checker names the argument in its error message so that a person can act on it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from mdp_core.errors import DataError

__all__ = [
    "Progress",
    "as_float_array",
    "check_delta",
    "check_distance_matrix",
    "check_eps",
    "check_log_ratio",
    "check_loss_matrix",
    "check_positive",
    "check_prior",
    "check_rng",
    "check_shape",
    "check_stochastic_matrix",
    "part",
    "report",
]

#: Optional progress callback: ``progress(fraction_done in [0, 1], message)``.
Progress = Callable[[float, str], None] | None


def report(progress: Progress, fraction: float, message: str) -> None:
    """Call ``progress`` if given, clipping the fraction to [0, 1]."""
    if progress is not None:
        progress(min(max(float(fraction), 0.0), 1.0), message)


def part(progress: Progress, start: float, stop: float, prefix: str = "") -> Progress:
    """``progress`` for a sub-task that fills [start, stop] of the caller's bar (None stays None), so the
    bar never goes back when the sub-task starts from 0; its raise (a stop) reaches the sub-task. The
    sub-task's messages get ``prefix`` in front (what the caller is doing)."""
    if progress is None:
        return None
    return lambda fraction, message: report(progress, start + (stop - start) * fraction, prefix + message)


def as_float_array(value: object, name: str, *, ndim: int | None = None) -> np.ndarray:
    """Convert to a finite float64 array, raising DataError/TypeError naming ``name``."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be numeric array-like, got {type(value).__name__}") from exc
    if ndim is not None and arr.ndim != ndim:
        raise DataError(f"{name} must be {ndim}-dimensional, got shape {arr.shape}")
    if arr.size == 0:
        raise DataError(f"{name} must not be empty")
    if not np.all(np.isfinite(arr)):
        raise DataError(f"{name} contains NaN or infinite values")
    return arr


def check_positive(value: object, name: str, *, allow_inf: bool = False) -> float:
    """Return ``value`` as a float > 0, else raise DataError naming ``name``."""
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a number, got {type(value).__name__}") from exc
    if np.isnan(x) or x <= 0 or (np.isinf(x) and not allow_inf):
        raise DataError(f"{name} must be a positive finite number, got {value!r}")
    return x


def check_eps(eps: object, name: str = "eps") -> float:
    """Privacy budget: a finite number > 0."""
    return check_positive(eps, name)


#: Largest log-ratio between two probabilities of one row that float64 carries: e^-700 is still a normal
#: number, e^-745 rounds to 0 (a zero beside a positive entry breaks eps-mDP for every eps).
MAX_LOG_RATIO = 700.0


def check_log_ratio(span: float, what: str) -> None:
    """Refuse a mechanism whose probabilities would span more than e^MAX_LOG_RATIO (they round to 0)."""
    if span > MAX_LOG_RATIO:
        raise DataError(
            f"{what}: eps times the distances reaches {span:.4g}, so some probabilities fall below "
            f"e^-{MAX_LOG_RATIO:g} and round to 0, which no eps-mDP mechanism allows; use a smaller eps "
            "(the mechanism is then close to releasing the value as it is)"
        )


def check_distance_matrix(
    dist: object, name: str = "dist_in", *, check_triangle: bool = True, atol: float = 1e-9
) -> np.ndarray:
    """Square, symmetric, non-negative, zero diagonal, and (optionally) a metric."""
    d = as_float_array(dist, name, ndim=2)
    n, m = d.shape
    if n != m:
        raise DataError(f"{name} must be square, got shape {d.shape}")
    if np.any(d < 0):
        raise DataError(f"{name} must be non-negative")
    if np.any(np.abs(np.diag(d)) > atol):
        raise DataError(f"{name} must have a zero diagonal")
    if not np.allclose(d, d.T, atol=atol, rtol=0):
        raise DataError(f"{name} must be symmetric")
    if check_triangle and n <= 2000:
        # d[x, z] <= d[x, y] + d[y, z] for all x, y, z, checked one y at a time.
        for y in range(n):
            if np.any(d > d[:, [y]] + d[[y], :] + atol):
                raise DataError(f"{name} violates the triangle inequality (not a metric)")
    return d


def check_shape(p: object, name: str = "p") -> float:
    """Generalized Gaussian shape parameter: a number in [1, inf] (inf allowed)."""
    try:
        value = float(p)  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a number in [1, inf], got {type(p).__name__}") from exc
    if np.isnan(value) or value < 1.0:
        raise DataError(f"{name} must be in [1, inf] (shape parameter), got {p!r}")
    return value


def check_prior(prior: object, n: int | None = None, name: str = "prior") -> np.ndarray:
    """A probability vector (non-negative, sums to 1 within 1e-9), renormalised exactly."""
    p = as_float_array(prior, name, ndim=1)
    if n is not None and p.size != n:
        raise DataError(f"{name} must have length {n}, got {p.size}")
    if np.any(p < 0):
        raise DataError(f"{name} must be non-negative")
    total = p.sum()
    if not np.isclose(total, 1.0, atol=1e-9, rtol=0):
        raise DataError(f"{name} must sum to 1, got {total:.12g}")
    return p / total


def check_loss_matrix(loss: object, shape: tuple[int, int] | None = None, name: str = "loss") -> np.ndarray:
    """A finite loss matrix (|X| x |Y|) of the expected shape."""
    c = as_float_array(loss, name, ndim=2)
    if shape is not None and c.shape != shape:
        raise DataError(f"{name} must have shape {shape}, got {c.shape}")
    return c


def check_stochastic_matrix(matrix: object, name: str = "P", *, atol: float = 1e-9) -> np.ndarray:
    """Rows are probability vectors (non-negative, summing to 1 within ``atol``)."""
    P = as_float_array(matrix, name, ndim=2)
    if np.any(P < 0):
        raise DataError(f"{name} must be non-negative")
    if not np.allclose(P.sum(axis=1), 1.0, atol=atol, rtol=0):
        raise DataError(f"{name} rows must sum to 1")
    return P


def check_delta(delta: object, name: str = "delta") -> float:
    """A probability in the open interval (0, 1), e.g. the delta of (eps, delta)-DP."""
    value = check_positive(delta, name)
    if value >= 1.0:
        raise DataError(f"{name} must be in (0, 1), got {delta!r}")
    return value


def check_rng(rng: object, name: str = "rng") -> np.random.Generator:
    """The explicit ``numpy.random.Generator`` every random core function takes (no global state)."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"{name} must be a numpy.random.Generator (default_rng), got {type(rng).__name__}")
    return rng
