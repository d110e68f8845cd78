"""The panels' static forms: what a saved notebook, GitHub, nbviewer, a terminal or
``print(panel)`` shows where no widget is drawn (text/plain and a text/html snapshot)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from IPython.core.interactiveshell import InteractiveShell

from aklab.agent import AgentConfig
from aklab.core import ActorAddress, EventMessage, StartMessage
from aklab.lab._magic_show import LIVE_TEXT, LiveView
from aklab.lab.panels import ContextPanel, Dashboard, RosterPanel, TranscriptPanel, UsagePanel, ask_transcript
from aklab.lab.panels._static import HTML_CHARS, HTML_LINES, SNAPSHOT_NOTE, TEXT_ROWS, TEXT_WIDTH
from aklab.lab.session import Lab
from aklab.llm import LlmUsageEvent, ModelConfig
from aklab.llm.streaming import OutputStreamEvent
from tests.lab.test_panels import addr, busy, context, sent, usage

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
# What a saved output must not hold: hex ids, memory addresses, times, absolute paths.
UNSTABLE = re.compile(r"[0-9a-f]{8,}|0x[0-9a-f]+|\d\d:\d\d|/tmp/|/home/|/work/")

#: The dashboard's text/plain after one ask on the demo model: the same on every run.
AFTER_ONE_ASK = """\
<Dashboard: roster, transcript, context, usage>
Roster: 3 members
  member      role       model            status
  @Human      Human      —                idle
  @Manager    Manager    demo:aklab-demo  idle
  @Developer  Developer  demo:aklab-demo  idle
Transcript: 4 messages
  @Human → @Manager (request): Plan the login page
  @Manager → @Developer (request): Plan the login page
  @Developer → @Manager (response): Developer result for "Plan the login page": (+3 lines)
  @Manager → @Human (response): Here is what @Developer came back with on "Plan the login … (+4 lines)
Context: 3 updates from 2 agents
  @Manager · context update 2 · +1 −0 lines · 1 of 2 sections sent
    + - @Developer (Developer)
  @Developer · context update 1 · first update · sections: Team, Roles you can hire
Usage: 3 requests by 2 agents
  agent       model            requests  tokens  cost
  @Manager    demo:aklab-demo         2     937     —
  @Developer  demo:aklab-demo         1     332     —
  total: 3 requests, 1,269 tokens, cost unknown (no price for the model)"""


@pytest.fixture
def board() -> Iterator[Dashboard]:
    board = Dashboard()
    yield board
    board.close()


def one_ask() -> tuple[dict[str, str], str, str]:
    """A fresh lab asked one question: its dashboard's bundle, ``str`` and ``repr``."""
    with Lab(store=False) as lab:
        lab.ask("Plan the login page", timeout=20)
        board = lab.dashboard()
        return board._repr_mimebundle_(), str(board), repr(board)


def test_a_dashboard_shown_after_an_ask_says_what_happened_the_same_way_every_run() -> None:
    (bundle, text, short), (again, _, _) = one_ask(), one_ask()
    assert bundle["text/plain"] == text == AFTER_ONE_ASK
    assert short == "<Dashboard: roster, transcript, context, usage>"  # repr stays one line, for logs
    assert again["text/plain"] == bundle["text/plain"] and again["text/html"] == bundle["text/html"]
    html = bundle["text/html"]
    for piece in (
        "<b>Roster</b> · 3 members",
        '<td style="padding:2px 8px;text-align:left">demo:aklab-demo</td>',
        "<b>@Developer</b> → <b>@Manager</b> (response)",
        "3. Implement the core path first, behind a flag, and ship it to staging.</pre>",  # the whole message
        "+ - @Developer (Developer)",
        "total: 3 requests, 1,269 tokens",
        SNAPSHOT_NOTE,
    ):
        assert piece in html, piece
    assert not UNSTABLE.search(bundle["text/plain"]) and not UNSTABLE.search(html)
    # the snapshot's classes are its own: a browser test finding .aklab-msg saw the widget
    assert "aklab-static-msg" in html and 'class="aklab-msg"' not in html and "aklab-roster" not in html


