"""Output modes: what a run asks of the model, and how each kind of answer is read."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from pydantic_ai import ModelRetry, TextOutput, ToolOutput
from pydantic_ai.output import NativeOutput

from aklab.agent import Request, StructuredOutput
from aklab.llm.output_modes import RUN_FALLBACK, messages_item_type, plan_output
from tests.fakeserver import FakeOpenAI, text


def reply_to_human(text: str) -> StructuredOutput:
    return StructuredOutput(messages=[Request(recipient="@Human", message_type="response", message=text)])


@pytest.fixture(autouse=True)
def _run_fallback() -> Iterator[None]:
    """What a run does around its task: the readers find the run's fallback in RUN_FALLBACK."""
    token = RUN_FALLBACK.set(reply_to_human)
    yield
    RUN_FALLBACK.reset(token)


def test_plans_share_their_output_spec_and_carry_each_runs_own_fallback() -> None:
    def other(text: str) -> StructuredOutput:
        return reply_to_human(f"other: {text}")

    first = plan_output(StructuredOutput, "tool", fallback=reply_to_human, recipients=["@Human"])
    second = plan_output(StructuredOutput, "tool", fallback=other, recipients=["@Human"])
    assert first.output_type is second.output_type  # so pydantic-ai's schema of it is built once
    assert (first.fallback, second.fallback) == (reply_to_human, other)
    assert (
        plan_output(StructuredOutput, "prompted", recipients=["@A"]).output_type
        is not plan_output(StructuredOutput, "prompted", recipients=["@B"]).output_type
    )  # the recipients are part of the prompted JSON shape


def read(plan_type: object, text: str) -> object:
    assert isinstance(plan_type, TextOutput)
    return plan_type.output_function(text)  # type: ignore[call-arg]


def test_tool_mode_with_a_fallback_also_accepts_plain_text() -> None:
    plan = plan_output(StructuredOutput, "tool", fallback=reply_to_human)
    assert isinstance(plan.output_type, list)
    tool, text = plan.output_type
    assert isinstance(tool, ToolOutput)
    out = read(text, "Paris.")
    assert out == reply_to_human("Paris.")
    assert plan.streams


def test_tool_mode_without_a_fallback_is_the_output_tool_only() -> None:
    plan = plan_output(StructuredOutput, "tool")
    assert isinstance(plan.output_type, ToolOutput)


def test_native_mode_uses_the_providers_json_schema_format() -> None:
    assert isinstance(plan_output(StructuredOutput, "native").output_type, NativeOutput)


def test_prompted_mode_reads_json_and_limits_recipients_to_reachable_names() -> None:
    plan = plan_output(
        StructuredOutput, "prompted", fallback=reply_to_human, recipients=["@Human", "Developer"], constrain_json=True
    )
    assert plan.instructions is not None and "@Human, Developer" in plan.instructions
    schema = plan.settings["extra_body"]["response_format"]["schema"]
    assert plan.settings["extra_body"]["response_format"]["type"] == "json_object"
    assert "@Human" in json.dumps(schema) and "Developer" in json.dumps(schema)
    answer = {"messages": [{"recipient": "Developer", "message_type": "request", "message": "Write it."}]}
    out = read(plan.output_type, "```json\n" + json.dumps(answer) + "\n```")
    assert out == StructuredOutput(
        messages=[Request(recipient="Developer", message_type="request", message="Write it.")]
    )


def test_prompted_mode_falls_back_to_plain_text_and_to_the_text_of_a_near_miss() -> None:
    plan = plan_output(StructuredOutput, "prompted", fallback=reply_to_human, recipients=["@Human"])
    assert read(plan.output_type, "The capital of France is Paris.") == reply_to_human(
        "The capital of France is Paris."
    )
    near_miss = {"messages": [{"recipient": "@Human", "message_type": "answer", "message": "4"}]}
    assert read(plan.output_type, json.dumps(near_miss)) == reply_to_human("4")


