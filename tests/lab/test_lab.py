from __future__ import annotations

from collections.abc import Iterator

import pandas as pd
import pytest

from aklab.errors import ConfigError, RoutingError
from aklab.lab.frames import USAGE_COLUMNS, usage_frame
from aklab.lab.session import Lab
from aklab.llm import LlmUsageEvent


@pytest.fixture
def lab() -> Iterator[Lab]:
    with Lab() as lab:
        yield lab


def test_ask_returns_what_reached_the_human_and_the_transcript_has_every_hop(lab: Lab) -> None:
    [reply] = lab.ask("Plan the login page", timeout=20)
    assert reply.sender is not None and reply.sender.name == "@Manager"
    hops = [(m.sender.name, m.recipient.name, m.type) for m in lab.transcript()]  # type: ignore[union-attr]
    assert hops == [
        ("@Human", "@Manager", "request"),
        ("@Manager", "@Developer", "request"),
        ("@Developer", "@Manager", "response"),
        ("@Manager", "@Human", "response"),
    ]


def test_usage_has_one_row_per_agent_with_tokens(lab: Lab) -> None:
    lab.ask("Plan the login page", timeout=20)
    frame = lab.usage()
    assert list(frame.columns) == [
        "agent",
        "role",
        "model",
        "requests",
        "input_tokens",
        "output_tokens",
        "total_tokens",
        "cost_usd",
    ]
    assert list(frame["agent"]) == ["@Manager", "@Developer"]
    assert list(frame["requests"]) == [2, 1]
    assert (frame["total_tokens"] == frame["input_tokens"] + frame["output_tokens"]).all()
    assert frame["cost_usd"].isna().all()  # the demo model has no price


def test_asking_an_unknown_member_or_nothing_is_a_clear_error(lab: Lab) -> None:
    with pytest.raises(RoutingError, match="no team member @Ghost; members: @Human, @Manager"):
        lab.ask("hello", to="@Ghost")
    with pytest.raises(ConfigError, match="empty"):
        lab.ask("   ")


def _event(agent: str, run: str, cost: float | None, tokens: int = 10) -> LlmUsageEvent:
    return LlmUsageEvent(
        agent=agent,
        role=agent.strip("@"),
        run_id=run,
        model="m",
        input_tokens=tokens,
        output_tokens=1,
        cost_usd=cost,
    )


def test_usage_frames_keep_a_fixed_column_order_and_unknown_cost_stays_unknown() -> None:
    events = [
        _event("@A", "r1", 0.5),
        _event("@A", "r1", 0.25),
        _event("@B", "r2", None),
        _event("@B", "r3", 0.1),
    ]
    by_run = usage_frame(events, by="run")
    assert list(by_run.columns) == USAGE_COLUMNS
    assert list(by_run["cost_usd"].isna()) == [False, True, False]
    assert by_run["cost_usd"].iloc[0] == pytest.approx(0.75)
    by_agent = usage_frame(events, by="agent")
    assert by_agent.set_index("agent")["cost_usd"].isna().to_dict() == {"@A": False, "@B": True}
    assert list(usage_frame(events, by="model")["requests"]) == [4]
    assert len(usage_frame(events, by="request")) == 4
    assert usage_frame([], by="agent").empty
    with pytest.raises(ConfigError, match="choose agent, run, model or request"):
        usage_frame(events, by="day")
    assert isinstance(by_run, pd.DataFrame)


def test_an_estimate_prices_the_same_tokens_on_a_real_model() -> None:
    from aklab.lab.frames import estimate_cost

    frame = usage_frame([_event("@A", "r1", None, tokens=1000)], by="agent")
    estimate = estimate_cost(frame, "gpt-4o-mini", provider="openai")
    assert estimate.name == "cost_usd_as_gpt-4o-mini"
    assert estimate.iloc[0] == pytest.approx(1000 * 0.15e-6 + 1 * 0.6e-6)
    with pytest.raises(ConfigError, match="no price for 'no-such-model'"):
        estimate_cost(frame, "no-such-model", provider="openai")
