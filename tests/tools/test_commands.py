from __future__ import annotations

import functools
from collections.abc import Callable

import pytest

from aklab.tools import CommandNotRecognized, CommandRegistry


def _registry() -> tuple[CommandRegistry, list[tuple[object, ...]]]:
    calls: list[tuple[object, ...]] = []

    def hire_member(role: str, name: str | None = None) -> str:
        """Hire by role."""
        calls.append((role, name))
        return f"hired {name or role}"

    def repeat(text: str, times: int = 1, loud: bool = False) -> str:
        """Repeat text."""
        out = " ".join([text] * times)
        return out.upper() if loud else out

    def quiet() -> None:
        """Do something silently."""

    def broken() -> str:
        """Always fails."""
        raise RuntimeError("it broke")

    registry = CommandRegistry()
    for command in (hire_member, repeat, quiet, broken):
        registry.register(command, card="Test")
    return registry, calls


def test_arguments_are_shlex_split_and_bound_by_name_only_for_real_parameters() -> None:
    registry, calls = _registry()
    assert registry.dispatch("/hire_member Developer name=@Ada") == "hired @Ada"
    assert registry.dispatch('/repeat "a=b c" times=2') == "a=b c a=b c"
    assert calls == [("Developer", "@Ada")]


def test_values_are_coerced_to_the_annotated_types() -> None:
    registry, _ = _registry()
    assert registry.dispatch("/repeat hi 3 loud=yes") == "HI HI HI"


def test_an_unknown_command_is_not_recognized_so_the_text_can_reach_the_model() -> None:
    registry, _ = _registry()
    with pytest.raises(CommandNotRecognized):
        registry.dispatch("/usr/bin is a folder")
    with pytest.raises(CommandNotRecognized):
        registry.dispatch("no slash")


def test_errors_after_the_command_is_known_come_back_as_text() -> None:
    registry, _ = _registry()
    assert registry.dispatch("/broken") == "Error in /broken: it broke"
    missing = registry.dispatch("/hire_member")
    assert (
        missing is not None
        and missing.startswith("Error in /hire_member")
        and "usage: /hire_member <role> [name]" in missing
    )
    assert registry.dispatch("/repeat x times=many") is not None


def test_none_means_handled_silently() -> None:
    registry, _ = _registry()
    assert registry.dispatch("/quiet") is None


def test_the_typed_surface_returns_native_values_and_descriptors_describe_everything() -> None:
    registry, _ = _registry()
    assert registry.has("repeat") and not registry.has("nope")
    assert registry.callable("repeat")("x", 2) == "x x"
    names = [d.name for d in registry.descriptors()]
    assert names == ["broken", "hire_member", "quiet", "repeat"]
    repeat = registry.descriptors()[3]
    assert repeat.args == {"text": "str", "times": "int", "loud": "bool"} and repeat.card == "Test"


def test_descriptors_are_the_same_for_every_registry_and_follow_a_changed_docstring() -> None:
    first, _ = _registry()
    second, _ = _registry()
    assert first.descriptors() == second.descriptors()
    first.descriptors()[0].args["extra"] = "int"  # a caller's copy: the next one is whole
    assert "extra" not in first.descriptors()[0].args

    def renamed() -> str:
        """Old text."""
        return ""

    registry = CommandRegistry()
    registry.register(renamed)
    assert registry.descriptors()[0].description == "Old text."
    renamed.__doc__ = "New text."
    assert registry.descriptors()[0].description == "New text."


def test_decorated_commands_are_described_by_the_function_they_wrap() -> None:
    def logged(command: Callable[..., str]) -> Callable[..., str]:
        @functools.wraps(command)
        def wrapper(*args: object, **kwargs: object) -> str:
            return command(*args, **kwargs)

        return wrapper

    @logged
    def greet(name: str) -> str:
        """Greet someone."""
        return f"hi {name}"

    @logged
    def count(times: int, loud: bool = False) -> str:
        """Count up."""
        return str(times)

    registry = CommandRegistry()
    registry.register(greet)
    registry.register(count)
    described = {d.name: (d.description, d.args) for d in registry.descriptors()}
    assert described == {
        "count": ("Count up.", {"times": "int", "loud": "bool"}),
        "greet": ("Greet someone.", {"name": "str"}),
    }


def test_help_lists_each_public_command_as_typed_unless_a_card_brings_its_own() -> None:
    registry, _ = _registry()
    assert registry.asks_for_help("/help") and registry.asks_for_help(" /? \n")
    assert not registry.asks_for_help("/help me with this") and not registry.asks_for_help("help")
    text = registry.help_text("@Dev")
    assert text.splitlines() == [
        "Commands @Dev obeys, each sent as a message of its own (/name arguments):",
        "/broken — Always fails.",
        "/hire_member role [name] — Hire by role.",
        "/quiet — Do something silently.",
        "/repeat text [times] [loud] — Repeat text.",
        "Any other text starting with / goes to the model as it is.",
    ]

    def help() -> str:  # a card's own /help
        """This card's own help."""
        return "mine"

    registry.register(help, card="Test")
    assert not registry.asks_for_help("/help")
    assert registry.dispatch("/help") == "mine"


def test_a_command_taking_any_words_is_shown_so_and_stop_answers_the_same_with_or_without_them() -> None:
    from aklab.tools import MailboxTool
    from aklab.tools.mailbox import NO_RUN_TO_CANCEL

    registry = CommandRegistry()
    for command in MailboxTool().get_commands(None):  # type: ignore[arg-type]
        registry.register(command)
    assert registry.help_text("@Dev").splitlines()[1] == "/stop [reason ...] — Cancel the current run."
    # mid-run any text starting with /stop cancels: idle, it must not be an error instead
    assert registry.dispatch("/stop") == registry.dispatch("/stop the spec changed") == NO_RUN_TO_CANCEL


def test_help_to_an_agent_answers_without_a_model_call_or_a_note_for_its_model() -> None:
    import json

    from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from aklab.lab import Lab
    from aklab.lab.teams import builtin_team
    from aklab.llm import ModelConfig

    prompts: list[str] = []

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompts.append(str(messages[-1]))
        args = {"messages": [{"recipient": "@Human", "message_type": "response", "message": "hello"}]}
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, json.dumps(args))])

    with Lab(builtin_team("dev-team").with_model(ModelConfig(model=FunctionModel(answer))), store=False) as lab:
        [reply] = lab.ask("/help", timeout=20)
        assert reply.type == "notification" and reply.sender is not None and reply.sender.name == "@Manager"
        lines = reply.content.splitlines()
        assert "/hire_member role [name] — Hire a member by role; returns the new member's address." in lines
        assert {"/clear", "/compact", "/stop [reason ...]", "/team_members"} <= {line.split(" —")[0] for line in lines}
        assert prompts == [] and lab.usage().empty  # no model request
        assert [m.content for m in lab.ask("Say hello", timeout=20)] == ["hello"]
        [prompt] = prompts
        assert "Say hello" in prompt and "/help" not in prompt  # the model was not told of it
