"""Uncertainty of a conditional distribution from several data sources (001 Sec. V: the triad's Delta)."""

from __future__ import annotations

from typing import Literal

import numpy as np
import pandas as pd

from mdp_core._validation import check_rng
from mdp_core.errors import DataError
from mdp_core.leakage._checks import _check_codes, _check_eps_array, _counts
from mdp_core.leakage.cpl import cpl_exact

__all__ = ["cpl_source_band", "source_conditionals", "uncertainty_from_sources"]


# --------------------------------------------------------------------------------- statistical Delta
def source_conditionals(
    codes: pd.DataFrame,
    target: str,
    other: str,
    *,
    groups: str | None = None,
    n_boot: int = 20,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """Several estimates of ``P(other | target)``: one per level of ``groups`` or per bootstrap resample.

    Parameters
    ----------
    codes : DataFrame
        Integer codes.
    target, other : str
        As in :func:`conditional`; the domain sizes are those of the whole table.
    groups : str, optional
        A grouping column (e.g. region): one source per level (001 Sec. V-D2, multiple sources).
    n_boot : int
        Bootstrap resamples when ``groups`` is None (>= 2).
    rng : numpy.random.Generator
        Required for the bootstrap.

    Returns
    -------
    ndarray, shape (N, a, b)
        Row-stochastic per source; a target level absent from a source has a NaN row, and one no record
        of the table takes has none (as in :func:`conditional`).
    """
    _check_codes(codes, target, other, *([groups] if groups is not None else []))
    if target == other:
        raise DataError("target and other must be different attributes")
    t = codes[target].to_numpy(dtype=np.int64)
    o = codes[other].to_numpy(dtype=np.int64)
    shape = (int(t.max()) + 1, int(o.max()) + 1)
    if groups is not None:
        if groups in (target, other):
            raise DataError("groups must differ from target and other")
        g = codes[groups].to_numpy()
        parts = [np.flatnonzero(g == level) for level in np.unique(g)]
        if len(parts) < 2:
            raise DataError(f"groups column {groups!r} has a single level; need >= 2 sources")
    else:
        if not isinstance(n_boot, (int, np.integer)) or n_boot < 2:
            raise DataError(f"n_boot must be an integer >= 2, got {n_boot!r}")
        gen = check_rng(rng)
        parts = [gen.integers(0, len(t), len(t)) for _ in range(int(n_boot))]
    out = np.empty((len(parts), *shape))
    for s, idx in enumerate(parts):
        counts = _counts(t[idx], o[idx], shape)
        totals = counts.sum(axis=1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[s] = np.where(totals > 0, counts / np.where(totals > 0, totals, 1.0), np.nan)
    return out[:, np.bincount(t, minlength=shape[0]) > 0]  # as conditional(): no row for an empty level


def uncertainty_from_sources(
    sources: object, *, method: Literal["range", "std"] = "range"
) -> tuple[np.ndarray, np.ndarray]:
    """Nominal conditional and entry-wise Delta from several sources (001 Sec. V-D2, Eqs. 17-18).

    Parameters
    ----------
    sources : array_like, shape (N, a, b)
        Row-stochastic estimates (NaN rows where a source lacks a target level), N >= 2.
    method : {"range", "std"}
        ``range``: Delta = max - min over sources (privacy-robust: every source lies in the box around the
        mean). ``std``: sample standard deviation (ddof 1; a utility-privacy balance, no such guarantee).

    Returns
    -------
    (nominal, Delta)
        nominal = mean over the sources that have the row (row-stochastic); rows seen in fewer than two
        sources get Delta = 1 (nothing is known about them).
    """
    s = np.asarray(sources, dtype=np.float64)
    if s.ndim != 3 or s.shape[0] < 2:
        raise DataError(f"sources must have shape (N >= 2, a, b), got {s.shape}")
    if method not in ("range", "std"):
        raise DataError(f"method must be 'range' or 'std', got {method!r}")
    seen = ~np.isnan(s).any(axis=2)  # (N, a)
    if not seen.any(axis=0).all():
        raise DataError("every target level must appear in at least one source")
    nominal = np.nanmean(s, axis=0)
    nominal = nominal / nominal.sum(axis=1, keepdims=True)
    few = seen.sum(axis=0) < 2
    with np.errstate(invalid="ignore"):
        if method == "range":
            delta = np.nanmax(s, axis=0) - np.nanmin(s, axis=0)
        else:
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                delta = np.nanstd(s, axis=0, ddof=1)
    delta = np.where(few[:, None] | np.isnan(delta), 1.0, delta)
    return nominal, delta


def cpl_source_band(sources: object, eps: object) -> tuple[np.ndarray, np.ndarray]:
    """Lowest and highest exact CPL* over several sources of ``P(other | target)`` (001 Sec. V-D2).

    Parameters
    ----------
    sources : array_like, shape (N, a, b)
        Row-stochastic estimates from :func:`source_conditionals` (NaN rows where a source lacks a target
        level), N >= 2.
    eps : float or array_like
        LDP budget(s) of the released attribute (nats, > 0).

    Returns
    -------
    (lower, upper) : ndarray
        ``min_s CPL*_s(eps)`` and ``max_s CPL*_s(eps)``, shaped like ``eps`` (at least 1-D), nats. A source's
        missing rows are taken from the nominal conditional (the mean over the sources that have them,
        :func:`uncertainty_from_sources`), so every source is a complete row-stochastic matrix. The band
        shows how much the exact leakage varies between sources; the DT with the sources' Delta is an upper
        bound for every one of them.
    """
    s = np.asarray(sources, dtype=np.float64)
    nominal, _ = uncertainty_from_sources(s)
    e = np.atleast_1d(_check_eps_array(eps))
    curves = np.vstack(
        [
            np.atleast_1d(cpl_exact(np.where(np.isnan(one).any(axis=1, keepdims=True), nominal, one), e))
            for one in s
        ]
    )
    return curves.min(axis=0), curves.max(axis=0)
