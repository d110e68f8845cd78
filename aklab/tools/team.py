"""TeamTool: hire and fire members, see the roster and the roles one may hire."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aklab.core import ActorAddress
from aklab.tools.card import ToolCard, ToolHost, offered_when

__all__ = ["ROLES_SECTION", "ROSTER_SECTION", "TeamTool"]

ROSTER_SECTION = "Team"
ROLES_SECTION = "Roles you can hire"


def render_roster(members: list[ActorAddress]) -> str:
    return "\n".join(f"- {a.name} ({a.role})" for a in sorted(members, key=lambda a: a.name))


def render_roles(host: ToolHost) -> str:
    """The roles ``host`` may hire, one line each: the same text for the model and for /team_roles."""
    return "\n".join(f"- {c.role}: {c.description or '(no description)'}" for c in host.hireable_cards())


class TeamTool(ToolCard):
    """The team card every agent carries (prepended unless one is supplied)."""

    name: str = "TeamTool"
    description: str = "Hire and fire team members; see the roster and hireable roles."

    def get_tools(self, host: ToolHost) -> list[Callable[..., Any]]:
        def can_hire() -> bool:
            return bool(host.hireable_cards())

        def can_fire() -> bool:
            roles = {c.role for c in host.hireable_cards()}
            return any(m.role in roles and m.name != host.name for m in host.team_members())

        @offered_when(can_hire)
        def hire_members(roles: list[str]) -> str:
            """Hire one member per role given."""
            return "\n".join(_try(host.hire, role) for role in roles)

        @offered_when(can_fire)
        def fire_members(names: list[str]) -> str:
            """Remove members, e.g. "@Developer"."""
            return "\n".join(_try_fire(host, n) for n in names)

        return [hire_members, fire_members]

    def get_context_states(self, host: ToolHost) -> dict[str, Callable[[], str]]:
        def roster() -> str:
            return render_roster(host.team_members())

        def roles() -> str:
            return render_roles(host)

        return {ROSTER_SECTION: roster, ROLES_SECTION: roles}

    def get_commands(self, host: ToolHost) -> list[Callable[..., Any]]:
        def hire_member(role: str, name: str | None = None) -> ActorAddress:
            """Hire a member by role; returns the new member's address."""
            return host.hire(role, name)

        def fire_member(name: str) -> str:
            """Fire a member by name."""
            members = host.team_members()
            # the member's own name in the reply ("@Developer fired"), however it was typed
            shown = next((m.name for m in members if m.name in (name, f"@{name}")), name)
            if not host.fire(name, by_operator=True):
                listed = ", ".join(sorted(m.name for m in members))
                raise ValueError(f"{name} is not a member of the team (members: {listed})")
            return f"{shown} fired"

        def team_members() -> str:
            """The current team roster."""
            return render_roster(host.team_members())

        def team_roles() -> str:
            """The roles this agent may hire, with their descriptions."""
            return render_roles(host) or "(no roles to hire)"

        return [hire_member, fire_member, team_members, team_roles]


def _try(hire: Callable[[str], ActorAddress], role: str) -> str:
    try:
        return f"{role}: hired {hire(role).name}"
    except Exception as exc:
        return f"{role}: error: {exc}"


def _try_fire(host: ToolHost, name: str) -> str:
    try:
        return f"{name}: fired" if host.fire(name) else f"{name}: not a member"
    except Exception as exc:
        return f"{name}: error: {exc}"
