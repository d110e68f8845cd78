"""The notebooks in a real browser: JupyterLab and Voila in headless Chromium.

Run by ``make test-browser`` (not by ``make test``: ``tests/`` is the unit suite). Needs
Debian's chromium and the packages of ``browser/requirements.txt`` (``browser/install.sh``).

- JupyterLab opens a copy of ``notebooks/01-quickstart.ipynb`` (outputs and saved widget
  state cleared, so all that shows ran now), waits for a connected idle kernel, runs all
  cells from the Run menu, and checks the live transcript of ``%%ask`` and the four
  dashboard panels of ``lab.dashboard()``: roster, transcript, context updates, usage,
  whose numbers must agree with the ``%usage`` DataFrame on the same page.
- JupyterLab opens ``browser/magics.ipynb`` and runs its cells one at a time, as a person
  would: each ``%%ask`` cell's transcript holds only its own ask after later asks ran; the
  dashboard shown earlier still shows content after ``%aklab model demo:aklab-demo``; a
  failing ``%%ask`` marks its cell as errored (one ``aklab:`` line, no traceback); the
  dashboard shows ``@Manager working…`` while a held model thinks; an ``%%ask`` queued
  behind that run says it waits for @Manager, and the stop button ends its cell within
  1 s, saying it withdrew the queued ask; Tab after ``%%ask @De`` completes ``@Developer``.
- Voila renders ``browser/dashboard.ipynb`` (``%load_ext aklab``, one ``%%ask``,
  ``lab.dashboard()``) as a page; the same checks on the panels.

Screenshots go to ``browser/screenshots/`` (emptied at the start of a run). Waits are
Playwright's waits on the page or polls of the server's API, never fixed sleeps.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import harness
from playwright.sync_api import Locator, Page, expect

QUESTION = "Plan the next sprint for the login page"
PAGE_LOAD_MS = 120_000
RUN_MS = 120_000  # all cells of the quickstart; seconds in practice
UI_MS = 30_000

# The rows of an HTML table as dicts keyed by its header, read in the page.
_READ_TABLE = """
table => {
  const heads = [...table.querySelectorAll('thead th')].map(th => th.innerText.trim());
  return [...table.querySelectorAll('tbody tr')].map(tr => {
    const cells = [...tr.querySelectorAll('th, td')].map(td => td.innerText.trim());
    const offset = cells.length - heads.length;  // a DataFrame's index header is empty
    return Object.fromEntries(heads.map((h, i) => [h || '#', cells[i + Math.max(offset, 0)]]));
  });
}
"""


def test_jupyterlab_runs_quickstart_and_shows_panels(lab_server: harness.Server, page: Page, screenshots: Path) -> None:
    page.goto(lab_server.url("/lab/tree/01-quickstart.ipynb"), wait_until="domcontentloaded", timeout=PAGE_LOAD_MS)
    panel = page.locator(".jp-NotebookPanel").filter(has=page.locator(".jp-Notebook"))
    expect(panel, "the quickstart notebook did not open in JupyterLab").to_be_visible(timeout=PAGE_LOAD_MS)
    notebook = panel.locator(".jp-Notebook")
    code_cells = notebook.locator(".jp-Cell.jp-CodeCell")
    n_code = count_code_cells(harness.QUICKSTART)
    expect(code_cells, "JupyterLab did not show all the quickstart's code cells").to_have_count(n_code, timeout=UI_MS)

    # The kernel must be started and connected before "Run All", or the run is lost.
    harness.wait_for(
        "a kernel that is idle with a connection (GET /api/kernels)",
        lambda: harness.connected_idle_kernel(lab_server),
        harness.KERNEL_READY_S,
    )
    expect(page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").first).to_be_attached(timeout=UI_MS)

    run_all_cells(page)

    # Every code cell gets an execution count ("[*]" while queued or running).
    for i in range(n_code):
        expect(
            code_cells.nth(i).locator(".jp-InputArea-prompt"),
            f"code cell {i + 1} of {n_code} did not finish running",
        ).to_have_text(re.compile(r"\[\d+\]"), timeout=RUN_MS)
    assert_no_errors(notebook)
    page.screenshot(path=str(screenshots / "lab-after-run-all.png"))

    # %%ask shows a live transcript widget above the answer.
    ask_cell = code_cells.filter(has_text="%%ask")
    live = ask_cell.locator(".jp-OutputArea-output .aklab-msg")
    expect(live.first, "the live transcript of %%ask did not render").to_be_visible(timeout=UI_MS)
    expect(ask_cell.locator(".jp-OutputArea")).to_contain_text(QUESTION)
    expect(ask_cell.locator(".jp-OutputArea")).to_contain_text("@Developer")
    ask_cell.screenshot(path=str(screenshots / "lab-ask-cell.png"))

    # The last cell, lab.dashboard(): four panels in tabs.
    dashboard = code_cells.last.locator(".jp-OutputArea-output .widget-tab")
    expect(dashboard, "lab.dashboard() rendered no tab widget").to_be_visible(timeout=UI_MS)
    by_agent = check_dashboard(dashboard, screenshots, prefix="lab")

    # The usage panel agrees with the %usage DataFrame on the same page.
    usage_cell = code_cells.filter(
        has=page.locator(".jp-InputArea-editor .cm-content", has_text=re.compile(r"^\s*%usage\s*$"))
    )
    expect(usage_cell, "no code cell that is just %usage").to_have_count(1)
    frame = usage_cell.locator(".jp-OutputArea-output table.dataframe")
    expect(frame, "%usage showed no DataFrame").to_be_visible(timeout=UI_MS)
    frame_rows = {row["agent"]: row for row in frame.evaluate(_READ_TABLE)}
    for agent, row in by_agent.items():
        assert agent in frame_rows, f"{agent} is in the usage panel but not in %usage: {frame_rows}"
        for column in ("requests", "total_tokens"):
            assert row[column] == frame_rows[agent][column], (
                f"{agent} {column}: panel says {row[column]}, %usage says {frame_rows[agent][column]}"
            )


def test_jupyterlab_magics(lab_server: harness.Server, page: Page, screenshots: Path) -> None:
    notebook = open_notebook(page, lab_server, "magics.ipynb")
    cells = notebook.locator(".jp-Cell.jp-CodeCell")
    setup, ask_a, ask_b, board, switch, ask_c, ghost, gated_lab, hold, started, queued, _release = (
        cells.nth(i) for i in range(12)
    )
    for cell in (setup, ask_a, ask_b):
        run_cell(page, cell)

    # 1. A cell's transcript holds only its own ask, after a later ask ran.
    first = ask_a.locator(".jp-OutputArea-output .aklab-msg")
    expect(first, "the first %%ask's transcript should hold its 4 messages only").to_have_count(4, timeout=UI_MS)
    expect(ask_a.locator(".jp-OutputArea")).to_contain_text("login page")
    expect(ask_a.locator(".jp-OutputArea")).not_to_contain_text("release notes")
    expect(ask_b.locator(".jp-OutputArea-output .aklab-msg").first).to_contain_text("release notes")
    # the replies are shown once, as Markdown (the cell's value), beside the transcript
    expect(ask_a.locator(".jp-RenderedMarkdown")).to_have_count(1)
    # it shows the whole ask, so there is nothing earlier to show
    expect(ask_a.locator("button", has_text="earlier")).to_be_disabled()
    ask_a.screenshot(path=str(screenshots / "lab-magics-own-transcript.png"))

    # 2. Panels shown earlier keep showing content after the lab is replaced.
    for cell in (board, switch, ask_c):
        run_cell(page, cell)
    dashboard = board.locator(".jp-OutputArea-output .widget-tab")
    shown = select_tab(dashboard, "Transcript")
    expect(shown.locator(".aklab-msg").first, "the dashboard went blank after %aklab model").to_be_visible()
    expect(shown).to_contain_text("QA pass")  # it follows the new lab
    shown = select_tab(dashboard, "Roster")
    expect(shown.locator("table.aklab-roster")).to_contain_text("@Manager")
    expect(first, "an old cell's transcript went blank after %aklab model").to_have_count(4)
    board.screenshot(path=str(screenshots / "lab-magics-after-model-switch.png"))

    # 3. A failing %%ask marks the cell as errored, in one line, without a traceback. (That the
    # run then stops is tested through nbclient: JupyterLab sends the next cells while the
    # kernel aborts only those already queued, so a cell that fails in milliseconds races them.)
    run_cell(page, ghost)
    error = ghost.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
    expect(error, "the failing %%ask showed no error output").to_contain_text("aklab: no team member @Ghost")
    expect(error).not_to_contain_text("Traceback")
    ghost.screenshot(path=str(screenshots / "lab-magics-failed-cell.png"))

    # 4. The stop button on an ask queued behind a run ends the cell within 1 s.
    for cell in (gated_lab, hold, started):
        run_cell(page, cell)
    # The gated model holds the Manager's run: the dashboard (carried to the new lab) shows it
    # working, so a slow model's silence does not look like a stalled team.
    shown = select_tab(dashboard, "Transcript")
    working = shown.locator(".aklab-working")
    expect(working, "the dashboard did not show @Manager working on the held run").to_contain_text("@Manager")
    expect(working).to_contain_text("working…")
    board.screenshot(path=str(screenshots / "lab-magics-working.png"))
    run_cell(page, queued, wait=False)
    expect(queued.locator(".jp-InputArea-prompt")).to_have_text(re.compile(r"\[\*\]"), timeout=UI_MS)
    expect(queued.locator(".jp-OutputArea-output .widget-vbox, .jp-OutputArea-output .aklab-msg").first).to_be_attached(
        timeout=UI_MS
    )  # the cell's transcript is up: the ask was sent and waits
    waiting = queued.locator(".jp-OutputArea-output .aklab-waiting")
    expect(waiting, "the queued ask's cell did not say whom it waits for").to_contain_text(
        "@Manager busy with another ask", timeout=UI_MS
    )
    queued.screenshot(path=str(screenshots / "lab-magics-queued-waiting.png"))
    clicked = time.monotonic()
    interrupt_button(page).click()
    expect(queued.locator(".jp-InputArea-prompt")).to_have_text(re.compile(r"\[\d+\]"), timeout=UI_MS)
    elapsed = time.monotonic() - clicked
    stop_line = queued.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
    expect(stop_line).to_contain_text("withdrew 1 ask not started yet")
    queued.screenshot(path=str(screenshots / "lab-magics-stop-queued.png"))
    assert elapsed < 1.0, f"the stop button took {elapsed:.2f} s to end the queued %%ask"

    # 5. Tab completes @members on the %%ask line.
    harness.wait_for("an idle kernel", lambda: harness.connected_idle_kernel(lab_server), harness.KERNEL_READY_S)
    select_cell(page, queued)
    page.keyboard.press("Escape")
    page.keyboard.press("b")  # a new cell below, in command mode
    editor = notebook.locator(".jp-Cell.jp-mod-selected .cm-content")
    editor.click()
    page.keyboard.type("%%ask @De")
    page.keyboard.press("Tab")
    completer = page.locator(".jp-Completer")
    expect(completer, "Tab after %%ask @De showed no completions").to_be_visible(timeout=UI_MS)
    expect(completer.locator(".jp-Completer-item").first).to_contain_text("@Developer")
    expect(completer).not_to_contain_text("DeprecationWarning")
    notebook.screenshot(path=str(screenshots / "lab-magics-tab-completion.png"))
    page.keyboard.press("Enter")  # take it
    expect(editor, "the completion did not replace @De").to_have_text("%%ask @Developer")


def test_voila_renders_dashboard(voila_server: harness.Server, page: Page, screenshots: Path) -> None:
    # Voila runs the notebook while it serves the page, so the load itself takes seconds.
    page.goto(voila_server.url("/"), wait_until="domcontentloaded", timeout=PAGE_LOAD_MS)
    dashboard = page.locator(".widget-tab")
    expect(dashboard, "Voila's page shows no dashboard tab widget").to_be_visible(timeout=PAGE_LOAD_MS)
    body = page.locator("body")
    expect(body).to_contain_text("aklab dashboard")  # the markdown cell
    expect(body).not_to_contain_text("Traceback")
    expect(page.locator(".aklab-msg").first, "the live transcript of %%ask did not render").to_be_visible()
    page.screenshot(path=str(screenshots / "voila-page.png"), full_page=True)
    check_dashboard(dashboard, screenshots, prefix="voila")


# -- steps shared by both pages ---------------------------------------------------------


def open_notebook(page: Page, server: harness.Server, name: str) -> Locator:
    """Open ``name`` in JupyterLab and wait for a connected idle kernel; the notebook."""
    page.goto(server.url(f"/lab/tree/{name}"), wait_until="domcontentloaded", timeout=PAGE_LOAD_MS)
    panel = page.locator(".jp-NotebookPanel").filter(has=page.locator(".jp-Notebook"))
    expect(panel, f"{name} did not open in JupyterLab").to_be_visible(timeout=PAGE_LOAD_MS)
    harness.wait_for(
        "a kernel that is idle with a connection (GET /api/kernels)",
        lambda: harness.connected_idle_kernel(server),
        harness.KERNEL_READY_S,
    )
    expect(page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").first).to_be_attached(timeout=UI_MS)
    return panel.locator(".jp-Notebook")


def select_cell(page: Page, cell: Locator) -> None:
    """Make ``cell`` the active cell, in edit mode (its editor focused)."""
    cell.locator(".jp-InputArea-editor .cm-content").click()
    expect(cell).to_have_class(re.compile(r"jp-mod-active"))


def run_cell(page: Page, cell: Locator, *, wait: bool = True) -> None:
    """Shift+Enter on ``cell``; with ``wait``, until it has an execution count."""
    select_cell(page, cell)
    page.keyboard.press("Shift+Enter")
    if wait:
        expect(cell.locator(".jp-InputArea-prompt"), "the cell did not finish running").to_have_text(
            re.compile(r"\[\d+\]"), timeout=RUN_MS
        )


def run_menu(page: Page, item_name: str) -> None:
    """Run > ``item_name``, from the menu bar."""
    page.locator("#jp-menu-panel .lm-MenuBar-item", has_text=re.compile(r"^\s*Run\s*$")).click()
    item = page.locator(".lm-Menu").get_by_role("menuitem", name=item_name, exact=True)
    expect(item, f"the Run menu has no {item_name!r}").to_be_visible(timeout=UI_MS)
    item.click()


def interrupt_button(page: Page) -> Locator:
    """The notebook toolbar's stop button (interrupt the kernel)."""
    return page.locator(".jp-NotebookPanel-toolbar [data-jp-item-name='interrupt']").first


