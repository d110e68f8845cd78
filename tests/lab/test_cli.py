"""``python -m aklab demo``: the demo exchange from a shell, on the demo model or any model (``--model SPEC``).

With ``--model`` the model is ``ollama:`` on the loopback fake, through pydantic-ai's real OpenAI provider."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

import aklab
from aklab.__main__ import main, run_model_demo
from aklab.lab.console import run_demo
from tests.fakeserver import FakeOpenAI, echo, http_error


@pytest.fixture(autouse=True)
def _no_store(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AKLAB_STORE", "off")


def test_the_demo_asks_its_questions_of_the_model_named(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeOpenAI(model_ids=("qwen3:latest",)) as fake:
        fake.default = echo
        monkeypatch.setenv("OLLAMA_HOST", f"127.0.0.1:{fake.port}")
        out = io.StringIO()
        assert run_model_demo("ollama:qwen3", ["What is 2+2?", "And 3+3?"], out) == 0
        text = out.getvalue()
        assert "aklab demo: team 'dev-team' on ollama:qwen3" in text and "warning" not in text
        assert "== @Human asks: What is 2+2?" in text and "OK: What is 2+2?" in text and "OK: And 3+3?" in text
        assert "ollama:qwen3" in text.split("Usage:")[1]
        assert len(fake.bodies) == 2


def test_a_model_that_only_fails_ends_the_demo_with_status_1_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeOpenAI(model_ids=("llama3.2:3b",)) as fake:
        fake.default = lambda body: http_error(404, 'model "qwen3" not found, try pulling it first')
        monkeypatch.setenv("OLLAMA_HOST", f"127.0.0.1:{fake.port}")
        out = io.StringIO()
        assert run_model_demo("ollama:qwen3", ["What is 2+2?"], out) == 1
        text = out.getvalue()
    assert text.startswith("warning: Ollama at ") and "ollama pull qwen3 fetches it" in text
    assert "try pulling it first" in text  # the notice the ask ended in
    assert text.rstrip().endswith("error: no question got an answer, only notices (see them above)")


def test_a_bad_spec_is_one_line_and_local_with_model_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--model", "nosuch:thing"]) == 1
    assert capsys.readouterr().out.startswith("error: ")
    with pytest.raises(SystemExit) as exit_:
        main(["demo", "--local", "--model", "ollama:qwen3"])
    assert exit_.value.code == 2 and "give --local or --model SPEC, not both" in capsys.readouterr().err


def test_the_offline_demo_says_where_it_recorded_the_exchange_and_how_to_read_it_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AKLAB_STORE")
    out = io.StringIO()
    assert run_demo("Plan the login page.", out) == 0
    last = out.getvalue().rstrip().splitlines()[-2:]
    team = aklab.history().asks["team_id"].iloc[0]
    assert last == [
        f"Recorded in the event store (sqlite:.aklab/events.sqlite3) as team {team[:8]}:",
        f"aklab.history() reads it back; %aklab resume {team[:8]} takes the team up again in a notebook.",
    ]


def test_the_offline_demo_says_when_it_recorded_nothing_and_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = io.StringIO()
    assert run_demo("Plan the login page.", out) == 0
    assert out.getvalue().rstrip().endswith("Not recorded: the event store is off (AKLAB_STORE).")
    blocked = tmp_path / "file"
    blocked.write_text("")
    monkeypatch.setenv("AKLAB_STORE", str(blocked / "events.sqlite3"))  # a folder that cannot be made
    out = io.StringIO()
    assert run_demo("Plan the login page.", out) == 0
    last = out.getvalue().rstrip().splitlines()[-1]
    assert last.startswith("warning: the event store could not be opened: ") and "runs in memory only" in last
