from __future__ import annotations

from collections.abc import Iterator

import pytest

from aklab.agent import AgentBusyEvent, AgentMessage, RoutingSkippedEvent
from aklab.agent.output_models import Intent
from aklab.core import ActorAddress, EventMessage, Message, SentMessage
from aklab.lab.panels import Dashboard, TranscriptModel, attach_panels
from aklab.lab.session import Lab
from aklab.lab.teamfile import team_from_dict
from aklab.llm import ModelConfig
from aklab.llm.streaming import OutputStreamEvent
from tests.fakeserver import FakeOpenAI, output
from tests.lab.conftest import CommTraffic

LIVE = 'class="aklab-live"'
REAL = 'class="aklab-msg"'


def addr(name: str) -> ActorAddress:
    return ActorAddress(agent_id=f"id-{name}", name=name, role=name.strip("@"))


def sent(sender: str, recipient: str, content: str, intent: Intent = "request") -> SentMessage:
    message = AgentMessage(content=content, type=intent, sender=addr(sender), recipient=addr(recipient))
    return SentMessage(sender=message.sender, recipient=message.recipient, message=message)


def stream(
    agent: str,
    text: str,
    *,
    recipient: str = "",
    intent: str = "",
    index: int = 0,
    run: str = "run-1",
    attempt: int = 0,
    done: bool = False,
    dropped: bool = False,
) -> EventMessage:
    event = OutputStreamEvent(
        agent=agent,
        run_id=run,
        attempt=attempt,
        index=index,
        recipient=recipient,
        message_type=intent,
        text=text,
        done=done or dropped,
        dropped=dropped,
    )
    return EventMessage(event=event)


def busy(agent: str, is_busy: bool) -> EventMessage:
    return EventMessage(event=AgentBusyEvent(agent=agent, role=agent.strip("@"), busy=is_busy))


@pytest.fixture
def board() -> Iterator[Dashboard]:
    board = Dashboard()
    yield board
    board.close()


def html(board: Dashboard) -> str:
    value: str = board.transcript.shown_html()
    return value


def test_a_message_being_written_shows_as_a_provisional_row_until_it_is_sent(board: Dashboard) -> None:
    board.feed(sent("@Human", "@Manager", "Plan it"))
    board.feed(busy("@Manager", True))
    board.feed(stream("@Manager", "Here is the pl", intent="response"))
    page = html(board)
    assert page.count(LIVE) == 1 and page.count(REAL) == 1
    assert "<b>@Manager</b> → <b>…</b>" in page and "writing…" in page and "Here is the pl▍" in page
    assert page.index(REAL) < page.index(LIVE)
    assert repr(board.transcript) == "<TranscriptPanel: 1 message>"  # provisional rows are not counted

    board.feed(stream("@Manager", "Here is the plan & more", recipient="@Human", intent="response", done=True))
    page = html(board)
    assert page.count(LIVE) == 1 and "sending…" in page and "Here is the plan &amp; more▍" in page
    assert "<b>@Manager</b> → <b>@Human</b>" in page

    board.feed(busy("@Manager", False))  # the turn ends before its output is routed: a complete row stays
    assert html(board).count(LIVE) == 1
    board.feed(sent("@Manager", "@Human", "Here is the plan & more", "response"))
    page = html(board)
    assert page.count(LIVE) == 0 and page.count(REAL) == 2 and "▍" not in page
    assert repr(board.transcript) == "<TranscriptPanel: 2 messages>"


def test_an_agent_whose_turn_has_written_nothing_yet_shows_as_working(board: Dashboard) -> None:
    """A slow model's first seconds: the live view says who is working instead of showing nothing."""
    board.feed(busy("@Manager", True))
    page = html(board)
    assert "no messages yet" not in page and page.count("working…") == 1 and "<b>@Manager</b>" in page
    board.feed(sent("@Human", "@Manager", "Plan it"))
    board.feed(busy("@Developer", True))
    page = html(board)
    assert page.count("working…") == 2 and page.index(REAL) < page.index("working…")
    assert repr(board.transcript) == "<TranscriptPanel: 1 message>"  # not counted

    board.feed(stream("@Manager", "Here is", intent="response"))  # writing now: its row says so
    page = html(board)
    assert page.count("working…") == 1 and "writing…" in page
    board.transcript.filter.value = "@Manager"  # the filter hides other agents' lines
    assert "working…" not in html(board)
    board.transcript.filter.value = ""
    board.feed(busy("@Developer", False))
    board.feed(busy("@Manager", False))
    assert "working…" not in html(board) and "writing…" not in html(board)
    assert board.transcript.model.view().working == ()


def test_rows_that_will_not_be_sent_go_away() -> None:
    model = TranscriptModel()
    live = lambda: [(r.sender, r.content) for r in model.view().live]  # noqa: E731

    model.feed(stream("@A", "first draft", run="r1"))
    model.feed(stream("@A", "first draft", run="r1", dropped=True))  # e.g. the run was interrupted
    assert live() == []

    model.feed(stream("@A", "half", run="r2", index=0))
    model.feed(stream("@A", "whole", run="r2", index=1, recipient="@B", intent="request", done=True))
    model.feed(stream("@C", "other agent", run="r3"))
    model.feed(busy("@A", False))  # a row still being written when its turn ended goes
    assert live() == [("@A", "whole"), ("@C", "other agent")]
    model.feed(busy("@A", True))  # a complete row its agent never sent goes when the next turn starts
    assert live() == [("@C", "other agent")]

    model.feed(stream("@C", "to a ghost", run="r3", recipient=" @Ghost", intent="request", done=True))
    model.feed(EventMessage(event=RoutingSkippedEvent(agent="@C", recipient="@Ghost", reason="no such member")))
    assert live() == []
    assert model.summary() == "0 messages, 1 note"