def run_all_cells(page: Page) -> None:
    """Run > Run All Cells, from the menu bar."""
    run_menu(page, "Run All Cells")


def count_code_cells(path: Path) -> int:
    return sum(cell["cell_type"] == "code" for cell in json.loads(path.read_text(encoding="utf-8"))["cells"])


def assert_no_errors(notebook: Locator) -> None:
    errors = notebook.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
    texts = [t for t in errors.all_inner_texts() if "Traceback" in t or "Error" in t]
    assert not texts, "a cell raised:\n" + "\n\n".join(texts)
    widget_errors = notebook.get_by_text("Error displaying widget")
    assert widget_errors.count() == 0, "a widget failed to display: " + " | ".join(widget_errors.all_inner_texts())


def select_tab(dashboard: Locator, title: str) -> Locator:
    """Click a dashboard tab; the panel it shows."""
    dashboard.locator(".lm-TabBar-tab", has_text=title).click()
    expect(dashboard.locator(".lm-TabBar-tab.lm-mod-current")).to_have_text(title)
    return dashboard.locator(".widget-tab-contents > .lm-Widget:not(.lm-mod-hidden)")


def check_dashboard(dashboard: Locator, screenshots: Path, *, prefix: str) -> dict[str, dict[str, Any]]:
    """The four panels show the team's content; the usage rows by agent."""
    tabs = dashboard.locator(".lm-TabBar-tab")
    expect(tabs).to_have_text(["Roster", "Transcript", "Context", "Usage"])

    shown = select_tab(dashboard, "Roster")
    roster = shown.locator("table.aklab-roster")
    expect(roster, "the roster panel shows no table").to_be_visible()
    for member in ("@Human", "@Manager", "@Developer"):
        expect(roster).to_contain_text(member)
    expect(shown).to_contain_text(re.compile(r"3 present, \d+ busy"))
    dashboard.screenshot(path=str(screenshots / f"{prefix}-dashboard-roster.png"))

    shown = select_tab(dashboard, "Transcript")
    messages = shown.locator(".aklab-msg")
    expect(messages.first, "the transcript panel shows no message").to_be_visible()
    expect(messages).to_have_count(4)  # Human→Manager, Manager→Developer, and back
    expect(messages.first).to_contain_text(QUESTION)
    expect(messages.last).to_contain_text("@Manager")
    expect(messages.last).to_contain_text("@Human")
    dashboard.screenshot(path=str(screenshots / f"{prefix}-dashboard-transcript.png"))

    shown = select_tab(dashboard, "Context")
    updates = shown.locator(".aklab-context")
    expect(updates.first, "the context panel shows no context update").to_be_visible()
    expect(updates.first).to_contain_text("@Manager")
    dashboard.screenshot(path=str(screenshots / f"{prefix}-dashboard-context.png"))

    shown = select_tab(dashboard, "Usage")
    table = shown.locator("table.aklab-usage").first
    expect(table, "the usage panel shows no table").to_be_visible()
    total = shown.locator(".aklab-note", has_text="total:")
    expect(total).to_contain_text(re.compile(r"total: [\d,]+ requests, [\d,]+ tokens"))
    dashboard.screenshot(path=str(screenshots / f"{prefix}-dashboard-usage.png"))

    rows = {row["agent"]: row for row in table.evaluate(_READ_TABLE)}
    assert {"@Manager", "@Developer"} <= set(rows), f"usage rows by agent: {rows}"
    match = re.search(r"total: ([\d,]+) requests, ([\d,]+) tokens", total.inner_text())
    assert match, total.inner_text()
    requests, tokens = (int(group.replace(",", "")) for group in (match[1], match[2]))  # 1,317 tokens
    assert requests >= 3 and tokens > 0, total.inner_text()
    assert sum(int(r["requests"]) for r in rows.values()) == requests, (rows, total.inner_text())
    assert sum(int(r["total_tokens"]) for r in rows.values()) == tokens, (rows, total.inner_text())
    for agent, row in rows.items():
        assert int(row["input_tokens"]) + int(row["output_tokens"]) == int(row["total_tokens"]), (agent, row)
    return rows
