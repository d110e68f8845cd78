"""Every Python example of the reference README, run with only the package names changed.

Each fenced ``python`` block is taken from ``../shared/spec/akgentic-agent-README.md`` as it
is, ``akgentic`` becomes ``aklab``, and nothing else changes. Where an example names a
cloud model (``openai:gpt-4.1``), the real OpenAI provider classes talk to a fake
OpenAI-compatible server on 127.0.0.1 (``$OPENAI_BASE_URL``). Fragments that refer to
names defined elsewhere in the reference (``self`` inside an agent, ``human_addr`` from
the quick start, a ``return`` from a method body) run where those names exist: on an
agent's own thread, after the quick start, or as the body of a function.
"""

from __future__ import annotations

import re
import textwrap
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

import pytest
from pydantic import BaseModel

import aklab.agent as agent_pkg
from aklab.agent import REPLY_PROTOCOLS, AgentMessage, BaseAgent, HumanProxy, Request, StructuredOutput
from aklab.agent.custom_agent import AuditCapability, TriageMessage, TriageOutput
from aklab.core import ActorAddress, ActorSystem, Message
from aklab.tools import CommandsAnnouncedEvent, ToolFactory
from tests.fakeserver import FakeOpenAI, echo, json_text

REFERENCE = Path(__file__).resolve().parents[3] / "shared" / "spec" / "akgentic-agent-README.md"
if not REFERENCE.exists():
    REFERENCE = Path(__file__).resolve().parents[2].parent / "shared" / "spec" / "akgentic-agent-README.md"

pytestmark = pytest.mark.skipif(not REFERENCE.exists(), reason=f"the reference README is not at {REFERENCE}")


def _blocks() -> list[str]:
    text = REFERENCE.read_text(encoding="utf-8") if REFERENCE.exists() else ""
    return [b.replace("akgentic", "aklab") for b in re.findall(r"```python\n(.*?)```", text, re.S)]


BLOCKS = _blocks()


def block(first_line: str) -> str:
    """The one example whose code contains ``first_line``."""
    found = [b for b in BLOCKS if first_line in b]
    assert len(found) == 1, f"{len(found)} examples contain {first_line!r}"
    return found[0]


def as_function(code: str, signature: str) -> str:
    """A method-body fragment (it ``return``s) as a function."""
    return f"def {signature}:\n" + textwrap.indent(code, "    ")


class SnippetAgent(BaseAgent):
    """Runs a fragment written for the inside of an agent, on the agent's own thread."""

    def run_snippet(self, code: str, names: dict[str, Any]) -> dict[str, Any]:
        namespace: dict[str, Any] = {"self": self, **names}
        exec(code, namespace)
        return namespace


