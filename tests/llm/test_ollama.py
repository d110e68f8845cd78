"""``ollama:NAME``: Ollama's server, found where ``$OLLAMA_HOST`` says (else its default port).

The server is the loopback fake standing in for Ollama's OpenAI-compatible API; the client
is pydantic-ai's real ``OpenAIChatModel``, built by aklab from the spec as a user would."""

from __future__ import annotations

from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell

from aklab.agent import Notice
from aklab.errors import ConfigError
from aklab.lab import Lab, get_lab, set_lab
from aklab.llm import ModelConfig
from aklab.llm.profiles import resolve
from aklab.llm.profiles.ollama import DEFAULT_BASE_URL, base_url_from_host
from tests.fakeserver import FakeOpenAI, echo, http_error


@pytest.fixture(autouse=True)
def _no_store(monkeypatch: pytest.MonkeyPatch) -> None:
    """The magics' labs keep nothing: these tests are about the model, not the store."""
    monkeypatch.setenv("AKLAB_STORE", "off")


@pytest.mark.parametrize(
    ("host", "url"),
    [
        (None, "http://127.0.0.1:11434/v1"),
        ("", "http://127.0.0.1:11434/v1"),
        ("127.0.0.1:8081", "http://127.0.0.1:8081/v1"),
        ("0.0.0.0", "http://127.0.0.1:11434/v1"),  # listening everywhere: reached here
        ("0.0.0.0:9000", "http://127.0.0.1:9000/v1"),
        ("gpu-box", "http://gpu-box:11434/v1"),
        ("https://ollama.example.org", "https://ollama.example.org:443/v1"),
        ("http://gpu-box:11434/ollama/", "http://gpu-box:11434/ollama/v1"),
        ("[::1]:11500", "http://[::1]:11500/v1"),
    ],
)
def test_the_endpoint_is_read_from_ollama_host_as_ollamas_cli_reads_it(host: str | None, url: str) -> None:
    assert base_url_from_host(host) == url


@pytest.mark.parametrize("host", ["127.0.0.1:port", "ftp://gpu-box"])
def test_a_bad_ollama_host_is_one_line_naming_the_variable(host: str) -> None:
    with pytest.raises(ConfigError, match="OLLAMA_HOST="):
        base_url_from_host(host)


def test_the_spec_builds_ollamas_dialect_with_its_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OLLAMA_HOST", raising=False)
    r = resolve(ModelConfig.parse("ollama:llama3.2:3b"))
    assert (r.profile.family, r.profile.label, r.profile.output_mode) == ("ollama", "ollama:llama3.2:3b", "prompted")
    assert r.profile.local and r.profile.context_length == 4096
    assert r.settings.get("max_tokens") == 2048 and "temperature" not in r.settings  # the Modelfile's own
    assert str(r.model.base_url) == DEFAULT_BASE_URL + "/"  # type: ignore[attr-defined]
    r.close()
    remote = resolve(ModelConfig.parse("ollama:qwen3", base_url="http://gpu-box:11434/v1", max_tokens=64))
    assert not remote.profile.local and remote.settings.get("max_tokens") == 64
    remote.close()


