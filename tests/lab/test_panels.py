from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any, cast

import pytest
from ipywidgets.widgets import widget as widget_module

from aklab.agent import (
    AgentBusyEvent,
    AgentMessage,
    ContextUpdateEvent,
    Notice,
    OperatorActionEvent,
    RoutingSkippedEvent,
)
from aklab.agent.output_models import Intent
from aklab.core import ActorAddress, ErrorMessage, EventMessage, SentMessage, StartMessage, StopMessage
from aklab.errors import ConfigError
from aklab.lab.panels import (
    ContextModel,
    Dashboard,
    PanelHub,
    RosterModel,
    RosterPanel,
    TranscriptModel,
    TranscriptPanel,
    UsagePanel,
    attach_panels,
)
from aklab.lab.panels._context import diff_lines
from aklab.lab.panels._feed import lab_feed
from aklab.lab.recorder import TeamRecorder
from aklab.lab.session import Lab
from aklab.llm import LlmUsageEvent

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


# -- hand-made records --------------------------------------------------------------
def addr(name: str) -> ActorAddress:
    return ActorAddress(agent_id=f"id-{name}", name=name, role=name.strip("@"))


def sent(sender: str, recipient: str, content: str, intent: Intent = "request") -> SentMessage:
    message = AgentMessage(content=content, type=intent, sender=addr(sender), recipient=addr(recipient))
    return SentMessage(sender=message.sender, recipient=message.recipient, message=message)


def busy(agent: str, is_busy: bool) -> EventMessage:
    return EventMessage(event=AgentBusyEvent(agent=agent, role=agent.strip("@"), busy=is_busy))


def context(agent: str, number: int, block: str) -> EventMessage:
    return EventMessage(event=ContextUpdateEvent(agent=agent, number=number, block=block))


def usage(agent: str, run: str = "run-1", cost: float | None = None, tokens: int = 10) -> EventMessage:
    event = LlmUsageEvent(agent=agent, role=agent.strip("@"), run_id=run, model="m", input_tokens=tokens, cost_usd=cost)
    return EventMessage(event=event)


def following(lab: Lab) -> int:
    """How many follow the lab's feed (the lab may keep one itself: ``watch_lab``);
    asserts that nothing else listens to its recorder."""
    feed = lab_feed(lab)
    assert lab.recorder.listeners == ([] if feed is None else [feed])
    return 0 if feed is None else feed.followers


def widget_count() -> int:
    # ``Widget.widgets`` is deprecated (a warning, hence an error here); this is its storage.
    return len(widget_module._instances)


@pytest.fixture
def board() -> Iterator[Dashboard]:
    board = Dashboard()
    yield board
    board.close()


@pytest.fixture
def lab() -> Iterator[Lab]:
    with Lab() as lab:
        yield lab


# -- through a real Lab ---------------------------------------------------------------
def test_a_dashboard_attached_before_asking_follows_the_whole_conversation(lab: Lab) -> None:
    own = following(lab)
    board = attach_panels(lab)
    try:
        lab.ask("Plan the login page", timeout=20)
        board.flush()

        assert [repr(p) for p in board.panels.values()] == [
            "<RosterPanel: 3 members>",
            "<TranscriptPanel: 4 messages>",
            "<ContextPanel: 3 updates from 2 agents>",
            "<UsagePanel: 3 requests by 2 agents>",
        ]
        roster = board.roster.html.value
        for name in ("@Human", "@Manager", "@Developer"):
            assert name in roster and name.strip("@") in roster
        assert roster.count("○ idle") == 3

        html = board.transcript.shown_html()
        assert html.count('class="aklab-msg"') == 4
        assert html.index("<b>@Human</b> → <b>@Manager</b>") < html.index("<b>@Manager</b> → <b>@Human</b>")
        assert [v for _, v in board.transcript.filter.options] == ["", "@Human", "@Manager", "@Developer"]

        assert board.context.agent.options == ("@Manager", "@Developer")
        assert board.context.agent.value == "@Manager"
        context_html = board.context.html.value
        assert context_html.index("context update 2") < context_html.index("context update 1")
        assert 'class="aklab-add"' in context_html and "+ - @Developer (Developer)" in context_html

        usage_html = board.usage.html.value
        assert "@Manager" in usage_html and "@Developer" in usage_html
        assert "total: 3 requests" in usage_html and "cost unknown" in usage_html

        assert len(board.widget.children) == 4
        assert board.widget.titles == ("Roster", "Transcript", "Context", "Usage")
    finally:
        board.close()
    assert following(lab) == own  # closing the dashboard unsubscribed it


