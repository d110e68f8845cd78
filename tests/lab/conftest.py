"""A real IPython shell with aklab loaded (the notebook's lab is closed afterwards), and
the comm traffic of widgets, recorded."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import comm
import pytest
from comm.base_comm import BaseComm
from IPython.core.interactiveshell import InteractiveShell

from aklab.lab import set_lab


@pytest.fixture
def shell() -> Iterator[InteractiveShell]:
    ip = InteractiveShell.instance()
    ip.run_cell("%load_ext aklab")
    yield ip
    set_lab(None)


@dataclass(frozen=True)
class Sent:
    """One comm message a widget sent to the browser."""

    comm_id: str  # the widget's model_id
    kind: str  # comm_open, comm_msg, comm_close
    size: int  # bytes of its data as JSON
    data: dict[str, Any]


class CommTraffic:
    """What widgets made while the ``traffic`` fixture is on send to the browser."""

    def __init__(self) -> None:
        self.sent: list[Sent] = []

    def clear(self) -> None:
        self.sent.clear()

    def bytes(self) -> int:
        return sum(s.size for s in self.sent)

    def to(self, widget: Any) -> list[Sent]:
        return [s for s in self.sent if s.comm_id == widget.model_id]

    def updates(self, within: Any = None) -> dict[str, int]:
        """How many state updates each widget (model id) sent; ``within``: that widget and
        the widgets it holds only."""
        ids = None if within is None else model_ids(within)
        counts: dict[str, int] = {}
        for s in self.sent:
            if s.kind == "comm_msg" and s.data.get("method") == "update" and (ids is None or s.comm_id in ids):
                counts[s.comm_id] = counts.get(s.comm_id, 0) + 1
        return counts

    def opened(self) -> list[str]:
        return [s.comm_id for s in self.sent if s.kind == "comm_open"]


@pytest.fixture
def traffic(monkeypatch: pytest.MonkeyPatch) -> CommTraffic:
    """Widgets made from now on record every message they send (the kernel's comm would send
    them to the browser; without a kernel they go nowhere)."""
    traffic = CommTraffic()

    class Recording(BaseComm):
        def publish_msg(
            self, msg_type: str, data: Any = None, metadata: Any = None, buffers: Any = None, **keys: Any
        ) -> None:
            traffic.sent.append(Sent(self.comm_id, msg_type, len(json.dumps(data or {})), data or {}))

    monkeypatch.setattr(comm, "create_comm", Recording)  # ipywidgets looks it up at each open
    return traffic


def model_ids(widget: Any) -> set[str]:
    """The model ids of ``widget`` and of every widget it holds (children, layout, style)."""
    from ipywidgets import Widget

    ids = {widget.model_id}
    for name in widget.keys:
        value = getattr(widget, name, None)
        for item in value if isinstance(value, tuple | list) else (value,):
            if isinstance(item, Widget) and item is not widget:
                ids |= model_ids(item)
    return ids
