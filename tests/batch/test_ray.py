"""The Ray engine, in a loopback-only network namespace (Ray probes cloud metadata on start)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
NETNS = ROOT / "aklab" / "batch" / "netns_run.sh"


def _namespace_problem() -> str | None:
    probe = subprocess.run([str(NETNS), "true"], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        return f"no loopback-only network namespace here: {probe.stderr.strip() or probe.returncode}"
    return None


def _ray_problem() -> str | None:
    if importlib.util.find_spec("ray") is None:
        return "Ray is not installed (make install-ray, or pip install 'aklab[ray]')"
    return _namespace_problem()


NAMESPACE = _namespace_problem()
RAY = _ray_problem()
needs_namespace = pytest.mark.skipif(NAMESPACE is not None, reason=str(NAMESPACE))
needs_ray = pytest.mark.skipif(RAY is not None, reason=str(RAY))

PROBE = """
import errno, json, os, socket
def reach(host):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect((host, 80))
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc))
    finally:
        s.close()
    return "connected"
listener = socket.create_server(("127.0.0.1", 0))
port = listener.getsockname()[1]
loop = socket.create_connection(("127.0.0.1", port), timeout=2)
loop.close(); listener.close()
print(json.dumps({"metadata": reach("169.254.169.254"), "outside": reach("192.0.2.1"),
                  "stats": os.environ.get("RAY_USAGE_STATS_ENABLED")}))
"""


@needs_namespace
def test_the_namespace_has_loopback_only_and_ray_usage_stats_off() -> None:
    run = subprocess.run([str(NETNS), sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out == {"metadata": "ENETUNREACH", "outside": "ENETUNREACH", "stats": "0"}


def test_the_namespace_helper_says_how_it_is_used_and_fails_with_97_without_its_tools() -> None:
    usage = subprocess.run([str(NETNS)], capture_output=True, text=True, timeout=30)
    assert usage.returncode == 2 and "usage:" in usage.stderr
    bare = subprocess.run(["/bin/sh", str(NETNS), "true"], capture_output=True, text=True, timeout=30, env={"PATH": ""})
    assert bare.returncode == 97 and "needs unshare" in bare.stderr


@pytest.fixture(scope="module")
def ray_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """tests/batch/ray_batch.py, once, inside the namespace (each Ray start costs 10-20 s here)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("RAY_ADDRESS", None)  # a local cluster in the namespace, never one found outside
    run = subprocess.run(
        [str(NETNS), sys.executable, "-m", "tests.batch.ray_batch", str(tmp_path_factory.mktemp("ray"))],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env=env,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    out: dict[str, Any] = json.loads(run.stdout.strip().splitlines()[-1])
    return out


@needs_ray
def test_a_ray_batch_gives_the_local_frames_retries_and_cancels_within_two_seconds(ray_run: dict[str, Any]) -> None:
    out = ray_run
    rows = {r["id"]: r for r in out["scenarios"]}
    assert [rows[i]["status"] for i in ("s1", "s2", "flaky", "hangs")] == ["ok", "ok", "ok", "timeout"]
    assert (rows["flaky"]["attempt"], rows["hangs"]["attempt"]) == (2, 2)
    assert [rows["s1"]["answer"], rows["s2"]["answer"]] == out["local_answers"]
    assert out["usage_columns"] == out["local_columns"]
    assert out["usage_attempts"] == [1, 2]
    assert out["cancel_s"] < 2.0 and out["cancel_statuses"] == ["cancelled"]


@needs_ray
def test_cancelling_while_ray_starts_returns_within_two_seconds_and_leaves_no_ray_running(
    ray_run: dict[str, Any],
) -> None:
    out = ray_run
    assert out["start_saw_starting"], "the progress never said Ray was starting before Ray was up"
    assert not out["start_ray_up_at_cancel"], "Ray was already up: the cancel did not land during its start"
    assert out["start_finished"] and out["start_cancel_s"] < 2.0, f"cancel took {out['start_cancel_s']:.2f}s"
    assert out["start_error"] is None
    assert [(r["id"], r["status"], r["attempt"]) for r in out["start_rows"]] == [
        (f"slow{i}", "cancelled", 0) for i in range(4)
    ]  # every row there, none of them ever started
    assert {r["error"] for r in out["start_rows"]} == {"cancelled before it started"} and out["start_attempts"] == 0
    assert out["start_last_line"] == "4/4 done · 4 cancelled · 0 tokens · $0.0000"
    assert "starting Ray" in out["start_notes"]
    # What the abandoned start-up started was shut down: no Ray in this process, no process left.
    assert out["start_settled"] and not out["start_ray_after"]
    assert out["start_left_over"] == []
    # The check sees Ray's processes when there are some, and none once Ray is shut down.
    assert out["ray_processes"] >= 2 and out["left_over"] == []


@needs_ray
def test_an_interrupt_while_ray_starts_cancels_the_batch_and_re_raises_within_two_seconds(
    ray_run: dict[str, Any],
) -> None:
    assert ray_run["interrupt_s"] is not None, "no KeyboardInterrupt came out of batch.run"
    assert ray_run["interrupt_s"] < 2.0 and ray_run["interrupt_statuses"] == ["cancelled"]
    assert ray_run["interrupt_settled"] and not ray_run["interrupt_ray_after"]
    assert ray_run["interrupt_left_over"] == []


@needs_ray
def test_a_ray_that_cannot_start_stops_the_batch_with_one_line(ray_run: dict[str, Any]) -> None:
    assert ray_run["failed_start"] == (
        "engine='ray' could not start: RuntimeError: Unknown keyword argument(s): no_such_option"
    )
    assert ray_run["failed_settled"] and not ray_run["failed_ray_after"]


@needs_ray
def test_batches_started_together_share_the_ray_one_starts_and_the_last_shuts_it_down(
    ray_run: dict[str, Any],
) -> None:
    # The quick batch ends first: had it shut Ray down, the slow one's actor would have died.
    assert ray_run["shared_finished"] and ray_run["shared_statuses"] == ["ok", "ok"], ray_run["shared_errors"]
    assert ray_run["shared_settled"] and not ray_run["shared_ray_after"] and ray_run["shared_left_over"] == []


@needs_ray
def test_each_ray_actor_reports_its_memory_per_hosted_team(ray_run: dict[str, Any]) -> None:
    workers = ray_run["workers"]
    assert len(workers) == 2  # workers=2: two actors, each its own process
    assert sum(w["attempts"] for w in workers) == 6  # 4 scenarios, 2 retried
    for w in workers:
        assert w["worker"].rsplit(":", 1)[-1].isdigit()
        assert 1 <= w["teams"] <= 2  # concurrency 4 over 2 actors
        assert w["baseline_mb"] > 50 and w["peak_rss_mb"] >= w["baseline_mb"]
        assert w["mb_per_team"] == pytest.approx(w["growth_mb"] / w["teams"])
    assert ray_run["local_workers"][0]["worker"] not in {w["worker"] for w in workers}  # the driver's process


def test_a_missing_ray_is_one_line_with_the_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    import aklab.batch as batch
    from aklab.errors import ConfigError

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(ConfigError, match=r"^engine='ray' needs Ray: pip install 'aklab\[ray\]'$"):
        batch.start(["q"], engine="ray")
