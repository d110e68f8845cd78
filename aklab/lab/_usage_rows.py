"""UsageRows: every usage event of a session, about 100 bytes each.

``lab.usage()`` must total the whole session, however long, so usage is the one record
the lab keeps in full. An ``LlmUsageEvent`` object costs about a kilobyte; here its
fields are packed into typed arrays (strings that repeat, such as agent, role and model
names, become indices into a table; a run id that is 32 hex digits becomes 16 bytes), and
an event is rebuilt when it is read. The newest ``TAIL`` events are also kept as the
objects that were recorded, so a reader who matches records by identity (the dashboard's
replay) finds them.

Appends come from one thread at a time (the team log delivers one record at a time);
readers on other threads take a consistent length first and read below it.

It also keeps every ask begun (``begin``: the person's message that started it, and when),
so that ``lab.usage(by="ask")`` shows an ask from the moment it is sent, queued behind
another or waiting for its first model request, not only from its first usage.
"""

from __future__ import annotations

import threading
from array import array
from collections import OrderedDict, deque
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, overload

from aklab._text import counted
from aklab.llm import LlmUsageEvent

__all__ = ["RECENT_ASKS", "TAIL", "UsageRows"]

#: How many of the newest events are also kept as the recorded objects.
TAIL = 256
#: How many of the latest asks ``for_ask`` finds without a scan.
RECENT_ASKS = 64
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICRO = timedelta(microseconds=1)
_NONE = -1  # an unknown token count
_ESTIMATED, _OK, _NAIVE = 1, 2, 4


