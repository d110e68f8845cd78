"""BaseConfig (what an actor is) and BaseState (what it currently holds)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, PrivateAttr

__all__ = ["BaseConfig", "BaseState"]


class BaseConfig(BaseModel):
    """Identity and settings of an actor. ``name`` starts with ``@`` by convention."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    name: str
    role: str
    description: str = ""


class BaseState(BaseModel):
    """Mutable runtime state of an actor.

    ``notify_if_changed()`` compares serializations, so in-place mutation of nested
    fields is detected without any bookkeeping by the code that mutates them.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    _last_dump: str | None = PrivateAttr(default=None)
    _observer: Any = PrivateAttr(default=None)

    def observer(self, callback: Any) -> None:
        """Register ``callback(state)`` to hear about changes."""
        self._observer = callback

    def notify_if_changed(self) -> bool:
        dump = self.model_dump_json()
        if dump == self._last_dump:
            return False
        self._last_dump = dump
        if self._observer is not None:
            self._observer(self)
        return True
