"""Input checks and constants shared by the leakage modules (one home each)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mdp_core._validation import as_float_array
from mdp_core.errors import DataError

_BLOCK = 2_000_000  # entries per (rows x rows x b) block when scanning all pairs


_TINY = 1e-300  # denominators below this count as zero (their mass joins delta), so ratios stay finite


# ----------------------------------------------------------------------------------------------- input
def _check_codes(codes: object, *columns: str) -> pd.DataFrame:
    if not isinstance(codes, pd.DataFrame):
        raise TypeError(f"codes must be a pandas DataFrame of integer codes, got {type(codes).__name__}")
    if len(codes) == 0:
        raise DataError("codes has zero rows; load a table with data")
    for col in columns:
        if col not in codes.columns:
            raise DataError(f"column {col!r} is not in codes (columns: {list(codes.columns)})")
        values = codes[col]
        if not pd.api.types.is_integer_dtype(values) or (values < 0).any():
            raise DataError(f"codes[{col!r}] must hold non-negative integer codes (see discretize)")
    return codes


def _counts(target_codes: np.ndarray, other_codes: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    a, b = shape
    flat = np.bincount(target_codes * b + other_codes, minlength=a * b)
    return flat.reshape(a, b).astype(np.float64)


def _check_cond(cond: object, name: str = "cond") -> np.ndarray:
    p = as_float_array(cond, name, ndim=2)
    if np.any(p < 0):
        raise DataError(f"{name} must be non-negative")
    if not np.allclose(p.sum(axis=1), 1.0, atol=1e-9, rtol=0):
        raise DataError(f"{name} rows must sum to 1 (cond[x, i] = P(other = i | target = x))")
    return p / p.sum(axis=1, keepdims=True)


def _check_eps_array(eps: object) -> np.ndarray:
    e = np.asarray(eps, dtype=np.float64) if not isinstance(eps, str) else None
    if e is None or e.size == 0 or not np.all(np.isfinite(e)) or np.any(e <= 0):
        raise DataError(f"eps must be positive finite number(s), got {eps!r}")
    return e
