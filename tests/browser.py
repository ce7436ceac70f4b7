"""Headless Chromium for the dashboard's tests: Debian's `chromium` and `chromium-driver`
through Selenium, and reading what a Bokeh page holds by model name.

Without the browser the tests that need it are skipped, unless FIRMAMENT_REQUIRE_BROWSER is
set (CI sets it, after installing the packages), where they fail instead.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import pytest

T = TypeVar("T")


def _browser_paths() -> tuple[str, str]:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if chromium is None or driver is None:
        missing = "chromium and chromium-driver (apt-get install chromium chromium-driver)"
        if os.environ.get("FIRMAMENT_REQUIRE_BROWSER"):
            pytest.fail(f"the browser tests need {missing}")
        pytest.skip(f"needs {missing}")
    return chromium, driver


@contextmanager
def chromium(width: int = 1400, height: int = 1250) -> Iterator[Any]:
    """A headless Chromium driven by Selenium, closed afterwards."""
    binary, driver_path = _browser_paths()
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = binary
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(argument)
    options.add_argument(f"--window-size={width},{height}")
    driver = webdriver.Chrome(options=options, service=Service(driver_path))
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def bokeh_column(driver: Any, source: str, column: str) -> list[Any] | None:
    """Column `column` of the page's ColumnDataSource named `source`, as the browser has it
    (None while the page has not drawn it yet)."""
    return driver.execute_script(  # type: ignore[no-any-return]
        """
        const doc = window.Bokeh && Bokeh.documents && Bokeh.documents[0];
        const model = doc && doc.get_model_by_name(arguments[0]);
        return model ? Array.from(model.data[arguments[1]]) : null;
        """,
        source,
        column,
    )


def bokeh_text(driver: Any, name: str) -> str | None:
    """The text of the page's model (a Div) named `name`."""
    return driver.execute_script(  # type: ignore[no-any-return]
        """
        const doc = window.Bokeh && Bokeh.documents && Bokeh.documents[0];
        const model = doc && doc.get_model_by_name(arguments[0]);
        return model ? model.text : null;
        """,
        name,
    )


def wait_until(check: Callable[[], T | None], *, timeout: float = 60.0, what: str = "") -> T:
    """`check()`'s first truthy value, polled; AssertionError naming `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what} (last seen: {last!r})")
