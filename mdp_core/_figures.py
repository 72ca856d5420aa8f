"""Shared figure settings of the report and the pages (plotly axis dictionaries and a labelled line; no plotly
import needed)."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["labelled_vline", "log_axis"]

_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def _round_label(v: float, scientific: bool) -> str:
    """``0.1``, ``20``; on wide axes ``10⁻⁸``, ``5·10⁻⁸``, ``1.1·10⁵`` (one notation per axis)."""
    if not scientific or 1.0 <= v < 1e3:
        return f"{v:g}"
    mantissa, exponent = f"{v:.1e}".split("e")  # two digits: the rounded ends of a narrow axis have two
    mantissa = mantissa.rstrip("0").rstrip(".")
    power = "10" + str(int(exponent)).translate(_SUPERSCRIPT)
    return power if mantissa == "1" else f"{mantissa}·{power}"


def log_axis(lo: float, hi: float, *, max_ticks: int = 8) -> dict[str, object]:
    """Plotly axis settings for a log axis over ``[lo, hi]`` labelled by decades and a few round values.

    More than three decades: powers of ten only (every other one when there are too many); one to three
    decades: 1, 2, 5 per decade; less than one decade: 1, 2, 3, 5 per decade (and the rounded ends if that
    leaves fewer than two ticks). Never plotly's default minor labels ("2 3 4 ... 9 1 2", where "2" reads
    as 0.2 at one end and 20 at the other).
    """
    lo, hi = float(min(lo, hi)), float(max(lo, hi))
    if not (np.isfinite(lo) and np.isfinite(hi) and lo > 0):
        return {"type": "log"}
    hi = max(hi, lo * 1.0001)
    first, last = int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi)))
    span = np.log10(hi / lo)
    steps = (1.0,) if span > 3 else (1.0, 2.0, 5.0) if span > 1 else (1.0, 2.0, 3.0, 5.0)
    ticks = [m * 10.0**k for k in range(first, last + 1) for m in steps]
    ticks = [t for t in ticks if lo * (1 - 1e-9) <= t <= hi * (1 + 1e-9)]
    while len(ticks) > max_ticks:
        ticks = ticks[::2]
    if len(ticks) < 2:
        ticks = sorted({float(f"{lo:.2g}"), *ticks, float(f"{hi:.2g}")})
    scientific = min(ticks) < 1e-3 or max(ticks) >= 1e5
    return {"type": "log", "tickvals": ticks, "ticktext": [_round_label(t, scientific) for t in ticks]}


def labelled_vline(
    fig: Any, x: float, text: str, *, log: bool, line: dict | None = None, **label: Any
) -> None:
    """A vertical line at ``x`` on plotly figure ``fig`` (``line``: its style) with ``text`` at the plot's top
    edge (``label``: annotation settings over left / bottom anchors). Shapes take data coordinates but
    annotations on a log axis take log10 ones (plotly.py #2580): ``add_vline``'s own label at x = 48 landed at
    10^48 and stretched the axis to it, hence the label placed here (``log``: the x axis is logarithmic)."""
    fig.add_vline(x=x, line=line or {})
    fig.add_annotation(
        **{"xanchor": "left", "yanchor": "bottom", **label},
        x=float(np.log10(x)) if log else x,
        xref="x",
        y=1.0,
        yref="paper",
        text=text,
        showarrow=False,
    )
