"""Asks: one key for everything a human message causes, and the team guard on it.

A message a user proxy sends starts an *ask*; its ``ask_id`` is that message's id. Every
message an actor sends while handling a message of an ask carries the same ``ask_id``
(``Akgent.send`` stamps it), so routing, hiring and relays all stay inside the ask.

The :class:`AskLedger` (one per :class:`ActorSystem`, shared by every actor it created)
keeps, per open ask, what the guard needs: model turns, tokens, cost, and how often each
pair of members has passed work back and forth. It is thread-safe and O(1) per call.

**The team guard** (:class:`TeamGuard`, defaults a user can raise): an ask that takes more
model turns, tokens or cost than allowed, or in which two members exchange more than
``max_exchanges`` messages, or one member sends the same text to the same recipient
``max_repeats`` times, is *tripped*: it is cancelled like a stop, and the reason is
returned once so that the agent that noticed can tell the human.

A cancellation by a person or by the guard is announced through ``on_cancel`` (the lab
records it as an :class:`AskCancelledEvent`, so that a resume does not take the ask's
messages up again); closing the team is not a cancellation anyone records.

**After a restart** (``Lab.resume``) an ask that was still at work comes back with its
counters (:meth:`AskLedger.restore`: turns, tokens, cost and the messages exchanged,
recomputed from the stored records), so the guard's limits hold across the restart.

**Cancelling an ask** (``cancel``) ends it wherever it is at that moment: every run of
the ask registered with :meth:`AskLedger.running` is interrupted through its callback, a
message of the ask still queued is dropped when its turn comes (``Akgent`` checks
:meth:`is_cancelled` before dispatch), and nothing more is sent in it.
"""

from __future__ import annotations

import logging
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from aklab._text import counted

__all__ = ["AskCancelledEvent", "AskLedger", "AskState", "TeamGuard"]

log = logging.getLogger("aklab.core")

#: How many asks the ledger remembers (open or ended); older ones are forgotten. Each
#: holds its counters (~1 KB); 500 is far more than a session has open at once, and a
#: long session's ledger fills within 1,500 turns instead of growing for 6,000 (B9).
REMEMBERED_ASKS = 500


