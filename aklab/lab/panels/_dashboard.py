"""Dashboard (the four panels in a Tab), ``attach_panels`` and ``ask_transcript``: wiring to a Lab.

``attach_panels`` must neither lose a record nor show one twice, although the team may
be running while it replays what was already recorded. So it follows the lab's feed
(``_feed``) with a gate that buffers live records: the feed hands over its transcript
history (messages, notes, errors) and adds the gate in one step; then the recorder's
context updates and usage are copied and replayed; then the gate opens, dropping
buffered records that the copies already held (the recorder appends a record before it
calls its listeners, so the same object can be in both). Roster rows come from
``lab.team()``; joining is idempotent, so a buffered ``StartMessage`` for a known member
changes nothing.

Displayed, the dashboard is its tabs; where no widget can be drawn, each panel's static
forms one after the other (``_static``).

``ask_transcript(lab, ask_id)`` is a transcript of one ask (what a cell shows): its own
panel, hub and filter, following only that ask's records. Both transcripts page older
records back from the lab's event store on demand (``_older``). ``Dashboard.rebind(lab)``
moves a dashboard to another lab (``%aklab model`` replaces the lab): it stops following
the old one, forgets what it showed, and replays and follows the new one.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from aklab.core import EventMessage, Message
from aklab.errors import ConfigError
from aklab.lab.panels._context import ContextPanel
from aklab.lab.panels._feed import LabFeed, follow_lab, lab_feed
from aklab.lab.panels._hub import Panel, PanelHub, close_widget, widget_bundle
from aklab.lab.panels._older import OlderRecords
from aklab.lab.panels._roster import RosterPanel, model_label
from aklab.lab.panels._static import snapshot_note
from aklab.lab.panels._transcript_panel import TranscriptPanel
from aklab.lab.panels._usage import UsagePanel

if TYPE_CHECKING:
    from aklab.lab.session import Lab

__all__ = ["Dashboard", "ask_transcript", "attach_panels", "carry_panels", "detach_panels"]

T = TypeVar("T")


class Dashboard:
    """Roster, transcript, context and usage panels sharing one hub, shown as tabs."""

    def __init__(
        self,
        hub: PanelHub | None = None,
        *,
        transcript_limit: int = 500,
        transcript_keep: int = 5000,
        usage_every: int = 5,
    ) -> None:
        import ipywidgets as widgets

        self.hub = hub if hub is not None else PanelHub()
        self.roster = RosterPanel(self.hub)
        self.transcript = TranscriptPanel(self.hub, limit=transcript_limit, keep=transcript_keep)
        self.context = ContextPanel(self.hub)
        self.usage = UsagePanel(self.hub, every=usage_every)
        self.panels: dict[str, Panel[Any]] = {
            "roster": self.roster,
            "transcript": self.transcript,
            "context": self.context,
            "usage": self.usage,
        }
        self.widget: Any = widgets.Tab(
            children=[p.widget for p in self.panels.values()],
            titles=[p.title for p in self.panels.values()],
        )
        self._detach: list[Any] = []

    def panel(self, name: str) -> Panel[Any]:
        """One panel by name: roster, transcript, context or usage."""
        try:
            return self.panels[name.lower()]
        except KeyError:
            raise ConfigError(f"no panel {name!r}; choose {', '.join(self.panels)}") from None

    def feed(self, record: Message) -> None:
        self.hub.feed(record)

    def flush(self) -> None:
        self.hub.flush()

    def detach(self) -> None:
        """Stop listening to the lab (the panels keep what they show)."""
        while self._detach:
            self._detach.pop()()

    def rebind(self, lab: Lab) -> Dashboard:
        """Show ``lab`` from now on: stop following the lab shown so far, forget what
        every panel showed (the filters too), replay what ``lab`` recorded and follow it.
        The widgets stay the same, so wherever the dashboard is displayed it follows."""
        with self.hub.batched():
            self.detach()
            for panel in self.panels.values():
                panel.model.reset()
            attach_panels(lab, self)
        return self

    def close(self) -> None:
        """Stop listening and close every widget (and its comm)."""
        self.detach()
        close_widget(self.widget)

    def __repr__(self) -> str:
        return f"<Dashboard: {', '.join(self.panels)}>"

    def __str__(self) -> str:
        return self._static()[0]

    def _static(self) -> tuple[str, str]:
        """The text/plain and the HTML snapshot: each panel's, under its title."""
        lines = [repr(self)]
        html = []
        for panel in self.panels.values():
            summary, view = panel.model.snapshot()
            lines += [f"{panel.title}: {summary}", *(f"  {line}" for line in view.text_lines())]
            html.append(panel.static_html(summary, view))
        return "\n".join(lines), "".join(html) + snapshot_note()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        self.hub.flush()
        return widget_bundle(self.widget, *self._static())


class _Gate:
    """A recorder listener that buffers records until the replay is done."""

    def __init__(self, hub: PanelHub) -> None:
        self.hub = hub
        self._lock = threading.Lock()
        self._buffer: list[Message] | None = []

    def __call__(self, record: Message) -> None:
        with self._lock:
            if self._buffer is not None:
                self._buffer.append(record)
                return
        self.hub.feed(record)

    def open(self, seen: set[int]) -> None:
        """Feed buffered records not in ``seen`` (ids of replayed objects), then go live."""
        with self._lock:
            buffered, self._buffer = self._buffer or [], None
            for record in buffered:
                if _identity(record) not in seen:
                    self.hub.feed(record)