def test_a_team_on_ollama_answers_through_the_server_ollama_host_names(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeOpenAI(model_ids=("qwen3:4b",)) as fake:
        fake.default = echo
        monkeypatch.setenv("OLLAMA_HOST", f"127.0.0.1:{fake.port}")
        with Lab(model="ollama:qwen3:4b", store=False) as lab:
            result = lab.ask("What is 2+2?", timeout=30)
            assert [m.content for m in result.answers] == ["OK: What is 2+2?"]
            usage = lab.usage(by="request")
        [body] = fake.bodies
        assert (body["model"], body["max_tokens"]) == ("qwen3:4b", 2048) and "temperature" not in body
        assert list(usage["model"]) == ["ollama:qwen3:4b"] and list(usage["cost_source"]) == ["local"]
        assert list(usage["cost_usd"]) == [0.0]


def test_a_model_ollama_has_not_pulled_is_a_notice_that_says_so_and_the_team_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with FakeOpenAI(model_ids=("qwen3",)) as fake:
        fake.default = echo
        fake.push(http_error(404, 'model "qwen3" not found, try pulling it first'))
        monkeypatch.setenv("OLLAMA_HOST", f"127.0.0.1:{fake.port}")
        with Lab(model=ModelConfig.parse("ollama:qwen3", retries=0), store=False) as lab:
            first = lab.ask("hello", timeout=30)
            [notice] = first.notices
            assert isinstance(notice, Notice)
            assert (
                'the model or endpoint was not found (HTTP 404: model "qwen3" not found, try pulling it first); '
                "check the model name and base_url"
            ) in notice.content
            assert [m.content for m in lab.ask("again", timeout=30).answers] == ["OK: again"]


def test_the_magic_switches_to_ollama_and_list_names_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeOpenAI(model_ids=("qwen3",)) as fake:
        fake.default = echo
        monkeypatch.setenv("OLLAMA_HOST", f"127.0.0.1:{fake.port}")
        ip = InteractiveShell.instance()
        ip.run_cell("%load_ext aklab")
        try:
            assert ip.run_cell("%aklab model ollama:qwen3").error_in_exec is None
            status = capsys.readouterr().out
            assert "models: ollama:qwen3" in status and f"model server: {fake.url} (ollama:qwen3)" in status
            assert ip.run_cell("%aklab list").error_in_exec is None
            listed = capsys.readouterr().out
            assert any(line.split()[:2] == ["ollama", "4,096"] for line in listed.splitlines())
            lab = get_lab()
            assert [m.content for m in lab.ask("ping", timeout=30).answers] == ["OK: ping"]
        finally:
            set_lab(None)


def _switch(capsys: pytest.CaptureFixture[str], spec: str) -> str:
    ip = InteractiveShell.instance()
    ip.run_cell("%load_ext aklab")
    try:
        assert ip.run_cell(f"%aklab model {spec}").error_in_exec is None  # a warning, never a failed switch
        return capsys.readouterr().out
    finally:
        set_lab(None)


def test_switching_to_a_model_ollama_has_not_pulled_says_so_at_once(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeOpenAI(model_ids=("llama3.2:3b", "qwen3:latest")) as fake:
        monkeypatch.setenv("OLLAMA_HOST", f"127.0.0.1:{fake.port}")
        out = _switch(capsys, "ollama:mistral")
        said = f"Ollama at http://127.0.0.1:{fake.port} has no model 'mistral' (it has: llama3.2:3b, qwen3:latest)"
        assert f"warning: {said}; ollama pull mistral fetches it" in out
        assert "models: ollama:mistral" in out  # switched all the same
        for pulled in ("qwen3", "qwen3:latest", "llama3.2:3b"):
            assert "warning" not in _switch(capsys, f"ollama:{pulled}")


def test_switching_to_a_server_that_is_not_up_says_so_at_once(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeOpenAI() as gone:
        port = gone.port  # a loopback port nothing listens on once the fake is closed
    monkeypatch.setenv("OLLAMA_HOST", f"127.0.0.1:{port}")
    nothing = f"warning: nothing answers at http://127.0.0.1:{port} yet"
    assert (
        f"{nothing} (start it: ollama serve); the team's asks fail until it does (check the address: --base-url, "
        "$OLLAMA_HOST)"
    ) in _switch(capsys, "ollama:qwen3")
    compatible = f"openai-compatible:fake --base-url http://127.0.0.1:{port}/v1"
    assert f"{nothing}; the team's asks fail" in _switch(capsys, compatible)
    with FakeOpenAI(model_ids=("anything",)) as up:  # llama.cpp answers whatever model a request names
        assert "warning" not in _switch(capsys, f"local:qwen3 --base-url {up.url}")


def test_a_team_file_or_a_resume_on_a_server_that_is_not_up_says_so_at_once(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`%aklab team FILE` and `%aklab resume` check the servers their models name as `%aklab
    model` does (once per server), instead of leaving it to the first ask's notice."""
    monkeypatch.setenv("AKLAB_STORE", str(tmp_path / "events.sqlite3"))  # the tests' default keeps none
    with FakeOpenAI(model_ids=("llama3.2:3b",)) as fake:
        monkeypatch.setenv("OLLAMA_HOST", f"127.0.0.1:{fake.port}")
        team = tmp_path / "pair.toml"
        team.write_text(
            'name = "pair"\nentry = "Lead"\nmodel = "ollama:qwen3"\n'
            '[[roles]]\nrole = "Lead"\nroutes_to = ["Helper"]\n[[roles]]\nrole = "Helper"\n'
        )
        ip = InteractiveShell.instance()
        ip.run_cell("%load_ext aklab")
        try:
            assert ip.run_cell(f"%aklab team {team}").error_in_exec is None
            out = capsys.readouterr().out
            assert out.count("warning: ") == 1 and "has no model 'qwen3' (it has: llama3.2:3b)" in out
            get_lab().send("ping")  # asked once, so that a resume finds it
            get_lab().wait(10)
            set_lab(None)
        finally:
            set_lab(None)
    nothing = f"warning: nothing answers at http://127.0.0.1:{fake.port} yet (start it: ollama serve)"
    try:
        assert ip.run_cell("%aklab resume").error_in_exec is None
        out = capsys.readouterr().out
        assert "resumed team 'pair'" in out and nothing in out and "%aklab resume TEAM --model SPEC" in out
    finally:
        set_lab(None)


def test_tab_after_ollama_offers_the_models_the_server_has(monkeypatch: pytest.MonkeyPatch) -> None:
    import warnings

    from IPython.core.completer import provisionalcompleter

    def complete(line: str) -> list[str]:
        with warnings.catch_warnings(), provisionalcompleter():
            return [c.text for c in ip.Completer.completions(line, len(line))]

    ip = InteractiveShell.instance()
    ip.run_cell("%load_ext aklab")
    with FakeOpenAI(model_ids=("llama3.2:3b", "qwen3:latest")) as fake:
        monkeypatch.setenv("OLLAMA_HOST", f"127.0.0.1:{fake.port}")
        assert complete("%aklab model oll") == ["ollama:"]
        assert complete("%aklab model ollama:") == ["ollama:llama3.2:3b", "ollama:qwen3:latest"]
        assert complete("%aklab model ollama:q") == ["ollama:qwen3:latest"]
        port = fake.port
    # nothing answers now, or the address is bad: no model offered (IPython's own names are), nothing fails
    assert not [c for c in complete("%aklab model ollama:") if c.startswith("ollama:")]
    monkeypatch.setenv("OLLAMA_HOST", f"127.0.0.1:{port}:bad")
    assert not [c for c in complete("%aklab model ollama:") if c.startswith("ollama:")]
