"""The same call gives the same frames on the local and process engines; faults are retried,
costed per attempt, and reported."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pandas as pd
import pytest

import aklab.batch as batch
from aklab.batch import Scenario
from aklab.batch._driver import _plan
from aklab.batch._result import SCENARIO_COLUMNS, WORKER_COLUMNS
from aklab.batch._scenario import normalize
from aklab.batch.checks import contains
from aklab.batch.progress import ProgressState
from aklab.errors import ConfigError
from aklab.lab import Lab
from aklab.lab.frames import REQUEST_COLUMNS
from aklab.lab.teams import builtin_team
from aklab.llm import ModelConfig
from tests.batch.helpers import SLOW, FailsOnce, KillsWorkerOnce, WordCount

ENGINES = ["local", "process"]
QUESTIONS = [f"Plan feature {i}" for i in range(6)]


@pytest.fixture(scope="module")
def frames() -> dict[str, batch.BatchResult]:
    """One 6-scenario batch per engine (process workers are slow to start: share them)."""
    scenarios: list[batch.ScenarioLike] = [*QUESTIONS[:4], ["Plan the login page", "And test it"]]
    scenarios.append(Scenario("scored", "Plan the search box", check=WordCount(minimum=3), metadata={"tier": "a"}))
    return {
        engine: batch.run(scenarios, engine=engine, concurrency=4, workers=2, progress=False, timeout_s=60)
        for engine in ENGINES
    }


@pytest.mark.parametrize("engine", ENGINES)
def test_every_scenario_gets_a_row_with_its_answer_and_usage(frames: dict[str, batch.BatchResult], engine: str) -> None:
    result = frames[engine]
    table = result.scenarios
    assert list(table.columns) == [*SCENARIO_COLUMNS, "tier"]
    assert list(table["id"]) == ["s1", "s2", "s3", "s4", "s5", "scored"]
    assert set(table["status"]) == {"ok"} and set(table["attempt"]) == {1}
    assert table.loc[4, "asks"] == 2 and "And test it" in table.loc[4, "answer"]
    assert table.loc[5, "score"] == 1.0 and table.loc[5, "tier"] == "a"
    assert table["score"].isna().sum() == 5
    assert (table["tokens"] > 0).all() and (table["wall_s"] > 0).all()
    usage = result.usage
    assert list(usage.columns) == ["scenario_id", "attempt", *REQUEST_COLUMNS]
    per_scenario = usage.groupby("scenario_id", sort=False)["total_tokens"].sum()
    assert per_scenario.to_dict() == dict(zip(table["id"], table["tokens"], strict=True))
    assert int(usage["requests"].sum()) == int(table["requests"].sum())


def test_a_batch_scenario_costs_what_the_same_ask_costs_in_a_lab(frames: dict[str, batch.BatchResult]) -> None:
    with Lab() as lab:
        reply = lab.ask(QUESTIONS[0], timeout=30)
    row = frames["local"].scenarios.iloc[0]
    assert row["answer"] == reply.text
    assert (row["requests"], row["tokens"]) == (reply.totals()["requests"], reply.totals()["tokens"])
    assert list(frames["local"].usage.columns[2:]) == list(reply.usage(by="request").columns)


def test_local_and_process_engines_give_the_same_frames(frames: dict[str, batch.BatchResult]) -> None:
    keep = ["id", "team", "model", "status", "answer", "score", "asks", "requests", "tokens", "attempt"]
    local, process = (frames[e].scenarios[keep] for e in ENGINES)
    pd.testing.assert_frame_equal(local, process)
    assert (frames["local"].usage.dtypes == frames["process"].usage.dtypes).all()
    summary = frames["process"].summary()
    assert summary.loc[0, ["scenarios", "ok", "attempts"]].tolist() == [6, 6, 6]
    assert summary.loc[0, "tokens"] == frames["process"].usage["total_tokens"].sum()


@pytest.mark.parametrize(("engine", "workers", "most_teams"), [("local", 1, 4), ("process", 2, 2)])
def test_every_worker_reports_its_memory_per_hosted_team(
    frames: dict[str, batch.BatchResult], engine: str, workers: int, most_teams: int
) -> None:
    table = frames[engine].workers
    assert list(table.columns) == WORKER_COLUMNS
    assert len(table) == workers and table["attempts"].sum() == 6
    assert set(table["worker"]) == set(frames[engine].attempts["worker"])
    # concurrency 4: all four teams in this process, or two in each of two workers
    assert (table["teams"] >= 1).all() and table["teams"].max() == most_teams
    assert (table["baseline_mb"] > 50).all()  # a Python process with aklab and pydantic-ai imported
    assert (table["peak_rss_mb"] >= table["baseline_mb"]).all()
    assert (table["mb_per_team"] == table["growth_mb"] / table["teams"]).all()


@pytest.mark.parametrize("engine", ENGINES)
def test_a_raising_scenario_is_retried_and_every_attempt_is_costed(
    engine: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    scenarios = [
        Scenario("flaky", "Plan the login page", check=FailsOnce(str(tmp_path / "flaky"))),
        Scenario("broken", "Plan it", model="openai:gpt-4.1"),  # no key: the Lab refuses to start
        "Plan the search box",
    ]
    result = batch.run(scenarios, engine=engine, retries=2, concurrency=3, workers=1, progress=False, timeout_s=60)
    table = result.scenarios.set_index("id")
    assert table.loc["flaky", ["status", "attempt", "score"]].tolist() == ["ok", 2, 1.0]
    assert table.loc["broken", ["status", "attempt"]].tolist() == ["failed", 3]
    assert table.loc["broken", "error"].startswith("ConfigError: ") and "OPENAI_API_KEY" in table.loc["broken", "error"]
    assert table.loc["s3", ["status", "attempt"]].tolist() == ["ok", 1]
    attempts = result.attempts
    assert sorted(attempts[attempts["id"] == "flaky"]["status"]) == ["failed", "ok"]
    flaky_usage = result.usage[result.usage["scenario_id"] == "flaky"]
    assert sorted(set(flaky_usage["attempt"])) == [1, 2]  # the failed attempt's requests are kept
    assert result.summary().set_index("model").loc["openai:gpt-4.1", "attempts"] == 3
    state = result.state()  # kept as running totals: the same figures as the frames
    retried = int((attempts["attempt"] > 1).sum())
    assert (state.done, state.ok, state.failed, state.attempts, state.retried) == (3, 2, 1, len(attempts), retried)
    assert (state.requests, state.tokens) == (int(attempts["requests"].sum()), int(attempts["tokens"].sum()))


@pytest.mark.parametrize("engine", ENGINES)
def test_a_hanging_scenario_times_out_and_the_batch_finishes(engine: str) -> None:
    scenarios = [Scenario("hangs", "Plan it", model=SLOW), "Plan the login page"]
    result = batch.run(scenarios, engine=engine, timeout_s=1.5, retries=1, concurrency=2, workers=1, progress=False)
    table = result.scenarios.set_index("id")
    assert table.loc["hangs", ["status", "attempt"]].tolist() == ["timeout", 2]
    assert "no answer within 1.5s" in table.loc["hangs", "error"]
    assert table.loc["s2", "status"] == "ok"
    assert list(result.attempts.query("id == 'hangs'")["attempt"]) == [1, 2]


def test_a_killed_process_worker_costs_only_its_attempt_and_is_replaced() -> None:
    killed: list[int] = []
    lock = threading.Lock()

    def kill_doomed(state: ProgressState) -> None:
        running = state.running.get("doomed")
        if running is None:
            return
        pid = int(running[1].rsplit(":", 1)[1])
        with lock:
            if running[0] > len(killed):  # once per attempt, our own worker by its pid
                killed.append(pid)
                os.kill(pid, signal.SIGKILL)

    scenarios = [Scenario("doomed", "Plan it", model=SLOW), *QUESTIONS[:3]]
    # one team per worker, so the killed worker hosts only the doomed scenario
    result = batch.run(scenarios, engine="process", workers=2, concurrency=2, retries=1, progress=kill_doomed)
    table = result.scenarios.set_index("id")
    assert len(killed) == 2
    assert table.loc["doomed", ["status", "attempt"]].tolist() == ["failed", 2]
    assert f"worker process {killed[1]} died (signal SIGKILL)" == table.loc["doomed", "error"]
    assert (table.drop(index="doomed")["status"] == "ok").all()
    assert (table.drop(index="doomed")["attempt"] == 1).all()


def test_a_worker_that_dies_once_is_retried_on_a_new_worker(tmp_path: Path) -> None:
    scenarios = [Scenario("dies", "Plan it", check=KillsWorkerOnce(str(tmp_path / "died"))), "Plan the login page"]
    result = batch.run(scenarios, engine="process", workers=1, concurrency=2, retries=1, progress=False)
    table = result.scenarios.set_index("id")
    assert table.loc["dies", ["status", "attempt"]].tolist() == ["ok", 2]
    first = result.attempts.query("id == 'dies' and attempt == 1").iloc[0]
    assert first["status"] == "failed" and "died (signal SIGKILL)" in first["error"]
    second = result.attempts.query("id == 'dies' and attempt == 2").iloc[0]
    assert second["worker"].rsplit(":", 1)[1] != (tmp_path / "died").read_text()  # a new worker took it


def test_the_process_engine_refuses_what_cannot_be_pickled_in_one_line() -> None:
    with pytest.raises(ConfigError, match=r"scenario 's1''s check \(<function .*cannot be pickled") as info:
        batch.start([Scenario("s1", "q", check=lambda answer: True)], engine="process")
    assert "\n" not in str(info.value) and "engine='local'" in str(info.value)
    from pydantic_ai.models.function import FunctionModel

    model = ModelConfig(model=FunctionModel(lambda messages, info: None))  # type: ignore[arg-type,return-value]
    with pytest.raises(ConfigError, match=r"scenario 's1''s team .* cannot be pickled"):
        batch.start(["q"], model=model, engine="process")
    with pytest.raises(ConfigError, match="engine 'threads': choose 'local', 'process' or 'ray'"):
        batch.start(["q"], engine="threads")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"concurrency": 0}, "concurrency must be"),
        ({"retries": -1}, "retries must be"),
        ({"timeout_s": float("nan")}, "timeout_s must be"),
        ({"workers": 0}, "workers must be"),
        ({"team": "no-such-team"}, "no built-in team"),
        ({"model": "gpt4"}, "provider:model"),
    ],
)
def test_bad_arguments_fail_before_anything_starts(options: dict[str, object], words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        batch.start(["q"], **options)  # type: ignore[arg-type]


def test_expected_answers_score_without_a_check() -> None:
    result = batch.run(
        [
            Scenario("a", "Plan the login page", expected="staging"),  # a step of the demo's plans
            Scenario("b", "Plan X", check=contains("zzz")),
            # the demo's answer quotes its question twice, and has no other "login page" in it
            Scenario("c", "Plan the login page", expected="login page"),
        ],
        progress=False,
    )
    assert result.scenarios["score"].tolist() == [1.0, 0.0, 0.0]
    answer = result.scenarios.set_index("id").loc["c", "answer"]
    assert answer.count('"Plan the login page"') == 2


def test_expected_is_not_found_in_a_quote_of_the_question() -> None:
    from aklab.batch.checks import CheckContext, score

    def scored(answer: str, expected: str, *questions: str) -> float | None:
        return score(None, answer, CheckContext(questions, answer, expected))

    assert scored('Here is the plan for "Plan the login page.": ship it.', "login page", "Plan the login page.") == 0.0
    assert scored("The LOGIN PAGE needs a captcha. (plan the login page)", "login page", "Plan the login page") == 1.0
    assert scored("Paris.", "paris", "What is the capital of France?") == 1.0
    assert scored("It is 42", "42", "first turn", "What is 6 times 7?") == 1.0


def test_batch_sessions_do_not_stream_and_the_team_given_is_left_as_it_was() -> None:
    spec = builtin_team("dev-team")
    jobs, _ = _plan(normalize(["Plan it"]), spec, None, None, 60.0, ())
    assert [c.config.runtime_cfg.stream for c in jobs[0].team.cards] == [False, False, False]
    assert [c.config.runtime_cfg.stream for c in spec.cards] == [True, True, True]


def test_a_scenario_answered_only_by_a_failure_notice_fails_and_is_retried() -> None:
    """The team answers every ask, if only with aklab's notice ("@Manager could not answer:
    cannot reach the model server..."): that is a failed attempt, not an answer to score."""
    unreachable = ModelConfig.parse("openai-compatible:nothing", base_url="http://127.0.0.1:9/v1", retries=0)
    result = batch.run(
        [Scenario("unreachable", "Plan it", model=unreachable, expected="Plan"), "Plan the search box"],
        retries=1,
        progress=False,
        timeout_s=60,
    )
    table = result.scenarios.set_index("id")
    assert table.loc["unreachable", ["status", "attempt"]].tolist() == ["failed", 2]
    assert table.loc["unreachable", "error"].startswith(  # where it looked: the address, never the path
        "turn 1: @Manager could not answer: cannot reach the model server at http://127.0.0.1:9 ("
    )
    assert not table.loc["unreachable", "answer"] and pd.isna(table.loc["unreachable", "score"])  # nothing scored
    assert table.loc["s2", "status"] == "ok"


