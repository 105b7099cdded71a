"""The console in a real browser: playwright driving Debian's chromium headless
(/usr/bin/chromium; never a browser of playwright's own) against three real nodes.

Without chromium or the playwright package these tests skip saying so, except under CI=true,
where they fail: CI must run them (`make test` installs chromium with apt-get as root)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.servers import ADMIN_TOKEN, NodeProcess, http, make_nodes, running

CHROMIUM = Path("/usr/bin/chromium")
DELIVERY = '[delivery]\nallow_cidrs = ["127.0.0.0/8"]\n'  # a failing HTTP target on loopback
SCREENSHOTS_TO = "SCHEDD_CONSOLE_SCREENSHOTS"  # also copy each screenshot there (docs/console)


def _unavailable() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install -e '.[test]')"
    if not CHROMIUM.exists():
        return f"{CHROMIUM} is missing (apt-get install -y chromium; make test does it as root)"
    return None


@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    """Chromium for this package's tests only: playwright's sync driver keeps an event loop
    running in the main thread while it is open, which asyncio.run() elsewhere refuses."""
    reason = _unavailable()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"browser tests cannot run: {reason}; CI must run them", pytrace=False)
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        launched = driver.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox"]
        )
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="package")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[NodeProcess]]:
    base = tmp_path_factory.mktemp("console")
    with running(make_nodes(base, 3, extra_sections=DELIVERY)) as nodes:
        yield nodes


# Text nodes that are a bare JavaScript value (a null handed to the DOM's append becomes "null"),
# outside <pre> where JSON legitimately says null.
LEAKED_VALUES = """() => [...document.querySelectorAll("body, body *")]
  .filter((e) => e.tagName !== "PRE")
  .flatMap((e) => [...e.childNodes])
  .filter((n) => n.nodeType === 3)
  .map((n) => n.textContent.trim())
  .filter((text) => /^(null|undefined|NaN|\\[object Object\\])$/.test(text))"""


class Console:
    """One browser tab on a node's /ui/, its screenshots saved under the test's tmp_path; any
    page error or Content-Security-Policy violation fails the test at the end."""

    def __init__(self, page: Any, node: NodeProcess, out: Path) -> None:
        self.page, self.node, self.out = page, node, out
        self.problems: list[str] = []
        self.dialogs: list[str] = []
        page.on("pageerror", lambda exc: self.problems.append(f"page error: {exc}"))
        page.on("console", self._console)
        page.on("dialog", self._dialog)

    def _console(self, message: Any) -> None:
        if message.type == "error" and "status of 4" not in message.text:
            self.problems.append(f"console error: {message.text}")

    def _dialog(self, dialog: Any) -> None:  # alert() would mean injected script ran
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def open(self, route: str = "") -> None:
        self.page.goto(f"{self.node.url}/ui/{route}")

    def sign_in(self, token: str) -> None:
        self.open()
        self.page.fill("#token", token)
        self.page.click("form.signin button[type=submit]")
        self.page.wait_for_selector("header.bar")

    def go(self, route: str) -> None:
        self.page.evaluate("route => { location.hash = route; }", route)

    def confirm(self) -> None:
        self.page.click("dialog.confirm [data-confirm=yes]")

    def shot(self, name: str) -> Path:
        """Save a screenshot of the page, after checking it shows no leaked JavaScript value."""
        leaked = self.page.evaluate(LEAKED_VALUES)
        assert not leaked, f"{name}: the page shows {leaked}"
        path = self.out / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        copy_to = os.environ.get(SCREENSHOTS_TO)
        if copy_to:
            Path(copy_to).mkdir(parents=True, exist_ok=True)
            shutil.copy(path, Path(copy_to) / path.name)
        return path


@pytest.fixture
def console(browser: Any, cluster: list[NodeProcess], tmp_path: Path) -> Iterator[Console]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(15_000)
    tab = Console(context.new_page(), cluster[0], tmp_path)
    try:
        yield tab
    finally:
        context.close()
    assert not tab.problems, tab.problems
    assert not tab.dialogs, f"a dialog opened (injected script?): {tab.dialogs}"


def new_tenant(node: NodeProcess, name: str) -> dict[str, Any]:
    status, body, _ = http("POST", f"{node.url}/v1/tenants", {"name": name}, token=ADMIN_TOKEN)
    assert status == 201, body
    return body
