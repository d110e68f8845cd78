from __future__ import annotations

from aklab.agent import AgentMessage, StructuredOutput
from aklab.core import ActorAddress
from aklab.llm import ModelConfig
from aklab.llm.react import ReactAgent

CONTEXT = (
    "**Context update 1** — current state.\n\n## Team\n- @Human (Human)\n- @Manager (Manager)\n\n"
    "## Roles you can hire\n- Developer: writes code\n- QA: tests"
)


def _msg(text: str, sender: str, type: str = "request") -> str:
    m = AgentMessage(content=text, type=type, sender=ActorAddress("x", sender, sender.strip("@")))  # type: ignore[arg-type]
    return m.render_for_llm()


def _agent(prompt: str = "You are the Manager.") -> ReactAgent:
    return ReactAgent(name="@M", model_cfg=ModelConfig(), system_prompt=prompt)


def test_a_coordinator_delegates_to_the_role_the_request_names() -> None:
    out = _agent().run_sync([CONTEXT, _msg("Ask QA to check login", "@Human")], output_type=StructuredOutput)
    assert [(r.recipient, r.message_type) for r in out.messages] == [("QA", "request")]


def test_a_coordinator_relays_the_answer_to_whoever_asked() -> None:
    agent = _agent()
    agent.run_sync([CONTEXT, _msg("Build it", "@Human")], output_type=StructuredOutput)
    out = agent.run_sync(_msg("Done: 3 steps", "@Developer", "response"), output_type=StructuredOutput)
    [reply] = out.messages
    assert (reply.recipient, reply.message_type) == ("@Human", "response")
    assert "Done: 3 steps" in reply.message


def test_a_specialist_answers_its_sender_and_stays_quiet_on_notifications() -> None:
    agent = _agent("You are a Developer.")
    out = agent.run_sync(_msg("Fix the bug", "@Manager"), output_type=StructuredOutput)
    [reply] = out.messages
    assert (reply.recipient, reply.message_type) == ("@Manager", "response")
    assert reply.message.startswith('Developer result for "Fix the bug"')
    quiet = agent.run_sync(_msg("FYI", "@Manager", "notification"), output_type=StructuredOutput)
    assert quiet.messages == []


def test_the_demo_is_deterministic_and_reports_realistic_tokens() -> None:
    events = []
    runs = []
    for _ in range(2):
        agent = ReactAgent(name="@D", model_cfg=ModelConfig(), system_prompt="You are QA.", on_usage=events.append)
        runs.append(agent.run_sync(_msg("Test login", "@Manager"), output_type=StructuredOutput))
    assert runs[0] == runs[1]
    assert events[0].input_tokens == events[1].input_tokens > 50
    assert events[0].cost_usd is None


def test_a_coordinator_with_a_planning_board_records_the_task_before_delegating() -> None:
    from aklab.tools import PlanningTool, ToolFactory

    class Host:
        name = "@M"
        role = "Manager"
        directory = None

    tools = ToolFactory([PlanningTool()], Host()).get_tools()  # type: ignore[arg-type]
    calls: list[str] = []
    agent = ReactAgent(
        name="@M",
        model_cfg=ModelConfig(),
        system_prompt="You are the Manager.",
        tools=tools,
        on_tool_call=lambda e: calls.append(e.tool_name),
    )
    out = agent.run_sync([CONTEXT, _msg("Build the login page", "@Human")], output_type=StructuredOutput)
    assert calls == ["planning_create"]
    assert [(r.recipient, r.message_type) for r in out.messages] == [("Developer", "request")]
    quiet = agent.run_sync(_msg("FYI", "@Human", "notification"), output_type=StructuredOutput)
    assert quiet.messages == [] and calls == ["planning_create"]
