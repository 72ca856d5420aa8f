"""Plain-text helpers shared by the messages of every subpackage."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["listed", "share"]


def listed(names: Iterable[object], limit: int = 12) -> str:
    """``"a, b, c"``, or the first ``limit`` names and ``"and N more"``: a 300-column upload must not fill
    a warning with 270 names."""
    items = [str(n) for n in names]
    if len(items) <= limit:
        return ", ".join(items)
    return f"{', '.join(items[:limit])} and {len(items) - limit} more"


def share(p: float) -> str:
    """A probability as a percentage to one decimal that never rounds to a certainty it is not: ``"> 99.9 %"``
    for 0.9999999, ``"< 0.1 %"`` for 1e-6 (audit: "a 50 % guess becomes at most 100.0%" at eps 20)."""
    if 0.999 < p < 1.0:
        return "> 99.9 %"
    if 0.0 < p < 0.001:
        return "< 0.1 %"
    return f"{100.0 * p:.1f} %"