def _identity(record: Message) -> int:
    # What the recorder stores for this record: the event for an EventMessage, else itself.
    return id(record.event) if isinstance(record, EventMessage) else id(record)


def _copy(items: Iterable[T]) -> list[T]:
    # The recorder appends from another thread; a deque refuses to be iterated while it
    # changes, so retry (the copy is a single C call and almost never races).
    while True:
        try:
            return list(items)
        except RuntimeError:
            continue


def attach_panels(lab: Lab, dashboard: Dashboard | None = None) -> Dashboard:
    """A Dashboard that shows what ``lab`` already recorded and follows it live."""
    board = dashboard if dashboard is not None else Dashboard()
    recorder = lab.recorder
    gate = _Gate(board.hub)
    transcript: list[Message] = []
    board._detach.append(follow_lab(lab, gate, replay=transcript.extend))
    feed = lab_feed(lab)
    board.transcript.model.bind(
        OlderRecords.of(lab), dropped=feed.dropped if feed is not None else 0, holds_all=_holds_all(lab, feed)
    )

    members = lab.team()
    events: list[Any] = [*_earlier_context(lab), *_copy(recorder.context_updates), *_copy(recorder.usage)]
    with board.hub.batched():
        models = _models_by_role(lab)
        for member in members:
            board.roster.model.join(member.name, member.role, models.get(member.role, ""))
        for record in transcript:
            board.hub.feed(record)
        for event in events:
            board.hub.feed(EventMessage(event=event))
        gate.open({_identity(r) for r in transcript} | {id(e) for e in events})
    return board


def _models_by_role(lab: Lab) -> dict[str, str]:
    """Each role's model label, from the lab's team spec (a member hired later runs its
    role's card, so it has the same model); empty for a lab-like object without one."""
    cards = getattr(getattr(lab, "spec", None), "cards", ())
    labels = {getattr(c.config, "role", ""): model_label(c.config) for c in cards}
    return {role: label for role, label in labels.items() if role and label}


def _holds_all(lab: Lab, feed: LabFeed | None) -> bool:
    """Whether a panel just replayed from ``feed`` holds every transcript record of ``lab``'s
    team: the feed has followed the lab since its start and let nothing go, and the team
    was not resumed (what came before a restart is in the store only). Then "show earlier"
    has nothing to read and stays off. A lab-like object that cannot say: False."""
    resumed = getattr(lab, "resumed", None)
    return feed is not None and feed.complete and feed.dropped == 0 and resumed is False


def _earlier_context(lab: Lab) -> list[Any]:
    """The context-update blocks memory does not hold (from before a resume, or let go),
    read back from the event store, oldest first: the panel composes each agent's state
    from every block since its first. Nothing when memory holds them all or no store can
    tell (then the panel starts from what memory holds)."""
    from aklab.errors import AklabError
    from aklab.lab.recorder import CONTEXT_UPDATES_LIMIT

    context = getattr(lab, "context", None)  # a lab-like object without a store has none
    if context is None:
        return []
    try:
        stored = context(limit=CONTEXT_UPDATES_LIMIT)
    except AklabError:
        return []
    held = {(u.agent, u.number) for u in lab.recorder.context_updates}
    return [u for u in stored if (u.agent, u.number) not in held]


def ask_transcript(lab: Lab, ask_id: str | None = None, *, limit: int = 500, keep: int = 5000) -> TranscriptPanel:
    """A transcript of one ask: everything the human message ``ask_id`` caused (messages,
    notes, errors, and the messages being written), live, with its own agent filter; who
    is working on it, or, while it waits for an agent still in a turn of another ask, whom
    it waits for; its "show earlier" button reads what memory let go back from the event
    store.

    ``ask_id`` defaults to ``lab.last_ask_id``, the ask last sent by ``lab.send`` or
    ``lab.ask``. The panel stops following when it is closed or the lab is detached
    (``detach_panels``), and keeps what it shows.
    """
    ask_id = ask_id or getattr(lab, "last_ask_id", None)
    if not ask_id:
        raise ConfigError("no ask to show: send a message first (lab.send, lab.ask or %%ask)")
    panel = TranscriptPanel(PanelHub(), limit=limit, keep=keep)
    panel.model.ask_id = ask_id  # other asks' busy agents: what this ask may wait for
    with panel.hub.batched():  # the replay is applied once, outside the feed's lock
        panel._on_close.append(follow_lab(lab, panel.hub.feed, ask_id))
        feed = lab_feed(lab)
        panel.model.bind(
            OlderRecords.of(lab, ask_id),
            dropped=feed.dropped if feed is not None else 0,
            holds_all=_holds_all(lab, feed),
        )
    return panel


def detach_panels(lab: Lab) -> None:
    """Every panel following ``lab`` stops (each keeps what it shows); for ``lab.close()``."""
    feed = lab_feed(lab)
    if feed is not None:
        feed.close()


def carry_panels(old: Lab, new: Lab) -> Dashboard | None:
    """Move ``old``'s dashboard to ``new`` (call before ``old.close()``, which would close it).

    Wherever the dashboard or one of its panels (``lab.panel(...)``) is displayed, it
    then shows ``new``. Returns the dashboard, or None if ``old`` had none.
    """
    board: Dashboard | None = old._dashboard
    if board is None or old is new:
        return board
    old._dashboard = None
    board.rebind(new)
    if new._dashboard is None:
        new._dashboard = board
    return board
