"""JupyterLab in a real browser: headless Chromium (Debian's ``chromium``, driven by PyPI ``playwright`` with that
executable; no browser download; :mod:`browser_helpers`), the way a researcher works.

The JupyterLab test does what the README's JupyterLab step says: start ``jupyter lab`` (here on a free localhost port,
with a token, in a temporary copy of the layout: ``notebooks/03_train`` and a ``params/`` folder with the tiny
params less the methods' comparison, which notebook 03's papermill test runs), open
``notebooks/03_train.ipynb``, set ``params_file`` in the first cell, Run > Run All Cells, and watch: progress bars
are widgets, figures are inline, nothing fails, library logs go to the session's log file and not into the cells;
a params file that does not exist gives a message that says what to
change, not a traceback; saving the notebook keeps its jupytext twin (``.py``) in step. A screenshot of the finished
notebook goes to the test's temporary folder. When Chromium cannot start, the test fails and says why."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml
from browser_helpers import chromium  # noqa: F401

from conftest import FIXTURES, REPO

LAB_SETTINGS = {  # no autosave (the test decides what is saved), every cell in the page, no news pop-up
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false"},
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def lab(tmp_path):
    """``(url, workspace)``: JupyterLab serving a copy of ``notebooks/03_train`` beside ``params/lab.yaml``, its
    kernels on the fixture data with their artifacts in the temporary folder; stopped (with its kernels) at the end."""
    ws = tmp_path / "ws"
    (ws / "notebooks").mkdir(parents=True)
    for suffix in (".ipynb", ".py"):
        shutil.copy(REPO / "notebooks" / f"03_train{suffix}", ws / "notebooks")
    (ws / "params").mkdir()  # the tiny params without the methods' comparison (notebook 03's papermill test runs it)
    tiny = yaml.safe_load((REPO / "params" / "tiny.yaml").read_text())
    (ws / "params" / "lab.yaml").write_text(yaml.safe_dump({**tiny, "train": {**tiny["train"], "compare": []}}))
    settings = tmp_path / "lab-settings"
    for name, value in LAB_SETTINGS.items():
        (settings / name).parent.mkdir(parents=True, exist_ok=True)
        (settings / name).write_text(json.dumps(value))
    port, token = _free_port(), secrets.token_hex(16)
    env = {
        **os.environ,
        "AZLLM_ARTIFACTS": str(tmp_path / "art"),
        "AZLLM_DATA_ROOT": str(FIXTURES),
        "JUPYTERLAB_SETTINGS_DIR": str(settings),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
    }
    env.pop("PYTEST_CURRENT_TEST", None)
    log = open(tmp_path / "lab.log", "w")
    jupyter = Path(sys.executable).parent / "jupyter"
    proc = subprocess.Popen(
        [str(jupyter), "lab", "--no-browser", "--allow-root", f"--port={port}", "--ServerApp.port_retries=0",
         "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={ws}"],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"JupyterLab did not start:\n{(tmp_path / 'lab.log').read_text()[-3000:]}")
            time.sleep(0.5)
        yield f"{url}/lab/tree/notebooks/03_train.ipynb?token={token}", ws
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


def _run_all_and_wait(page, timeout_s: float = 420) -> list[str]:
    """Run > Run All Cells, then wait until every code cell has run and the kernel is idle; the prompts."""
    page.click(".lm-MenuBar-itemLabel:text-is('Run')")
    page.click(".lm-Menu-itemLabel:text-is('Run All Cells')")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        prompts = [p.strip() for p in page.locator(".jp-CodeCell .jp-InputPrompt").all_inner_texts()]
        idle = page.locator(".jp-Notebook-ExecutionIndicator").get_attribute("data-status") == "idle"
        if prompts and idle and all(p not in ("[ ]:", "[*]:", "") for p in prompts):
            return prompts
        time.sleep(1)
    pytest.fail(f"the notebook did not finish within {timeout_s:.0f} s: {prompts}")


def _set_first_cell(page, text: str) -> None:
    page.locator(".jp-Notebook .jp-CodeCell").first.locator(".cm-content").click()
    page.keyboard.press("Control+a")
    page.keyboard.type(text)
    page.keyboard.press("Escape")


def _errors(page) -> list[str]:
    """Error outputs: a traceback or an error name in the cells' stderr."""
    texts = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").all_inner_texts()
    return [t[:500] for t in texts if "Traceback" in t or "Error:" in t]