def test_prompted_json_naming_someone_off_the_list_is_read_as_addressed() -> None:
    """Not turned into prose for the sender: the recipient check and routing deal with the name."""
    plan = plan_output(StructuredOutput, "prompted", fallback=reply_to_human, recipients=["@Human", "Developer"])
    reply = {
        "messages": [
            {"recipient": "@Nobody", "message_type": "request", "message": "Do it."},
            {"recipient": "Developer", "message_type": "request", "message": "Write it."},
        ]
    }
    assert read(plan.output_type, json.dumps(reply)) == StructuredOutput(
        messages=[
            Request(recipient="@Nobody", message_type="request", message="Do it."),
            Request(recipient="Developer", message_type="request", message="Write it."),
        ]
    )


def test_prompted_mode_reads_an_empty_list_as_sending_nothing_yet_its_grammar_asks_for_one() -> None:
    """As an empty output-tool call: a notification needs no reply. Before, it was asked for
    again until the retries ran out, and the human was told the agent could not answer."""
    plan = plan_output(
        StructuredOutput, "prompted", fallback=reply_to_human, recipients=["@Human"], constrain_json=True
    )
    assert read(plan.output_type, '{"messages": []}') == StructuredOutput(messages=[])
    assert plan.instructions is not None and '{"messages": []}' in plan.instructions
    assert plan.settings["extra_body"]["response_format"]["schema"]["properties"]["messages"]["minItems"] == 1


def test_an_empty_answer_is_rejected_with_a_retry_prompt() -> None:
    for mode in ("prompted", "text"):
        plan = plan_output(StructuredOutput, mode, fallback=reply_to_human)  # type: ignore[arg-type]
        with pytest.raises(ModelRetry):
            read(plan.output_type, "   ")


def test_prompted_mode_without_a_fallback_asks_again_for_json() -> None:
    plan = plan_output(StructuredOutput, "prompted")
    with pytest.raises(ModelRetry):
        read(plan.output_type, "no json here")


def test_text_mode_is_plain_text_to_the_sender() -> None:
    plan = plan_output(StructuredOutput, "text", fallback=reply_to_human)
    assert plan.settings == {}
    assert read(plan.output_type, "def rev(s): return s[::-1]") == reply_to_human("def rev(s): return s[::-1]")


def test_messages_item_type_finds_the_item_of_structured_output_only() -> None:
    assert messages_item_type(StructuredOutput) is Request
    assert messages_item_type(str) is None


def test_prompted_mode_delivers_prose_with_code_as_written() -> None:
    """A prose answer keeps its code fences, and braces in its code or text are not taken for
    the reply's JSON (SmolLM2's '```python' answer lost its opening fence; a dict literal in an
    answer was refused as malformed JSON)."""
    plan = plan_output(StructuredOutput, "prompted", fallback=reply_to_human, recipients=["@Human"])
    code = "```python\ndef reverse(s: str) -> str:\n    return s[::-1]\n```\n\nSlicing with a step of -1 reverses it."
    assert read(plan.output_type, code) == reply_to_human(code)
    config = 'Write the settings as a dict:\n```python\nSETTINGS = {"debug": 1, "name": "app"}\n```'
    assert read(plan.output_type, config) == reply_to_human(config)
    inline = 'Python reads {"a": 1} as a dict with one key.'
    assert read(plan.output_type, inline) == reply_to_human(inline)
    fenced_reply = {"messages": [{"recipient": "@Human", "message_type": "response", "message": "4"}]}
    assert read(plan.output_type, "Here:\n```json\n" + json.dumps(fenced_reply) + "\n```") == reply_to_human("4")
    with pytest.raises(ModelRetry):  # a JSON reply without anything to deliver is still debris
        read(plan.output_type, '{"recipient": "@Human", "message_type": "response"}')
    with pytest.raises(ModelRetry):
        read(plan.output_type, 'Here:\n```json\n{"message": ""}\n```')
    # SmolLM2: the answer, then a made-up JSON whose "message" is no text: the answer, as written
    made_up = {"message": {"type": "response", "data": {"id": 3}}, "results": [{"type": "success"}]}
    answer = "1. The capital of France is Paris.\n2. As JSON:\n```json\n" + json.dumps(made_up) + "\n```"
    assert read(plan.output_type, answer) == reply_to_human(answer)


