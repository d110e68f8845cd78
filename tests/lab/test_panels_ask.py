"""A cell's transcript shows its own ask; commands show once; context deltas; rebinding."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from typing import Any, cast

import pytest

from aklab.agent import AgentBusyEvent, AgentMessage, ContextUpdateEvent, OperatorActionEvent
from aklab.core import ActorAddress, ErrorMessage, EventMessage, Message, SentMessage
from aklab.errors import ConfigError
from aklab.lab.panels import (
    ContextModel,
    Dashboard,
    TranscriptModel,
    ask_transcript,
    attach_panels,
    carry_panels,
    detach_panels,
    watch_lab,
)
from aklab.lab.panels._feed import ask_of
from aklab.lab.recorder import TeamRecorder
from aklab.lab.session import Lab
from aklab.llm.streaming import OutputStreamEvent

MSG = 'class="aklab-msg"'
NOTE = 'class="aklab-note-row"'
# What must never be in a text/plain repr: hex ids, addresses, times.
UNSTABLE = re.compile(r"[0-9a-f]{8,}|0x[0-9a-f]+|\d\d:\d\d")


def addr(name: str) -> ActorAddress:
    return ActorAddress(agent_id=f"id-{name}", name=name, role=name.strip("@"))


def sent(sender: str, recipient: str, content: str, intent: Any = "request", ask: str | None = None) -> SentMessage:
    message = AgentMessage(content=content, type=intent, sender=addr(sender), recipient=addr(recipient), ask_id=ask)
    return SentMessage(sender=message.sender, recipient=message.recipient, message=message, ask_id=ask)


def command_note(agent: str, command: str, result: str | None) -> EventMessage:
    event = OperatorActionEvent(agent=agent, operator="@Human", command=command, result=result)
    return EventMessage(event=event)


def context(agent: str, number: int, block: str) -> EventMessage:
    return EventMessage(event=ContextUpdateEvent(agent=agent, number=number, block=block))


class FakeLab:
    """What the panels read from a lab: its recorder, its team and its last ask."""

    def __init__(self, *members: str) -> None:
        self.recorder = TeamRecorder()
        self.members = [addr(m) for m in members]
        self.last_ask_id: str | None = None
        self._dashboard: Dashboard | None = None

    def team(self) -> list[ActorAddress]:
        return self.members

    def say(self, record: Message) -> None:
        self.recorder.on_message(record)


@pytest.fixture
def lab() -> Iterator[Lab]:
    with Lab("dev-team") as lab:
        yield lab


# -- one ask per cell, through a real team -------------------------------------------------
def test_each_ask_has_its_own_transcript_that_later_asks_do_not_fill(lab: Lab) -> None:
    board = lab.dashboard()
    drafts: dict[str, int] = {}

    def count_drafts(record: Message) -> None:
        if isinstance(record, EventMessage) and isinstance(record.event, OutputStreamEvent | AgentBusyEvent):
            assert record.ask_id is not None  # streamed rows and busy turns belong to their ask
            drafts[record.ask_id] = drafts.get(record.ask_id, 0) + 1

    lab.recorder.listeners.append(count_drafts)
    lab.send("Plan the login page")
    first = ask_transcript(lab, lab.last_ask_id)  # as %%ask shows it: right after sending
    assert lab.wait(20)
    first_id = lab.last_ask_id
    lab.send("Now plan the signup page")
    second = ask_transcript(lab)  # the last ask by default
    assert lab.wait(20)
    try:
        for panel in (first, second, board):
            panel.hub.flush()
        assert repr(first) == repr(second) == "<TranscriptPanel: 4 messages>"
        assert repr(board.transcript) == "<TranscriptPanel: 8 messages>"
        one, two = first.shown_html(), second.shown_html()
        assert one.count(MSG) == two.count(MSG) == 4
        assert "Plan the login page" in one and "signup" not in one
        assert "signup" in two and "Plan the login page" not in two
        assert set(drafts) == {first_id, lab.last_ask_id}  # both asks streamed, each under its own id

        # A panel opened later for the first ask replays the same rows.
        late = ask_transcript(lab, first_id)
        assert late.shown_html() == one
        late.close()
    finally:
        lab.recorder.listeners.remove(count_drafts)
        first.close()
        second.close()


def test_the_agent_filter_of_one_cell_leaves_the_other_cells_and_the_dashboard_alone(lab: Lab) -> None:
    board = lab.dashboard()
    lab.ask("Plan the login page", timeout=20)
    first = ask_transcript(lab)
    lab.ask("Now plan the signup page", timeout=20)
    second = ask_transcript(lab)
    try:
        options = [value for _, value in first.filter.options]
        assert options == ["", "@Human", "@Manager", "@Developer"]
        first.filter.value = "@Developer"  # the user picks an agent in the first cell

        assert first.model.agent == "@Developer"
        assert "@Human</b> → <b>@Manager" not in first.shown_html()
        assert second.model.agent == "" and second.filter.value == ""
        assert board.transcript.model.agent == "" and board.transcript.filter.value == ""
        assert second.shown_html().count(MSG) == 4 and board.transcript.shown_html().count(MSG) == 8
    finally:
        first.close()
        second.close()


def test_a_cells_transcript_has_a_text_repr_free_of_ids_and_times(lab: Lab) -> None:
    lab.ask("Plan the login page", timeout=20)
    panel = ask_transcript(lab)
    try:
        bundle = panel._repr_mimebundle_()
        assert bundle["text/plain"].startswith("<TranscriptPanel: 4 messages>\n")
        assert "application/vnd.jupyter.widget-view+json" in bundle
        assert not UNSTABLE.search(bundle["text/plain"]) and not UNSTABLE.search(bundle["text/html"])
    finally:
        panel.close()


def test_a_slash_command_shows_once_in_its_cell_and_on_the_dashboard(lab: Lab) -> None:
    board = lab.dashboard()
    lab.ask("/team_roles", to="@Manager", timeout=10)
    cell = ask_transcript(lab)
    try:
        board.flush()
        for html in (board.transcript.shown_html(), cell.shown_html()):
            assert html.count(NOTE) == 1 and html.count(MSG) == 0
            assert html.count("/team_roles") == 1 and html.count("- Developer: Designs and writes code") == 1
        assert repr(board.transcript) == repr(cell) == "<TranscriptPanel: 0 messages, 1 note>"
    finally:
        cell.close()


def test_closing_a_cells_panel_or_detaching_the_lab_stops_it_following(lab: Lab) -> None:
    lab.ask("Plan the login page", timeout=20)
    closed = ask_transcript(lab)
    kept = ask_transcript(lab)
    assert len(lab.recorder.listeners) == 1  # one feed for every panel of the lab
    closed.close()
    assert len(lab.recorder.listeners) == 1  # the other panel still follows
    detach_panels(lab)
    assert lab.recorder.listeners == []
    assert repr(kept) == "<TranscriptPanel: 4 messages>"  # it keeps what it showed
    kept.close()


def test_an_ask_transcript_needs_an_ask() -> None:
    with pytest.raises(ConfigError, match="send a message first"):
        ask_transcript(cast(Lab, FakeLab("@Human")))


# -- an ask's records, by hand ---------------------------------------------------------------
def test_an_ask_transcript_takes_only_its_asks_records_including_notes_and_errors() -> None:
    fake = FakeLab("@Human", "@Dev")
    fake.say(sent("@Human", "@Dev", "before the panel", ask="a1"))
    panel = ask_transcript(cast(Lab, fake), "a1")
    try:
        fake.say(sent("@Human", "@Dev", "another ask", ask="a2"))
        fake.say(sent("@Dev", "@Human", "answer", intent="response", ask="a1"))
        failed = AgentMessage(content="x", ask_id="a1")
        # A handler's error carries the ask of the message it failed on.
        fake.say(
            ErrorMessage(sender=addr("@Dev"), exception_type="ValueError", exception_value="v", current_message=failed)
        )
        panel.hub.flush()
        html = panel.shown_html()
        assert "before the panel" in html and "answer" in html and "another ask" not in html
        assert "ValueError: v" in html
        assert repr(panel) == "<TranscriptPanel: 2 messages, 1 note>"
    finally:
        panel.close()
    assert fake.recorder.listeners == []


def test_ask_of_reads_the_record_then_the_message_it_is_about() -> None:
    assert ask_of(sent("@A", "@B", "x", ask="k")) == "k"
    inner = AgentMessage(content="x", ask_id="m")
    assert ask_of(SentMessage(message=inner)) == "m"
    assert ask_of(ErrorMessage(exception_type="E", exception_value="v", current_message=inner)) == "m"
    assert ask_of(EventMessage(event=None)) is None


# -- slash commands, by hand -------------------------------------------------------------------
def test_a_command_the_message_and_its_result_reply_fold_into_one_note() -> None:
    model = TranscriptModel()
    model.feed(sent("@Human", "@Dev", "hello"))
    model.feed(sent("@Human", "@Dev", "/clear"))
    model.feed(sent("@Dev", "@Human", "Context cleared.", intent="notification"))
    model.feed(command_note("@Dev", "/clear", "Context cleared."))
    view = model.view()
    assert [(r.intent, r.content, r.is_note) for r in view.rows] == [
        ("request", "hello", False),
        ("command", "/clear\nContext cleared.", True),
    ]
    assert model.summary() == "1 message, 1 note"


def test_a_commands_reply_recorded_after_the_note_is_left_out_too() -> None:
    model = TranscriptModel()
    model.feed(sent("@Human", "@Dev", "/clear"))
    model.feed(command_note("@Dev", "/clear", "Context cleared."))
    model.feed(sent("@Dev", "@Human", "Context cleared.", intent="notification"))
    model.feed(sent("@Dev", "@Human", "Context cleared.", intent="notification"))  # a second, real one stays
    assert [r.intent for r in model.view().rows] == ["command", "notification"]
    assert model.summary() == "1 message, 1 note"


def test_a_command_run_from_code_keeps_the_messages_around_it() -> None:
    model = TranscriptModel()
    model.feed(sent("@Dev", "@Human", "ok", intent="notification"))
    model.feed(command_note("@Dev", "/clear", "ok"))  # no message carried it: nothing to fold
    assert [r.intent for r in model.view().rows] == ["notification", "command"]


# -- context updates: deltas against the composed state ------------------------------------
FULL = "**Context update 1** — current state.\n\n## Plan\n- step 1\n- step 2\n\n## Team\n- @Dev (Dev)"
DELTA = "**Context update 2** — state has changed since the last update.\n\n## Team\n- @Dev (Dev)\n- @QA (QA)"


def test_a_delta_block_leaves_the_sections_it_omits_unchanged() -> None:
    model = ContextModel()
    model.feed(context("@Dev", 1, FULL))
    model.feed(context("@Dev", 2, DELTA))
    newest, first = model.view().blocks
    assert first.first and all(mark == " " for mark, _ in first.lines)
    assert [line for mark, line in newest.lines if mark != " "] == ["- @QA (QA)"]
    assert (newest.added, newest.removed) == (1, 0)
    assert [line for _, line in newest.lines] == [
        "## Plan",
        "- step 1",
        "- step 2",
        "",
        "## Team",
        "- @Dev (Dev)",
        "- @QA (QA)",
    ]
    assert newest.markers == ("**Context update 2** — state has changed since the last update.",)
    html = newest.html()
    assert "context update 2 · +1 −0 lines · 1 of 2 sections sent" in html and "aklab-del" not in html


def test_a_changed_section_in_a_delta_is_diffed_and_a_full_block_starts_again() -> None:
    model = ContextModel()
    model.feed(context("@Dev", 1, FULL))
    model.feed(context("@Dev", 2, DELTA.replace("## Team\n- @Dev (Dev)\n- @QA (QA)", "## Plan\n- step 1\n- step 3")))
    newest = model.view().blocks[0]
    assert [(m, line) for m, line in newest.lines if m != " "] == [("-", "- step 2"), ("+", "- step 3")]
    assert "- @Dev (Dev)" in [line for _, line in newest.lines]  # the team section is still there
    # A full snapshot (after /clear) replaces everything: the team section is gone.
    model.feed(context("@Dev", 1, "**Context update 1** — current state.\n\n## Plan\n- step 1\n- step 3"))
    latest = model.view().blocks[0]
    assert [line for mark, line in latest.lines if mark == "-"] == ["", "## Team", "- @Dev (Dev)"]


# -- moving panels to a new lab ----------------------------------------------------------------
def test_a_rebound_dashboard_forgets_the_old_lab_and_follows_the_new_one() -> None:
    old, new = FakeLab("@Human", "@Old"), FakeLab("@Human", "@New", "@Other")
    old.say(sent("@Human", "@Old", "old talk"))
    board = attach_panels(cast(Lab, old))
    try:
        board.transcript.filter.value = "@Old"
        new.say(sent("@Human", "@New", "new talk"))
        new.say(context("@New", 1, "## Plan\n- x"))
        assert board.rebind(cast(Lab, new)) is board
        assert old.recorder.listeners == []
        old.say(sent("@Human", "@Old", "too late"))
        new.say(sent("@New", "@Human", "live on the new lab", intent="response"))
        board.flush()
        html = board.transcript.shown_html()
        assert "old talk" not in html and "too late" not in html
        assert "new talk" in html and "live on the new lab" in html
        assert board.transcript.model.agent == ""  # the old lab's filter went with it
        assert [repr(p) for p in board.panels.values()] == [
            "<RosterPanel: 3 members>",
            "<TranscriptPanel: 2 messages>",
            "<ContextPanel: 1 update from 1 agent>",
            "<UsagePanel: 0 requests by 0 agents>",
        ]
    finally:
        board.close()
    assert new.recorder.listeners == []


def test_carry_panels_moves_the_labs_dashboard_so_closing_the_old_lab_keeps_it_open() -> None:
    with Lab() as old:
        board = old.dashboard()
        usage = old.panel("usage")
        old.ask("Plan the login page", timeout=20)
        with Lab() as new:
            assert carry_panels(cast(Lab, old), new) is board
            old.close()
            assert board.widget.comm is not None  # still open wherever it is displayed
            assert new.dashboard() is board and new.panel("usage") is usage
            assert repr(board.transcript) == "<TranscriptPanel: 0 messages>"
            new.ask("Plan the login page", timeout=20)
            board.flush()
            assert repr(board.transcript) == "<TranscriptPanel: 4 messages>"
            assert repr(usage) == "<UsagePanel: 3 requests by 2 agents>"
        assert board.widget.comm is None  # the new lab closed it


def test_a_watched_lab_keeps_its_notes_for_a_panel_opened_later() -> None:
    fake = FakeLab("@Human", "@Dev")
    stop = watch_lab(cast(Lab, fake))
    fake.say(sent("@Human", "@Dev", "/clear", ask="a1"))
    fake.say(sent("@Dev", "@Human", "Context cleared.", intent="notification", ask="a1"))
    fake.say(
        EventMessage(
            event=OperatorActionEvent(agent="@Dev", operator="@Human", command="/clear", result="Context cleared."),
            ask_id="a1",
        )
    )
    cell, board = ask_transcript(cast(Lab, fake), "a1"), attach_panels(cast(Lab, fake))
    try:
        for panel in (cell, board.transcript):
            assert repr(panel) == "<TranscriptPanel: 0 messages, 1 note>"
    finally:
        cell.close()
        board.close()
    assert len(fake.recorder.listeners) == 1  # still watched
    stop()
    assert fake.recorder.listeners == []


def _busy(agent: str, is_busy: bool, ask: str) -> EventMessage:
    return EventMessage(event=AgentBusyEvent(agent=agent, role=agent.strip("@"), busy=is_busy), ask_id=ask)


def test_a_panel_opened_while_an_agent_thinks_shows_it_working() -> None:
    """%%ask opens its cell's transcript just after sending: a model already thinking by
    then shows as working there (and on a dashboard opened later), until its turn ends."""
    fake = FakeLab("@Human", "@Dev")
    stop = watch_lab(cast(Lab, fake))

    fake.say(sent("@Human", "@Dev", "Plan it", ask="a1"))
    fake.say(_busy("@Dev", True, "a1"))
    fake.say(_busy("@Other", True, "a2"))
    fake.say(_busy("@Gone", True, "a1"))
    fake.say(_busy("@Gone", False, "a1"))
    cell, board = ask_transcript(cast(Lab, fake), "a1"), attach_panels(cast(Lab, fake))
    try:
        assert cell.model.view().working == ("@Dev",)  # not another ask's agent, not one that finished
        assert board.transcript.model.view().working == ("@Dev", "@Other")
        fake.say(_busy("@Dev", False, "a1"))
        assert cell.model.view().working == () and board.transcript.model.view().working == ("@Other",)
        later = ask_transcript(cast(Lab, fake), "a1")
        assert later.model.view().working == ()
        later.close()
    finally:
        cell.close()
        board.close()
        stop()


def test_an_ask_queued_behind_another_says_whom_it_waits_for() -> None:
    fake = FakeLab("@Human", "@Dev")
    stop = watch_lab(cast(Lab, fake))
    fake.say(sent("@Human", "@Dev", "First", ask="a1"))
    fake.say(_busy("@Dev", True, "a1"))
    fake.say(sent("@Human", "@Dev", "Second", ask="a2"))
    first, second = ask_transcript(cast(Lab, fake), "a1"), ask_transcript(cast(Lab, fake), "a2")
    try:
        assert (second.model.view().waiting, second.model.view().working) == ("@Dev", ())
        second.hub.flush()
        assert '<b>@Dev</b> <span style="color:#07a;font-style:italic">busy with another ask' in second.shown_html()
        assert repr(second) == "<TranscriptPanel: 1 message>"  # the line is not a message
        assert (first.model.view().waiting, first.model.view().working) == ("", ("@Dev",))
        second.model.set_agent("@Human")  # filtered to someone else: no line
        assert second.model.view().waiting == ""
        second.model.set_agent(None)

        fake.say(_busy("@Dev", False, "a1"))  # live: the first ask's turn ends...
        assert second.model.view().waiting == ""
        fake.say(_busy("@Dev", True, "a2"))  # ...and the second one's starts
        assert (second.model.view().waiting, second.model.view().working) == ("", ("@Dev",))
        assert first.model.view().working == ()

        fake.say(sent("@Dev", "@Human", "Done", "response", ask="a2"))
        fake.say(_busy("@Dev", False, "a2"))
        assert (second.model.view().waiting, second.model.view().working) == ("", ())
        assert "busy with another ask" not in repr(second)
    finally:
        first.close()
        second.close()
        stop()


def test_a_second_ask_to_a_busy_team_shows_it_waits_then_runs() -> None:
    """Through a real team: the Manager's model holds the first ask until released; the
    second ask's panel says it waits for @Manager, then shows its answer."""
    from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from aklab.lab.teams import builtin_team
    from aklab.llm import ModelConfig

    started, gate = threading.Event(), threading.Event()

    def gated(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if not started.is_set():
            started.set()
            assert gate.wait(30), "the test never released the first ask"
        args = {"messages": [{"recipient": "@Human", "message_type": "response", "message": "answered"}]}
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, json.dumps(args))])

    busy_first, second_sent = threading.Event(), threading.Event()
    with Lab(builtin_team("dev-team").with_model(ModelConfig(model=FunctionModel(gated)))) as held:

        def heard(record: Message) -> None:
            if isinstance(record, EventMessage) and isinstance(record.event, AgentBusyEvent) and record.event.busy:
                busy_first.set()
            if isinstance(record, SentMessage) and record.message.content == "Then this one.":
                second_sent.set()

        held.recorder.listeners.append(heard)  # after the lab's feed: it has the record when this runs
        held.send("Hold the team.")
        assert started.wait(30) and busy_first.wait(30)
        held.send("Then this one.")
        panel = ask_transcript(held)  # as %%ask does: just after sending
        try:
            assert second_sent.wait(30)
            assert panel.model.view().waiting == "@Manager"
            gate.set()
            assert held.wait(30)
            view = panel.model.view()
            assert (view.waiting, view.working) == ("", ())
            assert [(r.sender, r.recipient) for r in view.rows] == [("@Human", "@Manager"), ("@Manager", "@Human")]
        finally:
            gate.set()
            panel.close()