def test_a_dashboard_attached_after_asking_replays_what_the_live_one_saw(lab: Lab) -> None:
    own = following(lab)
    live = attach_panels(lab)
    lab.ask("Plan the login page", timeout=20)
    late = attach_panels(lab)
    try:
        live.flush()
        assert [repr(p) for p in late.panels.values()] == [repr(p) for p in live.panels.values()]
        assert late.transcript.shown_html() == live.transcript.shown_html()
        assert late.context.html.value == live.context.html.value
        assert late.usage.html.value == live.usage.html.value
        assert late.roster.html.value == live.roster.html.value
    finally:
        live.close()
        late.close()
    assert following(lab) == own


def test_a_dashboard_on_a_resumed_lab_shows_the_context_blocks_from_before_the_restart(tmp_path: Any) -> None:
    """A resumed member's baseline is restored, so its next block is a delta (or none): the
    panel composes each agent's state from the blocks before the restart, read back from
    the store, and shows what the live panel showed."""
    path = tmp_path / "events.sqlite3"
    with Lab(store=path) as first:
        live = attach_panels(first)
        try:
            first.ask("Plan the login page", timeout=20)
            first.ask("And the signup page", timeout=20)
            live.flush()
            shown = live.context.html.value
            view = live.context.model._view()
        finally:
            live.close()
        team_id = first.team_id
    assert view.delivered >= 2
    with Lab.resume(team_id, store=path) as again:
        assert again.context() == []  # memory holds none of them
        board = attach_panels(again)
        try:
            board.flush()
            assert board.context.model._view() == view
            assert board.context.html.value == shown
        finally:
            board.close()


def test_records_arriving_during_the_replay_are_shown_exactly_once() -> None:
    recorder = TeamRecorder()
    recorder.on_message(sent("@Human", "@Manager", "before"))

    class MidReplayLab:
        def __init__(self) -> None:
            self.recorder = recorder

        def team(self) -> list[ActorAddress]:
            # The team keeps talking while attach_panels copies the recorder: this record
            # is both in the recorder and buffered by the listener.
            recorder.on_message(sent("@Manager", "@Human", "during"))
            recorder.on_message(usage("@Manager"))
            return [addr("@Human"), addr("@Manager")]

    board = attach_panels(cast(Lab, MidReplayLab()))
    try:
        recorder.on_message(sent("@Human", "@Manager", "after"))
        board.flush()
        html = board.transcript.shown_html()
        assert [html.count(word) for word in ("before", "during", "after")] == [1, 1, 1]
        assert repr(board.usage) == "<UsagePanel: 1 request by 1 agent>"
        assert repr(board.roster) == "<RosterPanel: 2 members>"
    finally:
        board.close()
    assert recorder.listeners == []


# -- panels fed by hand ---------------------------------------------------------------
def test_the_roster_shows_joins_busy_and_idle_turns_and_departures() -> None:
    panel = RosterPanel()
    try:
        assert repr(panel) == "<RosterPanel: 0 members>"
        panel.hub.feed(StartMessage(sender=addr("@A")))
        panel.hub.feed(StartMessage(sender=addr("@B")))
        panel.hub.feed(busy("@A", True))
        assert "● busy" in panel.html.value and "2 present, 1 busy" in panel.html.value
        panel.hub.feed(busy("@A", False))
        panel.hub.feed(StopMessage(sender=addr("@B")))
        panel.hub.feed(busy("@B", True))  # late, from an agent that already left
        assert panel.html.value.count("○ idle") == 1 and panel.html.value.count("– left") == 1
        assert repr(panel) == "<RosterPanel: 1 member, 1 left>"
        panel.hub.feed(StartMessage(sender=addr("@B")))
        assert repr(panel) == "<RosterPanel: 2 members>"
    finally:
        panel.close()


