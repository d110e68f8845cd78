"""PanelModel, Panel and PanelHub: the thread-safe path from records to widget traits.

Records reach the lab on the thread of the member that made them
(``TeamRecorder.listeners``, called through the team's ``TeamLog``). Each panel is split
in two:

- a **model** (:class:`PanelModel`): plain Python state behind a lock, updated by
  ``feed(record)`` from any thread, that hands out immutable *views* together with a
  version number. Models import no widget code and are testable without a kernel.
- a **panel** (:class:`Panel`): the ipywidgets that show the latest view. Only the hub
  writes widget traits, always under its one flush lock.

:class:`PanelHub` fans each record out to its panels' models, then applies what changed.
Changes coalesce: a model bumps its version per change, and a flush renders each panel
once from its newest view, however many records arrived since the last flush.

Which thread writes the traits. ipykernel 7 sends comm messages from any thread through
its IOPub thread, so setting traits from the recording thread is safe as long as trait
writes are serialised; the flush lock does that. Hence:

- by default (``auto_flush=True``) the recording thread flushes after every record, so
  panels stay live while the notebook is idle (``%%ask --bg``). If another thread is
  already flushing, the recorder does not wait: it leaves a mark and that flusher makes
  another pass, so no change is stranded and the orchestrator is never held up.
- inside a blocking wait (``%%ask``) use :meth:`PanelHub.pump` (or :meth:`batched`):
  automatic flushes pause and the waiting thread flushes every ``interval`` seconds,
  which turns a burst of records into one widget update.

Nothing here prints; a panel that fails to render is logged, never raised into the
recorder.
"""

from __future__ import annotations

import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ClassVar, Generic, TypeVar

from aklab.core import Message
from aklab.lab.panels._static import StaticView, snapshot_html, snapshot_note

__all__ = ["Panel", "PanelHub", "PanelModel", "close_widget", "widget_bundle"]

log = logging.getLogger("aklab.lab")

V = TypeVar("V", bound=StaticView)


class PanelModel(ABC, Generic[V]):
    """Plain state behind one panel. Every public method is safe from any thread."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._version = 0

    def feed(self, record: Message) -> bool:
        """Take one orchestrator record; True if the view changed."""
        with self._lock:
            changed = self._feed(record)
            if changed:
                self._version += 1
            return changed

    def reset(self) -> None:
        """Forget every record and choice (a panel moving to another lab starts afresh)."""
        with self._lock:
            self._reset()
            self._version += 1

    def catch_up(self) -> None:
        """Make changes held back for coalescing visible (an explicit flush calls this)."""
        with self._lock:
            if self._catch_up():
                self._version += 1

    @property
    def version(self) -> int:
        return self._version

    def view(self) -> V:
        """The current view (immutable plain data)."""
        with self._lock:
            return self._view()

    def view_since(self, version: int) -> tuple[int, V] | None:
        """``(version, view)`` if anything changed after ``version``, else None."""
        with self._lock:
            if self._version == version:
                return None
            return self._version, self._view()

    def summary(self) -> str:
        """A short deterministic description (``3 members``) for text reprs."""
        with self._lock:
            return self._summary()

    def snapshot(self) -> tuple[str, V]:
        """The summary and the view taken together, held-back changes included: what a
        static form (text, HTML snapshot) shows."""
        with self._lock:
            if self._catch_up():
                self._version += 1
            return self._summary(), self._view()

    def __repr__(self) -> str:
        return f"<{type(self).__name__}: {self.summary()}>"

    def _changed(self) -> None:
        """Call under ``self._lock`` when a setter changed the view."""
        self._version += 1

    def _catch_up(self) -> bool:
        return False

    @abstractmethod
    def _reset(self) -> None:
        """Set the state to that of a new model (``__init__`` calls it too)."""

    @abstractmethod
    def _feed(self, record: Message) -> bool: ...

    @abstractmethod
    def _view(self) -> V: ...

    @abstractmethod
    def _summary(self) -> str: ...


class Panel(ABC, Generic[V]):
    """Widgets showing one model's view. Displays as the widget, with static forms beside it.

    ``panel.widget`` is the root ipywidget (put it in your own layouts); the panel object
    itself is what a notebook cell should display: besides the widget its bundle holds a
    ``text/plain`` and a ``text/html`` snapshot of the content (see ``_static``), for
    wherever the widget cannot be drawn, with no model id (nbval compares them).
    ``repr(panel)`` is the one-line summary (``<RosterPanel: 3 members>``), for logs;
    ``str(panel)`` (``print(panel)``) is the text/plain: that line, then the content.
    """

    title: ClassVar[str] = "Panel"

    def __init__(self, model: PanelModel[V], hub: PanelHub | None = None) -> None:
        self.model = model
        self._applied = -1  # model version shown by the widgets; guarded by the hub's lock
        self._on_close: list[Callable[[], Any]] = []  # e.g. stop following a lab
        self.widget: Any = self._build()
        self.hub = hub if hub is not None else PanelHub()
        self.hub.add(self)

    @abstractmethod
    def _build(self) -> Any:
        """Create the widgets once; updates only ever change traits."""

    @abstractmethod
    def _apply(self, view: V) -> None:
        """Write ``view`` into the widgets' traits (called under the hub's lock)."""

    def _sync(self, force: bool) -> None:
        if force:
            self.model.catch_up()
        got = self.model.view_since(self._applied)
        if got is None:
            return
        self._applied, view = got
        self._apply(view)

    def refresh(self) -> None:
        """Show the latest state now (the same as ``panel.hub.flush()``)."""
        self.hub.flush()

    def close(self) -> None:
        """Stop following any lab, then close the panel's widgets (and their comms)."""
        while self._on_close:
            try:
                self._on_close.pop()()
            except Exception:
                log.exception("%s could not detach", type(self).__name__)
        close_widget(self.widget)

    def __repr__(self) -> str:
        return self._head(self.model.summary())

    def __str__(self) -> str:
        summary, view = self.model.snapshot()
        return self._text(summary, view)

    def _head(self, summary: str) -> str:
        return f"<{type(self).__name__}: {summary}>"

    def _text(self, summary: str, view: V) -> str:
        return "\n".join([self._head(summary), *(f"  {line}" for line in view.text_lines())])

    def static_html(self, summary: str, view: V) -> str:
        """The HTML snapshot of ``view`` under the panel's title and ``summary``."""
        return snapshot_html(self.title, summary, view.static_html())

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        self.hub.flush()
        summary, view = self.model.snapshot()
        html = self.static_html(summary, view) + snapshot_note()
        return widget_bundle(self.widget, self._text(summary, view), html)