@pytest.fixture
def quick_start(fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """The quick start, run as written (its model is ``openai:gpt-4.1``, served by the fake server)."""
    fake_openai.default = echo
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    namespace: dict[str, Any] = {}
    exec(block("actor_system = ActorSystem()"), namespace)
    system: ActorSystem = namespace["actor_system"]
    try:
        assert system.wait_idle(20)
        yield namespace
    finally:
        system.shutdown()


def test_every_example_is_covered_below() -> None:
    assert len(BLOCKS) == 16


def test_the_quick_start_runs_and_the_manager_answers(quick_start: dict[str, Any]) -> None:
    inbox = quick_start["actor_system"].proxy_ask(quick_start["human_addr"], HumanProxy).inbox
    [answer] = inbox.messages
    assert answer.sender.name == "@Manager" and answer.type == "response"
    assert "Plan the next sprint." in answer.content  # the fake server echoes the question


def test_the_message_and_output_models_are_as_written() -> None:
    namespace: dict[str, Any] = {"Message": Message, "Literal": Literal, "BaseModel": BaseModel}
    exec(block("class AgentMessage(Message):"), namespace)
    exec(block("class StructuredOutput(BaseModel):"), namespace)
    for name, ours in (("AgentMessage", AgentMessage), ("Request", Request), ("StructuredOutput", StructuredOutput)):
        theirs = namespace[name]
        for field, info in theirs.model_fields.items():
            assert field in ours.model_fields, f"{name}.{field}"
            if getattr(info.annotation, "__args__", None) and "Literal" in repr(info.annotation):
                assert set(info.annotation.__args__) == set(ours.model_fields[field].annotation.__args__)  # type: ignore[union-attr]


def test_render_for_llm_is_as_written_for_every_intent() -> None:
    namespace: dict[str, Any] = {"REPLY_PROTOCOLS": REPLY_PROTOCOLS}
    exec(as_function(block("# AgentMessage.render_for_llm()"), "render(self, article, sender_name)"), namespace)
    for intent in REPLY_PROTOCOLS:
        message = AgentMessage(content="Body", type=intent, sender=ActorAddress("1", "@Human", "Human"))  # type: ignore[arg-type]
        article = "an" if intent[0] in "aeiou" else "a"
        assert namespace["render"](message, article, "@Human") == message.render_for_llm()
        assert "reply" in REPLY_PROTOCOLS[intent]  # every protocol line says whether a reply is expected


def _start(quick_start: dict[str, Any], agent_class: type[BaseAgent] = SnippetAgent) -> Any:
    orchestrator = quick_start["orchestrator_proxy"]
    config = quick_start["manager_card"].get_config_copy()
    address = orchestrator.createActor(agent_class, config=config)
    system: ActorSystem = quick_start["actor_system"]
    system.wait_started(address)
    return address


def test_the_run_sync_call_runs_inside_an_agent(quick_start: dict[str, Any], fake_openai: FakeOpenAI) -> None:
    fake_openai.push(json_text({"messages": [{"recipient": "@Human", "message_type": "response", "message": "4"}]}))
    address = _start(quick_start)
    proxy = quick_start["actor_system"].proxy_ask(address, SnippetAgent)
    names = {"prompt": "What is 2+2?", "output_type": StructuredOutput}
    output = proxy.run_snippet(block("output = self._react_agent.run_sync("), names)["output"]
    assert isinstance(output, StructuredOutput) and output.messages[0].message == "4"


def test_the_custom_agent_example_routes_its_own_output(quick_start: dict[str, Any]) -> None:
    namespace: dict[str, Any] = {
        "BaseAgent": BaseAgent,
        "AgentMessage": AgentMessage,
        "ActorAddress": ActorAddress,
        "TriageOutput": TriageOutput,
        "TriageMessage": TriageMessage,
        "__name__": "reference_custom_agent",
    }
    exec(block("class CustomAgent(BaseAgent):"), namespace)
    runnable = type("RunnableCustomAgent", (SnippetAgent, namespace["CustomAgent"]), {})
    address = _start(quick_start, runnable)
    proxy = quick_start["actor_system"].proxy_ask(address, SnippetAgent)
    human = quick_start["human_addr"]
    output = TriageOutput.model_validate({"handoffs": [{"recipient": human.name, "task": "look at ticket 7"}]})
    assert proxy.run_snippet("delivered = self._route_triage(output)", {"output": output})["delivered"] is True
    assert quick_start["actor_system"].wait_idle(10)
    inbox = quick_start["actor_system"].proxy_ask(human, HumanProxy).inbox
    assert inbox.messages[-1].content == "look at ticket 7"


def test_the_human_proxy_example_sends_and_answers(quick_start: dict[str, Any]) -> None:
    system: ActorSystem = quick_start["actor_system"]
    inbox = system.proxy_ask(quick_start["human_addr"], HumanProxy).inbox
    namespace = {
        **quick_start,
        "agent_addr": quick_start["manager_addr"],
        "original_message": inbox.messages[0],
    }
    exec(block("human_proxy.process_human_input("), namespace)
    assert system.wait_idle(20)
    assert len(inbox.messages) >= 2


def test_the_agent_card_example_builds_a_card() -> None:
    from aklab.agent import AgentConfig
    from aklab.core import AgentCard

    namespace: dict[str, Any] = {"AgentCard": AgentCard, "AgentConfig": AgentConfig}
    exec("card = " + block('description="Writes and reviews code"'), namespace)
    assert namespace["card"].role == "Developer" and namespace["card"].routes_to == ["Reviewer", "Tester"]


def test_the_subscriber_example_prints_the_exchange(
    quick_start: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    exec(block("class MessagePrinter(EventSubscriber):"), quick_start)
    quick_start["human_proxy"].send(quick_start["manager_addr"], AgentMessage(content="Again, please."))
    assert quick_start["actor_system"].wait_idle(20)
    out = capsys.readouterr().out
    assert "[@Human] → @Manager: Again, please." in out
    assert "[@Manager] → @Human: " in out


def test_the_usage_limit_examples_configure() -> None:
    namespace: dict[str, Any] = {}
    exec(block("config = AgentConfig("), namespace)
    assert namespace["config"].run_usage_limits.run_request_limit == 50
    from aklab.agent import AgentConfig
    from aklab.llm import RunUsageLimits, UsageLimits

    namespace = {"AgentConfig": AgentConfig, "UsageLimits": UsageLimits, "RunUsageLimits": RunUsageLimits}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exec(block("# before"), namespace)
    said = " ".join(str(w.message) for w in caught if issubclass(w.category, DeprecationWarning))
    assert "UsageLimits is deprecated" in said and "AgentConfig(usage_limits=...) is deprecated" in said


def test_the_capability_hook_example_adds_a_capability(quick_start: dict[str, Any]) -> None:
    seen: list[str] = []

    @dataclass
    class RecordingAudit(AuditCapability):
        async def before_model_request(self, ctx: Any, request_context: Any) -> Any:
            seen.append(self.agent_name)
            return await super().before_model_request(ctx, request_context)

    namespace: dict[str, Any] = {"AuditCapability": RecordingAudit, "__name__": "reference_audited"}
    exec(block("class AuditedAgent(BaseAgent):"), namespace)
    address = _start(quick_start, namespace["AuditedAgent"])
    system: ActorSystem = quick_start["actor_system"]
    system.proxy_tell(quick_start["human_addr"], HumanProxy).send(address, AgentMessage(content="hello"))
    assert system.wait_idle(20)
    assert seen and set(seen) == {address.name}


def test_the_capability_order_line_runs_inside_an_agent(quick_start: dict[str, Any]) -> None:
    address = _start(quick_start)
    proxy = quick_start["actor_system"].proxy_ask(address, SnippetAgent)
    namespace = proxy.run_snippet(block("self._capabilities = ["), {})
    assert namespace["self"]._mailbox_capability is not None


def test_the_command_registry_lines_run_inside_an_agent(quick_start: dict[str, Any]) -> None:
    from aklab.agent import AgentConfig
    from aklab.core import AgentCard

    developer: dict[str, Any] = {"AgentCard": AgentCard, "AgentConfig": AgentConfig}
    exec("card = " + block('description="Writes and reviews code"'), developer)
    quick_start["orchestrator_proxy"].register_agent_profiles([developer["card"]])
    address = _start(quick_start)
    proxy = quick_start["actor_system"].proxy_ask(address, SnippetAgent)
    code = "tool_factory = ToolFactory(self._assemble_cards(), host=self)\n" + block("self._command_registry = ")
    proxy.run_snippet(code, {"ToolFactory": ToolFactory, "CommandsAnnouncedEvent": CommandsAnnouncedEvent})
    hire = as_function(block('if not self._command_registry.has("hire_member"):'), "hire_member(self, role)")
    namespace = proxy.run_snippet(
        hire + "\nhired = hire_member(self, 'Developer')", {"cast": cast, "ActorAddress": ActorAddress}
    )
    assert namespace["hired"].role == "Developer"


def test_the_slash_command_examples_reach_the_manager(quick_start: dict[str, Any]) -> None:
    system: ActorSystem = quick_start["actor_system"]
    inbox = system.proxy_ask(quick_start["human_addr"], HumanProxy).inbox
    before = len(inbox.messages)
    exec(block('human_addr.send(manager_addr, AgentMessage(content="/team_members"))'), quick_start)
    assert system.wait_idle(20)
    answers = [m.content for m in inbox.messages[before:]]
    assert len(answers) == 3
    assert answers[0].startswith("- @Human (Human)")
    assert "DevOpsEngineer" in answers[1] and "@DevOpsEngineer456" in answers[2]


def test_the_public_names_of_the_reference_exist() -> None:
    for name in ("RunInterruptedError", "MailboxRenderError", "LlmRenderable", "MailboxPreviewable", "HumanProxy"):
        assert hasattr(agent_pkg, name), name


def test_the_choices_written_in_the_readme_hold() -> None:
    from aklab.agent import AgentConfig
    from aklab.core import AgentCard

    with pytest.raises(ValueError, match="role"):
        AgentCard(role="Developer", config=AgentConfig(name="@Developer", role="Developer"))  # type: ignore[call-arg]
    readme = " ".join((Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8").split())
    for choice in ("There is no run to cancel", "AgentCard(role=...)", "no reply or action is expected"):
        assert choice in readme