def test_a_code_answer_reaches_the_human_whole_through_the_real_provider(fake_openai: FakeOpenAI) -> None:
    """The same, end to end: pydantic-ai's OpenAI provider, a prompted-mode model, a loopback server."""
    from aklab.lab import Lab
    from aklab.lab.teamfile import team_from_dict
    from aklab.llm import ModelConfig

    code = "```python\ndef reverse(s):\n    return s[::-1]\n```\nIt slices the string backwards."
    fake_openai.push(text(code))
    solo = {"name": "solo", "entry": "Solo", "roles": [{"role": "Solo", "prompt": "You are Solo."}]}
    cfg = ModelConfig(
        provider="openai-compatible", model="fake", base_url=fake_openai.url, retries=0, output_mode="prompted"
    )
    with Lab(team_from_dict(solo), model=cfg) as lab:
        assert [m.content for m in lab.ask("Reverse a string in Python.", timeout=10)] == [code]


#: SmolLM2's first answer in one of 40 fresh teams: the answer, a line pointing at JSON, then
#: the reply's JSON without its "message".
ENVELOPE = {"messages": [{"recipient": "@Human", "message_type": "response"}]}
PROSE_THEN_ENVELOPE = (
    "The capital of France is Paris.\n\nYou can use the JSON format to send a response with the requested "
    "information:\n```json\n" + json.dumps(ENVELOPE, indent=4) + "\n```"
)


def test_prose_then_a_reply_envelope_with_no_message_delivers_the_prose() -> None:
    """Asked again, SmolLM2 wrote only the empty envelope three times, and the ask failed with
    its answer already written; in another session the retry prompt set it talking about
    invalid JSON for the rest of the session."""
    plan = plan_output(StructuredOutput, "prompted", fallback=reply_to_human, recipients=["@Human"])
    assert read(plan.output_type, PROSE_THEN_ENVELOPE) == reply_to_human("The capital of France is Paris.")
    same_line = "Paris is the capital of France. As JSON: " + json.dumps(ENVELOPE)
    assert read(plan.output_type, same_line) == reply_to_human("Paris is the capital of France.")
    # what follows the JSON talks about it, and the model copied that into later answers
    commented = "The answer is 4.\n" + json.dumps(ENVELOPE) + "\nThis response contains a JSON object."
    assert read(plan.output_type, commented) == reply_to_human("The answer is 4.")
    assert read(plan.output_type, json.dumps(ENVELOPE) + "\nParis.") == reply_to_human("Paris.")
    code = "```python\nd = {'a': {}}\n```\n"  # braces in code do not count, and the code stays
    assert read(plan.output_type, code + json.dumps(ENVELOPE)) == reply_to_human(code.strip())
    delegation = {"messages": [{"recipient": "Developer", "message_type": "request"}]}
    with pytest.raises(ModelRetry):  # an empty request to someone else: asked again, to be fixed
        read(plan.output_type, "I will ask the Developer.\n" + json.dumps(delegation))
    for debris in (  # nothing but a line pointing at the JSON: still debris, asked again
        "Here is my reply:\n```json\n" + json.dumps(ENVELOPE) + "\n```",
        "As JSON:\n" + json.dumps(ENVELOPE),
        json.dumps(ENVELOPE),
    ):
        with pytest.raises(ModelRetry):
            read(plan.output_type, debris)


def test_prose_then_an_empty_envelope_answers_in_one_request_through_the_real_provider(
    fake_openai: FakeOpenAI,
) -> None:
    from aklab.lab import Lab
    from aklab.lab.teamfile import team_from_dict
    from aklab.llm import ModelConfig

    fake_openai.push(text(PROSE_THEN_ENVELOPE))
    solo = {"name": "solo", "entry": "Solo", "roles": [{"role": "Solo", "prompt": "You are Solo."}]}
    cfg = ModelConfig(provider="openai-compatible", model="fake", base_url=fake_openai.url, output_mode="prompted")
    with Lab(team_from_dict(solo), model=cfg) as lab:
        replies = lab.ask("What is the capital of France?", timeout=10)
        assert [m.content for m in replies] == ["The capital of France is Paris."]
        assert len(fake_openai.requests) == 1
        fake_openai.push(text("4"))
        assert [m.content for m in lab.ask("What is 2+2?", timeout=10)] == ["4"]
    # the history holds the answer as delivered: SmolLM2 copied the JSON, and the line about it,
    # from its own earlier answer into every answer after it
    said = [m["content"] for m in fake_openai.bodies[1]["messages"] if m["role"] == "assistant"]
    assert said == ["The capital of France is Paris."]
