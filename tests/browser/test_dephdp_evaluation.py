"""The DepHDP held-out evaluation in a real browser: on Adult it runs for tens of seconds in the background
(walk seed 5101 found it holding one rerun for 91 s). The page must answer at once, show the job's progress
and a stop button, and draw the table by itself when the job lands (the poll's own rerun: AppTest never fires
a fragment's timer, so only a browser checks it)."""

from __future__ import annotations

import pytest

from tests.browser.test_pages import IDLE, _origin, _settle

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.xdist_group("browser")]


def test_held_out_evaluation_runs_in_the_background_and_lands_by_itself(server_url: str, chromium) -> None:
    own = _origin(server_url)
    requests: list[str] = []
    context = chromium.new_context(viewport={"width": 1400, "height": 2000})
    page = context.new_page()
    page.on("request", lambda r: requests.append(r.url))
    try:
        page.goto(f"{server_url}/dephdp", timeout=120_000)
        _settle(page, 180_000)
        page.locator("[data-testid=stSidebar] [data-testid=stSelectbox]").first.click()
        page.locator("[role=option]", has_text="Adult census").first.click()
        _settle(page, 180_000)
        main = page.locator("[data-testid=stMain]")
        main.get_by_role("button", name="Compute group profiles").click()
        toggle = main.get_by_text("Evaluate on the held-out test split")
        toggle.wait_for(timeout=300_000)  # the profiles land in the background too (10-30 s on Adult)
        _settle(page, 300_000)
        toggle.click()
        _settle(page)
        main.get_by_role("button", name="Run the held-out evaluation").click()
        # the run that started it ends while the job runs: the page is idle with its progress and stop button
        main.get_by_text("Held-out evaluation:").first.wait_for(timeout=60_000)
        # the click's run re-runs the page after showing the progress: the run that polls draws the stop
        # button (an idle moment between the two runs had no stop button yet: CI under load, stop 55)
        main.get_by_role("button", name="Stop the evaluation").wait_for(timeout=60_000)
        page.wait_for_selector(IDLE, timeout=60_000)
        assert main.get_by_role("button", name="Stop the evaluation").count() == 1
        tables = main.locator("[data-testid=stDataFrame]")
        assert tables.count() == 1  # the groups table only
        tables.nth(1).wait_for(timeout=300_000)  # the evaluation's table, drawn with no further click
        assert main.get_by_role("button", name="Stop the evaluation").count() == 0
        exceptions = page.locator("[data-testid=stException]")
        assert exceptions.count() == 0, exceptions.first.inner_text()[:800]
    finally:
        context.close()
    outside = sorted({u for u in requests if _origin(u) not in (None, own)})
    assert not outside, f"requests to other origins than {server_url}: {outside}"
