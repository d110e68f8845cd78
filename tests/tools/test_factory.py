from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel
from pydantic_ai import Tool
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from aklab.llm import ModelConfig
from aklab.llm.react import ReactAgent
from aklab.tools import ToolCard, ToolFactory
from aklab.tools._signature import signature_key
from aklab.tools.card import ToolHost
from aklab.tools.factory import _model_facing
from aklab.tools.planning import PlanningTool


class Host:
    name = "@Lead"
    role = "Lead"
    directory = None


class Out(BaseModel):
    text: str = ""


def test_a_tool_error_reaches_the_model_as_a_retry_it_can_act_on() -> None:
    tools = ToolFactory([PlanningTool()], Host()).get_tools()  # type: ignore[arg-type]
    seen: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("planning_get", {"task_id": "T99"})])
        seen.append(str(messages[-1]))
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, json.dumps({"text": "ok"}))])

    agent = ReactAgent(name="@Lead", model_cfg=ModelConfig(model=FunctionModel(model)), tools=tools)
    assert agent.run_sync("look up T99", output_type=Out).text == "ok"
    assert "T99" in seen[0]


class NoteCard(ToolCard):
    """A card whose tool is a closure over its host, like every framework card."""

    limit: int = 3

    def get_tools(self, host: ToolHost) -> list[Callable[..., Any]]:
        limit = self.limit

        def write_note(text: str, copies: int = limit) -> str:
            """Write a note for the team."""
            return f"{host.name}: {text} x{copies}"

        return [write_note]


class Named:
    def __init__(self, name: str) -> None:
        self.name = name


def _note_tool(host: str, **card: Any) -> Tool[Any]:
    (tool,) = ToolFactory([NoteCard(**card)], Named(host)).get_tools()  # type: ignore[arg-type]
    assert isinstance(tool, Tool)
    return tool


def test_agents_share_a_tools_built_schema_but_each_calls_its_own_host() -> None:
    a, b = _note_tool("@A"), _note_tool("@B")
    assert a.function_schema.validator is b.function_schema.validator  # built once
    assert a.function_schema.json_schema == b.function_schema.json_schema
    assert a.function_schema.json_schema is not b.function_schema.json_schema  # each agent its own dicts
    assert a.function("hi") == "@A: hi x3" and b.function("hi") == "@B: hi x3"
    fresh = Tool(NoteCard().get_tools(Named("@C"))[0])  # type: ignore[arg-type]
    assert a.tool_def.parameters_json_schema == fresh.tool_def.parameters_json_schema
    assert a.tool_def.description == fresh.tool_def.description == "Write a note for the team."


def test_a_tool_whose_defaults_differ_gets_its_own_schema() -> None:
    three, five = _note_tool("@A"), _note_tool("@A", limit=5)
    assert three.function_schema.json_schema["properties"]["copies"]["default"] == 3
    assert five.function_schema.json_schema["properties"]["copies"]["default"] == 5


def test_a_tool_that_cannot_be_keyed_still_gets_its_schema() -> None:
    def tag(labels: list[str] = ["a"]) -> str:  # noqa: B006 - an unhashable default on purpose
        """Tag it."""
        return ",".join(labels)

    assert signature_key(tag) is None
    tool = _model_facing(tag)
    assert tool.function_schema.json_schema["properties"]["labels"]["default"] == ["a"]
    assert tool.function() == "a"


def test_board_changes_run_alone_in_the_order_the_model_wrote_them() -> None:
    """Tool calls of one response run concurrently in pydantic-ai unless a tool is a barrier:
    two planning_create calls then got their task ids in whichever order their threads ran
    (a resume test failed on it, about one run in thirty)."""
    card, host = PlanningTool(), Host()
    tools = ToolFactory([card], host).get_tools()  # type: ignore[arg-type]
    assert {t.name: t.sequential for t in tools} == {
        "planning_create": True,
        "planning_update": True,
        "planning_get": False,
        "planning_search": False,
        "planning_summary": False,
    }
    created = ["first", "second", "third"]

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            calls = [ToolCallPart("planning_create", {"title": t}, tool_call_id=t) for t in created]
            return ModelResponse(parts=calls)
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, json.dumps({"text": "ok"}))])

    agent = ReactAgent(name="@Lead", model_cfg=ModelConfig(model=FunctionModel(model)), tools=tools)
    agent.run_sync("plan", output_type=Out)
    assert [t.line() for t in card.board(host).tasks()] == [
        "- T1 [todo] first",
        "- T2 [todo] second",
        "- T3 [todo] third",
    ]  # type: ignore[arg-type]
