"""%aklab shows where the team is stored, %aklab teams lists stored teams, %aklab resume brings one back."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell

from aklab.lab import get_lab, set_lab


@pytest.fixture
def shell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[InteractiveShell]:
    monkeypatch.setenv("AKLAB_STORE", str(tmp_path / "events.sqlite3"))
    ip = InteractiveShell.instance()
    ip.run_cell("%load_ext aklab")
    yield ip
    set_lab(None)


def out_of(shell: InteractiveShell, capsys: pytest.CaptureFixture[str], source: str) -> str:
    result = shell.run_cell(source)
    assert result.error_in_exec is None and result.error_before_exec is None, source
    return capsys.readouterr().out


def error_of(shell: InteractiveShell, source: str) -> str:
    """The one-line error ``source`` fails with (it must fail)."""
    result = shell.run_cell(source)
    assert result.error_in_exec is not None, source
    return str(result.error_in_exec)


def test_status_teams_and_resume(shell: InteractiveShell, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert "No team stored yet" in out_of(shell, capsys, "%aklab teams")
    out_of(shell, capsys, "%ask What is 2+2?")
    assert f"store: sqlite:{tmp_path / 'events.sqlite3'}" in out_of(shell, capsys, "%aklab")
    first = get_lab()
    assert first is not None
    listing = out_of(shell, capsys, "%aklab teams")
    assert "1 team" in listing and first.team_id[:8] in listing and "dev-team" in listing
    set_lab(None)  # as after a kernel restart
    report = out_of(shell, capsys, f"%aklab resume {first.team_id[:8]}")
    assert report.startswith("resumed team 'dev-team'") and "1 earlier reply to @Human" in report
    resumed = get_lab()
    assert resumed is not None and resumed.team_id == first.team_id
    assert "@Manager (response)" in out_of(shell, capsys, "%ask What is 3+3?")
    out_of(shell, capsys, "%ask /team_members")  # an ask that makes no model request
    usage = resumed.usage()
    tokens, requests = int(usage["total_tokens"].sum()), int(usage["requests"].sum())
    listing = out_of(shell, capsys, "%aklab teams")  # both sessions' asks and requests
    assert f"3 asks, {requests} requests, {tokens:,} tokens, cost unknown (no price for the model)" in listing


def test_a_team_never_asked_anything_neither_crowds_the_listing_nor_is_resumed_for_the_one_that_was(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    out_of(shell, capsys, "%ask What is 2+2?")
    asked = get_lab()
    assert asked is not None
    set_lab(None)  # a kernel restart; then a session that only switched the model before it ended
    out_of(shell, capsys, "%aklab model demo:aklab-demo")
    unasked = get_lab()
    assert unasked is not None
    listing = out_of(shell, capsys, "%aklab teams")
    assert "2 teams" in listing and asked.team_id[:8] in listing
    assert f"{unasked.team_id[:8]}  dev-team" in listing and "(running in a lab now)" in listing  # this kernel's
    set_lab(None)  # another restart
    listing = out_of(shell, capsys, "%aklab teams")
    assert listing.startswith("1 team") and asked.team_id[:8] in listing and unasked.team_id[:8] not in listing
    assert "not listed: 1 team never asked anything; %aklab teams --all lists them" in listing
    everything = out_of(shell, capsys, "%aklab teams --all")
    assert f"{unasked.team_id[:8]}  dev-team" in everything and "(never asked anything)" in everything
    assert "not listed" not in everything
    report = out_of(shell, capsys, "%aklab resume")  # the latest team with a conversation, not the empty one
    assert report.startswith(f"resumed team 'dev-team' ({asked.team_id[:8]})")
    assert "1 earlier reply to @Human" in report


def test_resume_of_an_unknown_team_is_one_line(shell: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    out_of(shell, capsys, "%ask What is 2+2?")
    assert "no stored team 'nosuch'" in error_of(shell, "%aklab resume nosuch")


def test_forget_deletes_one_stored_team_by_id_and_refuses_a_shared_name_or_a_running_team(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import aklab
    from aklab.store import SqliteStore

    out_of(shell, capsys, "%ask What is 2+2?")
    first = get_lab()
    assert first is not None
    out_of(shell, capsys, "%aklab team dev-team")  # a second team of the same name; the first is closed
    out_of(shell, capsys, "%ask What is 3+3?")
    second = get_lab()
    assert second is not None and second.team_id != first.team_id

    shared = error_of(shell, "%aklab forget dev-team")  # two teams share the name: which one is a guess
    assert "2 stored teams match 'dev-team'" in shared
    assert first.team_id in shared and second.team_id in shared
    running = error_of(shell, f"%aklab forget {second.team_id[:8]}")  # this kernel runs it
    assert f"team {second.team_id[:8]} ('dev-team') is the team this notebook runs" in running
    assert running.endswith(f"start another first (%aklab team dev-team), then %aklab forget {second.team_id[:8]}")
    assert "name the team to delete" in error_of(shell, "%aklab forget")
    capsys.readouterr()  # the three one-line errors

    report = out_of(shell, capsys, f"%aklab forget {first.team_id[:8]}")
    assert report.startswith(f"forgot team 'dev-team' ({first.team_id[:8]}):") and " records deleted from " in report
    with SqliteStore(tmp_path / "events.sqlite3") as store:
        assert [t.team_id for t in store.teams()] == [second.team_id]
        assert store.records(first.team_id) == [] and store.records(second.team_id) != []
    assert list(aklab.history(store=tmp_path / "events.sqlite3").asks.question) == ["What is 3+3?"]
    assert "@Manager (response)" in out_of(shell, capsys, "%ask And 4+4?")  # the running team is untouched


def test_readers_in_a_folder_with_no_store_say_where_they_looked_and_create_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import aklab
    from aklab.errors import ConfigError
    from aklab.lab import Lab

    elsewhere = tmp_path / "another-folder"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # a kernel started outside the notebook's folder
    monkeypatch.delenv("AKLAB_STORE", raising=False)
    for read in (aklab.history, lambda: aklab.forget("dev-team")):
        with pytest.raises(ConfigError, match=rf"no event store at {elsewhere}/.aklab/events.sqlite3: .*per project"):
            read()
    ip = InteractiveShell.instance()
    ip.run_cell("%load_ext aklab")
    assert ip.run_cell("%aklab teams").error_in_exec is None
    assert f"No team stored yet: no event store at {elsewhere}" in capsys.readouterr().out
    assert not (elsewhere / ".aklab").exists()  # nothing was created by reading
    with pytest.raises(ConfigError, match=rf"no team is stored in .*: start one .*now {elsewhere}"):
        Lab.resume()  # resume opens the store to run in it: the hint names the folder


def test_tab_offers_the_stored_teams_after_resume_and_forget(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from tests.lab.test_magics_help import complete

    assert "dev-team" not in complete(shell, "%aklab resume ")  # no store file yet: none offered, none created
    assert not (tmp_path / "events.sqlite3").exists()
    out_of(shell, capsys, "%ask What is 2+2?")
    lab = get_lab()
    assert lab is not None
    short = lab.team_id[:8]
    assert sorted(complete(shell, "%aklab resume ")) == sorted([short, "dev-team"])  # IPython orders them
    assert complete(shell, f"%aklab forget {short[:3]}") == [short]
    assert complete(shell, "%aklab forget dev") == ["dev-team"]
    monkeypatch.setenv("AKLAB_STORE", "off")
    assert short not in complete(shell, "%aklab resume ")


def test_teams_lists_without_checking_the_whole_file(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Listing reads the teams table; the whole-file check (seconds on a large store) is left to resume."""
    from aklab.store import SqliteStore

    out_of(shell, capsys, "%ask What is 2+2?")
    set_lab(None)

    def no_check(self: SqliteStore) -> None:
        raise AssertionError("%aklab teams checked the whole file")

    monkeypatch.setattr(SqliteStore, "_verify", no_check)
    assert "1 team" in out_of(shell, capsys, "%aklab teams")


