"""Overview: what mDP Lab is for and how the pages fit together."""

import streamlit as st

from ui.markdown import md
from ui.state import get_state

st.title("mDP Lab")
st.markdown(
    """
Decide **how to perturb personal data** under *metric differential privacy* (mDP) and local DP, and see
what each choice costs. Every mechanism the lab shows is checked against its privacy guarantee, never
assumed: no probability ratio between two records may exceed e^(ε·d) by more than 10⁻⁹.
"""
)
state = get_state()
if state.frame is not None:
    st.success(
        f"Working on **{md(state.dataset)}** ({len(state.frame):,} rows × {state.frame.shape[1]} columns). "
        "Change it in the sidebar: embedded samples or your own CSV/TSV."
    )

st.subheader("Workflow")
steps = [
    (
        "Data & dependencies",
        "data.py",
        "Check kinds and bins of each attribute; see which attributes depend on "
        "each other (normalised mutual information) and the groups that a threshold τ_group induces.",
    ),
    (
        "Mechanism playground",
        "mechanisms.py",
        "One attribute or group: exponential mechanism, Bayesian remapping "
        "and the LP-optimal mechanism side by side, for a task loss and a budget ε.",
    ),
    (
        "Mechanism selection (DepHDP)",
        "dephdp.py",
        "Per group: distance-based noise (DPN) or an optimised "
        "mechanism (OPT)? The budget split across groups, loss–budget curves and the sandwich bound.",
    ),
    (
        "Correlated leakage",
        "leakage.py",
        "How much releasing one attribute leaks about another (exact CPL* and "
        "the Dependency Triad), and per-attribute budgets under a total leakage target.",
    ),
    (
        "Geo mechanisms",
        "geo.py",
        "Location privacy over a real city's roads (embedded, or your own OpenStreetMap extract): "
        "tree-extended optimal mechanisms painted as heatmaps, against the exponential mechanism, remapping "
        "and LPs, each with how far it is from the best possible (a certified bound, or the exact optimum).",
    ),
    (
        "Noise shape",
        "noise.py",
        "For one numeric release under (ε, δ)-DP: the generalized Gaussian shape with the smallest error.",
    ),
    (
        "Decide & release",
        "release.py",
        "The smallest ε that meets a utility target, said in plain words; the whole table released with "
        "its audit record and a report; named scenarios side by side.",
    ),
    (
        "Sweep & frontier",
        "sweep.py",
        "The privacy–utility frontier over budgets, thresholds, tasks and methods, with repetitions, on "
        "this machine or a Dask cluster.",
    ),
]
for i, (title, page, text) in enumerate(steps, start=1):
    st.page_link(f"views/{page}", label=f"{i}. {title}")
    st.caption(text)

st.divider()
st.caption(
    "Methods: DepHDP (dependency-aware heterogeneous mechanism design), the Dependency Triad for "
    "correlation-induced leakage, tree-based extension of geo mechanisms, and the generalized Gaussian "
    "mechanism. Map data © OpenStreetMap contributors (ODbL); UCI datasets CC BY 4.0."
)
