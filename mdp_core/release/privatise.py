"""Release the whole table through the composed DepHDP channel, and flag degenerate output.

:func:`privatise` sends EVERY row of the discretised table through the composed mechanism of a
:class:`~mdp_core.DepHDPResult` (000 Eq. 11: one verified channel per attribute group), writes the outputs as
the encoding's level labels / bin centres rounded to the column's own precision, and releases the target
column too unless the user drops it. DepHDP never configures the target (it is what the prediction task
predicts), so a released target goes through one more channel of its own at budget ``target_eps``:
randomised response for a nominal / binary target (``P[x, x] = e^eps / (e^eps + m - 1)``, exactly
eps-mDP for the discrete metric), the exponential mechanism on the target's component metric otherwise. The
record budget then composes over K + 1 channels: ``||(eps_1, ..., eps_K, eps_T)||_q`` (000 Theorem 1), which
:func:`mdp_core.release.audit_record` states with the numbers. Columns outside the schema (identifiers, free
text, dates excluded by the guard rails) are never released.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from mdp_core._text import listed
from mdp_core._validation import check_eps, check_log_ratio, check_rng
from mdp_core.data import Encoded
from mdp_core.dephdp import DepHDPResult, release_attributes
from mdp_core.errors import DataError
from mdp_core.mechanisms import exponential_mechanism, sample

__all__ = ["ReleaseCheck", "column_decimals", "privatise", "release_report", "target_channel"]

_MAX_DECIMALS = 6
#: Largest magnitude up to which every integer is a float64 (2^53), so writing it as an int64 is exact.
_EXACT_INTEGERS = 2.0**53


def column_decimals(values: pd.Series) -> int:
    """Decimals needed to write every value of a numeric column exactly (0 for integers, at most 6)."""
    x = pd.to_numeric(values, errors="coerce").dropna().to_numpy(dtype=float)
    for d in range(_MAX_DECIMALS + 1):
        if np.allclose(np.round(x, d), x, rtol=0, atol=1e-9 * max(1.0, float(np.max(np.abs(x), initial=0)))):
            return d
    return _MAX_DECIMALS


def _rounded_levels(centres: np.ndarray, decimals: int) -> np.ndarray:
    """Bin centres rounded to ``decimals``, with more decimals where rounding would merge two centres."""
    c = np.asarray(centres, dtype=float)
    for d in range(decimals, decimals + _MAX_DECIMALS + 1):
        r = np.round(c, d)
        if np.unique(r).size == np.unique(c).size:
            # integers where float64 holds them exactly (audit: 3.2e19 overflowed int64 to -9.2e18)
            return r.astype(np.int64) if d == 0 and np.all(np.abs(r) <= _EXACT_INTEGERS) else r
    return c


def target_channel(encoded: Encoded, eps: float) -> np.ndarray:
    """The eps-mDP channel of a released target: randomised response (nominal / binary) or EM otherwise."""

    target = encoded.schema.target
    if target is None:
        raise DataError("the schema has no target column")
    e = check_eps(eps, "target_eps")
    m = len(encoded.levels[target])
    if encoded.schema.kind(target) in ("nominal", "binary"):
        # log-domain normalisation: diagonal e^eps / (e^eps + m - 1) without overflow
        check_log_ratio(e, "randomised response of the target")
        log_den = e + math.log1p((m - 1) * math.exp(-e))
        P = np.full((m, m), math.exp(-log_den))
        np.fill_diagonal(P, math.exp(e - log_den))
        return P / P.sum(axis=1, keepdims=True)
    return exponential_mechanism(encoded.components[target], e)


def _check_result(encoded: Encoded, result: DepHDPResult) -> None:

    if not isinstance(encoded, Encoded):
        raise TypeError(f"encoded must be an Encoded table (see discretize), got {type(encoded).__name__}")
    if not isinstance(result, DepHDPResult):
        raise TypeError(f"result must be a DepHDPResult (see run_dephdp), got {type(result).__name__}")
    expected = set(release_attributes(encoded))
    got = set(result.mechanism.attributes)
    if got != expected:
        raise DataError(
            f"result was configured on other columns ({sorted(got)}) than the table releases "
            f"({sorted(expected)})"
        )
    sizes = encoded.domain_sizes
    for group, gs in zip(result.mechanism.groups, result.mechanism.sizes, strict=True):
        if tuple(sizes[a] for a in group) != tuple(gs):
            raise DataError(f"group {group} has other domain sizes in the table than in the result")


def _decode_column(encoded: Encoded, df: pd.DataFrame, col: str, codes: np.ndarray) -> pd.Series:
    """Released labels as loaded: numbers rounded to the column's decimals, labels in its type. A declared
    public domain sets them itself, so that no record does: its bin centres as they are, its labels."""
    levels = encoded.levels[col]
    original = df[col] if col in df.columns else None
    if encoded.schema.kind(col) == "numeric":
        if col in encoded.ranges:  # the decimals that write the range's bin centres
            decimals = column_decimals(pd.Series(levels))
        else:
            decimals = column_decimals(original) if original is not None else 3
        values = _rounded_levels(levels, decimals)[codes]
        return pd.Series(values, name=col)
    values = np.asarray(levels, dtype=object)[codes]
    if original is not None and col not in encoded.categories:
        try:  # labels as loaded (ints stay ints); a "missing" level keeps the column textual
            return pd.Series(values.astype(original.dtype), name=col)
        except (TypeError, ValueError):
            pass
    return pd.Series(values, name=col, dtype=object)


def privatise(
    df: pd.DataFrame,
    result: DepHDPResult,
    *,
    encoded: Encoded,
    rng: np.random.Generator,
    include_target: bool = True,
    target_eps: float | None = None,
    rows: np.ndarray | None = None,
    domain_rows: np.ndarray | None = None,
) -> pd.DataFrame:
    """The whole table (or the records at ``rows``) through the composed DepHDP channel (and the target's
    own channel).

    Parameters
    ----------
    df : DataFrame
        The table as loaded (gives the column order and each numeric column's precision).
    result : DepHDPResult
        A configured DepHDP (fitted on ``encoded`` or on a split of it: same columns and levels).
    encoded : Encoded
        ``discretize(df, schema)``: every row with a value in each schema column (rows with a missing value
        are dropped by the encoding and counted in ``encoded.dropped_rows``).
    rng : numpy.random.Generator
        The only source of randomness.
    include_target : bool
        Release the schema target through its own channel (default) or drop it.
    target_eps : float, optional
        Budget of the target channel (default: the configuration's global eps).
    rows : array of int, optional
        Positions in ``encoded.codes`` of the records to release, e.g. those the configuration never saw
        (:func:`mdp_core.split_rows`); default every record.
    domain_rows : array of int, optional
        Positions in ``df`` of the rows whose values set the released numbers' decimals and the labels'
        type (a held-out release: the tuning rows, so that no released record sets them); default every row.

    Returns
    -------
    DataFrame
        One row per released record, in the encoded order; the schema's released columns (plus the target)
        in ``df``'s column order; labels as loaded, numeric columns as bin centres rounded to the column's
        decimals.
    """
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"df must be a pandas DataFrame, got {type(df).__name__}")
    _check_result(encoded, result)
    rng = check_rng(rng)
    if len(encoded.codes) + encoded.dropped_rows != len(df):
        raise DataError(
            f"encoded has {len(encoded.codes)} + {encoded.dropped_rows} dropped rows, df has {len(df)}: "
            "encode this table with discretize(df, schema)"
        )
    codes = encoded.codes if rows is None else encoded.codes.iloc[_positions(rows, len(encoded.codes))]
    released = result.mechanism.privatize(codes, rng)
    out = {c: released[c].to_numpy() for c in released.columns}
    target = encoded.schema.target
    if include_target and target is not None:
        eps_t = float(result.config.eps) if target_eps is None else check_eps(target_eps, "target_eps")

        P = target_channel(encoded, eps_t)
        out[target] = sample(P, codes[target].to_numpy(), rng)
    order = [c for c in df.columns if c in out] + [c for c in out if c not in df.columns]
    reference = df if domain_rows is None else df.iloc[_positions(domain_rows, len(df))]
    return pd.DataFrame({c: _decode_column(encoded, reference, c, out[c]) for c in order})


def _positions(rows: object, n: int) -> np.ndarray:
    pos = np.asarray(rows)
    if pos.ndim != 1 or not np.issubdtype(pos.dtype, np.integer):
        raise TypeError(f"rows must be a 1-D array of record positions, got {pos.dtype} of shape {pos.shape}")
    if pos.size and (pos.min() < 0 or pos.max() >= n or np.unique(pos).size != pos.size):
        raise DataError(f"rows must be distinct positions in 0..{n - 1}")
    return pos


@dataclass(frozen=True)
class ReleaseCheck:
    """What :func:`release_report` found; ``degenerate`` when a flag should stop a careless download.

    Attributes
    ----------
    rows_original, rows_released : int
        Rows of the loaded table and of the release (the difference had missing values).
    columns_released : tuple of str
    columns_excluded : tuple of str
        Columns of the original never released (outside the schema, or a dropped target).
    constant_columns : tuple of str
        Released columns with one value left although the original had several.
    min_budget_groups : tuple of str
        Groups (joined by " + ") whose budget is the grid's minimum: their output says almost nothing of the
        records (nearly random, or one value where the channel remaps).
    min_budget : float or None
        That minimum (the eps grid's first point).
    distinct_original, distinct_released : int
        Distinct rows over the released columns, before and after.
    rows_tuning : int
        Records that tuned the channels and are held back (a release of the held-out records only).
    unweighted_groups : tuple of str
        Those of ``min_budget_groups`` that the task model weighs 0 (``beta_k = 0``).
    """

    rows_original: int
    rows_released: int
    columns_released: tuple[str, ...]
    columns_excluded: tuple[str, ...]
    constant_columns: tuple[str, ...]
    min_budget_groups: tuple[str, ...]
    min_budget: float | None
    distinct_original: int
    distinct_released: int
    rows_tuning: int = 0
    unweighted_groups: tuple[str, ...] = ()

    @property
    def degenerate(self) -> bool:
        return bool(self.constant_columns or self.min_budget_groups or self.distinct_released <= 1)

    @property
    def messages(self) -> tuple[str, ...]:
        """Plain sentences, one per finding (empty when nothing needs saying)."""
        out = []
        if self.constant_columns:
            out.append(
                f"{len(self.constant_columns)} column(s) became constant: {listed(self.constant_columns)} "
                "(every released value is the same; the column carries no information)."
            )
        if self.min_budget_groups:
            out.append(
                f"{len(self.min_budget_groups)} group(s) got the smallest budget of the grid "
                f"(ε = {self.min_budget:g}): {listed(self.min_budget_groups)}. Their released values say "
                f"almost nothing about the records (nearly random, or one value where the channel remaps): "
                f"{self._why_least()}"
            )
        if self.distinct_released <= 1:
            out.append("Every released row is identical.")
        if self.rows_tuning:
            out.append(
                f"{self.rows_tuning} record(s) tuned the channels and are not released: only the "
                f"{self.rows_released} the tuning never saw are (the strict release)."
            )
        missing = self.rows_original - self.rows_released - self.rows_tuning
        if missing > 0:
            out.append(f"{missing} row(s) with a missing value are not released.")
        if self.columns_excluded:
            out.append(f"Never released: {listed(self.columns_excluded)}.")
        return tuple(out)

    def _why_least(self) -> str:
        """Why the budget split left these groups the least, as the task model's weights say."""
        unweighted, low = len(self.unweighted_groups), len(self.min_budget_groups)
        if unweighted == low:
            return "the task model gives them no weight."
        spent = "the budget split spends the total where the task gains most"
        if unweighted:
            return f"the task model gives {listed(self.unweighted_groups)} no weight, and {spent}."
        return f"{spent}, and it gains least from these."


def release_report(
    original: pd.DataFrame,
    privatised: pd.DataFrame,
    *,
    result: DepHDPResult | None = None,
    rows_tuning: int = 0,
) -> ReleaseCheck:
    """Flag degenerate output: constant columns, groups at the grid's minimum budget, distinct rows
    (``rows_tuning``: records held back because they tuned the channels)."""
    if not isinstance(original, pd.DataFrame) or not isinstance(privatised, pd.DataFrame):
        raise TypeError("original and privatised must be pandas DataFrames")
    unknown = [c for c in privatised.columns if c not in original.columns]
    if unknown:
        raise DataError(f"privatised has columns the original lacks: {unknown}")
    cols = [str(c) for c in privatised.columns]
    constant = tuple(
        c for c in cols if privatised[c].nunique(dropna=False) <= 1 and original[c].nunique(dropna=False) > 1
    )
    low: tuple[str, ...] = ()
    unweighted: tuple[str, ...] = ()
    lo = None
    if result is not None:
        lo = float(result.eps_grid[0])
        at_least = [
            (" + ".join(g), beta)
            for g, e, beta in zip(
                result.mechanism.groups, result.mechanism.eps, result.surrogate.betas, strict=True
            )
            if e <= lo * (1 + 1e-12)
        ]
        low = tuple(name for name, _ in at_least)
        unweighted = tuple(name for name, beta in at_least if beta == 0.0)
    return ReleaseCheck(
        rows_original=len(original),
        rows_released=len(privatised),
        columns_released=tuple(cols),
        columns_excluded=tuple(str(c) for c in original.columns if c not in privatised.columns),
        constant_columns=constant,
        min_budget_groups=low,
        min_budget=lo,
        distinct_original=len(original[cols].dropna().drop_duplicates()) if cols else 0,
        distinct_released=len(privatised.drop_duplicates()) if cols else 0,
        rows_tuning=int(rows_tuning),
        unweighted_groups=unweighted,
    )
