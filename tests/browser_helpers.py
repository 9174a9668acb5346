"""The browser of the browser tests: headless Chromium from Debian's ``chromium`` package, driven by PyPI
``playwright`` with that executable (no browser download). ``make test`` installs the package
(``.ci/system-packages``); when Chromium is missing or cannot start, the test that asked for it fails and says why
(it never skips)."""

from __future__ import annotations

import os
import shutil

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture(scope="module")
def chromium():
    """A headless Chromium of Debian's package, through Playwright."""
    from playwright.sync_api import sync_playwright

    if not os.path.exists(CHROMIUM):
        pytest.fail(f"Chromium is not installed at {CHROMIUM} (apt-get install chromium; .ci/system-packages does)")
    with sync_playwright() as p:
        try:
            browser = p.chromium.launch(
                executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
            )
        except Exception as e:  # the reason (a missing library, no sandbox) is in the message
            pytest.fail(f"Chromium ({CHROMIUM}) did not start: {e}")
        yield browser
        browser.close()
