"""User text in a real Chromium (security audit): a CSV named like a Markdown image, with such a column, is
shown literally (the project's bold around it kept), and the browser requests nothing from another origin."""

from __future__ import annotations

import pytest

from tests.browser.test_pages import _origin, _settle
from ui.markdown import JOINER

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.xdist_group("browser")]

EVIL_FILE = "![f](https:evil.example) **b** $x$ :red[r].csv"
EVIL_COL = "![c](http://evil.example/c.png)"
CSV = "\n".join([f"{EVIL_COL},a*b_c,target", *(f"v{i % 4},{i % 7},{i % 2}" for i in range(60))]) + "\n"


def test_an_uploaded_file_and_column_name_show_literally_and_fetch_nothing(server_url: str, chromium) -> None:
    own = _origin(server_url)
    requests: list[str] = []
    context = chromium.new_context(viewport={"width": 1400, "height": 1600})
    page = context.new_page()
    page.on("request", lambda r: requests.append(r.url))
    try:
        page.goto(f"{server_url}/leakage", timeout=120_000)
        page.locator("[data-testid=stMainBlockContainer] h1").first.wait_for(
            state="attached", timeout=180_000
        )
        _settle(page, 180_000)
        sidebar = page.locator("[data-testid=stSidebar]")
        sidebar.locator("[data-testid=stSelectbox]").first.click()
        page.get_by_role("option", name="Upload CSV/TSV…").click()
        _settle(page, 120_000)
        page.locator("input[type=file]").first.set_input_files(
            {"name": EVIL_FILE, "mimeType": "text/csv", "buffer": CSV.encode()}
        )
        _settle(page, 180_000)
        loaded = sidebar.locator("[data-testid=stCaptionContainer]", has_text="Loaded")
        bold = loaded.locator("strong").first.inner_text()
        assert bold.replace(JOINER, "") == EVIL_FILE  # literal (an invisible joiner breaks "https:"), bold
        main = page.locator("[data-testid=stMainBlockContainer]").inner_text().replace(JOINER, "")
        assert EVIL_COL in main and "a*b_c" in main
        links = page.evaluate(
            "() => Array.from(document.querySelectorAll('img[src], a[href]'))"
            ".map(e => e.getAttribute('src') || e.getAttribute('href')).filter(u => /evil/.test(u))"
        )
        assert not links, links
        assert page.locator(".katex, [data-testid=stException]").count() == 0
    finally:
        context.close()
    outside = sorted({u for u in requests if _origin(u) not in (None, own)})
    assert not outside, f"requests to other origins than {server_url}: {outside}"
    assert requests, "no request recorded: the recorder is not attached"
