"""Browser tests: one headless Chromium per test process (Debian's ``chromium`` and ``chromium-driver`` through
Selenium, :mod:`harness.explore.browser`); every test that needs it skips with one reason line when the browser, its
driver or Selenium is missing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from harness.explore.browser import chromium, console_errors, missing


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    why = missing()
    if why is not None:
        pytest.skip(f"no browser for the page tests: {why}")
    with chromium(1280, 900) as driver:
        yield driver


def open_page(driver: Any, path: Any, fragment: str = "", width: int = 1280) -> list[str]:
    """Load ``path`` from file:// (a fresh document: about:blank first, so a fragment change is a real load) at
    ``width`` pixels; the console errors of the load."""
    driver.set_window_size(width, 900)
    driver.get("about:blank")
    console_errors(driver)
    driver.get(f"file://{path}{fragment}")
    driver.execute_script("return document.readyState")
    return console_errors(driver)