@pytest.mark.slow  # JupyterLab starts, notebook 03 trains on the tiny params (~40-70 s on 2 cores)
def test_a_notebook_runs_in_jupyterlab_with_widgets_figures_and_a_clear_error(chromium, lab, tmp_path):
    url, ws = lab
    page = chromium.new_page(viewport={"width": 1400, "height": 1000})
    console = []
    page.on("console", lambda m: console.append(m.text) if m.type == "error" else None)
    page.goto(url)
    # the notebook's metadata selects the kernel: no dialog, "Python (azllm)" starts and goes idle
    page.wait_for_selector(".jp-Toolbar-kernelName:has-text('Python (azllm)')", timeout=90_000)
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=90_000)
    first = page.locator(".jp-Notebook .jp-CodeCell").first.inner_text()
    assert "What to change" in first and "params_file" in first

    _set_first_cell(
        page, '# What to change: the params file\nparams_file = "params/lab.yaml"\nout_dir = "reports/lab"\n'
    )
    prompts = _run_all_and_wait(page)
    assert len(prompts) >= 6 and not _errors(page), _errors(page)
    stderr = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").all_inner_texts()
    assert not stderr, f"library output in the notebook (it belongs in the session's log): {stderr[:3]}"
    assert (tmp_path / "art" / "jupyterlab.log").stat().st_size > 0  # where it went
    images = page.locator(".jp-RenderedImage img")
    assert images.count() >= 1 and all(
        images.nth(i).evaluate("img => img.complete && img.naturalWidth > 0") for i in range(images.count())
    )
    widgets = page.locator(".jp-OutputArea-output .widget-hprogress, .jp-OutputArea-output .widget-progress")
    assert widgets.count() >= 1, (
        "no progress bar rendered as a widget: " + str(page.locator(".jp-OutputArea-output").all_inner_texts())[:3000]
    )
    shot = tmp_path / "03_train.png"
    page.set_viewport_size({"width": 1400, "height": 2400})
    widgets.first.scroll_into_view_if_needed()  # the training bar, the curves below it
    page.screenshot(path=str(shot))
    print(f"screenshot: {shot}")
    assert shot.stat().st_size > 10_000
    assert (ws / "reports" / "lab" / "parts").is_dir()  # out_dir resolved from the project root, as in a report

    # saving from the Lab UI keeps the jupytext twin in step
    page.keyboard.press("Control+s")
    deadline = time.monotonic() + 30
    while 'out_dir = "reports/lab"' not in (ws / "notebooks" / "03_train.py").read_text():
        assert time.monotonic() < deadline, "the paired .py was not updated by the save"
        time.sleep(0.5)

    # a params file that does not exist: a message that says what to change, no traceback
    _set_first_cell(page, 'params_file = "params/nope.yaml"\nout_dir = "reports/lab"\n')
    page.locator(".jp-Notebook .jp-CodeCell").first.locator(".cm-content").click()
    page.keyboard.press("Shift+Enter")  # the parameters cell
    page.locator(".jp-Notebook .jp-CodeCell").nth(1).locator(".cm-content").click()
    page.keyboard.press("Shift+Enter")  # recipes.setup(params_file)
    page.wait_for_selector("text=params file not found", timeout=60_000)
    second = page.locator(".jp-Notebook .jp-CodeCell").nth(1).locator(".jp-OutputArea").inner_text()
    assert "azllm: ParamsError: params file not found: params/nope.yaml" in second
    assert "Change the params file" in second and "Traceback" not in second
    assert not [c for c in console if "widget" in c.lower()], console
