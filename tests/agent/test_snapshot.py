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
        ends = [r.message() for r in store.records(kinds=["DispatchedMessage"])]
        assert not store.records(kinds=["AgentSnapshotEvent"])  # each travels with its handling's end
    snapshots = [e.snapshot for e in ends if e.snapshot is not None]  # type: ignore[attr-defined]
    assert snapshots and all(isinstance(s, AgentSnapshotEvent) for s in snapshots)
    assert any(s.refs for s in snapshots)  # folds were sent as references, not whole
    with Lab.resume(store=path) as again:
        for name, history in histories.items():
            assert _history(again, name) == history


def _history(lab: Lab, name: str) -> list[Any]:
    """An agent's history as stored (its usage objects' own classes aside)."""
    return ModelMessagesTypeAdapter.dump_python(
        lab.system.proxy_ask(lab.member(name), BaseAgent).history(), mode="json"
    )


def _stored_history(records: list[Any], tmp_path: Path, name: str) -> list[Any]:
    from aklab.lab.resume import load_team
    from aklab.store import new_team_id

    team_id = new_team_id()
    with SqliteStore(tmp_path / f"{name}.sqlite3") as store:
        store.save_team(team_id, name="t")
        for record in records:
            store.append(record, team_id)
        (member,) = [m for m in load_team(store).members if m.name == "@A"]
    return ModelMessagesTypeAdapter.dump_python(ModelMessagesTypeAdapter.validate_python(member.messages), mode="json")


def test_a_snapshot_carried_by_the_end_of_a_handling_and_one_of_its_own_read_back_alike(tmp_path: Path) -> None:
    from pydantic_ai.messages import BinaryContent

    from aklab.core import ActorAddress, DispatchedMessage, EventMessage, StartMessage

    agent = ActorAddress("a" * 32, "@A", "A")
    picture = ModelRequest(
        parts=[UserPromptPart(content=["look", BinaryContent(b"\x89PNG\xff\x00", media_type="image/png")])]
    )
    turns = [[request("q1"), response("a1")], [request("q1"), response("a1"), picture, response("a png")]]
    before: list[Any] = []
    ends, events = [StartMessage(sender=agent)], [StartMessage(sender=agent)]
    for i, history in enumerate(turns):
        start, refs, new = _history_change(before, history)
        before = history
        snapshot = AgentSnapshotEvent(agent="@A", agent_id=agent.agent_id, start=start, refs=refs, messages=new)
        ends.append(DispatchedMessage(sender=agent, message_id=f"m{i}", done=True, snapshot=snapshot))
        # as earlier versions wrote it: an event of its own, its messages as JSON dicts
        dicts = ModelMessagesTypeAdapter.dump_python(new, mode="json")
        old = AgentSnapshotEvent.model_construct(
            agent="@A", agent_id=agent.agent_id, start=start, refs=refs, messages=dicts
        )
        events += [
            EventMessage(sender=agent, event=old),
            DispatchedMessage(sender=agent, message_id=f"m{i}", done=True),
        ]
    expected = ModelMessagesTypeAdapter.dump_python(turns[-1], mode="json")
    assert _stored_history(ends, tmp_path, "ends") == expected  # the image's bytes too
    assert _stored_history(events, tmp_path, "events") == expected


def test_a_snapshot_that_cannot_be_read_back_is_skipped_with_a_warning(tmp_path: Path, caplog: Any) -> None:
    from aklab.core import ActorAddress, DispatchedMessage, StartMessage

    agent = ActorAddress("a" * 32, "@A", "A")
    first = [request("q1"), response("a1")]
    good = AgentSnapshotEvent(agent="@A", agent_id=agent.agent_id, messages=first)
    bad = AgentSnapshotEvent.model_construct(
        agent="@A", agent_id=agent.agent_id, start=2, refs=[], messages=[{"kind": "?"}]
    )
    records = [
        StartMessage(sender=agent),
        DispatchedMessage(sender=agent, message_id="m1", done=True, snapshot=good),
        DispatchedMessage(sender=agent, message_id="m2", done=True, snapshot=bad),
    ]
    with caplog.at_level("WARNING", logger="aklab.lab"):
        history = _stored_history(records, tmp_path, "bad")
    assert history == ModelMessagesTypeAdapter.dump_python(first, mode="json")
    assert "could not be read back and is skipped" in caplog.text
