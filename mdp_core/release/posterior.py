"""What a budget means in words: the largest posterior an attacker can reach from one released record.

For an eps-mDP mechanism M and two records x, x' at distance d, every output y satisfies
``P[M(x) = y] <= e^(eps d) P[M(x') = y]`` (000 Def. 1, metric DP). An attacker who must tell x from x' and
holds the prior ``p = P(x)`` (``1 - p = P(x')``) updates by Bayes' rule to

    post(x | y) = p P[y|x] / (p P[y|x] + (1 - p) P[y|x']) <= p e^(eps d) / (p e^(eps d) + 1 - p),

so the prior odds ``p / (1 - p)`` are multiplied by at most ``e^(eps d)``; the bound is attained by any
output whose likelihood ratio is exactly ``e^(eps d)`` (e.g. randomised response on two values).
"""

from __future__ import annotations

import math
import sys

from mdp_core._validation import check_eps
from mdp_core.errors import DataError

__all__ = ["budget_sentence", "odds_factor", "posterior_bound", "posterior_table", "whole_record_note"]

#: ln of the largest float64: e^t overflows above it.
_LN_MAX = math.log(sys.float_info.max)

#: Priors of the plain-words table on every page (1 %, 10 %, 50 %).
PRIORS: tuple[float, ...] = (0.01, 0.10, 0.50)


def _check_prior(prior: object) -> float:
    try:
        p = float(prior)  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        raise TypeError(f"prior must be a number in [0, 1], got {type(prior).__name__}") from exc
    if not 0.0 <= p <= 1.0:
        raise DataError(f"prior must be a probability in [0, 1], got {prior!r}")
    return p


def _check_distance(distance: object) -> float:
    try:
        d = float(distance)  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        raise TypeError(f"distance must be a number >= 0, got {type(distance).__name__}") from exc
    if not (d >= 0.0 and math.isfinite(d)):
        raise DataError(f"distance must be a finite number >= 0, got {distance!r}")
    return d


def odds_factor(eps: float, distance: float = 1.0) -> float:
    """``e^(eps d)``: the most an attacker's odds between two records ``d`` apart can move (unitless);
    ``math.inf`` beyond float64's range (``eps d > 709.78``: :func:`budget_sentence` words it exactly)."""
    t = check_eps(eps) * _check_distance(distance)
    return math.exp(t) if t <= _LN_MAX else math.inf


def posterior_bound(prior: float, eps: float, distance: float = 1.0) -> float:
    """Largest posterior of x versus x' (distance ``d``) after one output of an eps-mDP mechanism.

    Parameters
    ----------
    prior : float
        The attacker's prior ``p = P(x)`` against the alternative x', in [0, 1].
    eps : float
        Budget of the mechanism (per unit of the record metric).
    distance : float
        ``d(x, x')`` in the metric's units (1 = the largest distance of one attribute).

    Returns
    -------
    float
        ``p e^(eps d) / (p e^(eps d) + 1 - p)``, computed as ``1 / (1 + (1 - p) / p e^(-eps d))`` so that
        large ``eps d`` does not overflow; 0 when p = 0 and 1 when p = 1.
    """
    p = _check_prior(prior)
    t = check_eps(eps) * _check_distance(distance)
    if p == 0.0 or p == 1.0:
        return p
    return 1.0 / (1.0 + (1.0 - p) / p * math.exp(-t))


def posterior_table(eps: float, distance: float = 1.0, priors: tuple[float, ...] = PRIORS) -> list[dict]:
    """Rows ``{"prior", "posterior"}`` of :func:`posterior_bound` for the page's small table."""
    return [{"prior": float(p), "posterior": posterior_bound(p, eps, distance)} for p in priors]


def budget_sentence(eps: float, distance: float = 1.0, *, unit: str = "") -> str:
    """The budget in one sentence, the same on every page.

    ``"Two records 1 apart: an attacker's odds between them move by at most a factor of 2.72 (e^(1 x 1))."``
    """
    e, d = check_eps(eps), _check_distance(distance)
    return (
        f"Two records {d:g}{unit} apart: whatever is released, an attacker's odds between them move by at "
        f"most a factor of {_factor_text(e * d)} (e^(ε·d) = e^({e:.4g} × {d:.4g}))."
    )


def whole_record_note(features: float, record: float, *, at_most: bool = False) -> str:
    """What precedes the budget sentence of a release whose target column has its own channel: the record's
    whole budget ``record`` (``at_most``: an upper bound) above the features' ``features`` ("" when equal);
    the page and the report say it alike."""
    if record <= features * (1 + 1e-12):
        return ""
    bound = "at most " if at_most else ""
    return (
        f"With the target column released too (its own channel), a record's whole budget is {bound}"
        f"{record:.4g}; the feature columns alone use at most ε = {features:g}. "
    )


def _factor_text(log_factor: float) -> str:
    """The factor ``e^log_factor`` in words a reader takes in at once: 2.72, about 163,000, about 2.4 ×
    10^12 (audit: the plain-words answer said "a factor 1.63e+05"); worked out from the exponent, so that
    e^1000 (past float64) reads "about 2 × 10^434" instead of overflowing."""
    if log_factor < math.log(999.5):  # (999.6 to 3 figures is 1e+03)
        return f"{math.exp(log_factor):.3g}"
    log10 = log_factor / math.log(10.0)
    if not log10 < 1e15:  # a count of digits beyond words (inf: eps d itself overflowed)
        return f"about 10^({log10:.3g})" if math.isfinite(log10) else "more than 10^(10^308)"
    digits = math.floor(log10)
    if digits < 9:
        return f"about {round(math.exp(log_factor), 2 - digits):,.0f}"
    return f"about {10.0 ** (log10 - digits):.2g} × 10^{digits}"
