"""The book builds with warnings as errors, and every page works in a browser without network access.

The build (the README's `bash scripts/build_book.sh`, minus the install) runs once for this module,
from scratch, into a temporary folder, so that a build running in _build/ at the same time cannot
interfere. Then headless Chromium, driven by Playwright, opens every page of the table of contents from
a local HTTP server with every other request blocked, and checks what a reader would see: no failed
or remote requests, no console error or page error at all (no allow-list), typeset math, loaded images,
exercises with their solutions, and widgets drawn from their saved state. Screenshots land in
_build/screenshots/ for a person to look at.

Without Chromium or Playwright the browser tests skip with the reason, except in CI (CI=true),
where that is a failure: scripts/test.sh installs Chromium when it runs as root.
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
SCREENSHOTS = ROOT / "_build" / "screenshots"
BUILD_TIMEOUT_S = 900


def toc_pages() -> list[str]:
    """Every document of _toc.yml, as paths without suffix, root first."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    pages = [toc["root"]]

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                pages.append(entry["file"])
            walk(entry.get("sections"))

    for part in toc.get("parts", []):
        walk(part.get("chapters"))
    walk(toc.get("chapters"))
    return pages


def missing_dependency(reason: str):
    """A missing browser fails in CI and skips elsewhere, with the reason either way."""
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"{reason} (CI=true: the browser test must run)")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    """Fetch the offline assets and build the whole book from scratch; returns (returncode, output, html)."""
    fetch = subprocess.run(
        [sys.executable, "scripts/fetch_assets.py"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert fetch.returncode == 0, fetch.stdout + fetch.stderr
    jupyter_book = Path(sys.executable).with_name("jupyter-book")
    out = tmp_path_factory.mktemp("book")
    result = subprocess.run(
        [str(jupyter_book), "build", ".", "-W", "-n", "--keep-going", "--all", "--path-output", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
    )
    return result.returncode, result.stdout + result.stderr, out / "_build" / "html"


def test_book_builds_without_warnings(build):
    returncode, output, html = build
    warnings = [line for line in output.splitlines() if "WARNING" in line or "ERROR" in line]
    assert returncode == 0 and not warnings, "\n".join(warnings) or output[-5000:]
    for page in toc_pages():
        assert (html / f"{page}.html").is_file(), f"{page} is in _toc.yml but was not built"


@pytest.fixture(scope="module")
def server(build):
    if build[0] != 0:
        pytest.fail("the book did not build: see test_book_builds_without_warnings")

    class QuietHandler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(QuietHandler, directory=build[2])
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()


@pytest.fixture(scope="module")
def browser(server, tmp_path_factory):
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing_dependency("Playwright is not installed (pip install playwright)")
    chromium = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        missing_dependency("Chromium is not installed (Debian: apt-get install chromium)")
    args = [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ]
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")),
            executable_path=chromium,
            headless=True,
            args=args,
            viewport={"width": 1280, "height": 900},
        )
        yield context
        context.close()


class PageVisit:
    """Opens one page with every request outside the local server blocked, and records what went wrong."""

    def __init__(self, context, base: str, path: str):
        self.problems: list[str] = []
        self.page = context.new_page()
        self.page.route("**/*", functools.partial(self._route, base))
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda error: self.problems.append(f"page error: {error}"))
        self.page.on("requestfailed", lambda request: self.problems.append(f"failed request: {request.url}"))
        self.page.on("response", lambda r: r.status >= 400 and self.problems.append(f"HTTP {r.status}: {r.url}"))
        self.page.goto(base + path, wait_until="load")
        # MathJax 3 typesets after load; its promise settles when every formula is done.
        self.page.evaluate("() => window.MathJax && window.MathJax.startup ? window.MathJax.startup.promise : null")
        self.page.wait_for_load_state("networkidle")

    def _route(self, base, route):
        if route.request.url.startswith((base, "data:", "blob:")):
            route.continue_()
        else:
            self.problems.append(f"remote request: {route.request.url}")
            route.abort()

    def _console(self, message):
        # No allow-list: any console error on any page is a problem of the book (book/_ext/thebe_once.py
        # and html_context.default_mode in _config.yml removed the two that Jupyter Book 1 used to log).
        if message.type == "error":
            self.problems.append(f"console error: {message.text}")

    def check(self) -> list[str]:
        """Everything a reader would notice: math, images, exercises, widgets. Returns the problems found."""
        report = self.page.evaluate(
            """() => {
            const article = document.querySelector('main') || document.body;
            const clone = article.cloneNode(true);
            clone.querySelectorAll('pre, code, script, mjx-container, .highlight').forEach(e => e.remove());
            const views = [...document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]')];
            return {
                math: document.querySelectorAll('.math').length,
                typeset: document.querySelectorAll('.math mjx-container, mjx-container.MathJax').length,
                rawTex: ['$$', '\\\\[', '\\\\(', '\\\\begin{'].filter(s => clone.textContent.includes(s)),
                brokenImages: [...document.images].filter(i => !i.complete || i.naturalWidth === 0)
                    .map(i => i.src.slice(0, 100)),
                exercises: document.querySelectorAll('.exercise').length,
                solutions: document.querySelectorAll('.solution').length,
                dropdownSolutions: document.querySelectorAll('.solution.dropdown').length,
                views: views.length,
                unrenderedViews: views.filter(s => !s.parentElement.querySelector('.jupyter-widgets')).length,
                hasWidgetState: !!document.querySelector('script[type="application/vnd.jupyter.widget-state+json"]'),
            };
        }"""
        )
        problems = list(self.problems)
        if report["typeset"] < report["math"]:
            problems.append(f"only {report['typeset']} of {report['math']} formulas were typeset by MathJax")
        if report["rawTex"]:
            problems.append(f"raw TeX left in the text: {report['rawTex']}")
        problems += [f"image did not load: {src}" for src in report["brokenImages"]]
        if report["solutions"] and report["dropdownSolutions"] != report["solutions"]:
            problems.append("every solution must be a collapsible dropdown (:class: dropdown)")
        if report["views"] and not report["hasWidgetState"]:
            problems.append("widgets without saved state (execute the notebook with scripts/run_notebook.py)")
        if report["unrenderedViews"]:
            problems.append(f"{report['unrenderedViews']} of {report['views']} widgets were not rendered")
        self.report = report
        return problems


@pytest.mark.parametrize("path", toc_pages())
def test_page_works_offline(browser, server, path):
    visit = PageVisit(browser, server, f"{path}.html")
    try:
        problems = visit.check()
        n_exercises, n_solutions = visit.report["exercises"], visit.report["solutions"]
        if path.startswith("chapters/exercises/") and (n_exercises == 0 or n_solutions != n_exercises):
            problems.append(
                f"{n_exercises} exercises and {n_solutions} solutions: "
                "an exercise page needs one collapsible solution per exercise"
            )
        assert not problems, "\n".join(problems)
    finally:
        visit.page.close()


def test_intro_screenshot(browser, server):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    visit = PageVisit(browser, server, "book/intro.html")
    try:
        visit.page.screenshot(path=str(SCREENSHOTS / "intro.png"))
        assert visit.check() == []
    finally:
        visit.page.close()


def test_chapter_1_widget_and_screenshots(browser, server):
    """The width slider of chapter 1 works without a kernel: moving it shows another saved picture."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    visit = PageVisit(browser, server, "chapters/01_mlp.html")
    page = visit.page
    try:
        page.screenshot(path=str(SCREENSHOTS / "01_mlp.png"))
        widget = page.locator(".widget-subarea").first
        widget.scroll_into_view_if_needed()
        readout = page.locator(".widget-readout").first
        picture = page.locator(".widget-subarea img").first
        before = (readout.text_content(), picture.get_attribute("src"))
        page.locator(".noUi-handle").first.focus()
        page.keyboard.press("ArrowRight")
        page.wait_for_function(
            "src => document.querySelector('.widget-subarea img').getAttribute('src') !== src", arg=before[1]
        )
        after = (readout.text_content(), picture.get_attribute("src"))
        widget.screenshot(path=str(SCREENSHOTS / "01_mlp_widget.png"))
        assert before[0] == "8" and after[0] == "16", (before[0], after[0])
        assert after[1] != before[1]
        assert visit.check() == []
    finally:
        page.close()
