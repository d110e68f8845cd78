"""Resume through pydantic-ai's real OpenAI provider over loopback: the histories stored with
each handling's end (responses with their usage, finish reasons, provider ids, digest folds)
come back exactly, and the resumed agent's next request carries them to the server; a
kernel killed while a member waits on the server resumes and finishes every message once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from pydantic_ai.messages import ModelMessagesTypeAdapter

import aklab
from aklab.agent import BaseAgent
from aklab.lab import Lab
from aklab.lab.teamfile import team_from_dict
from aklab.llm import ModelConfig
from aklab.store import SqliteStore
from tests.fakeserver import Behaviour, FakeOpenAI, cut_stream, hang, last_user_text, output
from tests.lab.test_resume import resume_and_finish_the_relay_once

SOLO = {"name": "solo", "entry": "Solo", "roles": [{"role": "Solo", "prompt": "You are Solo."}]}
ASKED = 9  # enough turns for the oldest to fold into a digest


def _answer(body: dict[str, Any]) -> Any:
    question = [line for line in last_user_text(body).splitlines() if line.strip()][-1]
    reply = {"message_type": "response", "recipient": "@Human", "message": f"Answer to {question}"}
    return output({"messages": [reply]})(body)


def _history(lab: Lab) -> list[Any]:
    agent = lab.system.proxy_ask(lab.member("@Solo"), BaseAgent)
    return ModelMessagesTypeAdapter.dump_python(agent.history(), mode="json")


@pytest.mark.parametrize("mode", ["tool", "prompted"])
def test_a_team_on_a_real_provider_resumes_with_its_histories_whole(
    fake_openai: FakeOpenAI, tmp_path: Path, mode: str
) -> None:
    fake_openai.default = _answer
    path = tmp_path / "events.sqlite3"
    cfg = ModelConfig(provider="openai-compatible", model="fake", base_url=fake_openai.url, output_mode=mode)
    with Lab(team_from_dict(SOLO), model=cfg, store=path) as lab:
        for i in range(ASKED):
            assert [m.content for m in lab.ask(f"Question {i}?", timeout=20)] == [f"Answer to Question {i}?"]
        before = _history(lab)
    assert any(m["kind"] == "response" and m.get("provider_name") for m in before)  # the real provider's responses
    with SqliteStore(path) as store:
        ends = [r.message() for r in store.records(kinds=["DispatchedMessage"])]
    assert any(getattr(e.snapshot, "refs", None) for e in ends)  # a fold was stored as references
    sent_before = len(fake_openai.bodies)

    with Lab.resume(store=path, spec=team_from_dict(SOLO), model=cfg) as again:
        assert _history(again) == before
        assert [m.content for m in again.ask("Question 9?", timeout=20)] == ["Answer to Question 9?"]
    (body,) = fake_openai.bodies[sent_before:]
    wire = "\n".join(str(m.get("content") or "") for m in body["messages"])
    assert "Question 0?" in wire and "Question 8?" in wire and "Question 9?" in wire


def test_a_resume_without_a_model_goes_back_to_the_model_the_team_ran_on(
    fake_openai: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`%aklab model local:smollm2 --temperature 0.3`, a restart, `%aklab resume`: the team came
    back on the demo model, because only a model given as a spec string was stored. Now the
    lab's ModelConfig is (its key's variable name at most; a URL's credentials never)."""
    fake_openai.default = _answer
    monkeypatch.setenv("FAKE_KEY_VAR", "dummy-key-for-the-loopback-fake")
    path = tmp_path / "events.sqlite3"
    with_login = fake_openai.url.replace("http://", "http://someone:pw-not-kept@")
    cfg = ModelConfig(
        provider="openai-compatible",
        model="fake",
        base_url=with_login,
        temperature=0.3,
        output_mode="prompted",
        api_key_env="FAKE_KEY_VAR",
    )
    with Lab(team_from_dict(SOLO), model=cfg, store=path) as lab:
        assert [m.content for m in lab.ask("Question 0?", timeout=20)] == ["Answer to Question 0?"]
        team_id = lab.team_id
    with SqliteStore(path) as store:
        (info,) = [t for t in store.teams() if t.team_id == team_id]
    assert "dummy-key" not in str(info.metadata) and "pw-not-kept" not in str(info.metadata)
    assert info.metadata["model_config"] == {
        "provider": "openai-compatible",
        "model": "fake",
        "base_url": fake_openai.url,
        "api_key_env": "FAKE_KEY_VAR",
        "temperature": 0.3,
        "output_mode": "prompted",
    }
    asked = len(fake_openai.bodies)
    with Lab.resume(store=path, spec=team_from_dict(SOLO)) as again:
        assert [m.content for m in again.ask("Question 1?", timeout=20)] == ["Answer to Question 1?"]
        assert set(again.usage()["model"]) == {"openai-compatible:fake"}
    (body,) = fake_openai.bodies[asked:]
    assert body["temperature"] == 0.3 and "Reply with one JSON object" in str(body["messages"])


