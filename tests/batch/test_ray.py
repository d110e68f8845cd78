"""The Ray engine, in a loopback-only network namespace (Ray probes cloud metadata on start)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

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


@needs_ray
def test_a_ray_batch_gives_the_local_frames_retries_and_cancels_within_two_seconds(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("RAY_ADDRESS", None)
    run = subprocess.run(
        [str(NETNS), sys.executable, "-m", "tests.batch.ray_batch", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env=env,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    rows = {r["id"]: r for r in out["scenarios"]}
    assert [rows[i]["status"] for i in ("s1", "s2", "flaky", "hangs")] == ["ok", "ok", "ok", "timeout"]
    assert (rows["flaky"]["attempt"], rows["hangs"]["attempt"]) == (2, 2)
    assert [rows["s1"]["answer"], rows["s2"]["answer"]] == out["local_answers"]
    assert out["usage_columns"] == out["local_columns"]
    assert out["usage_attempts"] == [1, 2]
    assert out["cancel_s"] < 2.0 and out["cancel_statuses"] == ["cancelled"]


def test_a_missing_ray_is_one_line_with_the_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    import aklab.batch as batch
    from aklab.errors import ConfigError

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(ConfigError, match=r"^engine='ray' needs Ray: pip install 'aklab\[ray\]'$"):
        batch.start(["q"], engine="ray")
