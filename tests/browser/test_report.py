"""The HTML report opened offline from disk in a real headless Chromium: every figure rendered, the audit
record readable from the page, and no request to any other origin (everything is inlined)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import mdp_core as core
from mdp_core.release import Decision, Scenario, UtilityTarget, build_report, dataset_fingerprint
from mdp_core.sweep import EpsChoice

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.xdist_group("browser")]

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
FAST = {"grid_points": 8, "opt_max_domain": 8, "calibration_pairs": 200, "max_contexts": 20}


def _table(n: int = 120, seed: int = 7) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 4, n)
    return pd.DataFrame(
        {
            "a": a,
            "a2": 2 * a + rng.integers(0, 2, n),
            "dose": np.round(rng.uniform(10.0, 25.0, n), 3),
            "colour": rng.choice(["red", "green", "blue"], n),
            "target": (a + rng.integers(0, 2, n) >= 2).astype(np.int64),
        }
    )


def _decision() -> Decision:
    rows = [
        {"method": m, "eps": e, "n": 5, "utility_mean": 0.6 + 0.02 * e, "utility_ci_lo": 0.55 + 0.02 * e,
         "utility_ci_hi": 0.65 + 0.02 * e}
        for m in ("DepHDP", "SPL+DPN", "SPL+RMP", "ALC+DPN", "ALC+RMP") for e in (0.5, 1.0, 2.0, 5.0)
    ]  # fmt: skip
    choice = EpsChoice(2.0, 0.64, (0.6, 0.68), True, "eps = 2 is the smallest budget", {"method": "DepHDP"})
    return Decision(choice, pd.DataFrame(rows), UtilityTarget(), "accuracy", 0.7, 1.0, "constructed")


@pytest.fixture(scope="module")
def report_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    df = _table()
    scenario = Scenario(
        "browser", "constructed.csv", core.DepHDPConfig(eps=2.0, **FAST), dataset_fingerprint(df),
        target="target", bins=(("dose", 4),),
    )  # fmt: skip
    path = tmp_path_factory.mktemp("report") / "report.html"
    path.write_text(build_report(scenario, data=df, decision=_decision(), repetitions=3), encoding="utf-8")
    return path


def test_report_renders_offline_with_no_outside_request(report_file: Path) -> None:
    if not CHROMIUM.exists():
        pytest.skip("Chromium is not installed at /usr/bin/chromium (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    url = report_file.resolve().as_uri()
    requests: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 2000})
            page.on("request", lambda r: requests.append(r.url))
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(url, wait_until="load")
            page.wait_for_function("document.querySelectorAll('[data-figure] .main-svg').length > 0")
            figures = page.eval_on_selector_all("[data-figure]", "els => els.map(e => e.dataset.figure)")
            rendered = page.eval_on_selector_all(
                "[data-figure]", "els => els.map(e => e.querySelectorAll('.main-svg').length > 0)"
            )
            traces = page.eval_on_selector_all(
                "[data-figure]",
                "els => els.map(e => e.querySelectorAll('.trace, .bars .point, .scatterlayer path').length)",
            )
            audit = page.evaluate("JSON.parse(document.getElementById('audit-record').textContent)")
            has_plotly = page.evaluate("typeof window.Plotly === 'object' && !!window.Plotly.newPlot")
        finally:
            browser.close()
    assert figures == ["frontier", "dependencies", "budget", "utility", "information", "leakage"]
    assert all(rendered), dict(zip(figures, rendered, strict=True))
    assert all(n > 0 for n in traces), dict(zip(figures, traces, strict=True))
    assert has_plotly and not errors
    assert audit["fingerprint"]["value"] == dataset_fingerprint(_table())
    outside = [r for r in requests if not (r == url or r.startswith(("data:", "blob:", "about:")))]
    assert not outside, outside
