"""Generalized Gaussian mechanism (seed 003): exact 1-D scales, one selection, the 50 x 100 heatmap.

Rows: the 1-D shape comparison of 003 Sec. 6.1 at Delta = 3 (selected p, E|Z|^2, improvement, seconds per
selection) and the (eps, delta) heatmap timing (eps in [0.1, 10], delta in [1e-8, 0.1], log grids) with the
counts 003 reports (cells selecting p = 1, improvement > 5 % / > 10 %, largest improvement and where).
Then the noise page (AppTest) where the walks of stop 53 found 12-27 s runs: the 50 x 100 heatmap at the
largest shape 20, now a background job: the run that starts it, when it lands, and a rerun after a
sensitivity change (the heatmap is reused: it does not depend on the sensitivity).
"""

from __future__ import annotations

import time

import numpy as np

from bench._apptest import open_app, timed, until
from mdp_core import ggm_scale, select_shape, shape_heatmap

SETTINGS = [(1.0, 0.01), (0.25, 0.01), (0.1, 0.1), (0.5, 0.05), (2.0, 0.001), (4.0, 1e-6)]


def _selection_rows(settings: list[tuple[float, float]]) -> list[dict]:
    rows = []
    for eps, delta in settings:
        start = time.perf_counter()
        choice = select_shape(eps, delta, 3.0)
        seconds = time.perf_counter() - start
        rows.append(
            {
                "case": f"select eps={eps:g} delta={delta:g}",
                "p": choice.p,
                "E|Z|^2": choice.second_moment,
                "classical_p": choice.classical_p,
                "classical E|Z|^2": choice.classical_second_moment,
                "improvement_%": 100 * choice.improvement,
                "seconds": seconds,
            }
        )
    return rows


def _scale_row() -> dict:
    ps = [1.0, 1.0 + 1e-9, 1.5, 2.0, 5.0, 50.0, 1000.0]
    start = time.perf_counter()
    for p in ps:
        for delta in (1e-12, 1e-6, 0.01):
            ggm_scale(p, 1.0, delta, 3.0)
    per = (time.perf_counter() - start) / (3 * len(ps))
    return {"case": "one ggm_scale (mean over p, delta)", "seconds": per}


def _heatmap_row(n_delta: int, n_eps: int) -> dict:
    eps = np.geomspace(0.1, 10.0, n_eps)
    delta = np.geomspace(1e-8, 0.1, n_delta)
    start = time.perf_counter()
    hm = shape_heatmap(eps, delta, 3.0)
    seconds = time.perf_counter() - start
    i, j = np.unravel_index(np.argmax(hm.improvement), hm.p.shape)
    return {
        "case": f"heatmap {n_delta} x {n_eps}",
        "p": float(hm.p[i, j]),
        "improvement_%": 100 * float(hm.improvement[i, j]),
        "at_eps": float(eps[j]),
        "at_delta": float(delta[i]),
        "cells_p1": int(np.sum(hm.p == 1.0)),
        "cells_gt5%": int(np.sum(hm.improvement > 0.05)),
        "cells_gt10%": int(np.sum(hm.improvement > 0.10)),
        "seconds": seconds,
    }


def run(quick: bool = False) -> list[dict]:
    """Selections at the 003 settings, a scale timing and the heatmap (10 x 20 when ``quick``)."""
    rows = _selection_rows(SETTINGS[:2] if quick else SETTINGS)
    rows.append(_scale_row())
    rows.append(_heatmap_row(10, 20) if quick else _heatmap_row(50, 100))
    rows.extend(_page_rows())
    return rows


def _page_rows() -> list[dict]:
    from ui import noise

    at = open_app()
    at.switch_page("views/noise.py").run()
    at.selectbox(key="ggm_grid").set_value("50 × 100 (fine, as in the paper)").run()
    at.slider(key="ggm_pmax").set_value(20.0).run()

    start = timed(at, lambda a: a.toggle(key="ggm_heatmap").set_value(True))
    lands = start + until(lambda: noise.stored_heatmap(50, 100, 3.0, 20.0) is not None)[0]
    at.run()
    sens = timed(at, lambda a: a.number_input(key="ggm_sens").set_value(0.5))
    case = "noise page, heatmap 50 x 100, largest shape 20"
    return [
        {"case": f"{case}: the run that starts it (toggle)", "seconds": start},
        {"case": f"{case}: it lands (background, from the toggle)", "seconds": lands},
        {"case": f"{case}: a sensitivity change, heatmap on (reused)", "seconds": sens},
    ]
