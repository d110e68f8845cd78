from __future__ import annotations

import re
from pathlib import Path

import pytest

from aklab.errors import ConfigError
from aklab.lab.session import Lab
from aklab.lab.teamfile import load_team_file, team_from_dict
from aklab.llm import ModelConfig
from aklab.tools import PlanningTool, WorkspaceTool

TOML = """
name = "research"
entry = "Lead"
model = "demo:aklab-demo"

[[roles]]
role = "Lead"
description = "Plans and reports"
prompt = "You are the Lead."
routes_to = ["Researcher"]
tools = ["PlanningTool", { type = "WorkspaceTool", root = "WS" }]

[[roles]]
role = "Researcher"
description = "Finds things out"
prompt = "You are a Researcher."
model = "demo:other"
run_usage_limits = { run_request_limit = 5 }
"""


def test_a_toml_team_file_describes_roles_tools_models_and_the_entry(tmp_path: Path) -> None:
    path = tmp_path / "team.toml"
    path.write_text(TOML.replace("WS", str(tmp_path / "ws")))
    spec = load_team_file(path)
    lead, researcher = spec.cards
    assert (spec.name, spec.entry, lead.routes_to) == ("research", "Lead", ["Researcher"])
    assert [type(t) for t in lead.config.tools] == [PlanningTool, WorkspaceTool]  # type: ignore[attr-defined]
    assert researcher.config.model_cfg.label == "demo:other"  # type: ignore[attr-defined]
    assert researcher.config.run_usage_limits.run_request_limit == 5  # type: ignore[attr-defined]
    with Lab(spec) as lab:
        [reply] = lab.ask("Find out about tides", timeout=20)
        assert "Researcher result" in reply.content


def test_a_model_may_be_a_table_with_options_and_a_role_replaces_the_teams(tmp_path: Path) -> None:
    path = tmp_path / "team.toml"
    path.write_text(
        'name = "local"\nentry = "A"\n'
        '[model]\nspec = "local:smollm2"\nmax_tokens = 64\ntimeout = 30\noutput_mode = "prompted"\n'
        '[[roles]]\nrole = "A"\nroutes_to = ["B", "C"]\n'
        '[[roles]]\nrole = "B"\nmodel = "openai:gpt-4.1"\n'
        '[[roles]]\nrole = "C"\n'
        'model = { spec = "openai-compatible:qwen3", base_url = "http://gpu:8000/v1", api_key_env = "GPU_KEY",'
        " temperature = 0.1, retries = 0, context_length = 8192 }\n"
    )
    a, b, c = (card.config.model_cfg for card in load_team_file(path).cards)  # type: ignore[attr-defined]
    assert a == ModelConfig(provider="local", model="smollm2", max_tokens=64, timeout=30, output_mode="prompted")
    assert b == ModelConfig(provider="openai", model="gpt-4.1")
    assert c == ModelConfig(
        provider="openai-compatible",
        model="qwen3",
        base_url="http://gpu:8000/v1",
        api_key_env="GPU_KEY",
        temperature=0.1,
        retries=0,
        context_length=8192,
    )


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ({"max_tokens": 5}, 'roles.0.model: a model table needs spec = "provider:model"'),
        ({"spec": "local:x", "colour": "red"}, "roles.0.model: model 'local:x': unknown option 'colour'"),
        ({"spec": "local:x", "output_mode": "json"}, "unknown output_mode 'json': use one of auto, tool,"),
        ({"spec": "local:x", "max_tokens": "many"}, "max_tokens: Input should be a valid integer"),
    ],
)
def test_mistakes_in_a_model_table_are_clear_errors(model: dict[str, object], message: str) -> None:
    data = {"name": "x", "entry": "A", "roles": [{"role": "A", "model": model}]}
    with pytest.raises(ConfigError, match=re.escape(message)) as info:
        team_from_dict(data, source="team.toml")
    assert str(info.value).startswith("team.toml: ") and "\n" not in str(info.value)


