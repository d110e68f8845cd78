"""Memory stays flat, yet nothing is out of reach: transcripts keep only their newest
records in memory and read older ones back from the event store when asked (the panel's
"show earlier" button, ``lab.transcript(before=..., limit=...)``), and say so when there
is no store to read from."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models.function import AgentInfo, FunctionModel

from aklab.agent import AgentMessage
from aklab.errors import ConfigError
from aklab.lab import Lab
from aklab.lab.panels import Dashboard, TranscriptPanel, ask_transcript, attach_panels
from aklab.lab.teams import TeamSpec
from tests.hardening._team import card, incoming, reply, team

CAP = 10  # messages the recorder and the lab's feed keep in memory in these tests

Row = tuple[str, str, str]  # sender, recipient, content


@pytest.fixture(autouse=True)
def small_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("aklab.lab.recorder.TRANSCRIPT_LIMIT", CAP)
    monkeypatch.setattr("aklab.lab.panels._feed.HISTORY", CAP)


def _echo_team() -> TeamSpec:
    """@Echo answers the human's text; ``count N`` makes it pass N numbers back and forth with @Other."""

    def echo(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        sender, text = incoming(messages)
        last = text.rsplit("\n", 1)[-1]
        if sender == "@Human" and last.startswith("count "):
            return reply(info, [("@Other", "request", f"1 of {last.split()[1]}")])
        if sender == "@Other":
            n, _, total = last.partition(" of ")
            if int(n) >= int(total):
                return reply(info, [("@Human", "response", f"counted to {total}")])
            return reply(info, [("@Other", "request", f"{int(n) + 1} of {total}")])
        return reply(info, [("@Human", "response", f"echo {last}")])

    def other(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        _, text = incoming(messages)
        return reply(info, [("@Echo", "response", text.rsplit("\n", 1)[-1])])

    return team(
        card("Echo", routes_to=["Other"], model=FunctionModel(echo)),
        card("Other", model=FunctionModel(other)),
        entry="Echo",
    )


def _questions(lab: Lab, count: int) -> list[Row]:
    """Ask ``count`` questions; the rows every one of them makes, in the order sent."""
    sent: list[Row] = []
    for i in range(count):
        assert [m.content for m in lab.ask(f"q{i}", timeout=20)] == [f"echo q{i}"]
        sent += [("@Human", "@Echo", f"q{i}"), ("@Echo", "@Human", f"echo q{i}")]
    return sent


def _rows(messages: list[AgentMessage]) -> list[Row]:
    return [(m.sender.name if m.sender else "?", m.recipient.name if m.recipient else "?", m.content) for m in messages]


class _CountingReads:
    """Counts the store's reads (to show that nothing is read until asked)."""

    def __init__(self, lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
        store = lab.store
        assert store is not None
        self.calls = 0
        records = store.records

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return records(*args, **kwargs)

        monkeypatch.setattr(store, "records", counted)


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    with Lab(_echo_team(), store=tmp_path / "events.sqlite3") as lab:
        yield lab


def test_lab_transcript_pages_older_messages_back_from_the_store_in_order_without_duplicates(lab: Lab) -> None:
    sent = _questions(lab, 12)  # 24 messages, memory keeps 10
    assert _rows(lab.transcript()) == sent[-CAP:]
    assert lab.recorder.transcript.dropped == len(sent) - CAP

    pages: list[list[AgentMessage]] = []
    page = lab.transcript(limit=7)
    for _ in range(10):  # bounded: 24 messages in pages of 7
        if not page:
            break
        pages.append(page)
        page = lab.transcript(before=page[0], limit=7)
    assert [len(p) for p in pages] == [7, 7, 7, 3]
    paged = [m for p in reversed(pages) for m in p]
    assert _rows(paged) == sent
    assert len({m.id for m in paged}) == len(sent)  # no duplicates

    assert _rows(lab.transcript("@Echo", before=paged[4].id, limit=3)) == sent[1:4]  # by id, one agent's
    assert lab.transcript(before=paged[0]) == []  # nothing before the first
    with pytest.raises(ConfigError, match="no message with this id is stored"):
        lab.transcript(before="nosuchid", limit=3)
    with pytest.raises(ConfigError, match="limit must be a number of messages >= 1"):
        lab.transcript(limit=0)


def test_the_show_earlier_button_reads_what_memory_let_go_back_from_the_store(
    lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = _CountingReads(lab, monkeypatch)
    board = attach_panels(lab, Dashboard(transcript_limit=4, transcript_keep=6))
    try:
        sent = _questions(lab, 12)
        panel = board.transcript
        assert isinstance(panel, TranscriptPanel)
        panel.page_size = 5
        panel.model.keep_earlier = 50
        board.flush()
        assert [(r.sender, r.recipient, r.content) for r in panel.model.view().rows] == sent[-4:]
        assert reads.calls == 0  # nothing read until asked
        assert not panel.earlier.disabled and panel.earlier.description == "show 5 earlier"

        panel.earlier.click()  # the kept rows first: no read
        assert reads.calls == 0
        assert len(panel.model.view().rows) == 6
        for _ in range(10):  # bounded: 18 more rows in the store, 5 a click
            if panel.earlier.disabled:
                break
            panel.earlier.click()
        assert panel.earlier.disabled
        view = panel.model.view()
        assert [(r.sender, r.recipient, r.content) for r in view.rows] == sent  # in order, none twice, no gap
        assert "18 earlier rows read back from the event store" in panel.shown_html()
        assert "the earliest messages are shown" in panel.shown_html()
        assert panel.shown_html().count('class="aklab-msg"') == len(sent)

        # Live rows keep arriving: the row they push out of memory joins the rows read back.
        more = _questions(lab, 2)
        board.flush()
        assert panel.model.view().matching == len(sent) + len(more)
        assert panel.show_earlier(4) == 4  # held, so no read
        assert [(r.sender, r.recipient, r.content) for r in panel.model.view().rows] == sent + more
    finally:
        board.close()


def test_show_earlier_stays_off_while_the_panel_holds_everything_and_comes_on_when_a_row_is_pushed_out(
    lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = _CountingReads(lab, monkeypatch)
    board = attach_panels(lab, Dashboard(transcript_limit=4, transcript_keep=4))
    try:
        first = _questions(lab, 1)
        cell = ask_transcript(lab)  # what %%ask shows under its cell, opened after its ask
        try:
            board.flush()
            assert _view_rows(cell) == first
            assert cell.earlier.disabled  # the whole ask is shown: nothing older to read
            assert board.transcript.earlier.disabled  # the whole team so far, too
            assert cell.show_earlier(5) == 0
            assert reads.calls == 0  # and no read was made to find that out
        finally:
            cell.close()

        later = _questions(lab, 2)  # 6 rows in all: the board keeps 4, so two go back to the store
        board.flush()
        assert not board.transcript.earlier.disabled
        assert board.transcript.show_earlier(5) == 2
        assert reads.calls > 0  # these two came back from the store
        assert _view_rows(board.transcript) == first + later
    finally:
        board.close()


def _view_rows(panel: Any) -> list[Row]:
    return [(r.sender, r.recipient, r.content) for r in panel.model.view().rows]


def test_a_cells_transcript_pages_back_only_its_own_ask(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    lab.ask("count 8", timeout=20)  # 1 + 8 + 7 + 1 = 17 messages in one ask
    counting = lab.last_ask_id
    assert counting is not None
    _questions(lab, 6)  # 12 later messages push the counting ask out of the lab's feed
    reads = _CountingReads(lab, monkeypatch)
    panel = ask_transcript(lab, counting, limit=3, keep=4)
    try:
        assert panel.model.view().rows == ()  # the feed let the whole ask go
        assert reads.calls == 0
        panel.page_size = 6
        panel.model.keep_earlier = 50
        for _ in range(10):
            if panel.earlier.disabled:
                break
            panel.earlier.click()
        rows = [(r.sender, r.recipient, r.content) for r in panel.model.view().rows]
        numbers = [f"{n} of 8" for n in range(1, 9)]
        expected = [("@Human", "@Echo", "count 8")]
        for n in numbers:
            expected.append(("@Echo", "@Other", n))
            expected.append(("@Other", "@Echo", n))
        expected.append(("@Echo", "@Human", "counted to 8"))
        assert rows == expected
    finally:
        panel.close()


def test_without_a_store_the_transcript_says_older_messages_are_not_kept() -> None:
    with Lab(_echo_team(), store=False) as lab:
        board = attach_panels(lab, Dashboard(transcript_limit=4, transcript_keep=6))
        try:
            sent = _questions(lab, 6)  # 12 messages: memory keeps 10, the panel 6
            board.flush()
            html = board.transcript.shown_html()
            assert "older messages are not kept: this lab has no event store" in html
            assert board.transcript.show_earlier(5) == 2  # the two kept rows not shown yet
            assert board.transcript.show_earlier(5) == 0
            assert len(board.transcript.model.view().rows) == 6
            assert board.transcript.earlier.disabled
        finally:
            board.close()
        kept = lab.transcript()
        assert _rows(kept) == sent[-CAP:]
        assert _rows(lab.transcript(before=kept[3], limit=2)) == sent[3:5]  # memory still answers
        assert _rows(lab.transcript(before=kept[1], limit=5)) == sent[2:3]  # what memory has
        assert _rows(lab.transcript("@Echo", before=kept[4], limit=2)) == sent[4:6]  # one agent's page, from memory
        with pytest.raises(ConfigError, match="older messages are not kept: this lab has no event store"):
            lab.transcript(before=kept[0], limit=5)


def test_a_resumed_lab_reads_the_conversation_before_the_restart_back_from_the_store(tmp_path: Path) -> None:
    path = tmp_path / "events.sqlite3"
    with Lab(_echo_team(), store=path) as lab:
        before = _questions(lab, 3)
    with Lab.resume(store=path, spec=_echo_team()) as again:
        assert again.transcript() == []  # memory holds what happened since the restart only
        assert _rows(again.transcript(limit=10)) == before
        board = attach_panels(again, Dashboard(transcript_limit=4))
        try:
            after = _questions(again, 1)
            assert _rows(again.transcript(limit=4)) == before[-2:] + after  # across the restart
            board.flush()
            assert not board.transcript.earlier.disabled
            assert board.transcript.show_earlier(10) == len(before)
            rows = [(r.sender, r.recipient, r.content) for r in board.transcript.model.view().rows]
            assert rows == before + after
        finally:
            board.close()


def test_rows_pushed_out_while_older_ones_are_being_read_leave_no_gap() -> None:
    from aklab.core import ActorAddress, SentMessage
    from aklab.lab.panels import TranscriptModel
    from aklab.lab.panels._older import OlderPage

    def sent(i: int) -> SentMessage:
        a, b = ActorAddress("a" * 32, "@A", "A"), ActorAddress("b" * 32, "@B", "B")
        return SentMessage(sender=a, recipient=b, message=AgentMessage(content=f"m{i}", sender=a, recipient=b))

    records = [sent(i) for i in range(12)]
    model = TranscriptModel(limit=2, keep=3)
    model.keep_earlier = 20

    class Source:  # the store holds m0..m5; m6.. arrive live while it is read
        store = object()
        why_not = None

        def seq_of(self, *, record_id: str | None = None, message_id: str | None = None) -> int | None:
            return next(i for i, r in enumerate(records) if r.id == record_id)

        def page(self, cursor: int | None, limit: int) -> OlderPage:
            for record in records[6:9]:  # pushes m3, m4, m5 (the anchor among them) out of the kept rows
                model.feed(record)
            assert cursor is not None
            return OlderPage(records[max(0, cursor - limit) : cursor], max(0, cursor - limit), cursor <= limit)

    for record in records[3:6]:
        model.feed(record)
    model.bind(Source())  # type: ignore[arg-type]
    assert model.show_earlier(1) == 1  # the kept row not shown yet: no read
    assert model.show_earlier(3) == 3
    assert model.show_earlier(3) == 3  # held: the rows pushed out during the read
    assert model.show_earlier(3) == 0  # m0 was reached
    assert [r.content for r in model.view().rows] == [f"m{i}" for i in range(9)]


def test_a_page_that_shows_a_commands_result_brings_the_message_that_gave_it(tmp_path: Path) -> None:
    from aklab.agent import AgentMessage, OperatorActionEvent
    from aklab.core import ActorAddress, EventMessage, SentMessage
    from aklab.lab.panels._older import OlderRecords
    from aklab.store import SqliteStore, new_team_id

    team = new_team_id()
    human = ActorAddress("h" * 32, "@Human", "Human", team_id=team, is_user_proxy=True)
    manager = ActorAddress("m" * 32, "@Manager", "Manager", team_id=team)

    def sent(text: str) -> SentMessage:
        inner = AgentMessage(content=text, sender=human, recipient=manager)
        return SentMessage(sender=human, recipient=manager, message=inner)

    done = OperatorActionEvent(agent="@Manager", operator="@Human", command="/clear", result="history cleared")
    with SqliteStore(tmp_path / "events.sqlite3") as store:
        for record in (sent("first"), sent("second"), sent("/clear"), EventMessage(sender=manager, event=done)):
            store.append(record, team)
        store.append(sent("third"), team)
        older = OlderRecords(store, team)
        newest = older.page(None, 2)  # the last two records: the command's result and "third"
        rest = older.page(newest.cursor, 10)
    texts = [getattr(getattr(r, "message", None), "content", "(result)") for r in newest.records]
    assert texts == ["/clear", "(result)", "third"]  # the command came along with its result
    assert [r.message.content for r in rest.records] == ["first", "second"] and rest.done  # type: ignore[attr-defined]