def test_each_panel_prints_its_summary_line_then_its_content(board: Dashboard) -> None:
    board.feed(StartMessage(sender=addr("@A"), config=AgentConfig(name="@A", role="A", model_cfg=ModelConfig())))
    board.feed(sent("@Human", "@A", "hi"))
    board.feed(context("@A", 1, "## Goal\nship"))
    board.feed(usage("@A", cost=0.25))
    assert str(board.roster).splitlines() == [
        "<RosterPanel: 1 member>",
        "  member  role  model            status",
        "  @A      A     demo:aklab-demo  idle",
    ]
    assert str(board.transcript).splitlines() == ["<TranscriptPanel: 1 message>", "  @Human → @A (request): hi"]
    assert str(board.context).splitlines() == [
        "<ContextPanel: 1 update from 1 agent>",
        "  @A · context update 1 · first update · sections: Goal",
    ]
    assert str(board.usage).splitlines() == [
        "<UsagePanel: 1 request by 1 agent>",
        "  agent  model  requests  tokens     cost",
        "  @A     m             1      10  $0.2500",
        "  total: 1 request, 10 tokens, $0.2500",
    ]
    for panel in board.panels.values():
        bundle = panel._repr_mimebundle_()
        assert bundle["text/plain"] == str(panel) and str(panel).splitlines()[0] == repr(panel)
        html = bundle["text/html"]
        title = re.match(r'<div class="aklab-static"><div class="aklab-static-title"[^>]*>(.*?)</div>', html)
        assert title is not None and title[1] == f"<b>{panel.title}</b> · {panel.model.summary()}"


def test_empty_panels_say_so() -> None:
    panels = [RosterPanel(), TranscriptPanel(), ContextPanel(), UsagePanel()]
    try:
        assert [str(p).splitlines()[1] for p in panels] == [
            "  no team members yet",
            "  no messages yet",
            "  no context updates yet",
            "  no model requests yet",
        ]
        for panel in panels:
            html = panel._repr_mimebundle_()["text/html"]
            assert str(panel).splitlines()[1].strip() in html and SNAPSHOT_NOTE in html
    finally:
        for panel in panels:
            panel.close()


def test_the_static_forms_show_who_is_busy_and_what_is_being_written(board: Dashboard) -> None:
    board.feed(StartMessage(sender=addr("@A")))
    board.feed(StartMessage(sender=addr("@B")))
    board.feed(busy("@A", True))
    board.feed(busy("@B", True))
    stream = OutputStreamEvent(agent="@B", run_id="r", index=0, recipient="@A", message_type="request", text="Half")
    board.feed(EventMessage(event=stream))
    text = str(board)
    assert "  @A      A     —      busy" in text and "  @B      B     —      busy" in text
    assert "  @B → @A (request, writing…): Half\n  @A working…" in text
    html = board._repr_mimebundle_()["text/html"]
    assert '<div class="aklab-static-live"><b>@B</b> → <b>@A</b> (request) <i>writing…</i>' in html
    assert "@A working…" in html


def test_a_filtered_transcript_says_whose_messages_it_shows(board: Dashboard) -> None:
    board.feed(sent("@Human", "@A", "to A"))
    board.feed(sent("@Human", "@B", "to B"))
    board.transcript.model.set_agent("@B")
    assert str(board.transcript).splitlines()[1:] == ["  (messages to or from @B)", "  @Human → @B (request): to B"]
    assert "messages to or from @B" in board.transcript._repr_mimebundle_()["text/html"]


def test_message_text_is_escaped_in_html_and_stripped_of_control_characters_in_text(board: Dashboard) -> None:
    evil = '<script>alert("x")</script> & <img src=x onerror=alert(1)>\x1b[31mred\x07'
    board.feed(StartMessage(sender=ActorAddress("id", "@<b>Eve</b>", "<i>Spy</i>")))
    board.feed(sent("@<b>Eve</b>", "@A", evil))
    board.feed(context("@<b>Eve</b>", 1, f"## <h1>Goal</h1>\n{evil}"))
    board.feed(EventMessage(event=LlmUsageEvent(agent="@<b>Eve</b>", run_id="r", model="<svg onload=x>")))
    bundle = board._repr_mimebundle_()
    html = bundle["text/html"]
    for raw in ("<script", "<img", "<svg", "<b>Eve", "<i>Spy", "<h1>"):
        assert raw not in html, raw
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &lt;img src=x onerror=alert(1)&gt;" in html
    assert "<b>@&lt;b&gt;Eve&lt;/b&gt;</b> → <b>@A</b>" in html
    text = bundle["text/plain"]
    assert "\x1b" not in text and "\x07" not in text
    assert '@<b>Eve</b> → @A (request): <script>alert("x")</script> & <img src=x onerror=alert(1)> [31mred' in text