def test_the_transcript_escapes_content_and_filters_by_agent(board: Dashboard) -> None:
    panel = board.transcript
    board.feed(sent("@Human", "@Manager", "<script>alert('hi')</script> & more"))
    board.feed(sent("@Manager", "@Developer", "build it"))
    board.feed(sent("@Developer", "@Manager", "done", "response"))
    html = panel.shown_html()
    assert "<script>" not in html and "&lt;script&gt;alert(&#x27;hi&#x27;)&lt;/script&gt; &amp; more" in html
    assert "(response)" in html

    panel.filter.value = "@Developer"  # what the frontend does when the user picks an agent
    assert panel.model.agent == "@Developer"
    assert panel.shown_html().count('class="aklab-msg"') == 2 and "alert" not in panel.shown_html()

    board.feed(sent("@Manager", "@QA", "test it"))  # a new agent: the options grow, the choice stays
    assert [v for _, v in panel.filter.options][-1] == "@QA"
    assert panel.filter.value == "@Developer"
    assert panel.shown_html().count('class="aklab-msg"') == 2

    panel.filter.value = ""
    assert panel.shown_html().count('class="aklab-msg"') == 4
    assert repr(panel) == "<TranscriptPanel: 4 messages>"


def test_the_transcript_renders_only_the_last_rows() -> None:
    panel = TranscriptPanel(limit=500)
    try:
        with panel.hub.batched():
            for i in range(600):
                panel.hub.feed(sent("@A", "@B", f"message {i}."))
        html = panel.shown_html()
        assert html.count('class="aklab-msg"') == 500
        assert "showing the last 500 of 600 messages" in html
        assert "message 99." not in html and "message 100." in html and "message 599." in html
        assert repr(panel) == "<TranscriptPanel: 600 messages>"
    finally:
        panel.close()


def test_the_transcript_shows_commands_unrouted_messages_and_errors_as_notes(board: Dashboard) -> None:
    board.feed(EventMessage(event=OperatorActionEvent(agent="@Dev", operator="@Human", command="clear", result="ok")))
    board.feed(EventMessage(event=RoutingSkippedEvent(agent="@Dev", recipient="@Ghost", reason="no such member")))
    board.feed(ErrorMessage(sender=addr("@Dev"), exception_type="ValueError", exception_value="bad <input>"))
    notice = Notice(content="@Dev could not answer: cannot reach the model server", sender=addr("@Dev"))
    board.feed(SentMessage(sender=addr("@Dev"), recipient=addr("@Human"), message=notice))
    board.feed(sent("@Dev", "@Human", "FYI: done", intent="notification"))  # an agent's own notification
    html = board.transcript.shown_html()
    assert html.count('class="aklab-note-row"') == 4
    assert "(command)" in html and "/clear\nok" in html
    assert "(not delivered)" in html and "no such member" in html
    assert "ValueError: bad &lt;input&gt;" in html
    assert "(notice)</span>" in html and "could not answer" in html  # aklab's notice: a note
    assert "(notification)</span>" in html  # an agent's message of that intent: a message
    assert repr(board.transcript) == "<TranscriptPanel: 1 message, 4 notes>"


def test_context_updates_mark_what_changed_since_the_same_agents_previous_block(board: Dashboard) -> None:
    board.feed(context("@A", 1, "# State\nplan: draft\nteam: @A"))
    board.feed(context("@B", 1, "something else"))
    board.feed(context("@A", 2, "# State\nplan: <final>\nteam: @A"))
    panel = board.context
    assert panel.agent.options == ("@A", "@B") and panel.agent.value == "@A"
    html = panel.html.value
    newest, first = html.split('<div class="aklab-context">')[1:]
    assert "context update 2 · +1 −1 lines" in newest
    assert '<span class="aklab-add" style="background:#e6ffec">+ plan: &lt;final&gt;</span>' in newest
    assert ">- plan: draft</span>" in newest and '<span class="aklab-same">  # State</span>' in newest
    assert "first update" in first and "aklab-add" not in first and "aklab-del" not in first

    panel.agent.value = "@B"
    assert "something else" in panel.html.value and "plan" not in panel.html.value
    board.feed(context("@A", 3, "# State"))  # new blocks for @A do not take the user away from @B
    assert panel.agent.value == "@B"
    assert repr(panel) == "<ContextPanel: 4 updates from 2 agents>"


def test_the_usage_panels_text_writes_counts_as_the_total_line_does() -> None:
    """ "1,317 tokens" in the total line and "1,317 requests", not "1317 requests", in its repr."""
    panel = UsagePanel(every=1)
    try:
        event = LlmUsageEvent(agent="@A", role="A", run_id="r", model="m", requests=1317, input_tokens=1317)
        panel.hub.feed(EventMessage(event=event))
        assert repr(panel) == "<UsagePanel: 1,317 requests by 1 agent>"
        assert "total: 1,317 requests, 1,317 tokens" in panel.html.value
    finally:
        panel.close()


