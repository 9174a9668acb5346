"""The report's pages in a real browser: headless Chromium (Debian's ``chromium`` through PyPI ``playwright``, no
browser download; :mod:`browser_helpers`) opens ``index.html`` and every page of a rendered tiny run from disk."""

from __future__ import annotations

import pytest
from browser_helpers import chromium  # noqa: F401


@pytest.mark.slow  # shares the session's run of notebooks 05, 06 and 08 (conftest.adapt_report)
def test_the_report_pages_open_with_no_console_error_and_nothing_broken(chromium, adapt_report):
    """``index.html`` and every page of a rendered tiny run, opened from disk: no console error, every image
    decoded, every local link pointing to a file that exists."""
    run_dir, _, _ = adapt_report
    pages = [run_dir / "index.html", *sorted(p for p in run_dir.glob("*.html") if p.name != "index.html")]
    assert len(pages) >= 4
    for path in pages:
        page = chromium.new_page()
        errors = []
        page.on("console", lambda m, errors=errors: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
        page.goto(path.as_uri())
        page.wait_for_load_state("load")
        assert not errors, (path.name, errors)
        broken = page.eval_on_selector_all(
            "img", "imgs => imgs.filter(i => !(i.complete && i.naturalWidth > 0)).length"
        )
        assert broken == 0, f"{path.name}: {broken} broken image(s)"
        links = page.eval_on_selector_all("a[href]", "as => as.map(a => a.getAttribute('href'))")
        local = [h for h in links if not h.startswith(("http:", "https:", "#", "mailto:"))]
        missing = [h for h in local if not (path.parent / h.split("#")[0]).exists()]
        assert not missing, f"{path.name} links to missing files: {missing}"
        page.close()
