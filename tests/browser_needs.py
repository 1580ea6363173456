"""What the browser tests need, found or reported: a missing tool fails in CI and skips elsewhere, with the
reason either way."""

import os

import pytest


def missing_dependency(reason: str):
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"{reason} (CI=true: this test must run)")
    pytest.skip(reason)


def playwright_and_chromium(chromium_path):
    """Playwright's sync_playwright and the Chromium executable that chromium_path() finds."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing_dependency("Playwright is not installed (pip install playwright)")
    chromium = chromium_path()
    if chromium is None:
        missing_dependency("Chromium is not installed (Debian: apt-get install chromium)")
    return sync_playwright, chromium