def test_diff_lines_marks_additions_and_removals_in_order() -> None:
    assert diff_lines(None, ["a"]) == ((" ", "a"),)
    assert diff_lines(["a", "b", "c"], ["a", "x", "c", "d"]) == (
        (" ", "a"),
        ("-", "b"),
        ("+", "x"),
        (" ", "c"),
        ("+", "d"),
    )


def test_usage_refreshes_every_n_records_or_on_flush() -> None:
    panel = UsagePanel(every=3)
    try:
        panel.hub.feed(usage("@A", "r1", cost=0.5))
        panel.hub.feed(usage("@B<i>", "r2", cost=None))
        assert "no model requests yet" in panel.html.value
        assert repr(panel) == "<UsagePanel: 2 requests by 2 agents>"
        panel.hub.feed(usage("@A", "r1", cost=0.25))
        html = panel.html.value
        assert "total: 3 requests, 30 tokens, at least $0.7500 (1 request unpriced)" in html
        assert "$0.7500" in html and "—" in html and "@B&lt;i&gt;" in html
        panel.hub.feed(usage("@A", "r3", cost=0.25))
        assert "total: 3 requests" in panel.html.value
        panel.hub.flush()
        assert "total: 4 requests" in panel.html.value
    finally:
        panel.close()


# -- threads, comms, reprs --------------------------------------------------------------
def test_records_fed_on_another_thread_reach_the_widgets_without_a_flush(board: Dashboard) -> None:
    done = threading.Event()

    def team_thread() -> None:
        board.feed(StartMessage(sender=addr("@A")))
        board.feed(sent("@Human", "@A", "from a worker thread"))
        done.set()

    threading.Thread(target=team_thread).start()
    assert done.wait(10)
    assert "from a worker thread" in board.transcript.shown_html()
    assert "@A" in board.roster.html.value


