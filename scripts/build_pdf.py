"""Print the built book into one PDF: _build/pdf/transformer-course.pdf (and a copy in the site's root).

    python scripts/build_pdf.py [--html _build/html] [--out _build/pdf/transformer-course.pdf]

Jupyter Book 1's single-page builders (singlehtml, pdfhtml) fail on this book (MyST-NB's hidden-cell nodes
have no visitor there), and its LaTeX route needs a TeX installation of gigabytes. So every page of the
built HTML book, in the order of _toc.yml, is printed the way a reader's "Print to PDF" prints it: by
headless Chromium (Playwright's `page.pdf`, the theme's print style), after MathJax has typeset the
formulas and the widgets are drawn from their saved state (a picture widget prints its selected picture).
Exercise solutions are unfolded, since paper cannot unfold them. Then pypdf joins the pages into one PDF
with one bookmark per page. Every request outside the local build is blocked.

Chromium: $CHROMIUM, else `chromium` on the PATH (Debian: apt-get install chromium fonts-wqy-microhei for
the Chinese terms), else the browser of `playwright install chromium`.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import http.server
import io
import os
import shutil
import sys
import threading
import time
from pathlib import Path

import yaml
from pypdf import PdfWriter

ROOT = Path(__file__).resolve().parent.parent
PDF_NAME = "transformer-course.pdf"
PARALLEL_PAGES = 2  # one per core
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Paper only: a code cell, an output or a figure moves whole to the next page rather than being cut in two
# (one longer than a page is still cut), and a long line of code wraps rather than being cut off at the margin.
PRINT_CSS = """@media print {
    div.cell_input, div.cell_output > div, div.highlight, figure, img, .admonition, table { break-inside: avoid; }
    pre { white-space: pre-wrap; }
}"""
PAGE_TITLE = "() => (document.querySelector('main h1') || document.querySelector('h1')).textContent"
# Unfold what paper cannot unfold: exercise solutions (sphinx-togglebutton hides their bodies).
UNFOLD_SOLUTIONS = """() => {
    document.querySelectorAll('.solution.toggle-hidden, .solution .toggle-hidden').forEach(e => {
        e.classList.remove('toggle-hidden');
    });
    document.querySelectorAll('.solution button.toggle-button').forEach(b => {
        b.classList.remove('toggle-button-hidden');
    });
    document.querySelectorAll('details.solution, .solution details').forEach(d => { d.open = true; });
}"""


def toc_pages(root: Path = ROOT) -> list[str]:
    """Every document of _toc.yml, as paths without suffix, root first."""
    toc = yaml.safe_load((root / "_toc.yml").read_text())
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


def chromium_path() -> str | None:
    return os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


class Server:
    """The built site on a local port, served from a thread."""

    def __init__(self, directory: Path):
        class QuietHandler(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *args):
                pass

        handler = functools.partial(QuietHandler, directory=str(directory))
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/"

    def __enter__(self):
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()


async def print_page(context, base: str, path: str) -> tuple[str, bytes]:
    """One page of the book as PDF bytes, with its title."""
    page = await context.new_page()
    problems: list[str] = []

    async def only_local(route):
        if route.request.url.startswith((base, "data:", "blob:")):
            await route.continue_()
        else:
            problems.append(route.request.url)
            await route.abort()

    await page.route("**/*", only_local)
    try:
        await page.goto(f"{base}{path}.html", wait_until="load")
        await page.evaluate("() => window.MathJax && MathJax.startup ? MathJax.startup.promise : null")
        await page.wait_for_load_state("networkidle")
        await page.evaluate("() => document.fonts.ready.then(() => null)")
        await page.evaluate(UNFOLD_SOLUTIONS)
        await page.add_style_tag(content=PRINT_CSS)
        title = await page.evaluate(PAGE_TITLE)
        title = title.replace("#", "").replace("¶", "").strip()
        pdf = await page.pdf(
            format="A4",
            print_background=True,
            margin={"top": "16mm", "bottom": "16mm", "left": "12mm", "right": "12mm"},
        )
    finally:
        await page.close()
    if problems:
        raise RuntimeError(f"{path}: requests outside the book were blocked: {problems[:5]}")
    return title, pdf


async def print_pages(html: Path, pages: list[str]) -> list[tuple[str, bytes]]:
    from playwright.async_api import Error, async_playwright

    with Server(html) as server:
        async with async_playwright() as playwright:
            try:
                browser = await playwright.chromium.launch(
                    executable_path=chromium_path(), headless=True, args=CHROMIUM_ARGS
                )
            except Error as error:
                raise SystemExit(
                    f"Chromium could not start, so the PDF was not built ({error.message.splitlines()[0]}).\n"
                    "Install it (Debian: apt-get install chromium fonts-wqy-microhei) or set CHROMIUM=/path/to/it."
                ) from error
            context = await browser.new_context(viewport={"width": 1100, "height": 1400})
            slots = asyncio.Semaphore(PARALLEL_PAGES)

            async def one(path: str):
                async with slots:
                    return await print_page(context, server.url, path)

            try:
                return await asyncio.gather(*(one(path) for path in pages))
            finally:
                await browser.close()


def build_pdf(html: Path, out: Path, pages: list[str]) -> int:
    """Print `pages` of the site in `html` into one PDF at `out`; returns its number of pages."""
    missing = [p for p in pages if not (html / f"{p}.html").is_file()]
    if missing:
        raise SystemExit(f"not built: {missing} (build the book first: bash scripts/build_book.sh)")
    printed = asyncio.run(print_pages(html, pages))
    writer = PdfWriter()
    for title, pdf in printed:
        writer.append(io.BytesIO(pdf), outline_item=title)
    book_title = yaml.safe_load((ROOT / "_config.yml").read_text()).get("title", "")
    writer.add_metadata({"/Title": book_title})
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "wb") as f:
        writer.write(f)
    return len(writer.pages)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--html", type=Path, default=ROOT / "_build" / "html", help="the built site")
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "pdf" / PDF_NAME)
    args = parser.parse_args()
    start = time.perf_counter()
    n_pages = build_pdf(args.html, args.out, toc_pages())
    # A copy in the site's root, where the intro and setup pages link to it.
    shutil.copyfile(args.out, args.html / PDF_NAME)
    print(f"{args.out}: {n_pages} pages, {args.out.stat().st_size / 1e6:.1f} MB in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
