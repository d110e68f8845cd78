"""Bad configuration and arguments: each is one clear line naming the field and the fix,
and a team still answers afterwards.

Covers team files (missing tool fields, duplicate roles, a BOM, non-UTF-8 bytes,
non-positive limits, code named by dotted paths), ``ModelConfig`` and its neighbours,
``%%ask`` / ``%aklab model`` arguments, private commands, and compaction on by default.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

from aklab.agent import BaseAgent
from aklab.errors import ConfigError
from aklab.lab import get_lab, set_lab
from aklab.lab.session import Lab
from aklab.lab.teamfile import TRUST_ENV, load_team_file, team_from_dict
from aklab.lab.teams import TeamSpec
from aklab.llm import CompactionConfig, ModelConfig, RuntimeConfig
from aklab.llm.react import ReactAgent
from aklab.tools import CommandNotRecognized, CommandRegistry, ToolCard
from aklab.tools.card import ToolHost
from tests.helpers import card


def team_answers(team: str | Path | TeamSpec = "dev-team") -> None:
    """The team starts and answers a question."""
    with Lab(team) as lab:
        [reply] = lab.ask("Plan the login page", timeout=20)
        assert reply.content


def one_line(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text, text
    return text


# -- team files -------------------------------------------------------------------------------


def _workspace_checks_itself() -> bool:
    """The workspace card may refuse a missing root itself (a ConfigError) or leave it to pydantic."""
    from aklab.tools import WorkspaceTool

    try:
        WorkspaceTool()  # type: ignore[call-arg]
    except ConfigError:
        return True
    except Exception:
        return False
    return False


WORKSPACE_CHECKS_ITSELF = _workspace_checks_itself()

HEAD = 'name = "t"\nentry = "A"\n'
ROLE_A = '[[roles]]\nrole = "A"\n'


def _limits(table: str, field: str, value: str) -> str:
    return f"{HEAD}{ROLE_A}{table} = {{ {field} = {value} }}\n"


TEAMFILE_CASES: list[tuple[str, str, list[str]]] = [
    (
        "workspace-without-root",
        f'{HEAD}{ROLE_A}tools = ["WorkspaceTool"]\n',
        ["roles.0.tools.0: WorkspaceTool", "root", "missing" if WORKSPACE_CHECKS_ITSELF else "required"],
    ),
    (
        "workspace-table-without-root",
        f'{HEAD}{ROLE_A}tools = ["PlanningTool", {{ type = "WorkspaceTool" }}]\n',
        ["roles.0.tools.1: WorkspaceTool", "root", "missing" if WORKSPACE_CHECKS_ITSELF else "required"],
    ),
    (
        "duplicate-roles",
        f"{HEAD}{ROLE_A}{ROLE_A}",
        ["roles.0 and roles.1 are both named 'A'", "give every role its own name"],
    ),
    (
        "duplicate-roles-apart",
        f'{HEAD}{ROLE_A}[[roles]]\nrole = "B"\n{ROLE_A}',
        ["roles.0 and roles.2 are both named 'A'", "give every role its own name"],
    ),
    *[
        (
            f"{table}-{field}-{value}",
            _limits(table, field, value),
            [f"roles.0.{table}.{field}: got {value}", "a limit is a positive number (leave it out for no cap)"],
        )
        for table, field, value in [
            ("run_usage_limits", "run_request_limit", "-1"),
            ("run_usage_limits", "run_request_limit", "0"),
            ("run_usage_limits", "tool_calls_limit", "-3"),
            ("run_usage_limits", "input_tokens_limit", "0"),
            ("run_usage_limits", "output_tokens_limit", "-1"),
            ("run_usage_limits", "total_tokens_limit", "-100"),
            ("agent_usage_limits", "agent_request_limit", "-1"),
            ("agent_usage_limits", "total_tokens_limit", "0"),
        ]
    ],
    (
        "limit-nan",
        _limits("run_usage_limits", "run_request_limit", "nan"),
        ["roles.0.run_usage_limits.run_request_limit", "finite number"],
    ),
    (
        "untrusted-tool-path",
        f'{HEAD}{ROLE_A}tools = [{{ type = "json.JSONDecoder" }}]\n',
        ["roles.0.tools.0: 'json.JSONDecoder' is code outside aklab", "trust=['json']", f"{TRUST_ENV}=json"],
    ),
    (
        "untrusted-tool-string",
        f'{HEAD}{ROLE_A}tools = ["os.system"]\n',
        ["roles.0.tools.0: 'os.system' is code outside aklab", f"{TRUST_ENV}=os"],
    ),
    (
        "untrusted-agent-class",
        f'{HEAD}{ROLE_A}agent_class = "collections.OrderedDict"\n',
        ["roles.0.agent_class: 'collections.OrderedDict' is code outside aklab", f"{TRUST_ENV}=collections"],
    ),
]


@pytest.mark.parametrize(("name", "text", "parts"), TEAMFILE_CASES, ids=[c[0] for c in TEAMFILE_CASES])
def test_a_bad_team_file_is_one_line_naming_the_field_and_the_fix(
    tmp_path: Path, name: str, text: str, parts: list[str]
) -> None:
    path = tmp_path / "team.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_team_file(path)
    message = one_line(info.value)
    assert message.startswith(f"{path}: ")
    for part in parts:
        assert part in message
    team_answers()


@pytest.mark.parametrize(
    ("name", "data", "suffix"),
    [
        ("latin-1-toml", f'{HEAD}{ROLE_A}prompt = "Caf\u00e9"\n'.encode("latin-1"), ".toml"),
        ("utf-16-toml", f"{HEAD}{ROLE_A}".encode("utf-16"), ".toml"),
        ("latin-1-yaml", "name: t\nentry: A\nroles:\n  - role: A\n    prompt: Caf\u00e9\n".encode("latin-1"), ".yaml"),
        ("binary", bytes(range(256)), ".toml"),
    ],
)
def test_a_team_file_that_is_not_utf8_says_to_save_it_as_utf8(
    tmp_path: Path, name: str, data: bytes, suffix: str
) -> None:
    path = tmp_path / f"team{suffix}"
    path.write_bytes(data)
    with pytest.raises(ConfigError) as info:
        load_team_file(path)
    message = one_line(info.value)
    assert message.startswith(f"{path}: not UTF-8") and "save the team file as UTF-8" in message
    team_answers()


@pytest.mark.parametrize(
    ("suffix", "text"),
    [
        (".toml", f'{HEAD}{ROLE_A}prompt = "Caf\u00e9 owner"\n'),
        (".yaml", "name: t\nentry: A\nroles:\n  - role: A\n    prompt: Caf\u00e9 owner\n"),
    ],
)
def test_a_utf8_byte_order_mark_is_accepted(tmp_path: Path, suffix: str, text: str) -> None:
    path = tmp_path / f"team{suffix}"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    spec = load_team_file(path)
    assert spec.name == "t" and spec.cards[0].config.prompt.template == "Caf\u00e9 owner"  # type: ignore[attr-defined]
    team_answers(spec)


@pytest.fixture
def untrusted_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Path]]:
    """A module on sys.path that leaves a marker file when imported (importing runs code)."""
    name = "aklab_hardening_untrusted"
    marker = tmp_path / "imported"
    (tmp_path / f"{name}.py").write_text(
        "from pathlib import Path\n"
        "from aklab.tools import ToolCard\n"
        f"Path({str(marker)!r}).write_text('ran')\n"
        "class Tool(ToolCard):\n    pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv(TRUST_ENV, raising=False)
    yield name, marker
    sys.modules.pop(name, None)


def test_a_tool_from_an_untrusted_module_is_refused_without_importing_it(
    untrusted_module: tuple[str, Path],
) -> None:
    name, marker = untrusted_module
    data = {"name": "t", "entry": "A", "roles": [{"role": "A", "tools": [f"{name}.Tool"]}]}
    with pytest.raises(ConfigError) as info:
        team_from_dict(data, source="team.toml")
    assert f"trust=[{name!r}]" in one_line(info.value)
    assert not marker.exists() and name not in sys.modules
    team_answers()


def test_a_module_trusted_by_the_loader_or_the_environment_is_imported(
    untrusted_module: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name, marker = untrusted_module
    path = tmp_path / "team.toml"
    path.write_text(f'{HEAD}{ROLE_A}tools = ["{name}.Tool"]\n')
    spec = load_team_file(path, trust=[name])
    assert marker.read_text() == "ran" and type(spec.cards[0].config.tools[0]).__module__ == name  # type: ignore[attr-defined]
    monkeypatch.setenv(TRUST_ENV, f"other, {name}")
    team_answers(load_team_file(path))


# -- ModelConfig and its neighbours -----------------------------------------------------------

MODEL_CASES: list[tuple[str, Callable[[], Any], list[str]]] = [
    ("model-int", lambda: ModelConfig(model=123), ["ModelConfig: model: got int 123", "give a model name"]),
    ("model-list", lambda: ModelConfig(model=["gpt"]), ["ModelConfig: model: got list", "give a model name"]),
    ("model-none", lambda: ModelConfig(model=None), ["ModelConfig: model: got NoneType", "give a model name"]),
    ("model-empty", lambda: ModelConfig(provider="demo", model=""), ["ModelConfig: model: empty", "give a model"]),
    ("model-blank", lambda: ModelConfig(provider="openai", model="  "), ["model: empty", "give a model name"]),
    ("provider-empty", lambda: ModelConfig(provider=""), ["ModelConfig: provider:", "give a provider"]),
    *[
        (f"{field}-{value}", (lambda f=field, v=value: ModelConfig(**{f: v})), [f"ModelConfig: {field}: ", fix])
        for field, value, fix in [
            ("timeout", math.inf, "give a finite number"),
            ("timeout", math.nan, "give a finite number"),
            ("timeout", -1.0, "greater than 0"),
            ("timeout", 0, "greater than 0"),
            ("temperature", math.nan, "give a finite number"),
            ("temperature", math.inf, "give a finite number"),
            ("temperature", -0.5, "greater than or equal to 0"),
            ("max_tokens", 0, "greater than 0"),
            ("max_tokens", -5, "greater than 0"),
            ("context_length", -1, "greater than 0"),
            ("retries", -1, "greater than or equal to 0"),
            ("demo_latency", math.nan, "give a finite number"),
        ]
    ],
    (
        "base-url-scheme",
        lambda: ModelConfig(base_url="ftp://gpu-box/v1"),
        ["base_url: 'ftp://gpu-box/v1': give an http"],
    ),
    (
        "base-url-no-scheme",
        lambda: ModelConfig.parse("ollama:qwen3", base_url="127.0.0.1:11434/v1"),
        ["model 'ollama:qwen3': base_url:", "did you mean http://127.0.0.1:11434/v1?"],
    ),
    ("base-url-port", lambda: ModelConfig(base_url="http://127.0.0.1:port/v1"), ["is not a URL", "give one such as"]),
    ("base-url-host", lambda: ModelConfig(base_url="http:///v1"), ["base_url: 'http:///v1': give an http"]),
    ("parse-nan", lambda: ModelConfig.parse("demo:aklab-demo", timeout=math.nan), ["model 'demo:aklab-demo': timeout"]),
    ("parse-inf", lambda: ModelConfig.parse("openai:gpt-4.1", temperature=math.inf), ["temperature: got inf"]),
    ("runtime-timeout", lambda: RuntimeConfig(http_timeout=math.inf), ["RuntimeConfig: http_timeout: got inf"]),
    ("runtime-retries", lambda: RuntimeConfig(retries=-2), ["RuntimeConfig: retries:", "greater than or equal"]),
    ("compaction-ratio", lambda: CompactionConfig(trigger_ratio=1.5), ["CompactionConfig: trigger_ratio:"]),
    ("compaction-nan", lambda: CompactionConfig(trigger_ratio=math.nan), ["trigger_ratio: got nan"]),
    ("compaction-keep", lambda: CompactionConfig(keep_last=-1), ["CompactionConfig: keep_last:"]),
]


@pytest.mark.parametrize(("name", "make", "parts"), MODEL_CASES, ids=[c[0] for c in MODEL_CASES])
def test_a_bad_model_setting_is_one_line_naming_the_field(name: str, make: Callable[[], Any], parts: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        make()
    message = one_line(info.value)
    for part in parts:
        assert part in message
    team_answers()


# -- magic arguments ----------------------------------------------------------------------------


@pytest.fixture
def shell() -> Iterator[InteractiveShell]:
    ip = InteractiveShell.instance()
    ip.run_cell("%load_ext aklab")  # type: ignore[no-untyped-call]
    yield ip
    set_lab(None)


def run(shell: InteractiveShell, capsys: pytest.CaptureFixture[str], source: str) -> str:
    shell.run_cell(source)  # type: ignore[no-untyped-call]
    return capsys.readouterr().out


@pytest.mark.parametrize("value", ["inf", "=-inf", "nan", "NaN", "-1", "0", "soon", "1e999", "''"])
def test_a_bad_ask_timeout_is_refused_before_anything_is_sent(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    lab = get_lab()
    sent = len(lab.transcript())
    flag = f"--timeout{value}" if value.startswith("=") else f"--timeout {value}"
    out = run(shell, capsys, f"%%ask {flag}\nPlan the login page.\n")
    assert re.fullmatch(r"aklab: --timeout must be a positive number of seconds, e\.g\. --timeout 60 \(got .*\)\n", out)
    assert len(lab.transcript()) == sent and lab.wait(5)
    assert "@Manager (response):" in run(shell, capsys, "%%ask --timeout 30\nPlan the login page.\n")


@pytest.mark.parametrize(
    ("options", "part"),
    [
        ("--timeout nan", "timeout: got nan; give a finite number"),
        ("--timeout inf", "timeout: got inf; give a finite number"),
        ("--temperature inf", "temperature: got inf; give a finite number"),
        ("--max-tokens 0", "max_tokens: Input should be greater than 0 (got 0)"),
        ("--context-length -5", "context_length: Input should be greater than 0 (got -5)"),
    ],
)
def test_a_bad_model_option_in_the_magic_keeps_the_running_team(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str], options: str, part: str
) -> None:
    before = get_lab()
    out = run(shell, capsys, f"%aklab model demo:aklab-demo {options}")
    assert out == f"aklab: model 'demo:aklab-demo': {part}\n"
    assert get_lab() is before
    assert "@Manager (response):" in run(shell, capsys, "%%ask\nPlan the login page.\n")


# -- private commands ---------------------------------------------------------------------------

BIG = "x" * 400_000


class DumpTool(ToolCard):
    """A card with a private command (agent code only) and a public one."""

    def get_commands(self, host: ToolHost) -> list[Callable[..., Any]]:
        def _dump(text: str = "") -> str:
            return BIG

        def shout(text: str) -> str:
            """Shout the text."""
            return text.upper()

        return [_dump, shout]


@pytest.mark.parametrize("text", ["/_dump", "/_dump everything", "/_expand_media_refs !!**/*.png", "/_"])
def test_a_private_command_is_not_dispatchable_but_code_can_call_it(text: str) -> None:
    registry = CommandRegistry()
    for command in DumpTool().get_commands(None):  # type: ignore[arg-type]
        registry.register(command, card="DumpTool")
    with pytest.raises(CommandNotRecognized, match=r"no command '_"):
        registry.dispatch(text)
    assert registry.names() == ["shout"] and [d.name for d in registry.descriptors()] == ["shout"]
    assert registry.has("_dump") and registry.callable("_dump")() == BIG
    assert registry.dispatch("/shout hi") == "HI"


def test_a_human_typing_a_private_command_reaches_the_model_as_text() -> None:
    spec = TeamSpec("t", [card("Solo", tools=[DumpTool()])], "Solo")
    with Lab(spec) as lab:
        [reply] = lab.ask("/_dump", timeout=20)
        assert len(reply.content) < 10_000 and BIG[:100] not in reply.content
        agent = lab.system.proxy_ask(lab.entry, BaseAgent)
        assert "_dump" not in [d.name for d in agent.commands()]
        assert agent.call_command("_dump") == BIG  # agent code still reaches it
        with pytest.raises(CommandNotRecognized):
            agent.run_command("/_dump")
        [again] = lab.ask("Plan the login page", timeout=20)
        assert again.content


# -- compaction on by default ---------------------------------------------------------------------


def _fill(agent: ReactAgent, runs: int) -> None:
    for i in range(runs):
        agent.messages += [
            ModelRequest(parts=[UserPromptPart(f"question {i} " + "x" * 400)]),
            ModelResponse(parts=[TextPart(f"answer {i}")]),
        ]


@pytest.mark.parametrize(
    ("spec", "window"),
    [("demo:aklab-demo", 8_192), ("local:smollm2", 4_096), ("openai-compatible:m", 8_192)],
)
def test_every_model_has_a_context_length_so_compaction_is_on_by_default(spec: str, window: int) -> None:
    options = {"base_url": "http://127.0.0.1:9/v1"} if spec.startswith("openai-compatible") else {}
    agent = ReactAgent(name="@A", model_cfg=ModelConfig.parse(spec, **options))
    try:
        assert agent.profile.context_length == window
        _fill(agent, 100)
        agent._context_size = int(window * 0.9)  # the last request filled 90% of the window
        assert agent.maybe_compact() > 0 and len(agent.messages) <= 2 * 8
    finally:
        agent.close()


def test_a_long_demo_session_stays_bounded_with_default_settings() -> None:
    agent = ReactAgent(name="@A", model_cfg=ModelConfig(), system_prompt="You are A.")
    try:
        longest = 0
        for i in range(150):
            agent.maybe_compact()
            assert agent.run_sync(f"question {i} " + "y" * 200, output_type=str)
            longest = max(longest, len(agent.messages))
        assert agent._context_size < 8_192 and longest < 300
    finally:
        agent.close()


def test_a_users_context_length_wins_and_compaction_can_be_turned_off() -> None:
    agent = ReactAgent(name="@A", model_cfg=ModelConfig(context_length=100_000))
    off = ReactAgent(name="@B", model_cfg=ModelConfig(), compaction_cfg=CompactionConfig(enabled=False))
    try:
        assert agent.profile.context_length == 100_000
        _fill(off, 100)
        off._context_size = 8_000
        assert off.maybe_compact() == 0 and len(off.messages) == 200
        assert off.compact() > 0  # by hand, it still works
    finally:
        agent.close()
        off.close()