ROOT = Path(__file__).resolve().parents[2]
RELAY = {
    "name": "relay",
    "entry": "Manager",
    "roles": [
        {"role": "Manager", "prompt": "You are Manager.", "routes_to": ["Developer"]},
        {"role": "Developer", "prompt": "You are Developer."},
    ],
}
#: How each child below ends: the relay on the server given as argv[2], stored at argv[1],
#: is asked a question; the child then waits (for its kill, or for the test to end it).
RUN_THE_RELAY = textwrap.dedent(
    """
    cfg = ModelConfig(provider="openai-compatible", model="fake", base_url=sys.argv[2])
    lab = Lab(team_from_dict(RELAY), model=cfg, store=sys.argv[1])
    lab.send("What is the answer?")
    sys.stdin.read()
    """
)
CHILD = (
    textwrap.dedent(
        """
    import sys
    from aklab.lab import Lab
    from aklab.lab.teamfile import team_from_dict
    from aklab.llm import ModelConfig
    from tests.lab.test_resume_real_provider import RELAY
    """
    )
    + RUN_THE_RELAY
)


def _model(server: FakeOpenAI) -> ModelConfig:
    return ModelConfig(provider="openai-compatible", model="fake", base_url=server.url)


@contextmanager
def _kernel(script: str, path: Path, url: str) -> Iterator[subprocess.Popen[bytes]]:
    """A child Python running ``script`` with the store ``path`` and the server ``url`` as
    arguments; killed at the end if it is still alive."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with subprocess.Popen(
        [sys.executable, "-c", script, str(path), url],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ) as child:
        try:
            yield child
        finally:
            if child.poll() is None:
                child.kill()
                child.wait(10)


def _relay(developer_answers: list[bool]) -> Any:
    """The server's side of the relay; the Developer's request hangs while ``developer_answers`` is empty."""

    def respond(body: dict[str, Any]) -> Behaviour:
        system = str(body["messages"][0].get("content") or "")
        text = last_user_text(body)
        if system.startswith("You are Developer"):
            if not developer_answers:
                return hang()
            reply = {"message_type": "response", "recipient": "@Manager", "message": "42"}
        elif "from @Developer" in text:
            answer = [line for line in text.splitlines() if line.strip()][-1]
            reply = {"message_type": "response", "recipient": "@Human", "message": f"relayed: {answer}"}
        else:
            reply = {"message_type": "request", "recipient": "Developer", "message": "compute the answer"}  # hires one
        return output({"messages": [reply]})(body)

    return respond


def test_a_kernel_on_a_real_provider_killed_mid_exchange_resumes_and_finishes_every_message_once(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    path = tmp_path / "events.sqlite3"
    answers: list[bool] = []
    fake_openai.default = _relay(answers)
    with _kernel(CHILD, path, fake_openai.url) as child:
        assert fake_openai.wait_hanging(60), "the child's Developer never reached the server"
        os.kill(child.pid, signal.SIGKILL)  # the kernel dies while the Developer waits on the server
        assert child.wait(10) == -signal.SIGKILL
    answers.append(True)
    cfg = _model(fake_openai)
    resume_and_finish_the_relay_once(path, spec=team_from_dict(RELAY), model=cfg)


def test_a_request_in_flight_when_the_kernel_dies_is_reported_once_by_the_resume(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """Each request to a model outside the kernel is stored before it leaves: the Developer's,
    which the server holds when the kernel is killed, has no answer, so the resume reports it
    (perhaps paid for, its usage unknown), counts it in usage as a failed request whose tokens
    and cost are unknown, and records that it did; a later resume neither reports nor counts
    it again. Answered requests and the ones of the run done again are not reported."""
    path = tmp_path / "events.sqlite3"
    answers: list[bool] = []
    fake_openai.default = _relay(answers)
    with _kernel(CHILD, path, fake_openai.url) as child:
        assert fake_openai.wait_hanging(60), "the child's Developer never reached the server"
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(10) == -signal.SIGKILL
    with SqliteStore(path) as store:
        requests = [r.message() for r in store.records(kinds=["ModelRequestEvent"])]
        answered = store.records(kinds=["ModelResponseEvent"])
    assert [r.event.agent for r in requests] == ["@Manager", "@Developer"]  # the held one was stored before it left
    assert [r.message().event.agent for r in answered] == ["@Manager"]
    answers.append(True)
    assert _resumed_with_one_request_in_flight(path, fake_openai) == [requests[1].id]
    with SqliteStore(path) as store:
        assert len(store.records(kinds=["ModelRequestEvent"])) == 4  # and the Developer's again, the Manager's last
    with Lab.resume(store=path, spec=team_from_dict(RELAY), model=_model(fake_openai)) as again:
        assert "in flight" not in (again.resume_report or "")
        rows = again.usage(by="request")
        lost = rows[rows["run_id"] == requests[1].event.run_id]
        assert len(lost) == 1  # counted once, by the first resume
        [row] = lost.to_dict("records")
        assert row["agent"] == "@Developer" and row["model"] == requests[1].event.model and not row["ok"]
        assert pd.isna(row["input_tokens"]) and pd.isna(row["output_tokens"])  # unknown, not a made-up 0
        assert requests[1].event.local and row["cost_usd"] == 0.0  # a server on 127.0.0.1 is free
        # the Manager's two answered requests; the Developer's lost one and the one asked again
        assert sorted(zip(rows["agent"], rows["ok"], strict=True)) == [
            ("@Developer", False),
            ("@Developer", True),
            ("@Manager", True),
            ("@Manager", True),
        ]


def _resumed_with_one_request_in_flight(path: Path, server: FakeOpenAI) -> list[str]:
    """Resume the relay stored at ``path``: its report names one request in flight, and the
    relay finishes. Returns the ids of the request records the resume noted as unanswered."""
    with Lab.resume(store=path, spec=team_from_dict(RELAY), model=_model(server)) as lab:
        report = lab.resume_report or ""
        assert "1 model request in flight when the kernel stopped" in report, report
        assert lab.wait(20)
        assert [m.content for m in lab.replies()] == ["relayed: 42"]
    with SqliteStore(path) as store:
        [noted] = [r.message().event for r in store.records(kinds=["UnansweredRequestsEvent"])]
    return list(noted.record_ids)


def test_a_request_that_failed_before_the_kernel_died_is_not_reported_as_in_flight(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """The server drops the Developer's first request part-way (twice: the SDK retries it
    once); aklab asks again in a run of its own, which the server holds when the kernel is
    killed. Both requests were stored before they left; the failed one ended with its run
    (its usage, failed, is stored too), so the resume reports only the held one as in flight."""
    path = tmp_path / "events.sqlite3"
    answers: list[bool] = []
    relay = _relay(answers)
    developer_asked: list[int] = []

    def respond(body: dict[str, Any]) -> Behaviour:
        if str(body["messages"][0].get("content") or "").startswith("You are Developer") and len(developer_asked) < 2:
            developer_asked.append(1)
            return cut_stream()
        return relay(body)

    fake_openai.default = respond
    with _kernel(CHILD, path, fake_openai.url) as child:
        assert fake_openai.wait_hanging(60), "the child's Developer never asked again"
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(10) == -signal.SIGKILL
    with SqliteStore(path) as store:
        request_rows = store.records(kinds=["ModelRequestEvent"])
        usage = [r.message().event for r in store.records(kinds=["LlmUsageEvent"])]
    requests = [r.message().event for r in request_rows]
    assert [r.agent for r in requests] == ["@Manager", "@Developer", "@Developer"]
    failed, held = requests[1], requests[2]
    assert failed.run_id != held.run_id  # asked again by a run of its own
    developer_usage = [(u.run_id, u.ok) for u in usage if u.agent == "@Developer"]
    assert developer_usage == [(failed.run_id, False)]
    answers.append(True)
    noted = _resumed_with_one_request_in_flight(path, fake_openai)
    assert noted == [request_rows[2].record_id]  # the held one, not the failed one


CHILD_DIES_ENDING = (
    textwrap.dedent(
        """
    import os, signal, sys
    from aklab.agent import BaseAgent
    from aklab.lab import Lab
    from aklab.lab.teamfile import team_from_dict
    from aklab.llm import ModelConfig
    from tests.lab.test_resume_real_provider import RELAY

    snapshot = BaseAgent._handling_snapshot

    def dying(self):
        if self.config.name == "@Manager":
            # what another member's record or a slow model call does: the queue, with the
            # Manager's request to the Developer, is committed; then the kernel dies
            lab._store.store.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        return snapshot(self)

    BaseAgent._handling_snapshot = dying
    """
    )
    + RUN_THE_RELAY
)


def test_a_kernel_killed_as_a_handling_ends_never_delivered_what_it_sent_and_the_resume_sends_it_once(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """A member holds what it sends until its handling's end is stored: a kernel killed in
    between (its request to the Developer already committed) delivered nothing, and the
    resume does that handling again, so the Developer is asked once, not twice."""
    path = tmp_path / "events.sqlite3"
    fake_openai.default = _relay([True])
    with _kernel(CHILD_DIES_ENDING, path, fake_openai.url) as child:
        assert child.wait(60) == -signal.SIGKILL
    with SqliteStore(path) as store:
        rows = store.records()
    [stored] = [r for r in rows if r.kind == "SentMessage" and r.recipient == "@Developer"]
    assert stored.message().during is not None  # sent while the Manager handled the question
    assert not [r for r in rows if r.kind == "DispatchedMessage" and r.sender == "@Manager"]  # killed before its end
    [hired] = [r for r in rows if r.kind == "StartMessage" and r.sender == "@Developer"]
    assert hired.message().during == stored.message().during  # hired by that same handling

    def asked_developer() -> int:
        return sum(
            str(b["messages"][0].get("content") or "").startswith("You are Developer") for b in fake_openai.bodies
        )

    assert asked_developer() == 0  # the held request never left the Manager
    assert _asked_manager(fake_openai) == 1
    cfg = _model(fake_openai)
    with Lab.resume(store=path, spec=team_from_dict(RELAY), model=cfg) as lab:
        report = lab.resume_report or ""
        assert "1 message re-delivered" in report  # the question
        assert "1 message an unfinished handling never sent (it runs again)" in report
        assert "1 member it hired left out (hired again if it does)" in report
        assert "1 model answer given again rather than paid twice" in report
        assert "cut short" not in report  # its run had ended: its usage was stored
        assert "in flight" not in report  # its one request was answered
        assert lab.wait(20)
        assert [m.content for m in lab.replies()] == ["relayed: 42"]
        names = sorted(m.name for m in lab.team())
        team_id = lab.team_id
        by_agent = lab.usage(by="agent").set_index("agent")["requests"].to_dict()
    assert names == ["@Developer", "@Human", "@Manager"]  # hired again, under the same name: as if never killed
    assert asked_developer() == 1
    assert _asked_manager(fake_openai) == 1  # the handling done again took the stored answer
    assert by_agent == {"@Manager": 2, "@Developer": 1}  # the question's request counted once, then the relay
    with SqliteStore(path) as store:
        rows = store.records(team_id)
    requests = [r.message_id for r in rows if r.kind == "SentMessage" and r.recipient == "@Developer"]
    ends = Counter(r.message_id for r in rows if r.kind in ("DispatchedMessage", "HandledMessage"))
    assert len(requests) == 2 and ends[requests[0]] == 0 and ends[requests[1]] == 1  # the first was never delivered
    # every request the server had was stored once as it left; the answer given again was asked of no one
    assert sum(r.event_type == "ModelRequestEvent" for r in rows) == len(fake_openai.bodies) == 3
    with Lab.resume(store=path, spec=team_from_dict(RELAY), model=cfg) as again:  # the left-out member stays out
        assert sorted(m.name for m in again.team()) == names
        assert "left out" not in (again.resume_report or "")


def _asked_manager(fake_openai: FakeOpenAI) -> int:
    """Requests the server had from the Manager about the person's question."""
    return sum(
        str(b["messages"][0].get("content") or "").startswith("You are Manager")
        and "from @Developer" not in last_user_text(b)
        for b in fake_openai.bodies
    )