class PanelHub:
    """Feeds records to panels and applies their changes to widget traits, serialised."""

    def __init__(self, *, auto_flush: bool = True) -> None:
        #: Flush from the feeding thread after each record (paused inside ``batched``).
        self.auto_flush = auto_flush
        self._panels: tuple[Panel[Any], ...] = ()
        self._flush_lock = threading.RLock()
        self._state_lock = threading.Lock()
        self._holds = 0
        self._missed = False
        self._local = threading.local()

    @property
    def panels(self) -> tuple[Panel[Any], ...]:
        return self._panels

    def add(self, panel: Panel[Any]) -> None:
        with self._state_lock:
            if panel not in self._panels:
                self._panels = (*self._panels, panel)

    def feed(self, record: Message) -> None:
        """Give ``record`` to every panel; safe from any thread. A recorder listener."""
        for panel in self._panels:
            try:
                panel.model.feed(record)
            except Exception:
                log.exception("%s could not take a record", type(panel).__name__)
        if self.auto_flush and not self._holds:
            self._flush(force=False, wait=False)

    __call__ = feed

    def flush(self) -> None:
        """Apply every pending change now, including held-back ones. Safe from any thread."""
        self._flush(force=True, wait=True)

    def applying(self) -> bool:
        """True on the thread that is writing traits (observers use it to ignore echoes)."""
        return bool(getattr(self._local, "applying", False))

    @contextmanager
    def batched(self) -> Iterator[None]:
        """Pause automatic flushes; flush once on the way out."""
        with self._state_lock:
            self._holds += 1
        try:
            yield
        finally:
            with self._state_lock:
                self._holds -= 1
            self.flush()

    def pump(self, wait: Callable[[float], bool], timeout: float | None = None, interval: float = 0.25) -> bool:
        """Call ``wait(step)`` until it returns True, flushing between calls.

        For a blocking wait on the kernel's thread: ``hub.pump(lab.wait, timeout)``.
        Returns False if ``timeout`` seconds passed first.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.batched():
            while True:
                step = interval if deadline is None else max(0.0, min(interval, deadline - time.monotonic()))
                if wait(step):
                    return True
                self.flush()
                if deadline is not None and time.monotonic() >= deadline:
                    return False

    def _flush(self, *, force: bool, wait: bool) -> None:
        # Set the mark before trying: a flusher holding the lock checks it after release.
        self._missed = True
        acquired = self._flush_lock.acquire(blocking=wait)
        while acquired:
            self._missed = False
            outer = self.applying()
            self._local.applying = True
            try:
                for panel in self._panels:
                    try:
                        panel._sync(force)
                    except Exception:
                        log.exception("%s could not update its widgets", type(panel).__name__)
            finally:
                self._local.applying = outer
                self._flush_lock.release()
            force = False
            acquired = self._missed and self._flush_lock.acquire(blocking=False)


def widget_bundle(widget: Any, text: str, html: str | None = None) -> dict[str, Any]:
    """The widget's display bundle with ``text`` as its text/plain and ``html`` as its
    text/html (those only, once the widget is closed)."""
    make = getattr(widget, "_repr_mimebundle_", None)
    bundle = make() if callable(make) else None
    data: dict[str, Any] = dict(bundle or {})
    data["text/plain"] = text
    if html is not None:
        data["text/html"] = html
    return data


def close_widget(widget: Any) -> None:
    """Close ``widget`` and every widget it holds (children, layout, style)."""
    from ipywidgets import Widget

    for name in list(getattr(widget, "keys", ())):
        value = getattr(widget, name, None)
        for item in value if isinstance(value, tuple | list) else (value,):
            if isinstance(item, Widget) and item is not widget:
                close_widget(item)
    widget.close()
