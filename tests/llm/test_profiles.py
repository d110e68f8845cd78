"""Provider profiles: a spec becomes a model whose settings reach the wire in its server's dialect."""

from __future__ import annotations

import asyncio
import copy
import gc
import json
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.providers.openai import OpenAIProvider

from aklab.agent import AgentConfig
from aklab.errors import ConfigError
from aklab.llm import ModelConfig, RuntimeConfig
from aklab.llm.models import build_model
from aklab.llm.profiles import FAMILY_MODULES, Profile, ResolvedModel, is_loopback, resolve
from tests.helpers import card

KEY_ENVS = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENROUTER_API_KEY", "AKLAB_LOCAL_BASE_URL")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in KEY_ENVS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def resolved() -> Iterator[Callable[..., ResolvedModel]]:
    """``resolved(spec, **options)``: resolve a spec; every model built is closed after the test."""
    built: list[ResolvedModel] = []

    def build(spec: str, runtime: RuntimeConfig | None = None, **options: Any) -> ResolvedModel:
        built.append(resolve(ModelConfig.parse(spec, **options), runtime))
        return built[-1]

    yield build
    for r in built:
        r.close()


# -- a ready pydantic-ai Model --------------------------------------------------------------


def test_a_config_holding_a_real_openai_model_can_be_copied_and_the_copies_share_it() -> None:
    provider = OpenAIProvider(api_key="dummy-key", base_url="http://127.0.0.1:9/v1")
    model = OpenAIChatModel("served-model", provider=provider)
    cfg = ModelConfig(model=model, temperature=0.3)
    config = AgentConfig(name="@A", role="A", model_cfg=cfg)
    assert copy.deepcopy(cfg).model is model
    assert cfg.model_copy(deep=True).model is model
    assert cfg.model_copy(update={"temperature": 0.1}, deep=True).model is model
    assert config.model_copy(deep=True).model_cfg.model is model
    assert config.model_copy(update={"role": "B"}, deep=True).model_cfg.model is model
    assert card("A", model=model).get_config_copy().model_cfg.model is model  # type: ignore[attr-defined]
    r = resolve(cfg)
    assert r.model is model and r.profile == Profile("custom", "served-model", "tool")
    assert r.settings == {"temperature": 0.3, "parallel_tool_calls": True}


def test_build_model_is_kept_for_old_callers() -> None:
    assert isinstance(build_model(ModelConfig()), FunctionModel)


# -- the local (llama.cpp) and OpenAI-compatible dialect -------------------------------------


def test_a_local_profile_speaks_the_llama_cpp_dialect(resolved: Callable[..., ResolvedModel]) -> None:
    r = resolved("local:smollm2", max_tokens=64, temperature=0.2, timeout=7, retries=0)
    assert r.profile == Profile(
        "local",
        "local:smollm2",
        "prompted",
        constrain_json=False,
        local=True,
        state_in_system=True,
        recent_runs=2,
        context_length=4_096,
    )
    assert r.settings == {
        "temperature": 0.2,
        "max_tokens": 64,
        "timeout": 7,
        "max_retries": 0,
        "parallel_tool_calls": True,
    }
    model = r.model
    assert isinstance(model, OpenAIChatModel) and model.settings == r.settings
    assert (model.base_url, model.client.timeout, model.client.max_retries) == ("http://127.0.0.1:8080/v1/", 7, 0)
    profile = model.profile
    assert profile.get("openai_chat_supports_max_completion_tokens") is False
    assert profile.get("supports_forced_tool_choice") is False
    assert profile.get("openai_supports_strict_tool_definition") is False
    assert profile.get("supports_json_object_output") is True
    assert profile.get("supports_json_schema_output") is False
    assert profile.get("default_structured_output_mode") == "prompted"