CHILD_DIES_ANSWERED = (
    textwrap.dedent(
        """
    import os, signal, sys
    from aklab.agent import BaseAgent
    from aklab.lab import Lab
    from aklab.lab.teamfile import team_from_dict
    from aklab.llm import ModelConfig
    from tests.lab.test_resume_real_provider import RELAY

    stored = BaseAgent._on_response

    def dying(self, response, usage):
        stored(self, response, usage)  # the answer is committed as it arrives
        if self.config.name == "@Manager":
            os.kill(os.getpid(), signal.SIGKILL)  # before its run ends and reports its usage

    BaseAgent._on_response = dying
    """
    )
    + RUN_THE_RELAY
)


def test_a_kernel_killed_as_the_model_answers_resumes_with_that_answer_and_pays_for_it_once(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """The Manager's answer is stored as it arrives; the kernel dies before the run reports its
    usage. The resume records that usage from the stored answer and does the handling again
    with the answer instead of asking the model: the server hears the question once, and
    the team's usage counts that request once."""
    path = tmp_path / "events.sqlite3"
    fake_openai.default = _relay([True])
    with _kernel(CHILD_DIES_ANSWERED, path, fake_openai.url) as child:
        assert child.wait(60) == -signal.SIGKILL
    assert _asked_manager(fake_openai) == 1
    with SqliteStore(path) as store:
        assert not store.records(kinds=["LlmUsageEvent"])  # the run never got to report it
        [answer] = [r.message() for r in store.records(kinds=["ModelResponseEvent"])]
    assert answer.event.agent == "@Manager" and answer.event.usage.requests == 1
    cfg = _model(fake_openai)
    with Lab.resume(store=path, spec=team_from_dict(RELAY), model=cfg) as lab:
        report = lab.resume_report or ""
        assert "1 model answer given again rather than paid twice" in report
        assert "the usage of 1 request a crash cut short recorded" in report
        assert lab.wait(20)
        assert [m.content for m in lab.replies()] == ["relayed: 42"]
        by_agent = lab.usage(by="agent").set_index("agent")["requests"].to_dict()
        team_id = lab.team_id
    assert _asked_manager(fake_openai) == 1
    assert by_agent == {"@Manager": 2, "@Developer": 1}
    usage = aklab.history(path, team=team_id).usage
    assert usage.groupby("agent")["requests"].sum().to_dict() == {"@Developer": 1, "@Manager": 2}
    with Lab.resume(store=path, spec=team_from_dict(RELAY), model=cfg) as again:  # nothing left to give again
        assert "given again" not in (again.resume_report or "") and "cut short" not in (again.resume_report or "")


CHILD_DIES_SECOND = textwrap.dedent(
    """
    import os, signal, sys
    from aklab.agent import BaseAgent
    from aklab.lab import Lab
    from aklab.lab.teamfile import team_from_dict
    from aklab.llm import ModelConfig
    from tests.lab.test_resume_real_provider import RELAY

    snapshot = BaseAgent._handling_snapshot
    armed = []

    def dying(self):
        if armed and self.config.name == "@Manager":
            lab._store.store.flush()  # the Manager's request to the Developer is committed
            os.kill(os.getpid(), signal.SIGKILL)
        return snapshot(self)

    BaseAgent._handling_snapshot = dying
    cfg = ModelConfig(provider="openai-compatible", model="fake", base_url=sys.argv[2])
    lab = Lab(team_from_dict(RELAY), model=cfg, store=sys.argv[1])
    assert [m.content for m in lab.ask("What is the answer?", timeout=30)] == ["relayed: 42"]
    armed.append(True)
    lab.send("And again?")
    sys.stdin.read()
    """
)


def test_a_message_an_unfinished_handling_never_sent_stays_unsent_after_the_handling_is_done_again(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """The Manager is killed as it ends a handling that asked the Developer (already on the
    team) again: the resume does the handling again and sends a new request. A second resume
    must not take the first, never-delivered request for one still to deliver, and history()
    lists only the request that was delivered."""
    path = tmp_path / "events.sqlite3"
    relay = _relay([True])

    def respond(body: dict[str, Any]) -> Behaviour:
        if "And again?" in last_user_text(body):  # the Manager asks the Developer it hired before
            reply = {"message_type": "request", "recipient": "@Developer", "message": "once more"}
            return output({"messages": [reply]})(body)
        return relay(body)

    fake_openai.default = respond
    with _kernel(CHILD_DIES_SECOND, path, fake_openai.url) as child:
        assert child.wait(60) == -signal.SIGKILL

    def asked_developer() -> int:
        return sum(
            str(b["messages"][0].get("content") or "").startswith("You are Developer") for b in fake_openai.bodies
        )

    assert asked_developer() == 1  # by the first question only
    cfg = _model(fake_openai)
    with Lab.resume(store=path, spec=team_from_dict(RELAY), model=cfg) as lab:
        report = lab.resume_report or ""
        assert "1 message an unfinished handling never sent (it runs again)" in report
        assert lab.wait(20)
        assert [m.content for m in lab.replies()] == ["relayed: 42", "relayed: 42"]
        team_id = lab.team_id
    assert asked_developer() == 2
    with Lab.resume(store=path, spec=team_from_dict(RELAY), model=cfg) as again:
        report = again.resume_report or ""
        assert "0 messages re-delivered" in report and "never sent" not in report, report
        assert again.wait(20)
    assert asked_developer() == 2  # the never-delivered request stays undelivered
    requests = aklab.history(path, team=team_id).messages
    to_developer = requests[requests["recipient"] == "@Developer"]
    with SqliteStore(path) as store:
        delivered = {r.message_id for r in store.records(team_id, kinds=["DispatchedMessage"])}
    assert len(to_developer) == 2 and set(to_developer["message_id"]) <= delivered
    dated = aklab.history(path, team=team_id, since="2000-01-01").messages  # read with a time filter too
    assert list(dated["message_id"]) == list(requests["message_id"])


def test_a_stored_answer_that_no_longer_reads_back_is_asked_for_again_with_a_warning(
    fake_openai: FakeOpenAI, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Written by another pydantic-ai version, say: the resume says so and the handling done
    again asks the model, as it would without the stored answer."""
    import logging
    import sqlite3

    path = tmp_path / "events.sqlite3"
    fake_openai.default = _relay([True])
    with _kernel(CHILD_DIES_ANSWERED, path, fake_openai.url) as child:
        assert child.wait(60) == -signal.SIGKILL
    db = sqlite3.connect(path)
    with db:  # what a newer pydantic-ai might have written: a part kind this one does not know
        db.execute("DROP TRIGGER events_no_update")
        db.execute(
            'UPDATE events SET payload = replace(payload, \'"part_kind":"text"\', \'"part_kind":"hologram"\') '
            "WHERE event_type = 'ModelResponseEvent'"
        )
    db.close()
    cfg = _model(fake_openai)
    caplog.set_level(logging.WARNING, "aklab.lab")
    with Lab.resume(store=path, spec=team_from_dict(RELAY), model=cfg) as lab:
        report = lab.resume_report or ""
        assert "given again" not in report and "1 message re-delivered" in report
        assert "cut short" not in report  # its usage went with it: unknown, not made up
        assert "1 stored model answer that no longer read back" in report, report
        assert "in flight" not in report  # it came back: it is not a request without an answer
        assert lab.wait(20)
        assert [m.content for m in lab.replies()] == ["relayed: 42"]
    assert any("stored model answer could not be read back" in r.getMessage() for r in caplog.records)
    assert _asked_manager(fake_openai) == 2  # asked again: nothing to give
    with SqliteStore(path) as store:
        answers = store.records(kinds=["ModelResponseEvent"])  # those of the handling done again too
        [reported] = store.records(kinds=["UnreadableAnswersEvent"])
    [unreadable] = [a for a in answers if "hologram" in str(a.payload)]
    assert len(answers) > 1
    assert reported.payload["fields"]["event"]["$data"]["record_ids"] == [unreadable.record_id]


def test_a_stored_answer_that_no_longer_reads_back_is_reported_by_one_resume_only(
    fake_openai: FakeOpenAI, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The same handling cut short again after a resume that reported the answer (what that
    resume records before it re-delivers): the next resume neither counts nor warns about it
    again, and still knows the request came back (not one in flight)."""
    import sqlite3

    from aklab.agent import UnreadableAnswersEvent
    from aklab.core import EventMessage
    from aklab.lab.resume import load_team

    path = tmp_path / "events.sqlite3"
    fake_openai.default = _relay([True])
    with _kernel(CHILD_DIES_ANSWERED, path, fake_openai.url) as child:
        assert child.wait(60) == -signal.SIGKILL
    db = sqlite3.connect(path)
    with db:
        db.execute("DROP TRIGGER events_no_update")
        db.execute(
            'UPDATE events SET payload = replace(payload, \'"part_kind":"text"\', \'"part_kind":"hologram"\') '
            "WHERE event_type = 'ModelResponseEvent'"
        )
    db.close()
    with SqliteStore(path) as store:
        [answer] = store.records(kinds=["ModelResponseEvent"])
        first = load_team(store)
        assert first.unreadable == [answer.record_id]
        store.append(EventMessage(event=UnreadableAnswersEvent(record_ids=first.unreadable)), answer.team_id)
        assert any("could not be read back" in r.getMessage() for r in caplog.records)
        caplog.clear()
        again = load_team(store)
    assert again.unreadable == [] and again.unanswered == []
    assert not any("could not be read back" in r.getMessage() for r in caplog.records)
    assert "no longer read back" not in again.summary() and "1 message re-delivered" in again.summary()


def test_a_request_without_an_answer_is_counted_per_run_and_reported_once() -> None:
    """What the resume reports as in flight: in handlings that never finished, each run's
    requests beyond its stored answers (a run asks one at a time), not those of finished
    handlings, nor those an earlier resume reported (a kernel that died twice)."""
    from aklab.lab.resume import _unanswered

    rows = [
        ("done", "r0", "q0"),  # a finished handling's request: never reported
        ("cut", "r1", "q1"),  # answered
        ("cut", "r1", "q2"),  # in flight
        ("cut", "r2", "q3"),  # a run reported by the resume before, done again and cut short again
        ("cut", "r3", "q4"),  # the run done again after that resume: in flight
    ]
    answers = Counter({"r1": 1})
    assert _unanswered(rows, {"done"}, answers, set(), set()) == ["q2", "q3", "q4"]
    assert _unanswered(rows, {"done"}, answers, {"q3"}, set()) == ["q2", "q4"]
    assert _unanswered(rows, {"done", "cut"}, answers, set(), set()) == []
    # a run whose usage is stored ended: its requests were answered or failed, none is in flight
    assert _unanswered(rows, {"done"}, answers, set(), {"r1", "r2"}) == ["q4"]


def test_a_request_in_flight_to_a_cloud_model_counts_with_an_unknown_cost(tmp_path: Path) -> None:
    """What the resume counts for a request in flight: its member's model (from the request's
    record, else the member's last usage), unknown tokens, and an unknown cost unless local;
    in the member's budget from then on."""
    from aklab.agent.events import ModelRequestEvent
    from aklab.core import ActorAddress, EventMessage
    from aklab.lab.resume import StoredAsk, StoredMember, _unanswered_usage
    from aklab.llm import LlmUsageEvent

    sender = ActorAddress("a1", "@Developer", "Developer", team_id="t1")
    cloud = ModelRequestEvent(
        agent="@Developer", agent_id="a1", message_id="m1", run_id="r1", model="openai:gpt-4o-mini", local=False
    )
    older = ModelRequestEvent(agent="@Developer", agent_id="a1", message_id="m1", run_id="r2")  # names no model
    with SqliteStore(tmp_path / "events.sqlite3") as store:
        ids = []
        for event in (older, cloud):
            record = EventMessage(event=event, ask_id="ask1", sender=sender)
            store.append(record, "t1")
            ids.append(record.id)
        member = StoredMember("a1", "@Developer", "Developer")
        member.usage.append(LlmUsageEvent(agent="@Developer", run_id="r0", model="openai:gpt-4.1", cost_usd=0.5))
        ask = StoredAsk("ask1")
        info = next(t for t in store.teams() if t.team_id == "t1")
        events = _unanswered_usage(store, info, ids, {"a1": member}, {"ask1": ask})
    assert [(e.model, e.run_id, e.ok, e.input_tokens, e.cost_usd, e.ask_id) for e in events] == [
        ("openai:gpt-4.1", "r2", False, None, None, "ask1"),
        ("openai:gpt-4o-mini", "r1", False, None, None, "ask1"),
    ]
    assert member.usage[1:] == events  # in the member's budget from now on
