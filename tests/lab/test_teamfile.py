from __future__ import annotations

from pathlib import Path

import pytest

from aklab.errors import ConfigError
from aklab.lab.session import Lab
from aklab.lab.teamfile import load_team_file
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
        ('name = "x"\nentry = "A"\n[[roles]]\nrole = "A"\ncolour = "red"\n', "roles.0.colour: Extra inputs"),
        ('name = "x"\nentry = "A"\n[[roles]]\nrole = "A"\ntools = ["Hammer"]\n', "unknown tool 'Hammer'"),
        ('name = "x"\nentry = "A"\n[[roles]]\nrole = "A"\nmodel = "gpt"\n', "must look like 'provider:model'"),
        ("name = \n", "not valid TOML"),
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
