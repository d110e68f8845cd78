from __future__ import annotations

import json

from pydantic import BaseModel
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from aklab.llm import ModelConfig
from aklab.llm.react import ReactAgent
from aklab.tools import ToolFactory
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
