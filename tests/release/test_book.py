"""The book builds with warnings as errors, and every page works in a browser without network access.

The build (the README's `bash scripts/build_book.sh`, minus the install) runs once for this module,
from scratch, into a temporary folder, so that a build running in _build/ at the same time cannot
interfere. Then headless Chromium, driven by Playwright, opens every page of the table of contents from
a local HTTP server with every other request blocked, and checks what a reader would see: no failed
or remote requests, no console error or page error at all (no allow-list), typeset math, loaded images,
exercises with their solutions, and widgets drawn from their saved state. Screenshots land in
_build/screenshots/ for a person to look at.

Last, the README's PDF step prints that build into one PDF, and poppler-utils read it back: every page
of the table of contents in order, every title, the Chinese terms in a CJK font, no raw TeX, the figures.

Without Chromium, Playwright or poppler-utils these tests skip with the reason, except in CI (CI=true),
where that is a failure: scripts/test.sh installs them when it runs as root.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from browser_needs import missing_dependency, playwright_and_chromium
from pypdf import PdfReader
from script_modules import load

ROOT = Path(__file__).resolve().parents[2]
build_pdf = load("build_pdf")  # the PDF step, whose helpers (pages, Chromium, server) the tests share
SCREENSHOTS = ROOT / "_build" / "screenshots"
BUILD_TIMEOUT_S = 900


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
    for page in build_pdf.toc_pages():
        assert (html / f"{page}.html").is_file(), f"{page} is in _toc.yml but was not built"


@pytest.fixture(scope="module")
def server(build):
    if build[0] != 0:
        pytest.fail("the book did not build: see test_book_builds_without_warnings")
    with build_pdf.Server(Path(build[2])) as site:
        yield site.url


@pytest.fixture(scope="module")
def browser(server, tmp_path_factory):
    sync_playwright, chromium = playwright_and_chromium(build_pdf.chromium_path)
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")),
            executable_path=chromium,
            headless=True,
            args=build_pdf.CHROMIUM_ARGS,
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
                rawTex: ['$$', '\\\\[', '\\\\(', '\\\\begin{', '\\\\sqrt', '\\\\frac', '\\\\top', '\\\\text{']
                    .filter(s => clone.textContent.includes(s)),
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


@pytest.mark.parametrize("path", build_pdf.toc_pages())
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


# The book as one PDF: the README's PDF step (scripts/build_pdf.py) on this module's build, then read back
# with poppler-utils (pdfinfo, pdftotext, pdffonts, pdfimages).
POPPLER = ("pdfinfo", "pdftotext", "pdffonts", "pdfimages")
CJK = re.compile(r"[\u3400-\u9fff]+")
CJK_FONT = re.compile(r"WenQuanYi|WQY|Noto\w*CJK|Source\s?Han|Droid\w*Fallback|AR\w*PL", re.IGNORECASE)
RAW_TEX = ("$$", "\\frac", "\\begin{", "\\mathrm", "\\sqrt", "\\left", "\\top", "\\text{", "\\cdot")


def poppler(tool: str, *args: str) -> str:
    return subprocess.run([tool, *args], capture_output=True, text=True, check=True, timeout=300).stdout


def document_title(page: str) -> str:
    """The H1 of a page of the book, from its source, as the reader sees it (no MyST markup)."""
    path = ROOT / f"{page}.ipynb" if (ROOT / f"{page}.ipynb").is_file() else ROOT / f"{page}.md"
    sources = (
        [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown"]
        if path.suffix == ".ipynb"
        else [path.read_text()]
    )
    line = next(line for source in sources for line in source.splitlines() if line.startswith("# "))
    return line[2:].replace("`", "").strip()


def squeeze(text: str) -> str:
    """Whitespace collapsed, and Sphinx's smart quotes (’ “ ”) back to the plain ones the notebooks' titles use."""
    return " ".join(text.split()).translate(str.maketrans("’‘“”", "''\"\""))


@pytest.fixture(scope="module")
def pdf(build, tmp_path_factory) -> Path:
    if build[0] != 0:
        pytest.fail("the book did not build: see test_book_builds_without_warnings")
    missing = [tool for tool in POPPLER if shutil.which(tool) is None]
    if missing:
        missing_dependency(f"{', '.join(missing)} not installed (Debian: apt-get install poppler-utils)")
    if build_pdf.chromium_path() is None:
        missing_dependency("Chromium is not installed (Debian: apt-get install chromium fonts-wqy-microhei)")
    out = tmp_path_factory.mktemp("pdf") / "transformer-course.pdf"
    result = subprocess.run(
        [sys.executable, "scripts/build_pdf.py", "--html", str(build[2]), "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (build[2] / out.name).is_file(), "the site has no copy of the PDF for the intro and setup pages' link"
    return out


@pytest.fixture(scope="module")
def pdf_text(pdf) -> str:
    return poppler("pdftotext", "-enc", "UTF-8", str(pdf), "-")


def test_pdf_has_every_page_of_the_book_in_order(pdf):
    info = dict(line.split(":", 1) for line in poppler("pdfinfo", str(pdf)).splitlines() if ":" in line)
    pages = build_pdf.toc_pages()
    assert int(info["Pages"]) >= len(pages), info["Pages"]
    outline = [item.title for item in PdfReader(pdf).outline]
    assert [squeeze(t) for t in outline] == [squeeze(document_title(p)) for p in pages]


def test_pdf_has_every_chapter_title(pdf_text):
    text = squeeze(pdf_text)
    missing = [document_title(page) for page in build_pdf.toc_pages() if squeeze(document_title(page)) not in text]
    assert not missing, missing


def test_pdf_has_the_chinese_terms_in_a_cjk_font(pdf, pdf_text):
    fonts = poppler("pdffonts", str(pdf))
    assert CJK_FONT.search(fonts), f"no CJK font embedded:\n{fonts[:3000]}"
    # pdftotext breaks a line inside a Chinese word where the page did: join such lines again.
    text = re.sub(r"(?<=[\u3400-\u9fff])\s+(?=[\u3400-\u9fff])", "", pdf_text)
    terms = set(CJK.findall((ROOT / "book" / "intro.md").read_text()))
    assert terms and not [term for term in terms if term not in text], sorted(terms - set(CJK.findall(text)))
    # The glossary is a table, which pdftotext reads across its columns: every character of it, then.
    characters = set("".join(CJK.findall((ROOT / "book" / "glossary.md").read_text())))
    assert characters and characters <= set(text), sorted(characters - set(text))


def test_pdf_has_no_raw_tex(pdf_text):
    assert not [tex for tex in RAW_TEX if tex in pdf_text], [tex for tex in RAW_TEX if tex in pdf_text]


def test_pdf_embeds_the_figures(pdf):
    """At least one image for every figure the notebooks show (a picture widget prints its selected one)."""
    rows = poppler("pdfimages", "-list", str(pdf)).splitlines()[2:]
    images = [row for row in rows if row.split()[2] == "image"]
    figures = 0
    for page in build_pdf.toc_pages():
        path = ROOT / f"{page}.ipynb"
        if path.is_file():
            for cell in nbformat.read(path, as_version=4).cells:
                tags = cell.metadata.get("tags", [])
                if cell.cell_type == "code" and not {"remove-output", "remove-cell"} & set(tags):
                    figures += sum("image/png" in out.get("data", {}) for out in cell.outputs)
    assert figures > 20
    assert len(images) >= figures, f"{len(images)} images in the PDF for {figures} figures"
