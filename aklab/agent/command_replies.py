"""Replies to the ``/commands`` a member obeys: whoever sent one gets one line back.

- A command's result, or its ``Error in /name: ...`` line, goes back to its sender as a
  notification; a bare ``/help`` gets the help text. A command that returns nothing says
  nothing to a person (the registry's "handled, nothing to say"), but a teammate is told
  ``/name: done.``: its model would otherwise never learn that the command went through.
- A ``/stop`` either cancels a run or finds none, and its sender hears which. Mid-run, the
  agent's cancel hook takes every queued stop out of the mailbox (the purge), and each
  teammate that sent one is told ``"@Name's run was cancelled."`` (a person is told by the
  agent's notice to the human, ``Run interrupted. (@Name)``); a stop that finds no run is
  dispatched as the command, whose answer is ``There is no run to cancel.``. The mailbox
  hands each queued message to exactly one of the two, under its lock, so however close
  to the end of a run a stop lands, its sender gets exactly one of those lines. (A stop in
  an ask that was stopped meanwhile is withdrawn unread, like the rest of that ask's mail.)
  A ``CancelMessage`` is code's cancel, not a command: it gets no reply from an agent.
- Nothing is sent to the agent itself (a command its own code sent it): a message to itself
  would start a turn about its own reply. Its ``/stop`` still ends its own run, and the
  human is told as for any stop; the reply is logged.
- A sender that left the team (fired) before its reply could be delivered is logged, not
  reported as an error, nor told to the human: there is no one left to tell.
"""

from __future__ import annotations

import logging
from typing import Any

from aklab._text import one_line
from aklab.agent.messages import AgentMessage
from aklab.core import Akgent, Message
from aklab.errors import ActorGoneError

__all__ = ["done_line", "reply_to_command", "stops_from_teammates", "undelivered_reply"]

log = logging.getLogger("aklab.agent")


def done_line(command: str) -> str:
    """What a teammate is told of a command that returned nothing."""
    head = command.strip().split(maxsplit=1)[:1]
    return f"{head[0] if head else command}: done."


def stops_from_teammates(removed: list[Any]) -> list[AgentMessage]:
    """The ``/stop`` texts among purged cancels that an agent (not a person, not code) sent."""
    return [m for m in removed if isinstance(m, AgentMessage) and m.sender is not None and not m.sender.is_user_proxy]


def reply_to_command(agent: Akgent[Any, Any], command: Message, text: str) -> None:
    """Send ``text`` back to whoever sent ``command``, as a notification in its ask."""
    sender = command.sender
    if sender is None:
        return
    name = agent.config.name
    what = one_line(getattr(command, "content", type(command).__name__), 40)
    if sender == agent.myAddress:
        log.info("%s: no reply to its own %s: %s", name, what, text)
        return
    gone = f"reply to {sender.name}'s {what} not delivered: {sender.name} left the team"
    directory = agent.directory
    # fired, even by this very command (a person cannot be: its inbox is always there)
    if not sender.is_user_proxy and directory is not None and directory.member(sender.name) != sender:
        log.info("%s: %s: %s", name, gone, text)
        return
    reply = AgentMessage(content=text, type="notification", ask_id=command.ask_id)
    reply._command_reply = True
    try:
        agent.send(sender, reply)
    except ActorGoneError:  # stopped between the look-up and the delivery
        log.info("%s: %s: %s", name, gone, text)


def undelivered_reply(agent: Akgent[Any, Any], message: Message, reason: str) -> bool:
    """Log ``message`` if it is a reply ``reply_to_command`` sent (a team with an event store
    delivers it only when the handling ends, its sender may have left by then); False if not."""
    if not (isinstance(message, AgentMessage) and message._command_reply):
        return False
    to = message.recipient.name if message.recipient is not None else "its sender"
    log.info("%s: reply to %s not delivered: %s", agent.config.name, to, reason)
    return True
