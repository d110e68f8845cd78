"""``python -m aklab demo --model SPEC``: the demo's questions on any model, from a shell.

The model is ``ollama:`` on the loopback fake, through pydantic-ai's real OpenAI provider."""

from __future__ import annotations

import io

import pytest

from aklab.__main__ import main, run_model_demo
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
