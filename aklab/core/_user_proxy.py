"""UserProxy: the actor standing for a person (or any outside system) in the team."""

from __future__ import annotations

from typing import Any

from aklab.core._akgent import Akgent

__all__ = ["UserProxy"]


class UserProxy(Akgent[Any, Any]):
    """An actor whose address says ``is_user_proxy``; agents escalate to it."""

    is_user_proxy = True