def test_the_same_team_in_yaml(tmp_path: Path) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(
        "name: pair\nentry: A\nroles:\n  - role: A\n    routes_to: [B]\n  - role: B\n    prompt: You are B.\n"
    )
    spec = load_team_file(path)
    assert [c.role for c in spec.cards] == ["A", "B"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('name = "x"\nentry = "A"\n[[roles]]\nrole = "B"\n', "role 'A' is used but not defined"),
        (
            'name = "x"\nentry = "A"\n[[roles]]\nrole = "A"\ncolour = "red"\n',
            r"roles\.0\.colour: unknown key \(known: role, ",
        ),
        (
            'name = "x"\nentry = "A"\n[[roles]]\nrole = "A"\npromt = "Hi"\n',
            r"roles\.0\.promt: unknown key \(did you mean 'prompt'\?\)",
        ),
        (
            'name = "x"\nentry = "A"\n[[rolse]]\nrole = "A"\n',
            r"team\.toml: rolse: unknown key \(did you mean 'roles'\?\)",
        ),
        (
            'name = "x"\nentry = "A"\n[[roles]]\nrole = "A"\n[roles.run_usage_limits]\nrun_request_limt = 1\n',
            r"roles\.0\.run_usage_limits\.run_request_limt: unknown key \(did you mean 'run_request_limit'\?\)",
        ),
        ('name = "x"\nentry = "A"\n[[roles]]\nrole = "A"\ntools = ["Hammer"]\n', "unknown tool 'Hammer'"),
        ('name = "x"\nentry = "A"\n[[roles]]\nrole = "A"\nmodel = "gpt"\n', "must look like 'provider:model'"),
        ("name = \n", "not valid TOML"),
        (
            'name = "x"\nentry = "A"\n[[roles]]\nrole = "A"\ncommands_from_agents = "sometimes"\n',
            r"roles\.0\.commands_from_agents",
        ),
    ],
)
def test_mistakes_in_a_team_file_are_clear_errors(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "team.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_team_file(path)


def test_a_missing_or_oddly_named_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no team file"):
        load_team_file(tmp_path / "none.toml")
    odd = tmp_path / "team.txt"
    odd.write_text("x")
    with pytest.raises(ConfigError, match=r"ends in \.toml, \.yaml or \.yml"):
        load_team_file(odd)


def test_a_misspelt_limit_in_code_is_an_error_not_a_cap_silently_unset() -> None:
    from pydantic import ValidationError

    from aklab.llm import AgentUsageLimits, RunUsageLimits

    with pytest.raises(ValidationError, match="run_request_limt"):
        RunUsageLimits(run_request_limt=1)  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="agent_request_limt"):
        AgentUsageLimits(agent_request_limt=1)  # type: ignore[call-arg]


def test_misspelt_settings_in_code_are_errors_too() -> None:
    from aklab.agent import AgentConfig
    from aklab.llm import ModelConfig, PromptTemplate
    from aklab.llm.config import CompactionConfig, RuntimeConfig

    with pytest.raises(ConfigError, match="retires"):
        RuntimeConfig(retires=2)  # type: ignore[call-arg]
    with pytest.raises(ConfigError, match="enable"):
        CompactionConfig(enable=False)  # type: ignore[call-arg]
    with pytest.raises(ConfigError, match="temprature"):
        ModelConfig(temprature=0.1)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="templat"):
        PromptTemplate(templat="You are A.")  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="promt"):
        AgentConfig(name="@A", role="A", promt="You are A.")  # type: ignore[call-arg]


def test_load_team_file_is_importable_from_aklab_lab_as_the_readme_shows() -> None:
    import aklab.lab

    assert aklab.lab.load_team_file is load_team_file and "load_team_file" in aklab.lab.__all__


def test_a_role_may_obey_commands_from_other_agents_and_by_default_does_not(tmp_path: Path) -> None:
    """``commands_from_agents`` was settable only in code; a team file user had no way to it."""
    path = tmp_path / "team.toml"
    path.write_text(TOML.replace('role = "Researcher"', 'role = "Researcher"\ncommands_from_agents = true'))
    lead, researcher = load_team_file(path).cards
    assert researcher.config.commands_from_agents is True  # type: ignore[attr-defined]
    assert lead.config.commands_from_agents is False  # type: ignore[attr-defined]
