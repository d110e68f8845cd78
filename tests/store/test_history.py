"""history(): asks, runs, usage and messages across sessions and teams of one store."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest

from aklab.errors import ConfigError
from aklab.lab import Lab
from aklab.lab.frames import REQUEST_COLUMNS
from aklab.store import SqliteStore, StoreSubscriber, history, new_team_id
from tests.store.test_contract import HUMAN, MANAGER, sent, usage

QUESTIONS = [["Write a hello function", "Now add a test"], ["Explain the plan"]]


def session(path: Path, questions: list[str]) -> tuple[str, pd.DataFrame, list[str]]:
    """One lab session writing to the store at ``path``: its team id, its usage, its ask ids."""
    store = SqliteStore(path)
    team_id = new_team_id()
    with Lab("dev-team") as lab:
        subscriber = StoreSubscriber(store, team_id)
        lab.orchestrator.subscribe(subscriber)
        store.save_team(team_id, name=lab.spec.name, metadata={"entry": lab.entry.name})
        asks: list[str] = []
        for q in questions:
            result = lab.ask(q, timeout=60)
            assert result and result.ask_id
            asks.append(result.ask_id)
        frame = lab.usage(by="request")
        frame["ask_id"] = [e.ask_id for e in lab.recorder.usage]
    store.close()
    assert subscriber.failed is None and subscriber.stored > 0
    return team_id, frame, asks


@pytest.fixture(scope="module")
def two_sessions(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[tuple[str, pd.DataFrame, list[str]]]]:
    path = tmp_path_factory.mktemp("history") / "events.sqlite3"
    return path, [session(path, qs) for qs in QUESTIONS]


def test_history_sees_every_session_and_each_asks_figures_match_the_lab(
    two_sessions: tuple[Path, list[tuple[str, pd.DataFrame, list[str]]]],
) -> None:
    path, sessions = two_sessions
    with SqliteStore(path) as store:
        h = history(store)
    assert list(h.usage.columns) == ["team_id", "ask_id", *REQUEST_COLUMNS]
    assert set(h.asks["team_id"]) == {s[0] for s in sessions} and set(h.asks["team"]) == {"dev-team"}
    assert list(h.asks["question"]) == [q for qs in QUESTIONS for q in qs]  # in time order
    for team_id, lab_usage, asks in sessions:
        for ask_id in asks:
            row = h.asks.set_index("ask_id").loc[ask_id]
            mine = lab_usage[lab_usage["ask_id"] == ask_id]
            assert row["team_id"] == team_id
            assert row["requests"] == mine["requests"].sum() > 0
            for c in ["input_tokens", "output_tokens", "total_tokens"]:
                assert row[c] == mine[c].sum()
            lab_cost = mine["cost_usd"]
            if lab_cost.isna().any():  # unpriced (the demo model): unknown, never a made-up 0
                assert pd.isna(row["cost_usd"])
            else:
                assert row["cost_usd"] == pytest.approx(lab_cost.sum())
            assert row["first_at"] <= row["last_at"]
        stored = h.usage[h.usage["team_id"] == team_id].reset_index(drop=True)
        expected = lab_usage.reset_index(drop=True)
        for c in REQUEST_COLUMNS:
            if c == "started_at":
                assert list(pd.to_datetime(stored[c], utc=True)) == list(pd.to_datetime(expected[c], utc=True))
            else:
                assert stored[c].tolist() == expected[c].tolist(), c
        assert stored["ask_id"].tolist() == expected["ask_id"].tolist()
    assert h.runs["requests"].sum() == h.usage["requests"].sum() == h.asks["requests"].sum()
    assert set(h.runs["run_id"]) == set(h.usage["run_id"])
    questions = h.messages[h.messages["message_id"] == h.messages["ask_id"]]
    assert list(questions["sender"]) == ["@Human"] * 3 and list(questions["type"]) == ["request"] * 3
    assert h.messages["seq"].is_monotonic_increasing and "@Developer" in set(h.messages["sender"])


def test_history_filters_by_team_agent_model_and_time(
    two_sessions: tuple[Path, list[tuple[str, pd.DataFrame, list[str]]]],
) -> None:
    path, sessions = two_sessions
    first_team = sessions[0][0]
    with SqliteStore(path) as store:
        everything = history(store)
        by_team = history(store, team=first_team)
        by_name = history(store, team="dev-team")
        developer = history(store, agent="Developer")
        no_model = history(store, model="no-such-model")
        future = history(store, since=datetime.now(UTC) + timedelta(days=1))
        past = history(store, until="2000-01-01")
        by_prefix = history(store, team=first_team[:8])  # as %aklab teams shows it
        with pytest.raises(ConfigError, match=r"no stored team 'no-such-team' in .*; stored: dev-team \("):
            history(store, team="no-such-team")
        model = everything.usage["model"].iloc[0]
        one_model = history(store, model=model)
        slips = history(store, agent="developer"), history(store, agent="@DEVELOPER")  # another case
        bare_model = history(store, model=model.split(":", 1)[1].upper())  # "AKLAB-DEMO" for demo:aklab-demo
    assert set(by_team.asks["team_id"]) == {first_team} and len(by_team.asks) == 2
    assert by_prefix.asks.equals(by_team.asks)
    assert len(by_name.asks) == 3
    assert set(developer.usage["agent"]) == {"@Developer"}
    assert developer.asks["requests"].sum() == developer.usage["requests"].sum()
    assert developer.asks["requests"].sum() < everything.asks["requests"].sum()
    assert set(developer.asks["question"]) <= {q for qs in QUESTIONS for q in qs}
    pairs = zip(developer.messages["sender"], developer.messages["recipient"], strict=True)
    assert all("@Developer" in pair for pair in pairs)
    assert len(one_model.usage) == len(everything.usage[everything.usage["model"] == model]) > 0
    for slip in slips:
        pd.testing.assert_frame_equal(slip.usage, developer.usage)
    pd.testing.assert_frame_equal(bare_model.usage, one_model.usage)
    for empty in (no_model, future, past):
        assert empty.usage.empty and empty.runs.empty
    assert future.asks.empty and future.messages.empty and list(future.asks.columns) == list(everything.asks.columns)


def test_an_empty_history_has_the_dtypes_of_a_full_one(
    two_sessions: tuple[Path, list[tuple[str, pd.DataFrame, list[str]]]],
) -> None:
    """`history(since=...)` that selects nothing gave asks and runs of object columns, so
    `h.asks.first_at.dt.date` raised "Can only use .dt accessor with datetimelike values"."""
    path, _ = two_sessions
    with SqliteStore(path) as store:
        full = history(store)
        empty = history(store, since=datetime.now(UTC) + timedelta(days=1))
    for name in ("asks", "runs", "usage", "messages"):
        kept, none = getattr(full, name), getattr(empty, name)
        assert none.empty and list(none.columns) == list(kept.columns)
        for c in kept.columns:
            if not pd.api.types.is_string_dtype(kept[c]):  # str or object where empty: both read as text
                assert none[c].dtype == kept[c].dtype, (name, c)
    assert list(empty.asks["first_at"].dt.date) == [] and list(empty.runs["started_at"].dt.date) == []
    assert empty.asks[empty.asks["ok"]].empty


def test_an_empty_team_names_no_team_and_forgets_none(tmp_path: Path) -> None:
    """Every id starts with "": `aklab.forget("")` deleted the only team stored, and
    `history(team="")` read every team."""
    import aklab

    path = tmp_path / "events.sqlite3"
    with SqliteStore(path) as store:
        team = new_team_id()
        store.save_team(team, name="only")
        store.append(sent("hello", "ask1"), team)
    for empty in ("", "  "):
        with pytest.raises(ConfigError, match="name a stored team by its id, an id prefix or its name"):
            aklab.forget(empty, store=path)
        with pytest.raises(ConfigError, match="name a stored team"):
            aklab.history(path, team=empty)
    with SqliteStore(path) as store:
        assert [t.team_id for t in store.teams()] == [team] and len(store.records(team)) == 1


def test_an_asks_cost_is_the_sum_of_its_requests_and_unknown_if_any_is_unpriced(tmp_path: Path) -> None:
    team = new_team_id()
    with SqliteStore(tmp_path / "events.sqlite3") as store:
        for ask_id in ("priced", "mixed"):
            question = sent(f"question {ask_id}", ask_id)
            question.message.id = ask_id
            store.append(question, team)
        store.append(usage("priced", cost_usd=0.01, input_tokens=10, output_tokens=5), team)
        store.append(usage("priced", cost_usd=0.02, input_tokens=20, output_tokens=5, run_id="r2"), team)
        store.append(usage("mixed", cost_usd=0.5, model="openai:gpt-4.1"), team)
        store.append(usage("mixed", cost_usd=None, input_tokens=None, output_tokens=None), team)
        h = history(store)
    asks = h.asks.set_index("ask_id")
    assert asks.loc["priced", "cost_usd"] == pytest.approx(0.03) and asks.loc["priced", "total_tokens"] == 40
    assert asks.loc["priced", "runs"] == 2 and asks.loc["priced", "question"] == "question priced"
    assert asks["cost_usd"].isna()["mixed"] and asks.loc["mixed", "requests"] == 2
    # the models each ask used, to compare models across sessions (h.asks.groupby("models"))
    assert asks.loc["priced", "models"] == "demo" and asks.loc["mixed", "models"] == "demo, openai:gpt-4.1"
    assert str(h.usage["input_tokens"].dtype) == "Int64"  # an unknown count stays <NA>, as in lab.usage()
    runs = h.runs.set_index("run_id")
    assert runs.loc["r2", "cost_usd"] == pytest.approx(0.02)


def test_an_ask_whose_requests_were_all_cut_off_has_unknown_tokens_not_zero(tmp_path: Path) -> None:
    team = new_team_id()
    with SqliteStore(tmp_path / "events.sqlite3") as store:
        question = sent("stopped at once", "cut")
        question.message.id = "cut"
        store.append(question, team)
        store.append(usage("cut", cost_usd=None, input_tokens=None, output_tokens=None, ok=False), team)
        h = history(store)
    ask = h.asks.set_index("ask_id").loc["cut"]
    run = h.runs.iloc[0]
    for row in (ask, run):
        assert pd.isna(row["input_tokens"]) and pd.isna(row["total_tokens"]) and row["requests"] == 1


def test_importing_the_store_does_not_import_pandas() -> None:
    code = "import sys, aklab.store; assert 'pandas' not in sys.modules, 'pandas imported'"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_aklab_history_reads_without_checking_the_whole_file_and_still_names_the_damage(
    two_sessions: tuple[Path, list[tuple[str, pd.DataFrame, list[str]]]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``aklab.history(path)`` only reads: SQLite's whole-file check on open (about 1 s per
    60 MB not in the page cache) is skipped, and damage in what it reads is still reported
    with the way to recover."""
    import shutil

    import aklab
    from aklab.store import StoreCorruptError

    path, sessions = two_sessions

    def no_check(self: SqliteStore) -> None:
        raise AssertionError("aklab.history() checked the whole file")

    with monkeypatch.context() as patched:
        patched.setattr(SqliteStore, "_verify", no_check)
        h = aklab.history(path)
    assert set(h.asks["team_id"]) == {s[0] for s in sessions}

    damaged = tmp_path / "damaged.sqlite3"
    shutil.copy(path, damaged)
    with SqliteStore(damaged) as store:  # the WAL into the file, so the copy is the whole store
        pages = store._db().execute("PRAGMA page_count").fetchone()[0]
    size = damaged.stat().st_size
    page = size // pages
    with open(damaged, "r+b") as f:  # every page but the first overwritten: a reader hits damage
        for n in range(1, pages):
            f.seek(n * page)
            f.write(b"\xff" * page)
    with pytest.raises(StoreCorruptError, match=r"damaged .*SqliteStore\.recover"):
        aklab.history(damaged)


