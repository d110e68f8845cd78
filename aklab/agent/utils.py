"""The team addressing convention: ``@member`` is delivered, a bare role is hired.

Models slip, and a retry to fix a slip whose intent is clear costs a request, so three
slips are read as meant: ``@Role`` naming no member but a role the agent may hire is read
as the bare role (hired), as models write "@Developer" for a Developer not hired yet as
often as "Developer"; a bare name that is no hireable role but a member's name is that
member ("Human" for @Human); and "@manager" is @Manager when only one member's name
matches but for case.

Kept apart from ``agent.py`` so that a second agent class can route its own output
type without importing the base class.
"""

from __future__ import annotations

import logging
from typing import Protocol

from aklab.core import ActorAddress

__all__ = ["TeamResolver", "resolve_recipient", "why_unresolvable"]

log = logging.getLogger("aklab.agent")


class TeamResolver(Protocol):
    def get_team_member(self, name: str) -> ActorAddress | None: ...
    def hire_member(self, role: str, name: str | None = None) -> ActorAddress: ...
    def hireable_roles(self) -> list[str]: ...
    def report_unroutable(self, recipient: str, reason: str) -> None: ...


def _read(team: TeamResolver, recipient: str) -> tuple[str, ActorAddress | None]:
    """``recipient`` stripped, an ``@Role`` that names no member but a hireable role read as
    that role, a bare name that is no hireable role but a member's name read as that member
    ("Human" for @Human), and the member it names."""
    recipient = recipient.strip()
    if not recipient.startswith("@"):
        if recipient and recipient not in team.hireable_roles():
            member = team.get_team_member(f"@{recipient}")
            if member is not None:
                return member.name, member
        return recipient, None
    member = team.get_team_member(recipient)
    if member is None and recipient[1:] in team.hireable_roles():
        return recipient[1:], None
    return (recipient if member is None else member.name), member


def why_unresolvable(team: TeamResolver, recipient: str) -> str | None:
    """Why ``recipient`` cannot be reached right now, or None if it can (no side effects)."""
    return _why(team, *_read(team, recipient))


def _why(team: TeamResolver, recipient: str, member: ActorAddress | None) -> str | None:
    """``why_unresolvable`` of a recipient ``_read`` has read, with the member it found."""
    if recipient.startswith("@"):
        if member is None:
            return f"{recipient} is not a member of the team"
        if recipient == getattr(team, "name", None):
            return f"{recipient} is you; answer the sender or address another member"
        return None
    roles = team.hireable_roles()
    if recipient not in roles:
        allowed = ", ".join(roles) or "none"
        return f"{recipient!r} is not a role you may hire (you may hire: {allowed}); address members as @Name"
    return None


def resolve_recipient(
    team: TeamResolver, recipient: str, *, otherwise: ActorAddress | None = None
) -> ActorAddress | None:
    """The member to deliver to, hiring one for a bare role; if impossible, ``otherwise``
    (reported as delivered there instead), or None (logged and reported)."""
    recipient, member = _read(team, recipient)
    reason = _why(team, recipient, member)
    if reason is None:
        if member is not None:
            return member
        try:
            return team.hire_member(recipient)
        except Exception as exc:
            reason = f"hiring {recipient!r} failed: {exc}"
    if otherwise is not None:
        reason = f"{reason}; delivered to {otherwise.name} instead"
    log.warning("skipped recipient %s: %s", recipient, reason)
    team.report_unroutable(recipient, reason)
    return otherwise
