"""aklab's exception tree.

::

    AklabError                      root of everything aklab raises on purpose
    ├── ConfigError                 misuse: the message says what to type instead
    ├── RoutingError                a recipient that cannot be resolved or hired
    ├── ActorGoneError              the target actor is stopped or was never started
    └── ModelError                  a provider or model failure (original kept as __cause__)

Later layers add their own subclasses (usage limits, run interruption) next to the
code that raises them; they all derive from :class:`AklabError`, never from
``BaseException``.
"""

from __future__ import annotations

__all__ = ["ActorGoneError", "AklabError", "ConfigError", "ModelError", "RoutingError"]


class AklabError(Exception):
    """Root of every error aklab raises deliberately."""


class ConfigError(AklabError):
    """Misuse: a bad argument or configuration. The message tells how to fix it."""


class RoutingError(AklabError):
    """A message could not be delivered: unknown member, unknown or forbidden role."""


class ActorGoneError(AklabError):
    """The addressed actor is not running (stopped, failed, or never started)."""


class ModelError(AklabError):
    """The model or its provider failed; the original exception is ``__cause__``."""