def test_history_reads_a_page_at_a_time_and_says_how_far_it_has_got(
    two_sessions: tuple[Path, list[tuple[str, pd.DataFrame, list[str]]]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A large store is read in pages (never held whole as records), with the same frames as
    one read, and a long read says on stderr how many records it has read."""
    import aklab.store._history as reading

    path, sessions = two_sessions
    with SqliteStore(path) as store:
        whole = history(store)
        assert capsys.readouterr().err == ""  # a short read says nothing
        monkeypatch.setattr(reading, "PAGE", 3)
        monkeypatch.setattr(reading, "PROGRESS_AFTER_S", 0.0)
        paged = history(store)
        filtered = history(store, team=sessions[0][0], agent="Developer")
    for name in ("asks", "runs", "usage", "messages"):
        pd.testing.assert_frame_equal(getattr(paged, name), getattr(whole, name))
    records = len(whole.usage) + len(whole.messages)
    assert records > 3 * 2  # several pages
    err = capsys.readouterr().err
    assert f"aklab.history: {records:,} records read in " in err
    assert err.count("records read...") >= records // 3 - 1  # one line per page read
    with SqliteStore(path) as store:
        monkeypatch.setattr(reading, "PAGE", 20_000)
        expected = history(store, team=sessions[0][0], agent="Developer")
    for name in ("asks", "runs", "usage", "messages"):
        pd.testing.assert_frame_equal(getattr(filtered, name), getattr(expected, name))


def test_each_ask_names_its_agents_and_is_not_ok_after_a_notice_or_a_stop(tmp_path: Path) -> None:
    from aklab.agent import AgentMessage, Notice
    from aklab.core import EventMessage, SentMessage
    from aklab.core._asks import AskCancelledEvent

    team = new_team_id()
    with SqliteStore(tmp_path / "events.sqlite3") as store:
        for ask_id in ("fine", "noticed", "stopped"):
            question = sent(f"question {ask_id}", ask_id)
            question.message.id = ask_id
            store.append(question, team)
            store.append(usage(ask_id), team)
            store.append(usage(ask_id, agent="@Developer", role="Developer", run_id="r2"), team)
            store.append(usage(ask_id, run_id="r3"), team)
        answer = AgentMessage(content="done", sender=MANAGER, recipient=HUMAN, ask_id="fine")  # it ended
        store.append(SentMessage(sender=MANAGER, recipient=HUMAN, message=answer, ask_id="fine"), team)
        notice = Notice(content="@Developer could not answer", sender=MANAGER, recipient=HUMAN, ask_id="noticed")
        store.append(SentMessage(sender=MANAGER, recipient=HUMAN, message=notice, ask_id="noticed"), team)
        store.append(EventMessage(event=AskCancelledEvent(ask_id="stopped", reason="stopped"), ask_id="stopped"), team)
        h = history(store)
        developer = history(store, agent="Developer")
    asks = h.asks.set_index("ask_id")
    assert list(asks["agents"]) == ["@Manager, @Developer"] * 3  # names, in the order of their first request
    assert asks["ok"].to_dict() == {"fine": True, "noticed": False, "stopped": False} and asks["ok"].dtype == "boolean"
    # filtered to one agent: its figures, but the whole ask's ok
    assert developer.asks.set_index("ask_id")["ok"].to_dict() == asks["ok"].to_dict()
    assert set(developer.asks["agents"]) == {"@Developer"}


def test_a_history_says_its_counts_in_words(tmp_path: Path) -> None:
    with Lab("dev-team", store=tmp_path / "events.sqlite3") as lab:
        lab.ask("/team_roles", timeout=20)
    with SqliteStore(tmp_path / "events.sqlite3") as store:
        said = repr(history(store))
    assert said == "<History: 1 ask, 0 runs, 0 requests, 2 messages>"


def test_a_time_window_keeps_its_records_but_ok_is_the_whole_asks(tmp_path: Path) -> None:
    """An ask that straddles ``until``: told of a failure, stopped, or answered after it. Its
    figures are the window's; its ``ok`` is what became of it, as with the agent filter."""
    from aklab.agent import AgentMessage, Notice
    from aklab.core import EventMessage, SentMessage
    from aklab.core._asks import AskCancelledEvent

    team, start = new_team_id(), datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    later = start + timedelta(hours=2)
    with SqliteStore(tmp_path / "events.sqlite3") as store:
        for ask_id in ("answered", "noticed", "stopped"):
            question = sent(f"question {ask_id}", ask_id)
            question.message.id, question.created_at = ask_id, start
            store.append(question, team)
            spent = usage(ask_id)
            spent.created_at = start
            store.append(spent, team)
        reply = AgentMessage(content="done", sender=MANAGER, recipient=HUMAN, ask_id="answered")
        notice = Notice(content="@Developer could not answer", sender=MANAGER, recipient=HUMAN, ask_id="noticed")
        for ask_id, message in (("answered", reply), ("noticed", notice)):
            store.append(
                SentMessage(sender=MANAGER, recipient=HUMAN, message=message, ask_id=ask_id, created_at=later), team
            )
        stop = EventMessage(event=AskCancelledEvent(ask_id="stopped", reason="stopped"), ask_id="stopped")
        stop.created_at = later
        store.append(stop, team)
        window = history(store, until=start + timedelta(hours=1))
        whole = history(store)
    expected = {"answered": True, "noticed": False, "stopped": False}
    assert whole.asks.set_index("ask_id")["ok"].to_dict() == expected
    assert window.asks.set_index("ask_id")["ok"].to_dict() == expected
    assert len(window.messages) == 3 and len(whole.messages) == 5  # the window's records, all the same