def test_an_attempt_given_up_on_before_its_worker_was_named_counts_under_that_worker() -> None:
    """A Ray attempt starts under its actor's provisional name; the actor's process
    (host:pid) is known from its first outcome. An attempt given up on before then (a
    hung one) used to make a worker row of its own: three workers for two actors."""
    from aklab.batch._attempt import HostMemory, Outcome
    from aklab.batch._result import BatchResult

    scenarios = normalize(["hangs", "fine", "later"])
    result = BatchResult(scenarios, [("dev-team", "demo:aklab-demo")] * 3, "ray")
    result._attempt_started(0, 1, "ray-actor-1")
    result._attempt_started(1, 1, "ray-actor-1")
    result._attempt_ended(0, Outcome((0, 1), "timeout", error="abandoned"), final=True)  # given up: no worker
    result._worker_named("ray-actor-1", "vm:42")  # the actor's first outcome names its process
    result._attempt_ended(1, Outcome((1, 1), "ok", worker="vm:42", host=HostMemory(100.0, 110.0, 1)), final=True)
    result._attempt_started(2, 1, "ray-actor-1")  # started under the provisional name after naming
    result._attempt_ended(2, Outcome((2, 1), "timeout", error="abandoned"), final=True)
    assert result.workers[["worker", "attempts"]].values.tolist() == [["vm:42", 3]]
    assert set(result.attempts["worker"]) == {"vm:42"}


