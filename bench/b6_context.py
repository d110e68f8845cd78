"""B6 context: compose the context update when one member of a large roster changed.

The real pieces: a ``TeamDirectory`` holding N members, ``TeamTool``'s context providers
(roster and hireable roles, rendered by ``render_roster``) bound to a host that reads the
directory the way ``BaseAgent`` does, and a ``ContextUpdater``. Each step renames one
member in the directory (untimed, it is the orchestrator's side) and then composes the
next block with the previous marker visible (a delta), which is what an agent does at the
start of a turn. The no-change compose (nothing to send) is reported alongside.
"""

from __future__ import annotations

import time
from typing import Any

from bench.common import Figure

__all__ = ["measure", "run"]

ID = "B6"


class _LiveRef:
    """Stands in for a pykka ActorRef: always alive."""

    def is_alive(self) -> bool:
        return True


class _Host:
    """The ToolHost surface of BaseAgent, on a directory (as BaseAgent reads it)."""

    def __init__(self, directory: Any, role: str) -> None:
        self.directory = directory
        self.name = f"@{role}"
        self.role = role

    def team_members(self) -> list[Any]:
        return self.directory.members()  # type: ignore[no-any-return]

    def hireable_cards(self) -> list[Any]:
        own = self.directory.card(self.role)
        cards = (self.directory.card(r) for r in own.routes_to)
        return [c for c in cards if c is not None]

    def hire(self, role: str, name: str | None = None) -> Any:
        raise NotImplementedError

    def fire(self, name: str, *, by_operator: bool = False) -> bool:
        raise NotImplementedError


def measure(size: int, steps: int) -> dict[str, float]:
    from aklab.agent import AgentConfig
    from aklab.core import ActorAddress, AgentCard, TeamDirectory
    from aklab.tools import TeamTool
    from aklab.tools.context import ContextUpdater, ToolState

    directory = TeamDirectory()
    for role, routes in [("Manager", ["Developer", "QA"]), ("Developer", []), ("QA", [])]:
        directory.set_card(
            AgentCard(
                description=f"{role} of the benchmark",
                agent_class="aklab.agent.BaseAgent",
                config=AgentConfig(name=f"@{role}", role=role),
                routes_to=routes,
            )
        )
    ref: Any = _LiveRef()
    members = [ActorAddress(f"id{i}", f"@Developer{i}", "Developer", ref=ref) for i in range(size)]
    for address in members:
        directory.add_member(address)
    state = ToolState()
    updater = ContextUpdater(TeamTool().get_context_states(_Host(directory, "Manager")), lambda: state)
    if updater.compose(set()) is None:  # block 1, the full snapshot
        raise RuntimeError("no first block")
    shown = {state.counter}  # every block delivered stays in the history (nothing folded)

    changed = 0.0
    unchanged = 0.0
    block: str | None = None
    victim = members[size // 2]
    for step in range(steps):
        directory.remove_member(victim)
        victim = ActorAddress(
            victim.agent_id, f"@Developer{size // 2}{'b' if step % 2 == 0 else ''}", "Developer", ref=ref
        )
        directory.add_member(victim)
        start = time.perf_counter()
        block = updater.compose(shown)
        changed += time.perf_counter() - start
        if block is None or victim.name not in block:
            raise RuntimeError("the changed member is not in the block")
        shown.add(state.counter)
        start = time.perf_counter()
        nothing = updater.compose(shown)
        unchanged += time.perf_counter() - start
        if nothing is not None:
            raise RuntimeError("a block was composed although nothing changed")
    return {
        "changed_ms": changed / steps * 1000,
        "unchanged_ms": unchanged / steps * 1000,
        "block_chars": len(block or ""),
    }


def run(*, smoke: bool = False, repeat: int = 3, context: dict[str, Any] | None = None) -> list[Figure]:
    sizes = [10, 100] if smoke else [10, 100, 1000]
    steps = 5 if smoke else 200
    repeat = 1 if smoke else repeat
    figures = []
    for size in sizes:
        results = [measure(size, steps) for _ in range(repeat)]
        best = min(results, key=lambda r: r["changed_ms"])
        figures.append(
            Figure(
                ID,
                f"context: compose the update for a roster of {size:,} when one member changed",
                "time per compose",
                best["changed_ms"],
                "ms",
                budget_max=5.0 if size == 1000 else None,
                note=f"nothing changed: {best['unchanged_ms']:.3f} ms; block {best['block_chars']:,} chars",
                details={"steps": steps, "repeat": repeat, "runs": results},
            )
        )
    return figures