def test_runtime_timeout_and_one_retry_are_the_defaults(resolved: Callable[..., ResolvedModel]) -> None:
    r = resolved("local:smollm2", RuntimeConfig(http_timeout=33, parallel_tool_calls=False))
    assert r.settings == {
        "timeout": 33,
        "max_retries": 1,
        "parallel_tool_calls": False,
        "max_tokens": 768,
        "temperature": 0.2,
    }
    assert isinstance(r.model, OpenAIChatModel)
    assert (r.model.client.timeout, r.model.client.max_retries) == (33, 1)


def test_the_local_endpoint_comes_from_the_config_then_the_environment(
    resolved: Callable[..., ResolvedModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AKLAB_LOCAL_BASE_URL", "http://127.0.0.1:8123/v1")
    from_env = resolved("local:smollm2").model
    from_cfg = resolved("local:smollm2", base_url="http://localhost:9000/v1").model
    assert isinstance(from_env, OpenAIChatModel) and isinstance(from_cfg, OpenAIChatModel)
    assert (from_env.base_url, from_cfg.base_url) == ("http://127.0.0.1:8123/v1/", "http://localhost:9000/v1/")


def test_an_openai_compatible_server_is_local_only_on_loopback(resolved: Callable[..., ResolvedModel]) -> None:
    remote = resolved("openai-compatible:qwen3", base_url="http://gpu-box:8000/v1")
    here = resolved("openai-compatible:qwen3", base_url="http://[::1]:8000/v1")
    assert (remote.profile.family, remote.profile.label) == ("openai-compatible", "openai-compatible:qwen3")
    assert (remote.profile.local, here.profile.local) == (False, True)
    assert remote.profile.output_mode == "prompted" and not remote.profile.constrain_json
    grammar = resolved("openai-compatible:qwen3", base_url="http://gpu-box:8000/v1", output_mode="grammar")
    assert (grammar.profile.output_mode, grammar.profile.constrain_json) == ("prompted", True)
    assert [is_loopback(u) for u in ("http://127.0.0.2/v1", "http://localhost", "https://example.com")] == [
        True,
        True,
        False,
    ]


def test_an_explicit_output_mode_wins_over_the_family_default(resolved: Callable[..., ResolvedModel]) -> None:
    native = resolved("local:smollm2", output_mode="native")
    text = resolved("local:smollm2", output_mode="text")
    assert (native.profile.output_mode, native.profile.constrain_json) == ("native", False)
    assert native.model.profile.get("supports_json_schema_output") is True
    assert (text.profile.output_mode, text.profile.constrain_json) == ("text", False)
    assert resolved("demo:aklab-demo", output_mode="prompted").profile.output_mode == "prompted"


# -- OpenAI and the cloud families -----------------------------------------------------------


def test_openai_in_the_cloud_uses_the_responses_api_with_the_key_from_the_environment(
    resolved: Callable[..., ResolvedModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-real")
    r = resolved("openai:gpt-4.1", max_tokens=100)
    assert isinstance(r.model, OpenAIResponsesModel)
    assert r.profile == Profile("openai", "openai:gpt-4.1", "tool", context_length=128_000)
    assert r.settings == {"max_tokens": 100, "timeout": 120.0, "max_retries": 1, "parallel_tool_calls": True}
    assert (r.model.client.timeout, r.model.client.max_retries) == (120.0, 1)


def test_openai_with_a_base_url_goes_to_chat_completions_never_responses(
    resolved: Callable[..., ResolvedModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = resolved("openai:gpt-4.1", base_url="https://proxy.example/v1")
    assert isinstance(proxy.model, OpenAIChatModel) and proxy.profile.family == "openai"
    assert proxy.model.profile.get("openai_chat_supports_max_completion_tokens", True) is True
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1")
    local = resolved("openai:smollm2")
    assert isinstance(local.model, OpenAIChatModel) and local.model.base_url == "http://127.0.0.1:8080/v1/"
    assert local.profile == Profile(
        "openai-compatible",
        "openai:smollm2",
        "prompted",
        constrain_json=False,
        local=True,
        state_in_system=True,
        context_length=8_192,
    )


def test_openrouter_is_built_from_its_key(
    resolved: Callable[..., ResolvedModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", "or-test-not-real")
    r = resolved("openrouter:anthropic/claude-sonnet-4", temperature=0)
    assert r.profile == Profile("openrouter", "openrouter:anthropic/claude-sonnet-4", "tool", context_length=128_000)
    assert r.settings["temperature"] == 0 and r.settings["max_retries"] == 1


def test_the_demo_model_needs_no_network_settings(resolved: Callable[..., ResolvedModel]) -> None:
    r = resolved("demo:aklab-demo")
    assert isinstance(r.model, FunctionModel) and r.settings == {"parallel_tool_calls": True}
    assert r.profile == Profile("demo", "demo:aklab-demo", "tool", context_length=8_192)


# -- keys ----------------------------------------------------------------------------------


def test_a_key_is_used_but_never_shown(resolved: Callable[..., ResolvedModel], monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-very-secret-123"
    monkeypatch.setenv("MY_SERVER_KEY", secret)
    r = resolved("openai-compatible:qwen3", base_url="http://gpu-box:8000/v1", api_key_env="MY_SERVER_KEY")
    assert isinstance(r.model, OpenAIChatModel) and r.model.client.api_key == secret
    cfg = ModelConfig.parse("openai-compatible:qwen3", api_key_env="MY_SERVER_KEY")
    shown = [repr(r), repr(r.model), r.profile.label, repr(cfg), cfg.model_dump_json()]
    assert not [s for s in shown if secret in s]
    monkeypatch.delenv("MY_SERVER_KEY")
    with pytest.raises(ConfigError, match="set the MY_SERVER_KEY environment variable") as info:
        resolved("openai-compatible:qwen3", base_url="http://gpu-box:8000/v1", api_key_env="MY_SERVER_KEY")
    assert "\n" not in str(info.value)


def test_an_openai_compatible_server_never_gets_the_openai_key(
    resolved: Callable[..., ResolvedModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-not-for-others")
    r = resolved("openai-compatible:qwen3", base_url="http://gpu-box:8000/v1")
    assert isinstance(r.model, OpenAIChatModel) and r.model.client.api_key == "not-needed"


# -- one-line errors -----------------------------------------------------------------------


def test_a_missing_sdk_names_the_install_command_for_this_python(monkeypatch: pytest.MonkeyPatch) -> None:
    for module in ("anthropic", "pydantic_ai.models.anthropic", "pydantic_ai.providers.anthropic"):
        monkeypatch.setitem(sys.modules, module, None)  # None in sys.modules: the import fails
    with pytest.raises(ConfigError) as info:
        resolve(ModelConfig.parse("anthropic:claude-sonnet-4-5"))
    assert str(info.value) == f"provider 'anthropic' needs its SDK: {sys.executable} -m pip install 'aklab[anthropic]'"
    for module in ("openai", "pydantic_ai.models.openai", "pydantic_ai.providers.openai_compatible"):
        monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(ConfigError, match=r"provider 'local' needs its SDK: .* install 'aklab\[openai\]'"):
        resolve(ModelConfig.parse("local:smollm2"))


@pytest.mark.parametrize(
    ("spec", "options", "message"),
    [
        ("nosuch:model", {}, "unknown model provider 'nosuch': use one of " + ", ".join(FAMILY_MODULES)),
        ("openai:gpt-4.1", {}, "model openai:gpt-4.1: set the OPENAI_API_KEY environment variable"),
        ("openrouter:x/y", {}, "model openrouter:x/y: set the OPENROUTER_API_KEY environment variable"),
        ("openai-compatible:qwen3", {}, "needs the server's base_url, e.g. --base-url"),
        ("openrouter:x/y", {"base_url": "http://h/v1"}, "OpenRouter has a fixed endpoint"),
    ],
)
def test_a_model_that_cannot_be_built_is_a_one_line_config_error(
    spec: str, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError) as info:
        resolve(ModelConfig.parse(spec, **options))
    assert message in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"output_mode": "json"}, "unknown output_mode 'json': use one of auto, tool, native, prompted, grammar, text"),
        ({"colour": "red"}, "unknown option 'colour'"),
        ({"timeout": 0}, "timeout: Input should be greater than 0"),
        ({"provider": "openai"}, "give the provider and the model in the spec only"),
    ],
)
def test_bad_model_options_are_one_line_config_errors(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ModelConfig.parse("local:smollm2", **options)


def test_a_spec_parses_with_its_options() -> None:
    cfg = ModelConfig.parse(" local:smollm2 ", base_url=None, max_tokens=64, output_mode="text")
    assert (cfg.provider, cfg.model, cfg.base_url, cfg.max_tokens, cfg.output_mode) == (
        "local",
        "smollm2",
        None,
        64,
        "text",
    )
    assert ModelConfig.parse("openrouter:meta/llama:free").model == "meta/llama:free"


# -- closing -------------------------------------------------------------------------------


def test_close_is_idempotent_and_works_inside_a_running_loop(resolved: Callable[..., ResolvedModel]) -> None:
    r = resolved("local:smollm2")
    assert not r.closed

    async def in_a_notebook_cell() -> None:
        r.close()

    asyncio.run(in_a_notebook_cell())
    assert r.closed
    r.close()
    assert r.closed


def test_a_client_whose_idle_loop_is_not_this_threads_running_one_still_closes() -> None:
    """An agent's model closed by its finalizer during a garbage collection inside another
    coroutine: the client's own loop is idle, and this thread runs a different one."""
    import httpx2

    from aklab.llm.profiles._base import _OwnedClient

    capture = Capture()
    capture.thread.start()
    own_loop = asyncio.new_event_loop()
    try:
        owned = _OwnedClient(httpx2.AsyncClient())
        response = own_loop.run_until_complete(owned.client.get(f"{capture.url}/models"))
        assert response.status_code == 501 and owned.loop is own_loop  # a connection bound to own_loop

        async def some_other_coroutine() -> None:
            owned.close()

        asyncio.run(some_other_coroutine())
        assert owned.client.is_closed
    finally:
        own_loop.close()
        capture.server.shutdown()
        capture.server.server_close()


# -- on the wire ---------------------------------------------------------------------------


class Capture:
    """A minimal Chat Completions server on 127.0.0.1 that records request bodies."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        capture = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                capture.bodies.append(body)
                payload = json.dumps(capture.reply(body)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @staticmethod
    def reply(body: dict[str, Any]) -> dict[str, Any]:
        answer = json.dumps({"answer": "Paris"})
        message: dict[str, Any] = {"role": "assistant", "content": answer}
        if body.get("tools"):
            call = {"id": "call_1", "type": "function", "function": {"name": "final_result", "arguments": answer}}
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
        return {
            "id": "c1",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
        }


@pytest.fixture
def capture() -> Iterator[Capture]:
    c = Capture()
    c.thread.start()
    yield c
    c.server.shutdown()
    c.server.server_close()


class Answer(BaseModel):
    answer: str


def ask(r: ResolvedModel) -> Answer:
    """One run on the agent's own loop, then ``close()`` before the loop goes, as ReactAgent does."""
    loop = asyncio.new_event_loop()
    try:
        result = loop.run_until_complete(Agent(r.model, output_type=Answer).run("Capital of France?"))
        r.close()
    finally:
        loop.close()
    gc.collect()  # an unclosed connection would warn (ResourceWarning) here, failing the test
    return result.output


def test_local_settings_reach_the_wire_as_llama_cpp_expects(
    capture: Capture, resolved: Callable[..., ResolvedModel]
) -> None:
    r = resolved("local:smollm2", base_url=capture.url, max_tokens=64, temperature=0.2)
    assert ask(r) == Answer(answer="Paris") and r.closed
    [body] = capture.bodies
    assert (body["model"], body["max_tokens"], body["temperature"]) == ("smollm2", 64, 0.2)
    assert "max_completion_tokens" not in body and "tools" not in body
    assert body["response_format"] == {"type": "json_object"}


def test_tool_output_on_a_local_server_is_never_forced_nor_strict(
    capture: Capture, resolved: Callable[..., ResolvedModel]
) -> None:
    r = resolved("local:smollm2", base_url=capture.url, output_mode="tool", max_tokens=32)
    assert ask(r) == Answer(answer="Paris")
    [body] = capture.bodies
    assert body["tool_choice"] != "required" and body["max_tokens"] == 32
    assert [t["function"].get("strict") for t in body["tools"]] == [None]
    assert "response_format" not in body


def test_a_local_model_gets_a_response_cap_unless_one_is_set(resolved: Callable[..., ResolvedModel]) -> None:
    assert resolved("local:smollm2").settings.get("max_tokens") == 768
    assert resolved("local:smollm2", max_tokens=64).settings.get("max_tokens") == 64
    assert "max_tokens" not in resolved("openai-compatible:qwen3", base_url="http://gpu-box:8000/v1").settings


def test_a_local_model_samples_at_a_low_temperature_unless_one_is_set(
    capture: Capture, resolved: Callable[..., ResolvedModel]
) -> None:
    """llama.cpp's server would sample at 0.8; a small model rambles there (see LocalFamily)."""
    assert ask(resolved("local:smollm2", base_url=capture.url)) == Answer(answer="Paris")
    assert ask(resolved("local:smollm2", base_url=capture.url, temperature=0.9)) == Answer(answer="Paris")
    assert ask(resolved("local:smollm2", base_url=capture.url, temperature=0)) == Answer(answer="Paris")
    assert [body["temperature"] for body in capture.bodies] == [0.2, 0.9, 0]
    other = resolved("openai-compatible:qwen3", base_url="http://gpu-box:8000/v1")
    assert "temperature" not in other.settings  # a server named as such keeps its own default


def test_a_bad_local_base_url_in_the_environment_is_one_line_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, resolved: Callable[..., ResolvedModel]
) -> None:
    monkeypatch.setenv("AKLAB_LOCAL_BASE_URL", "127.0.0.1:8081/v1")
    with pytest.raises(ConfigError, match=r"^\$AKLAB_LOCAL_BASE_URL: .*did you mean http://127.0.0.1:8081/v1\?"):
        resolved("local:qwen3")
    monkeypatch.setenv("AKLAB_LOCAL_BASE_URL", " http://127.0.0.1:8081/v1 ")
    assert str(resolved("local:qwen3").model.base_url) == "http://127.0.0.1:8081/v1/"  # type: ignore[attr-defined]


@pytest.mark.parametrize("provider", ["openai-compatible", "local", "ollama"])
def test_a_self_hosted_server_gets_one_system_message(
    fake_openai: Any, provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The role's prompt and the run's instructions (prompted mode's JSON shape) go out as one
    system message: open models' chat templates expect one (some refuse a second), and on
    SmolLM2 a team's first question got the expected word 51 times in 60 with one, 37 with two."""
    from aklab.lab import Lab
    from aklab.lab.teamfile import team_from_dict
    from tests.fakeserver import text

    monkeypatch.setenv("OLLAMA_HOST", fake_openai.url.removesuffix("/v1"))
    fake_openai.push(text("Paris."))
    solo = {"name": "solo", "entry": "Solo", "roles": [{"role": "Solo", "prompt": "You are Solo."}]}
    base_url = None if provider == "ollama" else fake_openai.url
    cfg = ModelConfig(provider=provider, model="fake", base_url=base_url, retries=0)
    with Lab(team_from_dict(solo), model=cfg, store=False) as lab:
        assert [m.content for m in lab.ask("What is the capital of France?", timeout=10)] == ["Paris."]
    (body,) = fake_openai.bodies
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user"], roles
    system = body["messages"][0]["content"]
    assert system.startswith("You are Solo.") and "Reply with one JSON object" in system
