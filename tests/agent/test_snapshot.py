"""What an agent's snapshot carries of its history: only the messages the previous one lacked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic_ai.messages import ModelMessagesTypeAdapter, ModelRequest, ModelResponse, TextPart, UserPromptPart

from aklab.agent import AgentSnapshotEvent, BaseAgent
from aklab.agent.agent import _history_change
from aklab.lab import Lab
from aklab.store import SqliteStore


def request(text: str) -> ModelRequest:
    return ModelRequest(parts=[UserPromptPart(content=text)])


def response(text: str) -> ModelResponse:
    return ModelResponse(parts=[TextPart(content=text)])


def replay(before: list[Any], after: list[Any]) -> tuple[AgentSnapshotEvent, list[Any]]:
    """The snapshot event for ``before`` -> ``after``, and the history a resume reads from it."""
    start, refs, new = _history_change(before, after)
    event = AgentSnapshotEvent(
        agent="@A",
        agent_id="a",
        start=start,
        refs=refs,
        messages=ModelMessagesTypeAdapter.dump_python(new, mode="json"),
    )
    stored_before = ModelMessagesTypeAdapter.dump_python(before, mode="json")
    return event, list(ModelMessagesTypeAdapter.validate_python(event.history(stored_before)))


def test_a_turn_sends_only_what_it_added() -> None:
    before = [request("q1"), response("a1")]
    after = [*before, request("q2"), response("a2")]
    event, rebuilt = replay(before, after)
    assert (event.start, event.refs, len(event.messages)) == (2, [], 2)
    assert rebuilt == after


def test_a_fold_keeps_the_messages_it_did_not_touch_by_reference() -> None:
    before = [request("system + q1"), response("a1"), request("q2"), response("a2"), request("q3"), response("a3")]
    head = request("system + digest of q1, q2")
    after = [head, *before[4:], request("q4"), response("a4")]  # the first turns folded, the rest kept
    event, rebuilt = replay(before, after)
    assert event.refs == [-1, 4, 5, -1, -1] and len(event.messages) == 3
    assert rebuilt == after


def test_a_merged_request_is_new_and_what_follows_it_is_kept() -> None:
    before = [request("q1"), response("a1"), request("closing"), request("q2"), response("a2")]
    merged = ModelRequest(parts=[*before[2].parts, *before[3].parts])
    after = [*before[:2], merged, before[4], request("q3"), response("a3")]
    event, rebuilt = replay(before, after)
    assert event.refs == [0, 1, -1, 4, -1, -1] and len(event.messages) == 3
    assert rebuilt == after


def test_a_cleared_history_and_an_unrelated_one_are_sent_whole() -> None:
    before = [request("q1"), response("a1")]
    assert replay(before, [])[0].start == 0 and replay(before, [])[1] == []
    other = [request("x"), response("y")]
    event, rebuilt = replay(before, other)
    assert (event.start, event.refs, len(event.messages)) == (0, [], 2) and rebuilt == other


def test_a_snapshot_that_refers_past_what_it_has_says_so() -> None:
    event = AgentSnapshotEvent(agent="@A", agent_id="a", refs=[0, 5], messages=[])
    try:
        event.history([{"kind": "request"}])
    except ValueError as exc:
        assert "@A" in str(exc) and "refers to messages it does not have" in str(exc)
    else:
        raise AssertionError("no error")


def test_histories_folded_into_a_digest_come_back_whole_after_a_resume(tmp_path: Path) -> None:
    path = tmp_path / "events.sqlite3"
    with Lab("dev-team", store=path) as lab:
        for i in range(9):  # enough turns for the Manager's oldest ones to fold into a digest
            lab.ask(f"Ask the Developer for item {i}.", timeout=10)
        histories = {n: _history(lab, n) for n in ("@Manager", "@Developer")}
    with SqliteStore(path) as store:
        snapshots = [r.message().event for r in store.records(kinds=["AgentSnapshotEvent"])]  # type: ignore[attr-defined]
    assert any(s.refs for s in snapshots)  # folds were sent as references, not whole
    with Lab.resume(store=path) as again:
        for name, history in histories.items():
            assert _history(again, name) == history


def _history(lab: Lab, name: str) -> list[Any]:
    """An agent's history as stored (its usage objects' own classes aside)."""
    return ModelMessagesTypeAdapter.dump_python(
        lab.system.proxy_ask(lab.member(name), BaseAgent).history(), mode="json"
    )
