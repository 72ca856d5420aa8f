"""Plain-text helpers shared by the messages of every subpackage."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["listed"]


def listed(names: Iterable[object], limit: int = 12) -> str:
    """``"a, b, c"``, or the first ``limit`` names and ``"and N more"``: a 300-column upload must not fill
    a warning with 270 names."""
    items = [str(n) for n in names]
    if len(items) <= limit:
        return ", ".join(items)
    return f"{', '.join(items[:limit])} and {len(items) - limit} more"
