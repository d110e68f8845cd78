"""aklab: a Jupyter-centric lab for teams of LLM agents.

``%load_ext aklab`` in a notebook, then ``%%ask`` the team and ``%usage`` for the cost.
The library underneath: ``aklab.core`` (actors), ``aklab.llm`` (models),
``aklab.tools`` (tool cards), ``aklab.agent`` (collaborative agents), ``aklab.lab``.
"""

from __future__ import annotations

import logging
from typing import Any

import aklab.secrets  # noqa: F401  (log records are redacted from the first import on)
from aklab.errors import AklabError

# A library does not configure logging: without this, actor-thread warnings would land
# on stderr (and in notebook cells) through logging's last-resort handler.
logging.getLogger("aklab").addHandler(logging.NullHandler())

__version__ = "0.1.0"
__all__ = ["AklabError", "__version__", "forget", "history", "load_ipython_extension"]


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext aklab``: register the magics (heavy imports warm up in the background)."""
    from aklab.lab import load_ipython_extension as load

    load(ipython)


def history(store: Any = None, **filters: Any) -> Any:
    """Every stored session's asks, runs, usage and messages as DataFrames (``.asks``,
    ``.runs``, ``.usage``, ``.messages``), across teams and kernel restarts.

    ``store``: a path, a ``postgresql://`` DSN or an open store (default: ``$AKLAB_STORE``,
    else ``./.aklab/events.sqlite3``); a SQLite path with no store raises ``ConfigError``
    saying where it looked (nothing is created). Filters: ``team`` (id, id prefix or name; one
    that names no stored team raises ``ConfigError``), ``agent``,
    ``model``, ``since``, ``until`` (datetime, date or ISO string).
    """
    from aklab.store import EventStore, open_store
    from aklab.store import history as read

    if isinstance(store, EventStore):
        return read(store, **filters)
    # Reading only: no check of the whole file on open (about 1 s per 60 MB not yet cached);
    # damage in what is read is still reported, with SqliteStore.recover(...) named.
    with open_store(store, create=False, verify=False) as opened:
        return read(opened, **filters)


def forget(team: str, store: Any = None) -> str:
    """Delete one stored team for good: every record of it (messages, usage, histories) and
    its row; returns what went, in one line. ``team``: its id, an id prefix or its name (a
    name or prefix several teams share is refused, naming their ids). Refused while a lab
    runs the team, in this kernel or another (close it first). ``store`` as for
    :func:`history`. The SQLite file keeps its size (its free pages are reused).
    """
    from aklab.lab.resume import forget_team
    from aklab.store import EventStore, open_store

    if isinstance(store, EventStore):
        return forget_team(store, team)
    with open_store(store, create=False) as opened:
        return forget_team(opened, team)
