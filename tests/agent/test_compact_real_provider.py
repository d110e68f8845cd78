"""/compact with the summarize strategy on a real provider: pydantic-ai's OpenAI model over
loopback. The summary is asked of the model in one request on the wire, with no tools, and
its answer replaces the old turns at the head of the next request. A failed summary request
is told in one readable line and leaves the history as it was."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from aklab.lab import Lab
from aklab.lab.teamfile import TeamSpec, team_from_dict
from aklab.llm import ModelConfig
from aklab.llm.config import CompactionConfig
from aklab.llm.react import SUMMARY_PROMPT
from tests.fakeserver import FakeOpenAI, Usage, echo, hang, http_error, last_user_text, text

SOLO = {"name": "solo", "entry": "Solo", "roles": [{"role": "Solo", "prompt": "You are Solo."}]}


def _summarizing(keep_last: int) -> TeamSpec:
    team = team_from_dict(SOLO)
    card = team.cards[0]
    compaction = CompactionConfig(strategy="summarize", keep_last=keep_last)
    team.cards[0] = card.model_copy(update={"config": card.config.model_copy(update={"compaction_cfg": compaction})})
    return team


def _said(lab: Lab, command: str) -> list[tuple[str, str]]:
    return [(m.type, m.content) for m in lab.ask(command, timeout=20)]


@contextmanager
def _two_turns(fake_openai: FakeOpenAI) -> Iterator[Lab]:
    """A summarizing Solo on the fake server (echoing), after two questions answered."""
    fake_openai.default = echo
    cfg = ModelConfig(provider="openai-compatible", model="fake", base_url=fake_openai.url, retries=0)
    with Lab(_summarizing(keep_last=1), model=cfg, store=False) as lab:
        assert _said(lab, "Capital of France?") == [("response", "OK: Capital of France?")]
        assert _said(lab, "Capital of Peru?") == [("response", "OK: Capital of Peru?")]
        yield lab


def test_compact_summarize_asks_the_model_once_and_the_summary_replaces_the_old_turns(
    fake_openai: FakeOpenAI,
) -> None:
    with _two_turns(fake_openai) as lab:
        assert len(fake_openai.bodies) == 2

        summary = "@Human asked for the capital of France: Paris."
        fake_openai.push(text(summary))
        done = "Compacted (summarize): 2 messages removed, last 1 turns kept."
        assert _said(lab, "/compact") == [("notification", done)]
        [summarize] = fake_openai.bodies[2:]
        assert last_user_text(summarize) == SUMMARY_PROMPT
        assert "Capital of France?" in json.dumps(summarize["messages"])  # what it summarizes
        assert "Capital of Peru?" not in json.dumps(summarize["messages"])  # the kept turn is not
        assert not summarize.get("tools"), "the summary request offered tools"

        assert _said(lab, "Capital of Chile?") == [("response", "OK: Capital of Chile?")]
        after = fake_openai.bodies[-1]["messages"]
        assert [m["role"] for m in after] == ["system", "user", "assistant", "user", "assistant", "user"]
        assert after[1]["content"] == f"Summary of the earlier conversation:\n{summary}"  # first, as the digest
        assert "France" not in json.dumps([after[0], *after[2:]]), "an old turn was sent again"
        assert "Capital of Peru?" in after[3]["content"]  # the last turn, kept whole
        assert last_user_text(fake_openai.bodies[-1]).startswith("Operator action by @Human: /compact\n")

        # Compacted again, the earlier summary is among what the model summarizes: nothing is lost.
        fake_openai.push(text("France: Paris; Peru: Lima."))
        again = "Compacted (summarize): 4 messages removed, last 1 turns kept."
        assert _said(lab, "/compact") == [("notification", again)]
        [resummarize] = fake_openai.bodies[4:]
        assert "capital of France: Paris" in json.dumps(resummarize["messages"])
        assert "Capital of Peru?" in json.dumps(resummarize["messages"])
        assert "Capital of Chile?" not in json.dumps(resummarize["messages"])
        assert lab.errors() == []


def test_a_failed_summary_request_is_one_readable_line_and_the_history_stays_whole(
    fake_openai: FakeOpenAI,
) -> None:
    with _two_turns(fake_openai) as lab:
        fake_openai.push(http_error(500))
        failed = (
            "Error in /compact: the summary request failed: the model server failed "
            "(HTTP 500: internal server error); ask again. Nothing was compacted."
        )
        assert _said(lab, "/compact") == [("notification", failed)]
        assert _said(lab, "Capital of Chile?") == [("response", "OK: Capital of Chile?")]
        after = json.dumps(fake_openai.bodies[-1]["messages"])
        assert "Capital of France?" in after and "Capital of Peru?" in after and "Summary of" not in after
        assert lab.errors() == []


# -- automatic compaction with the summarize strategy ------------------------------------------------

#: A small context, and answers that report filling most of it: the next turn compacts first.
FULL_TURN = Usage(prompt_tokens=900, completion_tokens=20)


@contextmanager
def _filled(fake_openai: FakeOpenAI) -> Iterator[Lab]:
    """A summarizing Solo whose two answered turns filled its 1,000-token context."""
    cfg = ModelConfig(
        provider="openai-compatible", model="fake", base_url=fake_openai.url, retries=0, context_length=1_000
    )
    with Lab(_summarizing(keep_last=1), model=cfg, store=False) as lab:
        fake_openai.push(text("Paris.", usage=FULL_TURN))
        assert _said(lab, "Capital of France?") == [("response", "Paris.")]
        fake_openai.push(text("Lima.", usage=FULL_TURN))
        assert _said(lab, "Capital of Peru?") == [("response", "Lima.")]
        yield lab


def _stopped_while_hanging(lab: Lab, fake_openai: FakeOpenAI, arrived: Callable[[FakeOpenAI], bool]) -> None:
    """Ask "Capital of Chile?", the server holding the request; ``lab.stop()`` once ``arrived``:
    told as a stopped run, and nothing failed."""
    fake_openai.push(hang())
    try:
        lab.send("Capital of Chile?")
        assert fake_openai.wait_for(arrived), "the request never reached the server"
        assert lab.stop() == ["@Solo"]
        assert lab.wait(5)
    finally:
        fake_openai.release()
    assert [m.content for m in lab.replies()][-1] == "Run interrupted. (@Solo)"
    assert lab.errors() == []


def test_a_stop_during_an_automatic_summary_interrupts_it_and_the_team_answers_next(
    fake_openai: FakeOpenAI,
) -> None:
    """The summary request a full context triggers is part of the turn: stopping the ask
    abandons it at once, told as any stopped run, and nothing fails."""
    with _filled(fake_openai) as lab:
        _stopped_while_hanging(lab, fake_openai, lambda f: f.hanging == 1)
        assert last_user_text(fake_openai.bodies[-1]) == SUMMARY_PROMPT
        fake_openai.push(text("Summary: Paris, Lima."), text("Santiago."))
        assert _said(lab, "Capital of Chile?") == [("response", "Santiago.")]
        assert lab.errors() == []


def test_a_failed_automatic_summary_drops_the_old_turns_says_so_and_the_turn_runs(fake_openai: FakeOpenAI) -> None:
    with _filled(fake_openai) as lab:
        fake_openai.push(http_error(500), text("Santiago."))
        said = _said(lab, "Capital of Chile?")
        assert said == [
            (
                "notification",
                "@Solo could not summarize its older turns (the model server failed (HTTP 500: internal server "
                "error); ask again); they were dropped to make room, and its answer follows.",
            ),
            ("response", "Santiago."),
        ]
        sent = json.dumps(fake_openai.bodies[-1]["messages"])
        assert "Capital of Chile?" in sent and "Capital of Peru?" in sent  # the last turn is kept
        assert lab.errors() == []


@pytest.mark.parametrize("how", ["/stop", "lab.stop"])
def test_a_stop_during_compact_is_one_line_and_leaves_no_reason_for_the_next_stopped_run(
    fake_openai: FakeOpenAI, how: str
) -> None:
    with _two_turns(fake_openai) as lab:
        fake_openai.push(hang())
        try:
            lab.send("/compact")
            assert fake_openai.wait_hanging(5), "the summary request never reached the server"
            if how == "/stop":
                lab.send("/stop the spec changed")
            else:
                assert lab.stop() == ["@Solo"]
            assert lab.wait(5)
        finally:
            fake_openai.release()
        stopped = "Error in /compact: stopped before the summary came back. Nothing was compacted."
        assert [m.content for m in lab.replies()][2:] == [stopped]  # not also "There is no run to cancel."
        _stopped_while_hanging(lab, fake_openai, lambda f: f.hanging == 1 and len(f.bodies) == 4)