def test_a_long_run_shows_its_last_messages_within_bounds(board: Dashboard) -> None:
    page = ("<&>\"' " * 2_000 + "\n") * 5  # 60,000 characters that escaping makes longer still
    with board.hub.batched():
        for i in range(1_000):
            board.feed(sent(f"@A{i % 100}", "@B", f"message {i}\n{page}"))
        for i in range(100):
            board.feed(StartMessage(sender=addr(f"@A{i}")))
            board.feed(usage(f"@A{i}"))
            block = "\n".join(["## S", *(f"line {j} " + "<" * 400 for j in range(500))])
            board.feed(context(f"@A{i}", 1, block))
            board.feed(context(f"@A{i}", 2, block.replace("line 250 ", "LINE 250 ")))
    bundle = board._repr_mimebundle_()
    text, html = bundle["text/plain"], bundle["text/html"]
    assert len(text) < 16_000 and len(text.splitlines()) < 100
    assert max(len(line) for line in text.splitlines()) <= TEXT_WIDTH + 4  # indented by at most 4
    assert len(html) < 200_000  # not the 60 MB the run holds

    transcript = str(board.transcript).splitlines()
    assert transcript[0] == "<TranscriptPanel: 1,000 messages>" == repr(board.transcript)  # as counts are written
    assert transcript[1] == "  (the last 12 of 1,000 messages)" and len(transcript) == 2 + TEXT_ROWS
    assert transcript[-1].startswith("  @A99 → @B (request): message 999 (+")
    assert "  … and 88 more members" in text and "  … and 88 more agents" in text
    panel = board.transcript._repr_mimebundle_()["text/html"]
    assert panel.count('class="aklab-static-msg"') == TEXT_ROWS
    assert "message 988\n" in panel and "message 987\n" not in panel
    assert f"… ({len(page) + len('message 999') + 1 - HTML_CHARS:,} more characters)" in panel


def test_a_long_context_block_shows_its_changes_and_the_lines_around_them() -> None:
    panel = ContextPanel()
    try:
        block = "\n".join(["## Notes", *(f"note {j}" for j in range(200))])
        panel.hub.feed(context("@A", 1, block))
        panel.hub.feed(context("@A", 2, block.replace("note 100\n", "note one hundred\n")))
        html = panel._repr_mimebundle_()["text/html"]
        body = re.sub(r"<[^>]*>", "", html[html.index("<pre") : html.index("</pre>")])  # the text of the lines
        assert '<span style="background:#e6ffec">+ note one hundred</span>' in html
        assert "- note 100\n+ note one hundred" in body
        assert "  note 98\n  note 99\n- note 100" in body and "  note 101\n  note 102\n  …" in body
        assert "note 97\n" not in body and "note 103" not in body
        assert "(196 lines not shown)" in body and body.count("\n") < HTML_LINES
        assert str(panel).splitlines()[1:] == [
            "  @A · context update 2 · +1 −1 lines",
            "    - note 100",
            "    + note one hundred",
        ]
    finally:
        panel.close()


def test_a_cells_live_view_keeps_its_fixed_text_and_no_snapshot() -> None:
    with Lab(store=False) as lab:
        lab.ask("Plan the login page", timeout=20)
        panel = ask_transcript(lab)
        try:
            bundle = LiveView(panel)._repr_mimebundle_()
            # displayed as the ask starts, a snapshot would hold whatever had arrived by then
            assert bundle.keys() == {"text/plain", WIDGET_VIEW} and bundle["text/plain"] == LIVE_TEXT
            assert "text/html" in panel._repr_mimebundle_()  # the panel itself, displayed later, has one
        finally:
            panel.close()


def test_ipython_shows_the_dashboard_content_where_it_cannot_draw_the_widget(shell: InteractiveShell) -> None:
    assert shell.run_cell("%%ask\nPlan the login page\n").error_in_exec is None
    board = shell.run_cell("%aklab dashboard").result
    data, _ = shell.display_formatter.format(board)
    assert data["text/plain"] == AFTER_ONE_ASK and data["text/html"] == board._repr_mimebundle_()["text/html"]
    # a terminal IPython asks for text/plain only
    plain, _ = shell.display_formatter.format(board, include={"text/plain"})
    assert plain == {"text/plain": AFTER_ONE_ASK}
