"""The transcript panel's rows in blocks: a new message sends about one row to the browser,
not every row shown; the oldest block goes whole; widgets that go are closed."""

from __future__ import annotations

import logging
import statistics

import pytest

from aklab.agent import OperatorActionEvent
from aklab.core import EventMessage
from aklab.lab.panels import Dashboard, TranscriptPanel
from aklab.lab.panels._older import OlderPage
from tests.lab.conftest import CommTraffic
from tests.lab.test_panels import sent, widget_count

REAL = 'class="aklab-msg"'
LONG = "lorem <b>ipsum</b> & dolor sit amet, " * 80  # about 3 KB, 4 KB escaped


def shows_its_view(panel: TranscriptPanel) -> None:
    """The widget shows exactly the model's view, rows in order, each in the block of its position."""
    view = panel.model.view()
    assert panel.shown_html() == view.html()
    blocks = view.blocks()
    assert len(panel.rows) == len(blocks) == len(panel.rows.widget.children)
    for (_, piece), rows in blocks:
        assert len(rows) <= (view.block if piece < 0 else max(1, view.block // 25))
    if view.matching > len(view.rows):  # rows are hidden: what is shown starts a block, within one of the limit
        assert view.start % view.block == 0
        assert panel.model.limit <= len(view.rows) < panel.model.limit + panel.model._extra + view.block


def test_a_new_message_sends_about_one_row_not_every_row_shown(traffic: CommTraffic) -> None:
    panel = TranscriptPanel()
    try:
        with panel.hub.batched():
            for i in range(520):
                panel.hub.feed(sent("@A", "@B", f"{i} {LONG}"))
        row = len(panel.model.view().rows[-1].html())
        shown = row * len(panel.model.view().rows)
        per_message, opened = [], []
        for i in range(200):  # four blocks filled, four dropped
            traffic.clear()
            panel.hub.feed(sent("@A", "@B", f"new {i} {LONG}"))
            per_message.append(traffic.bytes())
            opened.append(len(traffic.opened()))
        # a row and its share of the block it completes (sent whole once), a piece's widget
        assert statistics.mean(per_message) < 4 * row
        assert statistics.median(per_message) < 3 * row
        full = [n for n in per_message if n > 3 * row]  # a block completed: it is sent whole, once
        assert len(full) == 4 and max(full) < (panel.model.block + 1) * row < shown / 8
        # the block completed and the oldest one dropped reuse the widgets that went: none is made
        assert [o for n, o in zip(per_message, opened, strict=True) if n in full] == [0] * 4
        shows_its_view(panel)
    finally:
        panel.close()


def test_the_oldest_block_goes_whole_and_the_rows_shown_float_within_a_block_above_the_limit() -> None:
    before = widget_count()
    panel = TranscriptPanel(limit=500)
    assert panel.model.block == 50
    counts = set()
    try:
        for i in range(1_200):
            panel.hub.feed(sent("@A", "@B", f"m{i}."))
            view = panel.model.view()
            counts.add(len(view.rows))
            if i >= 549:
                first = int(view.rows[0].content[1:-1])
                assert first % 50 == 0 and first > i - 550  # a block's first row, less than a block back
                assert f"showing the last {len(view.rows)} of {i + 1:,} messages" in panel.shown_html()
            # blocks full and sealed, and the filling one in pieces of 2: the widgets stay few
            assert len(panel.rows) <= 11 + 25
        assert counts == set(range(1, 550))
        shows_its_view(panel)
    finally:
        panel.close()
    assert widget_count() == before  # every block's widget closed: the ones dropped and the ones shown


def test_a_burst_flushed_once_updates_each_block_it_touches_once(traffic: CommTraffic) -> None:
    panel = TranscriptPanel()
    try:
        for i in range(501):  # the last block holds one row
            panel.hub.feed(sent("@A", "@B", f"m{i}"))
        pieces = {w.model_id for w in panel.rows.widget.children}
        traffic.clear()
        burst = iter([sent("@A", "@B", f"burst {i}") for i in range(7)])

        def wait(step: float) -> bool:  # the team talks while the kernel waits: seven records in one pump
            for record in burst:
                panel.hub.feed(record)
            return True

        assert panel.hub.pump(wait, timeout=None, interval=0.01)
        updates = traffic.updates()
        assert set(updates.values()) == {1}  # no widget updated twice
        changed = {w.model_id for w in panel.rows.widget.children} - pieces
        # rows 501..507: the piece holding row 500 gets row 501, then three new pieces of two
        assert len(changed) == 3 and sum(1 for i in updates if i in pieces) == 1
        assert updates.keys() - pieces == {panel.rows.widget.model_id}  # its children: the new pieces
        assert len(traffic.opened()) == 2 * 3  # each new piece: its HTML and its style (the layout is shared)
        shows_its_view(panel)
    finally:
        panel.close()


def test_filters_folded_commands_notes_and_earlier_rows_render_in_the_right_blocks() -> None:
    panel = TranscriptPanel(limit=500)
    try:
        for i in range(620):
            panel.hub.feed(sent("@A", "@B" if i % 3 else "@C", f"m{i}"))
            if i % 97 == 0:
                shows_its_view(panel)
        panel.filter.value = "@C"  # 207 rows: all shown
        shows_its_view(panel)
        assert panel.shown_html().count(REAL) == 207 and "showing" not in panel.shown_html()
        panel.hub.feed(sent("@Human", "@C", "clear"))
        panel.hub.feed(sent("@C", "@Human", "cleared", "notification"))
        shows_its_view(panel)
        event = OperatorActionEvent(agent="@C", operator="@Human", command="clear", result="cleared")
        panel.hub.feed(EventMessage(event=event))  # folds the message and the reply into one note
        assert "(command)" in panel.shown_html() and panel.shown_html().count(REAL) == 207
        shows_its_view(panel)
        panel.filter.value = ""
        shows_its_view(panel)
        assert panel.model.view().matching == 621 and panel.shown_html().count("m") >= 521
        assert panel.show_earlier(30) == 50  # to the start of a block
        shows_its_view(panel)
        assert panel.show_earlier(500) == 50 and panel.earlier.disabled
        assert panel.shown_html().count(REAL) == 620
        shows_its_view(panel)
    finally:
        panel.close()


def test_rows_read_back_before_the_first_kept_row_take_the_positions_before_it() -> None:
    records = [sent("@A", "@B", f"m{i}") for i in range(600)]
    panel = TranscriptPanel(limit=500, keep=500)
    model = panel.model

    class Source:  # the store holds every record
        store = object()
        why_not = None

        def seq_of(self, *, record_id: str | None = None, message_id: str | None = None) -> int | None:
            return next(i for i, r in enumerate(records) if r.id == record_id)

        def page(self, cursor: int | None, limit: int) -> OlderPage:
            assert cursor is not None
            return OlderPage(list(records[max(0, cursor - limit) : cursor]), max(0, cursor - limit), cursor <= limit)

    try:
        for record in records[:560]:
            panel.hub.feed(record)
        assert panel.model.view().start == 60 and panel.shown_html().count(REAL) == 500  # 60 let go
        model.bind(Source())  # type: ignore[arg-type]
        assert panel.show_earlier(25) == 25  # read back: m35 to m59
        view = model.view()
        assert view.start == 35 and view.rows[0].content == "m35" and len(view.rows) == 525
        shows_its_view(panel)
        for record in records[560:]:  # pushed-out rows join the ones read back: positions hold
            panel.hub.feed(record)
            shows_its_view(panel)
        assert [r.content for r in model.view().rows] == [f"m{i}" for i in range(50, 600)]
    finally:
        panel.close()


def test_closing_closes_every_block_and_a_late_record_makes_no_widget(caplog: pytest.LogCaptureFixture) -> None:
    before = widget_count()
    board = Dashboard()
    panel = TranscriptPanel()
    for i in range(777):
        board.feed(sent("@A", "@B", f"m{i}"))
        panel.hub.feed(sent("@A", "@B", f"m{i}"))
    assert len(panel.rows) > 10
    board.close()  # closes its widget tree
    panel.close()
    assert widget_count() == before
    for late in ("late", "later"):  # a new piece of the filling block, had the panels been open
        panel.hub.feed(sent("@A", "@B", late))
        board.hub.feed(sent("@A", "@B", late))
    assert widget_count() == before
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]  # nor tries to
