"""Every page of `streamlit run app.py` in a real headless Chromium: renders without an exception while its
main controls are used, and never makes a request to another origin than the server's own.

Every request (``page.on("request")``, including web sockets and workers' fetches) is recorded from the first
navigation on; ``data:``/``blob:``/``about:`` URLs never leave the browser and are not requests to an origin.
"""

from __future__ import annotations

import ast
import contextlib
from pathlib import Path
from urllib.parse import urlsplit

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.xdist_group("browser")]

IDLE = "[data-testid=stApp][data-test-script-state=notRunning][data-test-connection-state=CONNECTED]"
# True once ten frames in a row came within 200 ms of each other: the browser has drawn what arrived (a
# deck.gl map's first frame takes seconds in software WebGL, longer still on a loaded CI machine).
CALM_FRAMES = """() => {
  const now = performance.now(), w = window;
  w.__calm = w.__lastFrame !== undefined && now - w.__lastFrame < 200 ? (w.__calm || 0) + 1 : 0;
  w.__lastFrame = now;
  return w.__calm >= 10;
}"""
ACTION_MS = 120_000  # a control may wait this long to be visible, enabled and stable
LOCAL_SCHEMES = {"data", "blob", "about", "chrome", "chrome-extension"}
ROOT = Path(__file__).resolve().parents[2]


def app_url_paths() -> list[str]:
    """The URL path of every page registered in app.py ("" for the default page)."""
    tree = ast.parse((ROOT / "app.py").read_text(encoding="utf-8"))
    paths: list[str] = []
    for node in ast.walk(tree):
        is_page = isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
        if not (is_page and node.func.attr == "Page"):
            continue
        if not (node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            continue
        kw = {k.arg: k.value for k in node.keywords}
        default = kw.get("default")
        if isinstance(default, ast.Constant) and default.value is True:
            path = ""
        elif isinstance(kw.get("url_path"), ast.Constant):
            path = str(kw["url_path"].value)
        else:
            path = Path(node.args[0].value).stem
        if path not in paths:
            paths.append(path)
    return paths


def _origin(url: str) -> tuple[str, str] | None:
    """(host, port) of a URL that goes over the network; None for in-browser URLs."""
    parts = urlsplit(url)
    if parts.scheme in LOCAL_SCHEMES:
        return None
    default = {"http": 80, "ws": 80, "https": 443, "wss": 443}.get(parts.scheme, 0)
    return (parts.hostname or "", str(parts.port or default))


def _settle(page, timeout_ms: int = 120_000) -> None:
    """Wait for the rerun a control started (if any) to finish."""
    with contextlib.suppress(Exception):
        page.wait_for_selector("[data-testid=stApp][data-test-script-state=running]", timeout=1_500)
    page.wait_for_selector(IDLE, timeout=timeout_ms)
    page.wait_for_function(CALM_FRAMES, polling="raf", timeout=timeout_ms)
    page.wait_for_timeout(300)  # late requests (images, fonts, tiles) of the freshly drawn elements


def _app_state(page) -> str:
    """The app's script and connection state, as its root element shows them."""
    app = page.locator("[data-testid=stApp]")
    script, connection = (app.get_attribute(f"data-test-{k}-state") for k in ("script", "connection"))
    return f"script {script}, connection {connection}"


def _use_main_controls(page) -> list[str]:
    """Use the page's main controls as a user would: a slider, a select box, a toggle, a map click."""
    done: list[str] = []
    main = page.locator("[data-testid=stMain]")
    slider = main.locator("[role=slider]")
    if slider.count():
        slider.first.focus(timeout=ACTION_MS)
        page.keyboard.press("ArrowRight")
        page.keyboard.press("ArrowRight")
        _settle(page)
        done.append("slider +2 steps")
    box = main.locator("[data-testid=stSelectbox]")
    if box.count():
        box.first.click(timeout=ACTION_MS)
        options = page.locator("[role=option]")
        with contextlib.suppress(Exception):
            options.first.wait_for(timeout=5_000)
        if options.count() > 1:
            options.nth(1).click(timeout=ACTION_MS)
            _settle(page)
            done.append("select box: second option")
        else:
            page.keyboard.press("Escape")
    toggle = main.locator("[data-testid=stCheckbox] label")
    if toggle.count():
        toggle.first.click(timeout=ACTION_MS)
        _settle(page)
        done.append("first toggle")
    canvas = main.locator("[data-testid=stDeckGlJsonChart] canvas")
    if canvas.count():
        box_ = canvas.first.bounding_box()
        if box_:
            page.mouse.click(box_["x"] + box_["width"] / 2, box_["y"] + box_["height"] / 2)
            _settle(page)
            done.append("map click")
    return done


@pytest.mark.parametrize("path", app_url_paths())
def test_page_loads_and_reacts_without_exception_or_outside_request(
    server_url: str, chromium, path: str
) -> None:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    own = _origin(server_url)
    requests: list[str] = []
    context = chromium.new_context(viewport={"width": 1400, "height": 2000})
    page = context.new_page()
    page.on("request", lambda r: requests.append(r.url))
    page.on("websocket", lambda ws: requests.append(ws.url))
    try:
        page.goto(f"{server_url}/{path}", timeout=120_000)
        title = page.locator("[data-testid=stMainBlockContainer] h1").first
        title.wait_for(state="attached", timeout=180_000)
        _settle(page, 180_000)
        exceptions = page.locator("[data-testid=stException]")
        assert exceptions.count() == 0, f"on load: {exceptions.first.inner_text()[:800]}"
        try:
            done = _use_main_controls(page)
        except PlaywrightTimeout as exc:  # say what the app was doing, not only what the control was
            raise AssertionError(f"a control did not respond ({_app_state(page)}): {exc}") from exc
        assert exceptions.count() == 0, f"after {done}: {exceptions.first.inner_text()[:800]}"
    finally:
        context.close()
    outside = sorted({u for u in requests if _origin(u) not in (None, own)})
    assert not outside, f"requests to other origins than {server_url}: {outside}"
    assert requests, "no request recorded: the recorder is not attached"


def test_origin_of_urls() -> None:
    assert _origin("http://127.0.0.1:8501/static/x.js") == ("127.0.0.1", "8501")
    assert _origin("ws://127.0.0.1:8501/_stcore/stream") == ("127.0.0.1", "8501")
    assert _origin("https://basemaps.cartocdn.com/gl/positron.json") == ("basemaps.cartocdn.com", "443")
    assert _origin("data:image/png;base64,AAAA") is None
    assert _origin("blob:http://127.0.0.1:8501/1234") is None
