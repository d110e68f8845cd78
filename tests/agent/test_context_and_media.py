from __future__ import annotations

import json
from pathlib import Path

from pydantic_ai.messages import BinaryContent, ModelMessage, ModelRequest, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from aklab.agent import AgentMessage
from aklab.core import ActorSystem
from aklab.llm import CompactionConfig, ModelConfig
from aklab.tools import WorkspaceTool
from tests.helpers import card, make_team

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d49444154789c6300010000050001"
)


class Recorder:
    def __init__(self, tokens: int = 10) -> None:
        self.prompts: list[list[object]] = []
        self.histories: list[list[ModelMessage]] = []
        self.tokens = tokens

    def model(self) -> FunctionModel:
        def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            self.histories.append(messages)
            last = messages[-1]
            assert isinstance(last, ModelRequest)
            content = [p.content for p in last.parts if p.part_kind == "user-prompt"][-1]
            self.prompts.append(content if isinstance(content, list) else [content])
            return ModelResponse(
                parts=[ToolCallPart(info.output_tools[0].name, json.dumps({"messages": []}))],
                usage=RequestUsage(input_tokens=self.tokens, output_tokens=5),
            )

        return FunctionModel(fn)


def test_image_references_become_binary_content_and_documents_get_a_hint(system: ActorSystem, tmp_path: Path) -> None:
    (tmp_path / "shot.png").write_bytes(PNG)
    (tmp_path / "report.pdf").write_bytes(b"%PDF-1.4")
    rec = Recorder()
    team = make_team(system, [card("Analyst", model=rec.model(), tools=[WorkspaceTool(root=str(tmp_path))])])
    analyst = team.start("Analyst")
    team.say(analyst, "Look at !!shot.png and !!report.pdf and !!missing.png")
    team.settle()
    parts = rec.prompts[0]
    assert any(isinstance(p, BinaryContent) and p.media_type == "image/png" for p in parts)
    text = "".join(p for p in parts if isinstance(p, str))
    assert "!!report.pdf[=> Use workspace_read tool]" in text
    assert "!!missing.png[Error: no image found in the workspace]" in text


def test_clear_starts_the_context_again_at_block_one(system: ActorSystem) -> None:
    rec = Recorder()
    team = make_team(system, [card("Manager", model=rec.model())])
    manager = team.start("Manager")
    team.say(manager, "one")
    team.settle()
    team.say(manager, "/clear")
    team.say(manager, "two")
    team.settle()
    first, second = ("\n".join(str(p) for p in prompt) for prompt in rec.prompts)
    assert "**Context update 1** — current state." in first
    assert "**Context update 1** — current state." in second
    assert len(rec.histories[1]) == 1  # the history was emptied


def test_compaction_starts_by_itself_when_the_context_fills_up(system: ActorSystem) -> None:
    rec = Recorder(tokens=900)
    config = {
        "model_cfg": ModelConfig(model=rec.model(), context_length=1000),
        "compaction_cfg": CompactionConfig(strategy="sliding_window", keep_last=1, trigger_ratio=0.8),
    }
    team = make_team(system, [card("Manager", **config)])
    manager = team.start("Manager")
    for text in ["one", "two", "three"]:
        team.say(manager, text)
        team.settle()
    runs_seen = [
        sum(1 for m in h if isinstance(m, ModelRequest) and any(p.part_kind == "user-prompt" for p in m.parts))
        for h in rec.histories
    ]
    assert runs_seen == [1, 2, 2]  # before "three", the oldest run was dropped
    prompts = ["\n".join(str(p) for p in prompt) for prompt in rec.prompts]
    assert "Context update" not in prompts[1]
    # the compacted history lost block 1, so the next block is a full snapshot, numbered on
    assert "**Context update 2** — current state." in prompts[2]


def test_a_slash_command_from_the_human_is_not_shown_to_the_model_as_its_own_turn(system: ActorSystem) -> None:
    rec = Recorder()
    team = make_team(system, [card("Manager", model=rec.model())])
    manager = team.start("Manager")
    team.system.tell(manager, AgentMessage(content="/team_roles", sender=team.human, recipient=manager))
    team.settle()
    assert rec.prompts == []
