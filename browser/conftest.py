"""Fixtures of the browser test: Chromium (Debian's, driven by Playwright), the servers.

Every fixture ends what it started in a ``finally``; on a failure it prints the server's
log (pytest shows it under "Captured stdout teardown") and saves a screenshot of the page.
"""

from __future__ import annotations

import shutil
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import harness
import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page, Playwright

NOTEBOOKS = harness.ROOT / "notebooks"
OWN_INI = harness.HERE / "pytest.ini"


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    # Only `pytest -c browser/pytest.ini browser` (make test-browser) runs this folder; a
    # pytest run from the repository root (the unit suite's settings) leaves it alone.
    if config.inipath is None or config.inipath.resolve() != OWN_INI:
        return True
    return None


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    # Keep each phase's report on the item, so fixtures can tell whether the test failed.
    report: pytest.TestReport = yield
    setattr(item, f"rep_{report.when}", report)
    return report


def _failed(request: pytest.FixtureRequest) -> bool:
    report = getattr(request.node, "rep_call", None)
    return report is None or report.failed


@pytest.fixture(scope="session")
def screenshots() -> Path:
    return harness.fresh_screenshots()


@pytest.fixture(scope="session")
def playwright() -> Iterator[Playwright]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        yield pw


@pytest.fixture(scope="session")
def browser(playwright: Playwright) -> Iterator[Browser]:
    if not Path(harness.CHROMIUM).exists():
        pytest.fail(f"{harness.CHROMIUM} is missing: run browser/install.sh (Debian's chromium)", pytrace=False)
    # A fresh temporary profile (Playwright's default for launch()).
    browser = playwright.chromium.launch(
        executable_path=harness.CHROMIUM, headless=True, args=harness.CHROMIUM_ARGS, timeout=60_000
    )
    try:
        yield browser
    finally:
        browser.close()


@pytest.fixture
def page(browser: Browser, request: pytest.FixtureRequest, screenshots: Path) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(60_000)
    page = context.new_page()
    console: list[str] = []
    page.on("console", lambda msg: console.append(f"[{msg.type}] {msg.text}"))
    page.on("pageerror", lambda exc: console.append(f"[pageerror] {exc}"))
    try:
        yield page
    finally:
        if _failed(request):
            shot = screenshots / f"FAILED-{request.node.name}.png"
            try:
                page.screenshot(path=str(shot))
                print(f"screenshot of the failed page: {shot}")
            except Exception as exc:
                print(f"(no screenshot of the failed page: {exc})")
            print("---- browser console (last 60 lines) ----")
            print("\n".join(console[-60:]) or "(empty)")
        context.close()


def _server_home(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    return tmp_path_factory.mktemp(name)


@pytest.fixture
def lab_server(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[harness.Server]:
    """JupyterLab serving a copy of notebooks/ (outputs and widget state cleared)."""
    home = _server_home(tmp_path_factory, "jupyterlab")
    root = home / "notebooks"
    root.mkdir()
    for source in [*NOTEBOOKS.glob("*.ipynb"), harness.MAGICS]:
        harness.copy_notebook(source, root)
    for extra in NOTEBOOKS.iterdir():
        if extra.is_file() and extra.suffix != ".ipynb":
            shutil.copy2(extra, root / extra.name)
    server = harness.start_jupyterlab(root, home)
    try:
        yield server
    finally:
        if _failed(request):
            _print_state(server)
        server.stop(shutdown_path="/api/shutdown")


@pytest.fixture
def voila_server(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[harness.Server]:
    """Voila serving a copy of browser/dashboard.ipynb (outputs cleared)."""
    home = _server_home(tmp_path_factory, "voila")
    notebook = harness.copy_notebook(harness.DASHBOARD, home / "notebooks")
    server = harness.start_voila(notebook, home)
    try:
        yield server
    finally:
        if _failed(request):
            _print_state(server)
        server.stop()


def _print_state(server: harness.Server) -> None:
    try:
        print(f"{server.name} kernels: {server.get('/api/kernels')}")
    except Exception as exc:
        print(f"({server.name} kernels unknown: {exc})")
    print(server.log_tail())
