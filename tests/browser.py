"""Open an HTML page of ``tardy report`` in headless Chromium and say what a reader would see.

``check_page`` loads the file through Playwright with Debian's ``chromium`` (never Playwright's
own browser download: `make chromium`, a dependency of `make test`, installs it), blocks and
records every request beyond the file itself, collects script errors, waits until each
``.tardy-chart`` holds a drawn plotly graph, counts the points of its traces and saves a
full-page screenshot.
"""

from __future__ import annotations

import contextlib
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from playwright.sync_api import ConsoleMessage, Route, sync_playwright
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import TimeoutError as PlaywrightTimeout

VIEWPORT = {"width": 1280, "height": 900}

# Per .tardy-chart: is its plotly graph drawn, and how many points its traces hold (the
# longest of a trace's data arrays, summed over the traces of ``gd.data``).
CHARTS_JS = """
() => Array.from(document.querySelectorAll('.tardy-chart')).map((chart) => {
  const gd = chart.querySelector('.js-plotly-plot');
  const traces = gd && Array.isArray(gd.data) ? gd.data : [];
  const length = (v) => (v && typeof v !== 'string' && typeof v.length === 'number') ? v.length : 0;
  const points = traces.map((tr) => Math.max(0, ...['x', 'y', 'z', 'values', 'labels', 'r']
    .map((key) => length(tr[key]))));
  return {
    name: chart.dataset.chart || '',
    empty: chart.dataset.empty === 'true',
    drawn: Boolean(gd && gd._fullLayout),
    points: points.reduce((a, b) => a + b, 0),
    withData: points.some((n) => n > 0),
  };
})
"""
# Ready: every chart drawn, with a trace that has a point unless it says "nothing yet".
READY_JS = f"() => ({CHARTS_JS})().every((c) => c.drawn && (c.withData || c.empty))"


class ChromiumMissing(RuntimeError):
    """Debian's chromium is not on PATH."""


@dataclass
class PageCheck:
    charts: list[str]  # data-chart names, in page order
    points: dict[str, int]  # per chart: the points of its traces
    empty: list[str]  # charts that say "nothing yet" (data-empty="true")
    not_drawn: list[str]  # charts with no drawn graph (or no data although not empty)
    errors: list[str]  # uncaught page errors and console errors
    requests: list[str]  # requests beyond the file itself (blocked)
    text: str  # the page's visible text
    screenshot: Path
    title: str = ""
    sizes: dict[str, int] = field(default_factory=dict)  # per chart: its height in pixels


def chromium() -> str:
    path = shutil.which("chromium")
    if path is None:
        raise ChromiumMissing(
            "chromium is not installed (the browser tests use Debian's package, not "
            "Playwright's download): run `make chromium` (a dependency of `make test`), i.e. "
            "`apt-get install chromium`"
        )
    return path


def check_page(
    path: Path, screenshot: Path, timeout_ms: int = 30_000, draw_timeout_ms: int | None = None
) -> PageCheck:
    """Load ``path`` offline (up to ``timeout_ms``), wait for its charts (up to
    ``draw_timeout_ms``, default ``timeout_ms``), screenshot it whole.

    A chart that never gets drawn is reported in ``not_drawn`` (not raised), so that a test
    sees it next to the page's errors."""
    executable = chromium()
    url = path.resolve().as_uri()
    errors: list[str] = []
    requests: list[str] = []

    def route(request_route: Route) -> None:
        requested = request_route.request.url
        if requested == url or requested.startswith(("data:", "about:")):
            request_route.continue_()
        else:
            requests.append(requested)
            request_route.abort()

    def console(message: ConsoleMessage) -> None:
        if message.type == "error":
            errors.append(f"console: {message.text}")

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable)
        try:
            page = browser.new_page(viewport=VIEWPORT)
            page.on("pageerror", lambda error: errors.append(f"pageerror: {error}"))
            page.on("console", console)
            page.route("**/*", route)
            page.goto(url, wait_until="load", timeout=timeout_ms)
            with contextlib.suppress(PlaywrightTimeout):  # reported below: not_drawn
                page.wait_for_function(READY_JS, timeout=draw_timeout_ms or timeout_ms)
            charts = page.evaluate(CHARTS_JS)
            sizes = page.evaluate(
                "() => Object.fromEntries(Array.from(document.querySelectorAll('.tardy-chart'))"
                ".map((c) => [c.dataset.chart, Math.round(c.getBoundingClientRect().height)]))"
            )
            text = page.inner_text("body")
            title = page.title()
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(screenshot), full_page=True)
        except PlaywrightError as error:
            raise RuntimeError(f"could not check {path}: {error}") from error
        finally:
            browser.close()
    return PageCheck(
        charts=[c["name"] for c in charts],
        points={c["name"]: int(c["points"]) for c in charts},
        empty=[c["name"] for c in charts if c["empty"]],
        not_drawn=[
            c["name"] for c in charts if not c["drawn"] or not (c["withData"] or c["empty"])
        ],
        errors=errors,
        requests=requests,
        text=text,
        screenshot=screenshot,
        title=title,
        sizes=sizes,
    )