class UsageRows(Sequence[LlmUsageEvent]):
    """A compact, complete, append-only list of ``LlmUsageEvent``s."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._strings: list[str | None] = [None]
        self._index: dict[str | None, int] = {None: 0}
        self._names = array("I")  # agent, role, model, cost_source, run id (if not hex), ask id: 6 per row
        self._run_ids = bytearray()  # 16 bytes per row (zeros when the id is in _names)
        self._ints = array("q")  # requests, input, output, cache read, cache write, started_at (us): 6 per row
        self._floats = array("d")  # cost_usd (nan for None), duration_s: 2 per row
        self._flags = bytearray()
        self._tail: deque[LlmUsageEvent] = deque(maxlen=TAIL)
        self._recent_asks: OrderedDict[int, list[int]] = OrderedDict()  # ask id index -> its rows
        self._whole: dict[int, LlmUsageEvent] = {}  # subclasses, kept as they are
        self._len = 0
        self._begun = array("I")  # ask id index of each ask begun, in the order begun
        self._begun_at = array("q")  # when (us since the epoch, UTC)
        self._begun_row = array("q")  # how many usage rows there were then (places it among them)

    def _intern(self, text: str | None) -> int:
        i = self._index.get(text)
        if i is None:
            i = self._index[text] = len(self._strings)
            self._strings.append(text)
        return i

    def append(self, event: LlmUsageEvent) -> None:
        with self._lock:
            row = self._len
            if type(event) is not LlmUsageEvent:
                self._whole[row] = event
            run_hex = _hex16(event.run_id)
            self._names.extend(
                (
                    self._intern(event.agent),
                    self._intern(event.role),
                    self._intern(event.model),
                    self._intern(event.cost_source),
                    0 if run_hex is not None else self._intern(event.run_id),
                    ask := self._intern(event.ask_id),  # one string per ask, not per request
                )
            )
            rows = self._recent_asks.get(ask)
            if rows is None:
                rows = self._recent_asks[ask] = []
                if len(self._recent_asks) > RECENT_ASKS:
                    self._recent_asks.popitem(last=False)
            rows.append(row)
            self._run_ids += run_hex or bytes(16)
            started = event.started_at
            naive = started.tzinfo is None
            self._ints.extend(
                (
                    event.requests,
                    _NONE if event.input_tokens is None else event.input_tokens,
                    _NONE if event.output_tokens is None else event.output_tokens,
                    event.cache_read_tokens,
                    event.cache_write_tokens,
                    ((started.replace(tzinfo=UTC) if naive else started) - _EPOCH) // _MICRO,
                )
            )
            self._floats.extend((float("nan") if event.cost_usd is None else event.cost_usd, event.duration_s))
            self._flags.append((event.estimated and _ESTIMATED) | (event.ok and _OK) | (naive and _NAIVE))
            self._tail.append(event)
            self._len = row + 1

    def begin(self, ask_id: str, at: datetime) -> None:
        """Ask ``ask_id`` was begun at ``at`` (a person sent the message that started it):
        ``asks_begun`` has it from now on, whether or not it ever makes a model request."""
        utc = at.replace(tzinfo=UTC) if at.tzinfo is None else at
        with self._lock:
            self._begun.append(self._intern(ask_id))
            self._begun_at.append((utc - _EPOCH) // _MICRO)
            self._begun_row.append(self._len)

    def asks_begun(self) -> dict[str, list[Any]]:
        """Every ask begun, in the order begun, as columns: ``ask_id``, ``asked_at`` (UTC)
        and ``row`` (how many usage rows came before it)."""
        with self._lock:
            n = len(self._begun)
            s = self._strings
            return {
                "ask_id": [s[i] for i in self._begun[:n]],
                "asked_at": [_EPOCH + us * _MICRO for us in self._begun_at[:n]],
                "row": list(self._begun_row[:n]),
            }

    def begun(self, ask_id: str) -> dict[str, list[Any]] | None:
        """``asks_begun``'s columns for ask ``ask_id`` alone (``row`` 0: its own usage rows
        come after it), or None if it was not begun here. Looked for from the newest back."""
        with self._lock:
            ask = self._index.get(ask_id)
            if ask is None:
                return None
            for at in range(len(self._begun) - 1, -1, -1):
                if self._begun[at] == ask:
                    return {"ask_id": [ask_id], "asked_at": [_EPOCH + self._begun_at[at] * _MICRO], "row": [0]}
        return None

    def _row(self, row: int, first_tail: int) -> LlmUsageEvent:
        if row >= first_tail:
            return self._tail[row - first_tail]
        whole = self._whole.get(row)
        if whole is not None:
            return whole
        s = self._strings
        agent, role, model, source, run, ask = self._names[6 * row : 6 * row + 6]
        requests, tokens_in, tokens_out, cache_r, cache_w, started_us = self._ints[6 * row : 6 * row + 6]
        cost, duration = self._floats[2 * row : 2 * row + 2]
        flags = self._flags[row]
        started = _EPOCH + started_us * _MICRO
        fields: dict[str, Any] = {
            "agent": s[agent],
            "role": s[role],
            "run_id": s[run] if run else self._run_ids[16 * row : 16 * row + 16].hex(),
            "model": s[model],
            "ask_id": s[ask],
            "requests": requests,
            "input_tokens": None if tokens_in == _NONE else tokens_in,
            "output_tokens": None if tokens_out == _NONE else tokens_out,
            "cache_read_tokens": cache_r,
            "cache_write_tokens": cache_w,
            "cost_usd": None if cost != cost else cost,
            "cost_source": s[source],
            "estimated": bool(flags & _ESTIMATED),
            "ok": bool(flags & _OK),
            "started_at": started.replace(tzinfo=None) if flags & _NAIVE else started,
            "duration_s": duration,
        }
        return LlmUsageEvent.model_construct(**fields)

    def for_ask(self, ask_id: str | None) -> list[LlmUsageEvent]:
        """The requests of one ask, oldest first, without rebuilding anyone else's (one
        lookup for the latest ``RECENT_ASKS`` asks, a scan of one packed column before)."""
        with self._lock:
            ask = self._index.get(ask_id)
            if ask is None:
                return []
            rows = self._recent_asks.get(ask)
            if rows is None:
                rows = [i for i, a in enumerate(self._names[5::6]) if a == ask]
            first_tail = self._len - len(self._tail)
            return [self._row(i, first_tail) for i in rows]

    def columns(self) -> dict[str, list[Any]]:
        """Every row as columns (``usage_frame``'s request columns and ``ask_id``), read
        straight from the packed arrays: no event object is rebuilt (100,000 rows in a
        fraction of the time ``model_construct`` takes per row)."""
        with self._lock:
            n = self._len
            s = self._strings
            names, ints, floats, flags = self._names, self._ints, self._floats, self._flags
            run_ids = self._run_ids
            whole = dict(self._whole)
        tokens_in = [None if v == _NONE else v for v in ints[1 : 6 * n : 6]]
        tokens_out = [None if v == _NONE else v for v in ints[2 : 6 * n : 6]]
        flag = flags[:n]
        started = [
            (t.replace(tzinfo=None) if f & _NAIVE else t)
            for t, f in zip((_EPOCH + us * _MICRO for us in ints[5 : 6 * n : 6]), flag, strict=True)
        ]
        cols: dict[str, list[Any]] = {
            "run_id": [s[r] if r else run_ids[16 * i : 16 * i + 16].hex() for i, r in enumerate(names[4 : 6 * n : 6])],
            "agent": [s[i] for i in names[0 : 6 * n : 6]],
            "role": [s[i] for i in names[1 : 6 * n : 6]],
            "model": [s[i] for i in names[2 : 6 * n : 6]],
            "requests": list(ints[0 : 6 * n : 6]),
            "input_tokens": tokens_in,
            "output_tokens": tokens_out,
            "total_tokens": [
                None if a is None and b is None else (a or 0) + (b or 0)
                for a, b in zip(tokens_in, tokens_out, strict=True)
            ],
            "cost_usd": [None if c != c else c for c in floats[0 : 2 * n : 2]],
            "estimated": [bool(f & _ESTIMATED) for f in flag],
            "cost_source": [s[i] for i in names[3 : 6 * n : 6]],
            "ok": [bool(f & _OK) for f in flag],
            "started_at": started,
            "duration_s": list(floats[1 : 2 * n : 2]),
            "ask_id": [s[i] for i in names[5 : 6 * n : 6]],
        }
        for row, event in whole.items():  # subclasses: their own values, as they were given
            if row < n:
                unknown = event.input_tokens is None and event.output_tokens is None
                values = {name: getattr(event, name) for name in cols if name != "total_tokens"}
                values["total_tokens"] = None if unknown else event.total_tokens
                for name, value in values.items():
                    cols[name][row] = value
        return cols

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, index: int) -> LlmUsageEvent: ...
    @overload
    def __getitem__(self, index: slice) -> list[LlmUsageEvent]: ...
    def __getitem__(self, index: int | slice) -> LlmUsageEvent | list[LlmUsageEvent]:
        with self._lock:
            n = self._len
            first_tail = n - len(self._tail)
            if isinstance(index, slice):
                return [self._row(i, first_tail) for i in range(*index.indices(n))]
            i = index + n if index < 0 else index
            if not 0 <= i < n:
                raise IndexError(f"usage row {index} out of range ({n} rows)")
            return self._row(i, first_tail)

    def __iter__(self) -> Iterator[LlmUsageEvent]:
        return iter(self[:])

    def __repr__(self) -> str:
        return f"<UsageRows: {counted(self._len, 'request')}>"


def _hex16(run_id: str) -> bytes | None:
    """The 16 bytes of a 32-digit lowercase hex id (a uuid4 hex), else None."""
    if len(run_id) != 32:
        return None
    try:
        raw = bytes.fromhex(run_id)
    except ValueError:
        return None
    return raw if raw.hex() == run_id else None