def test_the_summary_neither_under_counts_cost_nor_averages_in_scenarios_that_never_ran() -> None:
    """A cancelled batch: the summary summed only the attempts whose cost was known (one cut
    off in flight has <NA>), and its mean_wall_s counted the 0 s of every scenario cancelled
    before it started (0.28 s where the sessions that ran took 1.66 s)."""
    scenarios = pd.DataFrame(
        {
            "id": ["a", "b", "c", "d"],
            "team": "dev-team",
            "model": "openai:gpt-4.1-mini",
            "status": ["ok", "ok", "cancelled", "cancelled"],
            "score": pd.array([None] * 4, dtype="Float64"),
            "attempt": [1, 1, 1, 0],
            "wall_s": [2.0, 4.0, 0.5, 0.0],
        }
    )
    attempts = pd.DataFrame(
        {
            "id": ["a", "b", "c"],
            "requests": [3, 3, 1],
            "tokens": pd.array([100, 100, None], dtype="Int64"),
            "cost_usd": pd.array([0.01, 0.01, None], dtype="Float64"),
        }
    )

    class Frames(batch.BatchResult):
        scenarios = property(lambda self: scenarios)  # type: ignore[assignment]
        attempts = property(lambda self: attempts)  # type: ignore[assignment]

    (row,) = Frames.__new__(Frames).summary().to_dict("records")
    assert pd.isna(row["cost_usd"])  # unknown, not 0.02
    assert row["mean_wall_s"] == pytest.approx((2.0 + 4.0 + 0.5) / 3)
    assert row["tokens"] == 200 and row["attempts"] == 3 and row["cancelled"] == 2