def test_a_sent_message_replaces_the_draft_with_its_text_or_its_address() -> None:
    model = TranscriptModel()
    live = lambda: [r.content for r in model.view().live]  # noqa: E731
    model.feed(stream("@M", "build it", recipient="Developer", intent="request", index=0, done=True))
    model.feed(stream("@M", "ok", recipient="@Human", intent="response", index=1, done=True))
    model.feed(stream("@M", "ok", recipient="@QA", intent="notification", index=2, done=True))

    model.feed(sent("@M", "@Developer2", "build it"))  # a hired member: matched by its text
    assert live() == ["ok", "ok"]
    model.feed(sent("@M", "@QA", "ok", "notification"))  # same text twice: the one with the same address goes
    assert [r.recipient for r in model.view().live] == ["@Human"]
    model.feed(sent("@Other", "@Human", "ok", "response"))  # another sender settles nothing
    assert live() == ["ok"]
    model.feed(sent("@M", "@human", "OK (edited)", "response"))  # same recipient and intent
    assert live() == []


def test_drafts_follow_the_agent_filter_and_updates_keep_their_place() -> None:
    model = TranscriptModel()
    model.feed(stream("@A", "to b", recipient="@B", intent="request", index=0))
    model.feed(stream("@C", "to d", recipient="@D", intent="request", run="r2"))
    model.feed(stream("@A", "to b, longer", recipient="@B", intent="request", index=0))
    assert [r.content for r in model.view().live] == ["to b, longer", "to d"]
    model.set_agent("@B")
    view = model.view()
    assert [r.content for r in view.live] == ["to b, longer"] and view.rows == ()
    assert "writing…" in view.html()


def test_a_real_team_shows_drafts_while_it_works_and_none_once_done() -> None:
    with Lab() as lab:
        board = attach_panels(lab)
        seen: list[int] = []

        def watch(record: Message) -> None:
            if isinstance(record, EventMessage) and isinstance(record.event, OutputStreamEvent):
                seen.append(len(board.transcript.model.view().live))

        lab.recorder.listeners.append(watch)
        try:
            lab.ask("Plan the login page", timeout=20)
            board.flush()
            assert seen and max(seen) >= 1  # the board had drafts on show while the agents wrote
            page = html(board)
            assert page.count(LIVE) == 0 and page.count(REAL) == 4
            assert repr(board.transcript) == "<TranscriptPanel: 4 messages>"
        finally:
            lab.recorder.listeners.remove(watch)
            board.close()


def test_drafts_stream_in_through_the_real_provider_and_settle_into_the_sent_message(
    fake_openai: FakeOpenAI,
) -> None:
    """Tool mode over pydantic-ai's OpenAI provider, the loopback server streaming the output
    tool's arguments a few characters at a time: the transcript shows the message growing as a
    draft (what OutputStreamer reads from the real chunks), then only the sent message."""
    answer = "Paris is the capital of France, on the Seine. " * 3
    reply = {"messages": [{"recipient": "@Human", "message_type": "response", "message": answer.strip()}]}
    fake_openai.default = output(reply)
    cfg = ModelConfig(provider="openai-compatible", model="fake", base_url=fake_openai.url, output_mode="tool")
    solo = {"name": "solo", "entry": "Solo", "roles": [{"role": "Solo", "prompt": "You are Solo."}]}
    with Lab(team_from_dict(solo), model=cfg, store=False) as lab:
        board = attach_panels(lab)
        drafts: list[str] = []

        def watch(record: Message) -> None:
            if isinstance(record, EventMessage) and isinstance(record.event, OutputStreamEvent):
                drafts.append(record.event.text)

        lab.recorder.listeners.append(watch)
        try:
            assert [m.content for m in lab.ask("What is the capital of France?", timeout=20)] == [answer.strip()]
            board.flush()
            assert fake_openai.bodies[0]["stream"] is True
            assert len(drafts) >= 2 and len(set(drafts)) >= 2  # the draft grew over several chunks
            assert all(answer.strip().startswith(d) for d in drafts if d)
            page = html(board)
            assert page.count(LIVE) == 0 and page.count(REAL) == 2
        finally:
            lab.recorder.listeners.remove(watch)
            board.close()


def test_a_streamed_answer_rewrites_only_the_live_rows_not_every_recorded_one(traffic: CommTraffic) -> None:
    """Hundreds of long recorded rows are megabytes of HTML: a stream's chunks, flushed four
    times a second, must not send them to the browser again each time."""
    board = Dashboard()
    try:
        long = "a long answer, " * 200
        for i in range(100):
            board.feed(sent("@Human", "@Manager", f"{i}: {long}"))
        traffic.clear()
        board.feed(busy("@Manager", True))
        for n in range(1, 21):
            board.feed(stream("@Manager", "Here is the plan " * n, recipient="@Human", intent="response"))
        live = board.transcript.live_html
        # the working line, then each chunk: nothing else of the transcript
        assert traffic.updates(within=board.transcript.widget) == {live.model_id: 21}
        recorded = sum(len(r.content) for r in board.transcript.model.view().rows)
        assert max(s.size for s in traffic.sent) < 2_000 < recorded
        page = html(board)
        assert page.count(REAL) == 100 and page.count(LIVE) == 1 and page.index(REAL) < page.index(LIVE)

        traffic.clear()
        board.feed(sent("@Manager", "@Human", "Here is the plan " * 20, "response"))  # the real message replaces it
        assert html(board).count(REAL) == 101 and LIVE not in html(board)
        assert len(traffic.to(live)) == 1 and traffic.bytes() < 2 * len(board.transcript.model.view().rows[0].html())
    finally:
        board.close()
