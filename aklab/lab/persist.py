"""A lab's link to the event store: every record of its team, appended as it happens.

``Lab(store=...)`` takes a path, a ``postgresql://`` DSN, an open ``EventStore``, ``None``
(the default: ``$AKLAB_STORE`` if set, else ``./.aklab/events.sqlite3`` in the folder the
kernel runs in) or ``False`` (no store; ``AKLAB_STORE=off`` does the same by default).

A store that cannot be opened (a damaged file, a folder that cannot be created) or that
fails later (a read-only or full disk) never stops the team: it runs in memory and the
reason is kept in ``lab.store_warning`` (shown by ``%aklab`` and ``lab.status()``), logged
once on ``aklab.store``.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aklab.store import OFF
from aklab.tools._fs_text import size_text

if TYPE_CHECKING:
    from aklab.store import EventStore, StoreSubscriber

__all__ = ["OFF", "StoreLink", "open_link", "shown_location", "store_off"]

log = logging.getLogger("aklab.store")


def store_off() -> bool:
    """Whether ``$AKLAB_STORE`` turns the event store off (unset: on, in ``./.aklab``)."""
    return os.environ.get("AKLAB_STORE", "x").strip().lower() in OFF


@dataclass
class StoreLink:
    """The store a lab writes to (or None), the subscriber doing it, and why it stopped, if it did."""

    store: EventStore | None
    team_id: str
    subscriber: StoreSubscriber | None = None
    owned: bool = False  # the lab opened it, so the lab closes it
    warning: str | None = None
    claimed: bool = False

    @property
    def location(self) -> str:
        """Where records go; a SQLite file under the current folder is shown relative to it."""
        if self.store is None:
            return "off (in memory only)"
        return shown_location(self.store.location)

    def size_text(self) -> str | None:
        """The store's size on disk ("1.2 MB"), when its kind can tell cheaply."""
        size = None if self.store is None else self.store.size_bytes()
        if size is None:
            return None
        return size_text(size)

    def claim(self) -> None:
        """Claim the team in the store for this lab (see ``EventStore.claim``). Raises
        ``TeamInUseError`` if another lab runs it; any other store problem only warns."""
        from aklab.store import StoreError, TeamInUseError

        if self.store is None:
            return
        try:
            self.store.claim(self.team_id)
        except TeamInUseError:
            raise
        except StoreError as exc:
            log.warning("the team could not be claimed in the event store (%s); it runs all the same", exc)
            return
        self.claimed = True

    def failed(self, reason: str) -> None:
        # called on an actor thread: only remember it
        self.warning = f"the event store stopped recording: {reason}; the team goes on in memory"

    def close(self) -> None:
        if self.store is not None and self.claimed:
            self.claimed = False
            try:
                self.store.release(self.team_id)
            except Exception as exc:  # releasing must never break a lab's close
                log.warning("releasing the team's claim in the event store failed: %s", exc)
        if self.store is not None and self.owned:
            try:
                self.store.close()
            except Exception as exc:  # closing must never break a lab's close
                log.warning("closing the event store failed: %s", exc)


def open_link(target: Any) -> StoreLink:
    """Open the store ``target`` names (see the module docstring); never raises for a store problem."""
    from aklab.store import EventStore, StoreError, new_team_id, open_store

    team_id = new_team_id()
    if target is False or (target is None and store_off()):
        return StoreLink(None, team_id)
    if isinstance(target, str) and target.strip().lower() in OFF:
        return StoreLink(None, team_id)
    if isinstance(target, EventStore):
        return StoreLink(target, team_id)
    try:
        return StoreLink(open_store(target), team_id, owned=True)
    except StoreError as exc:
        warning = f"the event store could not be opened: {exc}; the team runs in memory only"
        log.warning("%s", warning)
        return StoreLink(None, team_id, warning=warning)


def subscribe(link: StoreLink, orchestrator: Any, *, name: str, metadata: dict[str, Any]) -> None:
    """Feed the team's records to the store and record the team itself."""
    from aklab.store import StoreError, StoreSubscriber

    if link.store is None:
        return
    try:
        link.store.save_team(link.team_id, name=name, metadata=metadata)
    except StoreError as exc:
        link.warning = f"the event store could not record the team: {exc}; the team runs in memory only"
        log.warning("%s", link.warning)
        return
    link.subscriber = StoreSubscriber(link.store, link.team_id, on_failure=link.failed)
    orchestrator.subscribe(link.subscriber)


def shown_location(where: str) -> str:
    """A store's location as shown: a SQLite file under the current folder relative to it
    (a saved notebook output then holds no absolute path), anything else as it is."""
    if not where.startswith("sqlite:"):
        return where
    try:
        path = os.path.relpath(where.removeprefix("sqlite:"))
    except ValueError:  # another drive (Windows)
        return where
    return where if path.startswith("..") else "sqlite:" + path