class TeamGuard(BaseModel):
    """Per-ask limits for the whole team. ``None`` switches one check off."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    max_turns: int | None = Field(default=60, gt=0)
    """Model turns (one message handled by one agent's model) per ask."""
    max_tokens: int | None = Field(default=400_000, gt=0)
    """Tokens (input + output, reported or estimated) per ask."""
    max_cost: float | None = Field(default=2.0, gt=0)
    """Cost in USD per ask (requests whose cost is unknown count 0)."""
    max_exchanges: int | None = Field(default=16, gt=0)
    """Messages between the same two agents (either way) per ask: a ping-pong."""
    max_repeats: int | None = Field(default=3, gt=0)
    """The same text sent by one member to the same recipient, per ask: a loop."""
    max_members: int | None = Field(default=40, gt=0)
    """Members in the team (the human included)."""
    max_hires_per_turn: int | None = Field(default=8, gt=0)
    """Members one agent may hire while handling one message."""
    max_message_chars: int | None = Field(default=200_000, gt=0)
    """Characters in one message: a person's longer message is refused, an agent's is cut with a note."""

    @field_validator("max_cost")
    @classmethod
    def _finite(cls, value: float | None) -> float | None:
        if value is not None and not math.isfinite(value):
            raise ValueError("max_cost must be a finite number of USD (or None for no limit)")
        return value


class AskCancelledEvent(BaseModel):
    """An ask was stopped (by a person) or tripped by the team guard."""

    aklab_log_limit: ClassVar[int] = 1  # the store keeps them all; memory only the last

    ask_id: str
    reason: str


@dataclass
class AskState:
    ask_id: str
    turns: int = 0
    tokens: int = 0
    cost: float = 0.0
    cancelled: str | None = None  # why, once cancelled or tripped
    pending: int = 0  # messages of the ask queued or being handled
    pairs: dict[tuple[str, str], int] = field(default_factory=dict)
    repeats: dict[int, int] = field(default_factory=dict)
    runs: dict[int, Callable[[], object]] = field(default_factory=dict)
    runners: dict[int, str] = field(default_factory=dict)  # whose run each is (its agent's name)


class AskLedger:
    """Thread-safe per-ask counters, the team guard, and cancellation by ask."""

    def __init__(self, guard: TeamGuard | None = None, *, remembered: int = REMEMBERED_ASKS) -> None:
        self.guard = guard or TeamGuard()
        self._lock = threading.Lock()
        self._asks: OrderedDict[str, AskState] = OrderedDict()
        self._remembered = remembered
        self._next_run = 0
        self._pending: list[Callable[[], object]] = []
        self._tripped: list[tuple[str, str]] = []
        self.closed = False
        #: Called with ``(ask_id, reason)`` after an ask is cancelled or tripped (not when the
        #: team closes), outside the ledger's lock, on the thread that cancelled it.
        self.on_cancel: Callable[[str, str], object] | None = None

    # -- asks ---------------------------------------------------------------------------
    def _state(self, ask_id: str) -> AskState:
        state = self._asks.get(ask_id)
        if state is None:
            state = self._asks[ask_id] = AskState(ask_id)
            while len(self._asks) > self._remembered:
                self._asks.popitem(last=False)
        return state

    def get(self, ask_id: str) -> AskState | None:
        with self._lock:
            return self._asks.get(ask_id)

    def open_asks(self) -> list[str]:
        """Asks not cancelled, oldest first."""
        with self._lock:
            return [a for a, s in self._asks.items() if s.cancelled is None]

    def is_cancelled(self, ask_id: str | None) -> bool:
        if self.closed:
            return True
        if ask_id is None:
            return False
        state = self._asks.get(ask_id)  # a dict read is atomic
        return state is not None and state.cancelled is not None

    def cancel(self, ask_id: str, reason: str = "stopped") -> bool:
        """End ``ask_id`` everywhere; False if it was already over."""
        return bool(self.cancel_many([ask_id], reason))

    def cancel_many(self, ask_ids: Iterable[str], reason: str = "stopped") -> list[str]:
        """End every ask of ``ask_ids`` everywhere; the ids of those that were not over yet.

        All are marked cancelled before any run is interrupted: an interrupted run frees its
        agent at once, and the next message it took, of an ask further down the list, would
        otherwise start (a model call) before being withdrawn."""
        ended: list[str] = []
        runs: list[Callable[[], object]] = []
        with self._lock:
            for ask_id in ask_ids:
                state = self._state(ask_id)
                if state.cancelled is not None:
                    continue
                state.cancelled = reason
                runs.extend(state.runs.values())
                ended.append(ask_id)
        for interrupt in runs:
            interrupt()
        self._announce([(ask_id, reason) for ask_id in ended])
        return ended

    def _announce(self, cancelled: list[tuple[str, str]]) -> None:
        callback = self.on_cancel
        if callback is None or self.closed:
            return
        for ask_id, reason in cancelled:
            try:
                callback(ask_id, reason)
            except Exception:  # recording a cancellation must not undo it
                log.exception("on_cancel failed for ask %s", ask_id)

    def cancel_all(self, reason: str = "stopped") -> list[str]:
        """Cancel every open ask; returns their ids."""
        return self.cancel_many(self.open_asks(), reason)

    def close(self) -> None:
        """No ask may run from now on: every open one is cancelled, and new ones are born over."""
        self.closed = True
        self.cancel_all("the team is closed")

    # -- work in flight ---------------------------------------------------------------------
    def sent(self, ask_id: str) -> None:
        """A message of ``ask_id`` was queued."""
        with self._lock:
            self._state(ask_id).pending += 1

    def done(self, ask_id: str) -> None:
        """A message of ``ask_id`` was handled, dropped or withdrawn."""
        with self._lock:
            state = self._asks.get(ask_id)
            if state is not None and state.pending > 0:
                state.pending -= 1

    def active(self) -> list[AskState]:
        """Asks with work queued or running, oldest first (copies' fields are read-only use)."""
        with self._lock:
            return [s for s in self._asks.values() if s.pending or s.runs]

    # -- runs -----------------------------------------------------------------------------
    @contextmanager
    def running(self, ask_id: str | None, interrupt: Callable[[], object], agent: str = "") -> Iterator[None]:
        """Register a run of ``ask_id`` (by ``agent``) so that cancelling the ask interrupts it."""
        if ask_id is None:
            yield
            return
        with self._lock:
            state = self._state(ask_id)
            self._next_run += 1
            key = self._next_run
            state.runs[key] = interrupt
            if agent:
                state.runners[key] = agent
        try:
            yield
        finally:
            with self._lock:
                state.runs.pop(key, None)
                state.runners.pop(key, None)

    def runners(self) -> list[str]:
        """The agents with a run of an ask in flight now, by name (sorted, once each)."""
        with self._lock:
            return sorted({name for state in self._asks.values() for name in state.runners.values()})

    def restore(
        self,
        ask_id: str,
        *,
        turns: int = 0,
        tokens: int = 0,
        cost: float = 0.0,
        messages: Iterable[tuple[str, str, str]] = (),
    ) -> AskState:
        """Add what ``ask_id`` had used before a restart: model turns, tokens, cost, and the
        messages members exchanged (``(sender, recipient, text)``, in order) for the
        ping-pong and repeat checks. Nothing trips here; the next charge does."""
        with self._lock:
            state = self._state(ask_id)
            state.turns += turns
            state.tokens += tokens
            if math.isfinite(cost):
                state.cost += cost
            for sender, recipient, text in messages:
                pair = (sender, recipient) if sender <= recipient else (recipient, sender)
                state.pairs[pair] = state.pairs.get(pair, 0) + 1
                key = _repeat_key(sender, recipient, text)
                state.repeats[key] = state.repeats.get(key, 0) + 1
            return state

    # -- the guard --------------------------------------------------------------------------
    def begin(self, ask_id: str) -> None:
        """A human message started ``ask_id`` (so that a stop finds it while it is still queued)."""
        with self._lock:
            self._state(ask_id)

    # The charge_* methods return the reason when *this* call trips the guard (once per
    # ask, so that exactly one agent tells the human); ``is_cancelled`` says whether it is over.
    def charge_turn(self, ask_id: str | None) -> str | None:
        """Count one model turn; the reason if this turn trips the guard."""
        if ask_id is None:
            return None
        with self._lock:
            state = self._state(ask_id)
            state.turns += 1
            limit = self.guard.max_turns
            if state.cancelled is not None:
                reason: str | None = None
            elif limit is not None and state.turns > limit:
                reason = self._trip(state, f"it reached {counted(limit, 'model turn')} (TeamGuard.max_turns)")
            else:
                reason = self._over_budget(state)
        return self._after(reason)

    def charge_usage(self, ask_id: str | None, tokens: int | None, cost: float | None) -> str | None:
        """Add one request's tokens and cost; the reason if this request trips the guard."""
        if ask_id is None:
            return None
        with self._lock:
            state = self._state(ask_id)
            state.tokens += tokens or 0
            if cost is not None and math.isfinite(cost):
                state.cost += cost
            reason = self._over_budget(state)
        return self._after(reason)

    def _over_budget(self, state: AskState) -> str | None:
        guard = self.guard
        if guard.max_tokens is not None and state.tokens > guard.max_tokens:
            return self._trip(
                state, f"it used {state.tokens:,} tokens, over {guard.max_tokens:,} (TeamGuard.max_tokens)"
            )
        if guard.max_cost is not None and state.cost > guard.max_cost:
            return self._trip(state, f"it cost ${state.cost:.4f}, over ${guard.max_cost:g} (TeamGuard.max_cost)")
        return None

    def charge_message(self, ask_id: str | None, sender: str, recipient: str, text: str) -> str | None:
        """Count a message between two agents; the reason if it makes a ping-pong or a loop (trips)."""
        if ask_id is None:
            return None
        with self._lock:
            reason = self._count_message(self._state(ask_id), sender, recipient, text)
        return self._after(reason)

    def _count_message(self, state: AskState, sender: str, recipient: str, text: str) -> str | None:
        guard = self.guard
        if state.cancelled is not None:
            return None
        pair = (sender, recipient) if sender <= recipient else (recipient, sender)
        count = state.pairs[pair] = state.pairs.get(pair, 0) + 1
        if guard.max_exchanges is not None and count > guard.max_exchanges:
            return self._trip(
                state,
                f"{pair[0]} and {pair[1]} passed {counted(count - 1, 'message')} back and forth "
                "(TeamGuard.max_exchanges)",
            )
        key = _repeat_key(sender, recipient, text)
        same = state.repeats[key] = state.repeats.get(key, 0) + 1
        if guard.max_repeats is not None and same >= guard.max_repeats:
            times = counted(same, "time")
            return self._trip(state, f"{sender} sent {recipient} the same message {times} (TeamGuard.max_repeats)")
        return None

    def _trip(self, state: AskState, why: str) -> str | None:
        """Cancel ``state`` (lock held) and return why; None if it was over already.
        Its runs are interrupted by :meth:`_after`, once the lock is released."""
        if state.cancelled is not None:
            return None
        state.cancelled = f"the team guard stopped this ask: {why}"
        self._pending.extend(state.runs.values())
        self._tripped.append((state.ask_id, state.cancelled))
        return state.cancelled

    def _after(self, reason: str | None) -> str | None:
        """Interrupt the runs of an ask just tripped (outside the lock)."""
        if self._pending or self._tripped:
            with self._lock:
                calls, self._pending = self._pending, []
                tripped, self._tripped = self._tripped, []
            for call in calls:
                call()
            self._announce(tripped)
        return reason


def _repeat_key(sender: str, recipient: str, text: str) -> int:
    """The same text (whitespace aside) from the same sender to the same recipient."""
    return hash((sender, recipient, " ".join(text.split())))
