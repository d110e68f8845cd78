from __future__ import annotations

import copy
import gc
import threading
from dataclasses import dataclass, field
from typing import Any

import pytest

from aklab.tools import PlanningTool, ToolFactory
from aklab.tools import planning as planning_module


class Directory:
    """Stands in for a team's TeamDirectory: only its identity matters."""


@dataclass
class Host:
    name: str
    role: str = "Developer"
    directory: Any = field(default_factory=Directory)


@dataclass
class KeyedHost:
    name: str
    key: str
    role: str = "Developer"

    def team_board_key(self) -> str:
        return self.key


def tools(card: PlanningTool, host: Any) -> dict[str, Any]:
    return {t.__name__: t for t in card.get_tools(host)}


def test_two_agents_of_one_team_share_the_board() -> None:
    team = Directory()
    alice, bob = Host("@Alice", directory=team), Host("@Bob", directory=team)
    tools(PlanningTool(), alice)["planning_create"]("Write the parser", owner="@Bob")
    bob_tools = tools(PlanningTool(), bob)
    bob_tools["planning_update"]("T1", status="doing")
    assert bob_tools["planning_summary"]() == "- T1 [doing] @Bob: Write the parser"
    assert "created by: @Alice" in tools(PlanningTool(), alice)["planning_get"]("T1")


def test_different_teams_have_separate_boards_with_their_own_ids() -> None:
    one, other = PlanningTool(), PlanningTool()
    tools(one, Host("@A"))["planning_create"]("First team task")
    result = tools(other, Host("@B"))["planning_create"]("Second team task")
    assert result == "created T1 [todo] Second team task"
    assert tools(other, Host("@C"))["planning_summary"]() == "(no tasks)"


def test_a_host_team_board_key_wins_over_its_directory() -> None:
    tools(PlanningTool(), KeyedHost("@A", key="team-x"))["planning_create"]("Shared by key")
    assert "Shared by key" in tools(PlanningTool(), KeyedHost("@B", key="team-x"))["planning_summary"]()
    assert tools(PlanningTool(), KeyedHost("@C", key="team-y"))["planning_summary"]() == "(no tasks)"


def test_a_host_without_a_team_gets_one_board_per_card_instance() -> None:
    card = PlanningTool()
    host = Host("@Solo", directory=None)
    tools(card, host)["planning_create"]("Mine")
    assert "Mine" in tools(card, Host("@Other", directory=None))["planning_summary"]()
    assert tools(PlanningTool(), host)["planning_summary"]() == "(no tasks)"


def test_ids_are_sequential_and_the_summary_is_sorted_by_id_number() -> None:
    board = PlanningTool().board(Host("@A"))
    for n in range(1, 11):
        board.create(f"Task {n}")
    ids = [line.split()[1] for line in board.summary().splitlines()]
    assert ids == [f"T{n}" for n in range(1, 11)]


def test_the_summary_shows_status_owner_and_title_one_line_per_task() -> None:
    host = Host("@Lead")
    t = tools(PlanningTool(), host)
    t["planning_create"]("Design the API", owner="Dev")
    t["planning_create"]("Review", description="look at everything")
    t["planning_update"]("t1", status="DOING")
    assert t["planning_summary"]() == "- T1 [doing] @Dev: Design the API\n- T2 [todo] Review"


def test_an_unknown_status_is_refused_with_the_valid_ones() -> None:
    t = tools(PlanningTool(), Host("@A"))
    t["planning_create"]("Something")
    with pytest.raises(ValueError, match="valid statuses: todo, doing, done, blocked"):
        t["planning_update"]("T1", status="finished")
    assert t["planning_summary"]() == "- T1 [todo] Something"


def test_an_unknown_task_id_is_refused_with_the_valid_ids() -> None:
    t = tools(PlanningTool(), Host("@A"))
    with pytest.raises(ValueError, match="valid ids: none yet"):
        t["planning_get"]("T1")
    t["planning_create"]("Something")
    with pytest.raises(ValueError, match="valid ids: T1"):
        t["planning_update"]("T9", status="done")


