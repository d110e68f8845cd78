"""/compact with the summarize strategy on a real provider: pydantic-ai's OpenAI model over
loopback. The summary is asked of the model in one request on the wire, with no tools, and
its answer replaces the old turns at the head of the next request. A failed summary request
is told in one readable line and leaves the history as it was."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

from aklab.lab import Lab
from aklab.lab.teamfile import TeamSpec, team_from_dict
from aklab.llm import ModelConfig
from aklab.llm.config import CompactionConfig
from aklab.llm.react import SUMMARY_PROMPT
from tests.fakeserver import FakeOpenAI, echo, http_error, last_user_text, text

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
