"""Geo page's results: the comparison table (its columns, the bound's headroom and gap, notes), the verdict
sentence under it, and the downloads of the shown mechanism (.npz and GeoJSON, cached in the store)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

import mdp_core.geo as cgeo
from mdp_core.geo import GeoComparison, GeoMechanism
from ui.geo import GeoConfig, cached_problem, method_labels
from ui.geo_bound import optimum_certificate
from ui.store import store

__all__ = [
    "TABLE_COLUMNS",
    "comparison_table",
    "geojson_bytes",
    "mechanism_npz",
    "verdict",
]


# ---------------------------------------------------------------------------------------------------- tables


#: How the page shows the comparison table's columns (units, digits, what a ratio means).
TABLE_COLUMNS = {
    "expected travel error (km)": st.column_config.NumberColumn(format="%.3f"),
    "vs EM": st.column_config.NumberColumn(format="%.3f", help="Expected travel error / EM's"),
    "at most % better possible": st.column_config.NumberColumn(
        format="%.1f", help="Share of this method's error some ε-mDP mechanism may save: 1 − bound / error"
    ),
    "gap to bound": st.column_config.NumberColumn(
        format="%.3f", help="Error / bound − 1 (0.084: 8.4 % above the certified lower bound)"
    ),
    "construction (s)": st.column_config.NumberColumn(format="%.2f"),
    "violation ratio": st.column_config.NumberColumn(format="%.2g"),
    "private (checked)": st.column_config.TextColumn(width="medium"),
}


def comparison_table(comps: dict[str, GeoComparison], bound: Any | None = None) -> pd.DataFrame:
    """One row per method: travel error, vs EM, the bound's headroom and gap, seconds, privacy check.

    With a bound B (``GeoBound``): "at most X % better possible" is ``1 - B / U`` and the gap ``U / B - 1``
    (private rows only: the bound holds for eps-mDP mechanisms). A tree variant worse than EM + remap on the
    same map and eps gets a note saying so.
    """
    labels = method_labels()
    utility = {key: c.utility_km[key] for key, c in comps.items()}
    em = utility.get("em")
    rows = []
    for key in labels:
        if key not in comps:
            continue
        comp, u = comps[key], utility[key]
        row: dict[str, object] = {
            "method": labels[key],
            "expected travel error (km)": u,
            "vs EM": u / em if em else np.nan,
        }
        private = _private(comp, key)
        if bound is not None:
            value = float(bound.value)
            ok = private and u > 0 and value > 0
            row["at most % better possible"] = 100.0 * max(0.0, 1.0 - value / u) if ok else np.nan
            row["gap to bound"] = u / value - 1.0 if ok else np.nan
        row["construction (s)"] = comp.mechanisms[key].seconds
        row["violation ratio"] = comp.violation_ratio[key]
        row["private (checked)"] = "yes" if private else "NO"
        remap = utility.get("em_remap")
        if key.startswith("tree") and remap is not None and u > remap:
            row["note"] = f"worse than EM + remap by {100 * (u / remap - 1):.1f} %"
        if key == "optimal":  # out of time, it is not the optimum: say how close it is
            row["note"] = _optimum_note(comp.mechanisms[key], u)
        rows.append(row)
    table = pd.DataFrame(rows)
    if "note" in table:  # next to the numbers it qualifies, not past the table's right edge
        table["note"] = table["note"].fillna("")
        checks = ["private (checked)", "violation ratio", "construction (s)"]
        table = table[[c for c in table.columns if c not in checks] + checks]
    return table


def _private(comp: GeoComparison, method: str) -> bool:
    """Whether the comparison's check found ``method`` eps-mDP (the bound holds for those rows only)."""
    return comp.max_excess[method] <= 1e-9


def verdict(comps: dict[str, GeoComparison], bound: Any | None) -> str:
    """In plain words: the private method shown (other than the exact optimum) with the least expected travel
    error, and how far it is from the best possible ("" without a bound or a private method)."""
    labels = method_labels()
    private = {k: c.utility_km[k] for k, c in comps.items() if k != "optimal" and _private(c, k)}
    if not private or bound is None or bound.value <= 0:
        return ""
    best = min(private, key=lambda k: private[k])
    better = 100 * max(1 - bound.value / private[best], 0.0)  # the table's "at most % better possible"
    if bound.exact:
        how_far = f"the best possible, the exact optimum's {bound.value:.3f} km, is {better:.1f} % less"
    else:  # the optimum lies between the bound and the best method
        how_far = f"at most {better:.1f} % less is possible (no ε-mDP mechanism errs less than "
        how_far += f"{bound.value:.3f} km)"
    return (
        f"Of the private methods shown, **{labels[best]}** has the least expected travel error "
        f"({private[best]:.3f} km): {how_far}."
    )


def _optimum_note(optimum: GeoMechanism, utility: float) -> str:
    """Nothing when the optimum is exact, else how far above the optimum its mechanism may be."""
    certificate = optimum_certificate(optimum)
    if certificate.exact:
        return ""
    if certificate.value <= 0:
        return "not closed in time: no certificate yet"
    return f"not closed in time: at most {100 * (utility / certificate.value - 1):.2f} % above the optimum"


# --------------------------------------------------------------------------------------------------- exports


def mechanism_npz(mech: GeoMechanism, config: GeoConfig) -> bytes:
    """The mechanism as .npz bytes (core ``save_mechanism``: arrays, CRS, origin and metadata), cached."""
    key = ("npz", config, round(float(mech.eps), 12), mech.method)
    return store().get_or_compute(key, lambda: _npz(mech, config))


def _npz(mech: GeoMechanism, config: GeoConfig) -> bytes:
    problem = cached_problem(config)
    with tempfile.TemporaryDirectory() as folder:
        path = cgeo.save_mechanism(
            mech, Path(folder) / "mechanism.npz", network=problem.network, grid=problem.grid, seed=config.seed
        )
        return Path(path).read_bytes()


def geojson_bytes(mech: GeoMechanism, config: GeoConfig) -> bytes:
    """GeoJSON (WGS84 points of targets and outputs + metadata, core ``export_geojson``), cached."""

    def build() -> bytes:
        problem = cached_problem(config)
        doc = cgeo.export_geojson(mech, problem.network, grid=problem.grid, seed=config.seed)
        return json.dumps(doc, separators=(",", ":")).encode()

    return store().get_or_compute(("geojson", config, round(float(mech.eps), 12), mech.method), build)