def test_an_update_with_nothing_to_change_is_refused() -> None:
    t = tools(PlanningTool(), Host("@A"))
    t["planning_create"]("Something")
    with pytest.raises(ValueError, match="nothing to update"):
        t["planning_update"]("T1")


def test_notes_are_kept_with_their_author_and_owners_can_be_cleared() -> None:
    t = tools(PlanningTool(), Host("@Tester"))
    t["planning_create"]("Fix the bug", owner="@Dev")
    t["planning_update"]("T1", note="fails on empty input", owner="")
    detail = t["planning_get"]("T1")
    assert "note: @Tester: fails on empty input" in detail
    assert "owner: (unassigned)" in detail


def test_search_matches_titles_descriptions_notes_and_owners_in_any_case() -> None:
    t = tools(PlanningTool(), Host("@A"))
    t["planning_create"]("Parser", description="handles YAML")
    t["planning_create"]("Docs", owner="@Writer")
    t["planning_create"]("Release")
    t["planning_update"]("T3", note="waiting on yaml fix")
    assert t["planning_search"]("yaml") == "- T1 [todo] Parser\n- T3 [todo] Release"
    assert t["planning_search"]("@writer") == "- T2 [todo] @Writer: Docs"
    assert t["planning_search"]("nothing") == "(no tasks match 'nothing')"


def test_the_context_section_is_titled_planning_and_renders_the_summary() -> None:
    card, host = PlanningTool(), Host("@A")
    states = card.get_context_states(host)
    assert list(states) == ["Planning"]
    assert states["Planning"]() == "(no tasks)"
    card.board(host).create("Ship it", owner="@A")
    assert states["Planning"]() == "- T1 [todo] @A: Ship it"


def test_the_commands_reach_the_same_board_by_name_and_as_text() -> None:
    host = Host("@Lead")
    registry = ToolFactory([PlanningTool()], host).get_command_registry()
    assert registry.names() == ["get_planning_task", "planning_summary", "search_planning"]
    tools(PlanningTool(), host)["planning_create"]("Plan the sprint")
    assert registry.dispatch("/planning_summary") == "- T1 [todo] Plan the sprint"
    task = registry.callable("get_planning_task")("T1")
    assert (task.id, task.title, task.created_by) == ("T1", "Plan the sprint", "@Lead")
    assert (registry.dispatch("/get_planning_task T1") or "").startswith("T1: Plan the sprint")
    assert registry.dispatch("/search_planning sprint") == "- T1 [todo] Plan the sprint"
    assert (registry.dispatch("/get_planning_task T7") or "").startswith("Error in /get_planning_task")


def test_concurrent_agents_never_get_the_same_task_id() -> None:
    team = Directory()
    cards = [(PlanningTool(), Host(f"@Agent{i}", directory=team)) for i in range(8)]

    def create_many(card: PlanningTool, host: Host) -> None:
        for n in range(25):
            card.board(host).create(f"{host.name} task {n}")

    threads = [threading.Thread(target=create_many, args=pair) for pair in cards]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ids = [t.id for t in cards[0][0].board(cards[0][1]).tasks()]
    assert ids == [f"T{n}" for n in range(1, 201)]


def test_a_card_can_be_deep_copied_after_its_own_board_was_used() -> None:
    card = PlanningTool()
    card.board(Host("@A", directory=None)).create("Before the copy")
    clone = copy.deepcopy(card)
    clone.board(Host("@B", directory=None)).create("Only in the clone")
    assert card.board(Host("@A", directory=None)).summary() == "- T1 [todo] Before the copy"


def test_a_team_board_is_forgotten_when_its_directory_is_collected() -> None:
    directory = Directory()
    key = ("directory", id(directory))
    PlanningTool().board(Host("@A", directory=directory)).create("Ephemeral")
    assert key in planning_module._boards
    del directory
    gc.collect()
    assert key not in planning_module._boards
