"""Resume after a kernel restart: the team comes back with its memory, and what was left
undone is done once — also after the kernel was killed in the middle of an exchange."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models.function import AgentInfo, FunctionModel

from aklab.agent import BaseAgent
from aklab.errors import ConfigError
from aklab.lab import Lab
from aklab.lab.teams import TeamSpec
from aklab.store import SqliteStore
from tests.hardening._team import card, incoming, reply, team

ROOT = Path(__file__).resolve().parents[2]


def _memory(lab: Lab, name: str) -> tuple[int, int, int]:
    agent = lab.system.proxy_ask(lab.member(name), BaseAgent)
    return len(agent.history()), agent.get_usage_summary().total.requests, agent.get_state().tool_state.counter


def test_a_resumed_team_has_its_members_history_state_and_budget_back(tmp_path: Path) -> None:
    path = tmp_path / "events.sqlite3"
    with Lab("dev-team", store=path) as lab:
        lab.ask("Ask the Developer for a haiku about tests.", timeout=10)
        lab.ask("What is 2+2?", timeout=10)
        before = {name: _memory(lab, name) for name in ("@Manager", "@Developer")}
        replies = [m.content for m in lab.replies()]
        team_id = lab.team_id
    with Lab.resume(store=path) as again:
        assert again.team_id == team_id
        assert sorted(a.name for a in again.team()) == ["@Developer", "@Human", "@Manager"]
        assert {name: _memory(again, name) for name in ("@Manager", "@Developer")} == before
        assert [m.content for m in again.replies()] == replies
        assert again.resume_report is not None and "0 messages re-delivered" in again.resume_report
        assert len(again.ask("What is 3+3?", timeout=10)) >= 1


def test_a_snapshot_records_the_state_only_when_it_changed_and_the_resume_takes_the_last_recorded(
    tmp_path: Path,
) -> None:
    path = tmp_path / "events.sqlite3"
    with Lab("dev-team", store=path) as lab:
        for question in ("Ask the Developer for a haiku about tests.", "What is 2+2?", "What is 3+3?"):
            lab.ask(question, timeout=10)
        manager = lab.system.proxy_ask(lab.member("@Manager"), BaseAgent)
        state = manager.get_state().model_dump(mode="json")
        team_id = lab.team_id
    with SqliteStore(path) as store:
        ends = [r.message() for r in store.records(team_id, kinds=["DispatchedMessage"]) if r.sender == "@Manager"]
    states = [e.snapshot.state for e in ends if e.snapshot is not None]
    assert states[0] is not None  # the first records it whole
    assert None in states  # a turn that changed none of it records none of it
    assert [s for s in states if s is not None][-1] == state  # the last one recorded is the state now
    with Lab.resume(store=path) as again:
        back = again.system.proxy_ask(again.member("@Manager"), BaseAgent).get_state().model_dump(mode="json")
        assert back == state


def test_resume_names_what_it_cannot_find(tmp_path: Path) -> None:
    path = tmp_path / "events.sqlite3"
    with pytest.raises(ConfigError, match="no team is stored"):
        Lab.resume(store=path)
    with Lab("dev-team", store=path):
        pass
    with pytest.raises(ConfigError, match="no stored team 'nosuch'"):
        Lab.resume("nosuch", store=path)
    with pytest.raises(ConfigError, match="no event store to resume from"):
        Lab.resume(store=False)


def test_a_team_built_in_code_is_resumed_with_spec_and_without_it_says_so(tmp_path: Path) -> None:
    path = tmp_path / "events.sqlite3"
    with Lab(_relay("42"), store=path) as lab:
        assert [m.content for m in lab.ask("What is the answer?", timeout=10)] == ["relayed: 42"]
        short = lab.team_id[:8]
    # the store keeps the team's name, not its code: the error says what to pass, not "no built-in team"
    with pytest.raises(ConfigError, match=rf"'hardening' \({short}\) was built in code.*spec=") as caught:
        Lab.resume(store=path)
    assert "built-in" not in str(caught.value)
    with Lab.resume(store=path, spec=_relay("43")) as again:
        assert [m.content for m in again.ask("And now?", timeout=10)] == ["relayed: 43"]


def test_a_team_whose_file_is_gone_names_the_file_and_spec(tmp_path: Path) -> None:
    path, file = tmp_path / "events.sqlite3", tmp_path / "team.toml"
    file.write_text('name = "filed"\nentry = "Solo"\nmodel = "demo:aklab-demo"\n\n[[roles]]\nrole = "Solo"\n')
    with Lab(file, store=path):
        pass
    file.unlink()
    with pytest.raises(ConfigError, match=rf"'filed' \(\w+\) was started from {file}, which cannot be loaded.*spec="):
        Lab.resume(store=path)


def _relay(developer_answer: str | None) -> TeamSpec:
    """Manager asks Developer, relays the answer; a Developer with no answer blocks for ever."""

    def manager(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        sender, text = incoming(messages)
        if sender == "@Human":
            return reply(info, [("@Developer", "request", "compute the answer")])
        return reply(info, [("@Human", "response", "relayed: " + text.rsplit("\n", 1)[-1])])

    def developer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if developer_answer is None:
            print("BLOCKED", flush=True)  # the parent kills this process now
            sys.stdin.read()
        return reply(info, [("@Manager", "response", developer_answer or "")])

    return team(
        card("Manager", routes_to=["Developer"], model=FunctionModel(manager)),
        card("Developer", model=FunctionModel(developer)),
        entry="Manager",
    )


CHILD = textwrap.dedent(
    """
    import sys
    from aklab.lab import Lab
    from tests.lab.test_resume import _relay
    lab = Lab(_relay(None), store=sys.argv[1])
    lab.send("What is the answer?")
    sys.stdin.read()
    """
)


def test_a_kernel_killed_mid_exchange_resumes_and_finishes_every_message_once(tmp_path: Path) -> None:
    path = tmp_path / "events.sqlite3"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path)],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    ) as child:
        try:
            assert child.stdout is not None
            ready, _, _ = select.select([child.stdout], [], [], 60)
            assert ready and child.stdout.readline().strip() == "BLOCKED", "the child never reached the Developer"
            os.kill(child.pid, signal.SIGKILL)  # the kernel dies while the Developer is answering
            assert child.wait(10) == -signal.SIGKILL
        finally:
            if child.poll() is None:
                child.kill()
                child.wait(10)
    resume_and_finish_the_relay_once(path, spec=_relay("42"))


def resume_and_finish_the_relay_once(path: Path, **resume: Any) -> None:
    """Resume a relay killed while the Developer worked: the one message left is delivered
    again, the human gets the relayed answer, and every message to an agent is finished once."""
    with Lab.resume(store=path, **resume) as lab:
        assert lab.resume_report is not None and "1 message re-delivered" in lab.resume_report
        assert lab.wait(20)
        assert [m.content for m in lab.replies()] == ["relayed: 42"]
        team_id = lab.team_id
    with SqliteStore(path) as store:
        rows = store.records(team_id)
    to_agents = [r.message_id for r in rows if r.kind == "SentMessage" and r.recipient != "@Human"]
    finished = Counter(
        r.message_id for r in rows if r.kind == "DispatchedMessage" and json.dumps(r.payload).find('"done": true') >= 0
    )
    assert len(to_agents) == 3  # the question, the request to the Developer, its answer
    assert all(finished[m] == 1 for m in to_agents), finished  # none missing, none finished twice


SENT_THEN_KILLED = textwrap.dedent(
    """
    import os, signal, sys
    from aklab.lab import Lab
    from tests.lab.test_resume import _relay
    lab = Lab(_relay("42"), store=sys.argv[1])
    lab.send("What is the answer?")
    os.kill(os.getpid(), signal.SIGKILL)  # the kernel dies the moment send() has returned
    """
)


def test_a_question_sent_is_kept_even_when_the_kernel_dies_as_send_returns(tmp_path: Path) -> None:
    """What aklab said it sent (`%ask --bg` printed "Sent to @Manager") survives a crash at once
    after; send() returned before the person's message was stored, and such a crash lost it."""
    path = tmp_path / "events.sqlite3"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.run(
        [sys.executable, "-c", SENT_THEN_KILLED, str(path)], cwd=ROOT, env=env, capture_output=True, timeout=120
    )
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()[-2000:]
    with Lab.resume(store=path, spec=_relay("42")) as lab:
        assert lab.resume_report is not None and "1 message re-delivered" in lab.resume_report
        assert lab.wait(20)
        assert [m.content for m in lab.replies()] == ["relayed: 42"]
        assert lab.transcript(limit=10)[0].content == "What is the answer?"
