"""Both tiers of usage limits on a real provider: pydantic-ai's OpenAI model against the
loopback fake, the token counts the server reports (not the demo model's estimates)."""

from __future__ import annotations

from typing import Any

import pytest

from aklab.agent import Notice
from aklab.lab import Lab
from aklab.lab.teamfile import team_from_dict
from aklab.llm import ModelConfig
from aklab.llm.recovery import CONCLUSION_PROMPT
from tests.fakeserver import FakeOpenAI, Usage, echo, empty, last_user_text, text, tool_call, tool_names


def _solo(fake: FakeOpenAI, **limits: Any) -> Lab:
    role = {"role": "Solo", "prompt": "You are Solo. Answer briefly.", **limits}
    team = team_from_dict({"name": "solo", "entry": "Solo", "roles": [role]})
    cfg = ModelConfig(provider="openai-compatible", model="fake", base_url=fake.url, retries=0, timeout=5)
    return Lab(team, model=cfg, store=False)


def test_the_agent_tier_counts_the_tokens_the_server_reports_and_refuses_the_next_run(
    fake_openai: FakeOpenAI,
) -> None:
    fake_openai.push(*(text(f"answer {i}", usage=Usage(prompt_tokens=15, completion_tokens=10)) for i in range(3)))
    with _solo(fake_openai, agent_usage_limits={"total_tokens_limit": 40}) as lab:
        assert [m.content for m in lab.ask("one", timeout=20).answers] == ["answer 0"]  # 25 tokens used
        assert [m.content for m in lab.ask("two", timeout=20).answers] == ["answer 1"]  # 50: over, after the run
        refused = lab.ask("three", timeout=20)
        assert refused.answers == [] and len(refused.notices) == 1 and isinstance(refused.notices[0], Notice)
        assert "agent lifetime limit reached: 50 total tokens used of 40" in refused.notices[0].content
        assert int(lab.usage()["total_tokens"].sum()) == 50
    assert len(fake_openai.bodies) == 2  # the refused run never reached the server


def test_a_run_over_its_request_limit_concludes_in_prose_and_the_next_run_starts_afresh(
    fake_openai: FakeOpenAI,
) -> None:
    """The conclusion request's plain-text answer is read as the run reads one (the text
    fallback of prompted mode), so a prose-writing model concludes instead of failing."""
    fake_openai.default = echo
    fake_openai.push(empty())  # an empty answer is asked for again: a second request in the run
    with _solo(fake_openai, run_usage_limits={"run_request_limit": 1}) as lab:
        concluded = lab.ask("first", timeout=20)
        [answer] = concluded.answers
        assert answer.content.startswith("OK: You have reached the usage limit for this turn") and not concluded.notices
        assert [m.content for m in lab.ask("second", timeout=20).answers] == ["OK: second"]
    # the retry of the empty answer was never sent; the conclusion was, then the next question
    asked = [last_user_text(b) for b in fake_openai.bodies]
    assert len(asked) == 3 and asked[1] == CONCLUSION_PROMPT and asked[2].endswith("second")


def test_a_conclusion_that_fails_too_is_a_notice_naming_the_run_limit(fake_openai: FakeOpenAI) -> None:
    fake_openai.default = echo
    fake_openai.push(empty(), empty())  # the run's answer and the conclusion's are both empty
    with _solo(fake_openai, run_usage_limits={"run_request_limit": 1}) as lab:
        stopped = lab.ask("first", timeout=20)
        assert stopped.answers == [] and [type(m) for m in stopped.notices] == [Notice]
        assert "@Solo stopped: run limit reached: The next request would exceed the request_limit of 1" in (
            stopped.notices[0].content
        )
        assert [m.content for m in lab.ask("second", timeout=20).answers] == ["OK: second"]


@pytest.mark.parametrize("limit", [0, -1])
def test_a_limit_that_is_not_positive_is_refused_when_the_team_is_read(limit: int) -> None:
    from aklab.errors import ConfigError

    with pytest.raises(ConfigError, match="positive"):
        team_from_dict(
            {
                "name": "solo",
                "entry": "Solo",
                "roles": [{"role": "Solo", "prompt": "p", "agent_usage_limits": {"agent_request_limit": limit}}],
            }
        )


def test_the_run_tier_counts_the_tokens_the_server_reports_across_the_runs_requests(fake_openai: FakeOpenAI) -> None:
    """A run's token cap is checked against the server's counts after each request of the run
    (a tool call and the request after it): over it, the run concludes without its tools, the
    conclusion's own tokens counted too, and the next run starts from zero."""
    role = {"role": "Solo", "prompt": "You are Solo.", "tools": ["PlanningTool"]}
    role["run_usage_limits"] = {"total_tokens_limit": 50}
    team = team_from_dict({"name": "solo", "entry": "Solo", "roles": [role]})
    cfg = ModelConfig(provider="openai-compatible", model="fake", base_url=fake_openai.url, retries=0, timeout=5)
    spend = Usage(prompt_tokens=20, completion_tokens=10)
    fake_openai.push(
        tool_call("planning_summary", {}, usage=spend),  # 30 tokens
        tool_call("planning_summary", {}, usage=spend),  # 60: over the cap of 50
        text("Concluded: the board is empty.", usage=spend),
        text("fresh", usage=spend),
    )
    with Lab(team, model=cfg, store=False) as lab:
        concluded = lab.ask("first", timeout=20)
        assert [m.content for m in concluded.answers] == ["Concluded: the board is empty."]
        assert [m.content for m in lab.ask("second", timeout=20).answers] == ["fresh"]
        assert int(lab.usage()["total_tokens"].sum()) == 4 * 30
    asked = [last_user_text(b) for b in fake_openai.bodies]
    assert len(asked) == 4 and asked[2] == CONCLUSION_PROMPT
    assert tool_names(fake_openai.bodies[2]) == []  # the conclusion may not call tools
