"""``%aklab model SPEC [options]``: parsed apart from the work, built before the team restarts."""

from __future__ import annotations

import sys

import pytest
from IPython.core.interactiveshell import InteractiveShell

from aklab.lab import get_lab
from aklab.lab.magics import UsageError, parse_aklab, parse_model
from aklab.llm import ModelConfig


def run(shell: InteractiveShell, capsys: pytest.CaptureFixture[str], source: str) -> str:
    shell.run_cell(source)
    return capsys.readouterr().out


def test_every_model_option_parses_into_the_config() -> None:
    action, words = parse_aklab(
        "model local:smollm2 --base-url http://127.0.0.1:8081/v1 --api-key-env LOCAL_KEY --temperature 0.2"
        " --max-tokens 64 --timeout 30 --retries 0 --output-mode text --context-length 4096"
    )
    assert action == "model" and words is not None
    assert parse_model(words) == ModelConfig(
        provider="local",
        model="smollm2",
        base_url="http://127.0.0.1:8081/v1",
        api_key_env="LOCAL_KEY",
        temperature=0.2,
        max_tokens=64,
        timeout=30,
        retries=0,
        output_mode="text",
        context_length=4096,
    )
    assert parse_model("openai:gpt-4.1") == ModelConfig(provider="openai", model="gpt-4.1")


def test_a_bad_model_option_shows_the_model_usage() -> None:
    with pytest.raises(UsageError, match=r"invalid choice: 'json'.*\nusage: %aklab model provider:model \[--base-url"):
        parse_model("local:smollm2 --output-mode json")
    with pytest.raises(UsageError, match="invalid int value: 'many'"):
        parse_model("local:smollm2 --max-tokens many")


def test_a_model_that_cannot_be_built_is_one_line_and_the_team_stays(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    run(shell, capsys, "%aklab")
    before = get_lab()
    out = run(shell, capsys, "%aklab model nosuch:model")
    assert out == "aklab: unknown model provider 'nosuch': use one of " + (
        "demo, openai, openai-compatible, local, ollama, anthropic, google, mistral, openrouter\n"
    )
    for module in ("anthropic", "pydantic_ai.models.anthropic", "pydantic_ai.providers.anthropic"):
        monkeypatch.setitem(sys.modules, module, None)
    out = run(shell, capsys, "%aklab model anthropic:claude-sonnet-4-5 --timeout 20")
    assert out == f"aklab: provider 'anthropic' needs its SDK: {sys.executable} -m pip install 'aklab[anthropic]'\n"
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    out = run(shell, capsys, "%aklab model openai:gpt-4.1")
    assert out.startswith("aklab: model openai:gpt-4.1: set the OPENAI_API_KEY environment variable")
    assert out.count("\n") == 1 and get_lab() is before


def test_a_local_model_with_options_restarts_the_team_on_it(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    out = run(shell, capsys, "%aklab model local:smollm2 --base-url http://127.0.0.1:9/v1 --max-tokens 64")
    assert "models: local:smollm2" in out
    [cfg] = {c.config.model_cfg.model_dump_json() for c in get_lab().spec.cards}  # type: ignore[attr-defined]
    assert ModelConfig.model_validate_json(cfg).max_tokens == 64