def test_concurrent_feeders_and_flushers_leave_every_record_shown(
    board: Dashboard, caplog: pytest.LogCaptureFixture
) -> None:
    start = threading.Barrier(5)

    def feeder(n: int) -> None:
        start.wait()
        for i in range(50):
            board.feed(sent(f"@T{n}", "@Human", f"{n}-{i}"))

    threads = [threading.Thread(target=feeder, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    start.wait()
    while any(t.is_alive() for t in threads):
        board.flush()
    for thread in threads:
        thread.join()
    assert board.transcript.shown_html().count('class="aklab-msg"') == 200
    assert len(board.transcript.filter.options) == 6
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_records_create_no_widgets_or_comms_but_the_transcripts_blocks(board: Dashboard) -> None:
    """The transcript's rows are in blocks, each a widget (and its style): those come and
    go with the rows (test_transcript_blocks); nothing else is made per record."""
    board.feed(sent("@Human", "@A", "warm up"))
    before = widget_count() - 2 * len(board.transcript.rows)
    for i in range(100):
        agent = f"@A{i % 7}"
        board.feed(
            [sent("@Human", agent, f"m{i}"), busy(agent, i % 2 == 0), context(agent, i, f"n={i}"), usage(agent)][i % 4]
        )
    board.flush()
    assert widget_count() == before + 2 * len(board.transcript.rows)
    assert repr(board.transcript) == "<TranscriptPanel: 26 messages>"


def test_the_static_forms_are_the_same_for_the_same_records_while_the_widget_view_is_kept() -> None:
    records = [StartMessage(sender=addr("@A")), sent("@Human", "@A", "hi"), context("@A", 1, "x"), usage("@A")]
    before = widget_count()
    one, two = Dashboard(), Dashboard()
    for record in records:
        one.feed(record)
        two.feed(record)
    bundles = [board._repr_mimebundle_() for board in (one, two)]
    for board, bundle in zip((one, two), bundles, strict=True):
        assert bundle["text/plain"].startswith("<Dashboard: roster, transcript, context, usage>\n")
        assert bundle[WIDGET_VIEW]["model_id"] == board.widget.model_id
    assert bundles[0]["text/plain"] == bundles[1]["text/plain"]
    assert bundles[0]["text/html"] == bundles[1]["text/html"]
    texts = [[p._repr_mimebundle_()["text/plain"].partition("\n")[0] for p in b.panels.values()] for b in (one, two)]
    assert (
        texts[0]
        == texts[1]
        == [
            "<RosterPanel: 1 member>",
            "<TranscriptPanel: 1 message>",
            "<ContextPanel: 1 update from 1 agent>",
            "<UsagePanel: 1 request by 1 agent>",
        ]
    )
    assert one.usage._repr_mimebundle_()[WIDGET_VIEW]["model_id"] == one.usage.widget.model_id
    assert "total: 1 request," in one.usage.html.value  # displaying flushed the held-back usage

    one.close()
    two.close()
    assert widget_count() == before
    closed = one._repr_mimebundle_()  # no widget left to show: the static forms, as they were
    assert closed == {"text/plain": bundles[0]["text/plain"], "text/html": bundles[0]["text/html"]}


def test_batched_pauses_automatic_flushes_and_pump_flushes_while_waiting() -> None:
    panel = TranscriptPanel()
    try:
        with panel.hub.batched():
            panel.hub.feed(sent("@A", "@B", "held"))
            assert "held" not in panel.shown_html()
        assert "held" in panel.shown_html()

        shown: list[int] = []

        def wait(step: float) -> bool:
            # stands in for lab.wait(step): the team talks while the kernel waits
            shown.append(panel.shown_html().count('class="aklab-msg"'))
            panel.hub.feed(sent("@A", "@B", f"pumped {len(shown)}"))
            return len(shown) == 3

        assert panel.hub.pump(wait, timeout=None, interval=0.01)
        assert shown == [1, 2, 3]  # each wait saw the previous record, flushed by the pump
        assert panel.shown_html().count('class="aklab-msg"') == 4
        assert panel.hub.pump(lambda step: False, timeout=0) is False
        assert panel.hub.auto_flush
    finally:
        panel.close()


def test_a_failing_panel_is_logged_and_does_not_stop_the_others(caplog: pytest.LogCaptureFixture) -> None:
    hub = PanelHub()
    broken, fine = RosterPanel(hub), TranscriptPanel(hub)

    def explode(view: Any) -> None:
        raise RuntimeError("render failed")

    broken._apply = explode  # type: ignore[method-assign]
    try:
        with caplog.at_level(logging.ERROR, logger="aklab.lab"):
            hub.feed(StartMessage(sender=addr("@A")))
            hub.feed(sent("@A", "@B", "still shown"))
        assert "still shown" in fine.shown_html()
        assert "RosterPanel could not update its widgets" in caplog.text
    finally:
        broken.close()
        fine.close()


def test_panels_are_found_by_name(board: Dashboard) -> None:
    assert board.panel("Usage") is board.usage
    with pytest.raises(ConfigError, match="no panel 'cost'; choose roster, transcript, context, usage"):
        board.panel("cost")


def test_models_need_no_widgets_and_version_their_views() -> None:
    roster = RosterModel()
    assert roster.view_since(roster.version) is None
    assert roster.join("@A", "Dev") and not roster.join("@A", "Dev")
    version, view = roster.view_since(0) or (0, None)
    assert version == 1 and view is not None and view.members[0].role == "Dev"
    assert repr(roster) == "<RosterModel: 1 member>"

    transcript = TranscriptModel(limit=2, keep=3)
    for i in range(5):
        transcript.feed(sent("@A", "@B", str(i)))
    assert [r.content for r in transcript.view().rows] == ["3", "4"]
    assert transcript.view().matching == 3

    contexts = ContextModel(keep=1)
    contexts.feed(context("@A", 1, "a"))
    contexts.feed(context("@A", 2, "b"))
    assert [b.number for b in contexts.view().blocks] == [2]
    assert "showing the last 1 of 2 updates" in contexts.view().html()
    assert not contexts.feed(sent("@A", "@B", "not a context update"))


def test_the_usage_total_is_honest_about_unknown_counts_and_prices() -> None:
    from aklab.llm.usage import totals_line

    assert totals_line([]) == "0 requests, 0 tokens, $0.0000"  # nothing asked costs nothing
    assert totals_line([usage("@A", "r1", cost=0.5).event]) == "1 request, 10 tokens, $0.5000"
    assert totals_line([usage("@A", "r1", cost=None).event] * 2) == (
        "2 requests, 20 tokens, cost unknown (no price for the model)"
    )
    cut = usage("@A", "r2", cost=None).event.model_copy(update={"input_tokens": None, "output_tokens": None})
    assert totals_line([usage("@A", "r1", cost=0.25).event, cut]) == (
        "2 requests, at least 10 tokens (1 request unreported), at least $0.2500 (1 request unpriced)"
    )