def test_recover_repairs_a_damaged_store_keeps_what_precedes_the_damage_and_leaves_a_sound_one_alone(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "events.sqlite3"
    assert out_of(shell, capsys, "%aklab recover") == f"No event store at {path}: nothing to recover.\n"
    out_of(shell, capsys, "%ask What is 2+2?")
    first = get_lab()
    assert first is not None
    stored = len(first.store.records(first.team_id)) if first.store is not None else 0
    assert stored > 0
    first.close()
    set_lab(None)  # as after a kernel restart
    assert "is not damaged (every page checked)" in out_of(shell, capsys, "%aklab recover")  # left alone
    size = path.stat().st_size
    with path.open("r+b") as f:  # the tail of the file lost (a disk that filled up, a copy cut short)
        f.truncate(size - 4096)

    assert "%aklab recover" in error_of(shell, "%aklab teams")
    capsys.readouterr()

    report = out_of(shell, capsys, "%aklab recover")
    assert report.startswith("recovered ") and f"into {path}" in report and "damaged file is kept as" in report
    assert "%aklab resume brings the latest team back" in report
    kept = int(report.removeprefix("recovered ").split(" ", 1)[0].replace(",", ""))
    assert 0 < kept <= stored  # what precedes the damage; the lost page's records are gone
    damaged = [
        p
        for p in tmp_path.iterdir()
        if p.name.startswith("events.sqlite3.damaged-") and not p.name.endswith(("-wal", "-shm"))
    ]
    assert len(damaged) == 1 and damaged[0].stat().st_size == size - 4096  # kept aside as it was
    listing = out_of(shell, capsys, "%aklab teams")
    assert "1 team" in listing and first.team_id[:8] in listing
    resumed = out_of(shell, capsys, f"%aklab resume {first.team_id[:8]}")
    assert resumed.startswith("resumed team 'dev-team'")
    assert "@Manager (response)" in out_of(shell, capsys, "%ask What is 3+3?")
    again = get_lab()
    assert again is not None
    again.close()
    assert "is not damaged" in out_of(shell, capsys, "%aklab recover")  # the recovered store takes appends


def test_recover_refuses_while_a_lab_runs_a_team_of_the_damaged_store(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out_of(shell, capsys, "%ask What is 2+2?")
    lab = get_lab()
    assert lab is not None
    path = tmp_path / "events.sqlite3"
    lab.wait(10)
    with path.open("r+b") as f:  # damaged under a running lab
        f.truncate(path.stat().st_size // 2)
    damaged = path.stat().st_size
    message = error_of(shell, "%aklab recover")
    assert f"team {lab.team_id[:8]} of {path} is running in a lab" in message and "stop them first" in message
    assert path.stat().st_size == damaged and not [p for p in tmp_path.iterdir() if ".damaged-" in p.name]  # left as is


def test_recover_says_what_it_does_not_do(monkeypatch: pytest.MonkeyPatch, shell: InteractiveShell) -> None:
    monkeypatch.setenv("AKLAB_STORE", "postgresql://user@127.0.0.1:1/aklab")
    assert "this project's store is PostgreSQL" in error_of(shell, "%aklab recover")


def test_transcript_after_a_resume_reads_the_conversation_before_it_back(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    out_of(shell, capsys, "%ask What is 2+2?")
    out_of(shell, capsys, "%ask @Developer Write the validation.")
    before = out_of(shell, capsys, "%transcript").splitlines()
    assert len(before) == 6 and before[0] == "@Human → @Manager (request): What is 2+2?"
    set_lab(None)  # as after a kernel restart
    out_of(shell, capsys, "%aklab resume")
    assert out_of(shell, capsys, "%transcript").splitlines() == before  # read back from the store
    out_of(shell, capsys, "%ask What is 3+3?")
    lines = out_of(shell, capsys, "%transcript").splitlines()
    assert lines[:6] == before and len(lines) == 10 and lines[6] == "@Human → @Manager (request): What is 3+3?"
    last = out_of(shell, capsys, "%transcript --last 2").splitlines()
    assert last == ["(the newest 2 shown; %transcript --last N shows more)", *lines[-2:]]
    developer = out_of(shell, capsys, "%transcript Developer --last 3").splitlines()
    involved = [line for line in lines if line.startswith("@Developer →") or " → @Developer " in line]
    assert developer == ["(the newest 3 shown; %transcript --last N shows more)", *involved[-3:]]
    assert "expected a number of messages >= 1, not '0'" in error_of(shell, "%transcript --last 0")


def test_transcript_says_when_memory_let_messages_go_and_no_store_keeps_them(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import aklab.lab.recorder as recorder
    from aklab.lab import Lab

    monkeypatch.setattr(recorder, "TRANSCRIPT_LIMIT", 4)
    set_lab(Lab(store=False))
    for question in ("One?", "Two?", "Three?"):
        out_of(shell, capsys, f"%ask {question}")
    lines = out_of(shell, capsys, "%transcript").splitlines()
    assert lines[0].startswith("(the newest 4 shown; older ones are not kept: ") and len(lines) == 5
    assert lines[-1].startswith("@Manager → @Human (response)") and "Three?" in lines[-1]


def test_context_after_a_resume_reads_the_blocks_before_it_back(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    out_of(shell, capsys, "%ask What is 2+2?")
    out_of(shell, capsys, "%ask What is 3+3?")
    before = out_of(shell, capsys, "%context")
    blocks = get_lab().context()
    assert before.count("── @") == len(blocks) >= 2
    set_lab(None)  # as after a kernel restart
    out_of(shell, capsys, "%aklab resume")
    assert get_lab().context() == []  # memory saw none of them
    assert out_of(shell, capsys, "%context") == before  # read back from the store
    last = out_of(shell, capsys, "%context --last 1")
    assert last.startswith("(the newest 1 shown; %context --last N shows more)\n")
    assert last.endswith(f"── {blocks[-1].agent}\n{blocks[-1].block}\n\n")
    manager = get_lab().context("Manager", limit=100)
    assert manager == [b for b in blocks if b.agent == "@Manager"] and manager


def test_resume_on_another_model_and_a_stored_model_that_no_longer_builds_says_how(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A team that ran on a model needing a key comes back on it, or (--model) on another; when
    its key is gone, the resume's one line says how to take the team up on another model."""
    monkeypatch.setenv("AKLAB_TEST_KEY_VAR", "dummy-value-for-a-loopback-server")
    out_of(
        shell,
        capsys,
        "%aklab model openai-compatible:fake --base-url http://127.0.0.1:9/v1 --api-key-env AKLAB_TEST_KEY_VAR",
    )
    out_of(shell, capsys, "%ask What is 2+2?")  # nothing listens there: a notice, and a team that was asked
    team = get_lab().team_id[:8]
    set_lab(None)  # a kernel restart, then the key is gone
    monkeypatch.delenv("AKLAB_TEST_KEY_VAR")
    message = error_of(shell, f"%aklab resume {team}")
    capsys.readouterr()
    assert "set the AKLAB_TEST_KEY_VAR environment variable" in message
    assert message.endswith(
        f"or resume the team on another model: %aklab resume {team} --model SPEC (Lab.resume(..., model=...))"
    )
    report = out_of(shell, capsys, f"%aklab resume {team} --model demo:aklab-demo")
    assert report.startswith("resumed team 'dev-team'") and "models: demo:aklab-demo" in report
    assert "@Manager (response)" in out_of(shell, capsys, "%ask What is 3+3?")
    assert "%aklab resume [TEAM] --model provider:model: name the model" in error_of(shell, "%aklab resume --model")


def test_parse_resume() -> None:
    from aklab.lab._magic_args import UsageError, parse_resume

    assert parse_resume("") == (None, None)
    assert parse_resume("dev-team") == ("dev-team", None)
    assert parse_resume("ab12cd34 --model local:smollm2") == ("ab12cd34", "local:smollm2")
    assert parse_resume("--model demo:aklab-demo") == (None, "demo:aklab-demo")
    for bad in ("a b", "--frob", "--model"):
        with pytest.raises(UsageError):
            parse_resume(bad)


def test_a_store_under_the_current_folder_is_named_relative_to_it_by_status_and_the_listing(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # a notebook's folder: a saved output must not hold the absolute path
    out_of(shell, capsys, "%ask What is 2+2?")
    assert "store: sqlite:events.sqlite3 (" in out_of(shell, capsys, "%aklab")
    assert out_of(shell, capsys, "%aklab teams").startswith("1 team in sqlite:events.sqlite3, latest activity first:")
