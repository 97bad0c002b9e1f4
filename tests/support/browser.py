"""A real headless Chromium (Debian's ``chromium`` and ``chromium-driver``) driven by Selenium."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

CHROMIUM = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
DRIVER = ("/usr/bin/chromedriver",)


def _first(paths: tuple[str, ...], name: str) -> str | None:
    return next((p for p in paths if os.path.exists(p)), None) or shutil.which(name)


@contextmanager
def headless_chromium(width: int = 1280, height: int = 900) -> Iterator[Any]:
    """The browser, or a skip naming what is missing (a failure where CI requires it: METNOS_REQUIRE_BROWSER)."""
    browser, driver = _first(CHROMIUM, "chromium"), _first(DRIVER, "chromedriver")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        webdriver = None
    if webdriver is None or browser is None or driver is None:
        missing = "selenium (pip)" if webdriver is None else "chromium and chromium-driver (apt)"
        if os.environ.get("METNOS_REQUIRE_BROWSER"):
            pytest.fail(f"METNOS_REQUIRE_BROWSER is set but {missing} is missing; ./install.sh --test installs it")
        pytest.skip(f"no headless browser here: {missing} is missing")
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", f"--window-size={width},{height}"):
        options.add_argument(flag)
    # The driver is the one Debian ships with the browser: Selenium must not fetch another.
    session = webdriver.Chrome(options=options, service=Service(driver))
    try:
        yield session
    finally:
        session.quit()
