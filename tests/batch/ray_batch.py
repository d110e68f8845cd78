"""A Ray batch, run by test_ray.py inside a loopback-only network namespace; prints JSON.

aklab/batch/netns_run.sh .venv/bin/python -m tests.batch.ray_batch MARKER_DIR
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import aklab.batch as batch
from aklab.batch import RayEngine, Scenario
from tests.batch.helpers import SLOW, FailsOnce
from tests.batch.test_cancel import _slow_batch, _WhenRunning


def main(marker_dir: Path) -> None:
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        scenarios = [
            "Plan feature 1",
            ["Plan the login page", "And test it"],
            Scenario("flaky", "Plan it", check=FailsOnce(str(marker_dir / "flaky"))),
            Scenario("hangs", "Plan it", model=SLOW),
        ]
        result = batch.run(scenarios, engine="ray", workers=2, concurrency=4, retries=1, timeout_s=3, progress=False)
        local = batch.run(scenarios[:2], engine="local", progress=False)
        watch = _WhenRunning(count=2)
        slow = batch.start(_slow_batch(4), engine=RayEngine(workers=2), concurrency=2, progress=watch)
        assert watch.ready.wait(60)
        asked = time.monotonic()
        slow.cancel()
        slow.wait(10)
        cancel_s = time.monotonic() - asked
        print(
            json.dumps(
                {
                    "scenarios": result.scenarios.drop(columns=["wall_s"]).to_dict(orient="records"),
                    "columns": list(result.scenarios.columns),
                    "usage_columns": list(result.usage.columns),
                    "local_columns": list(local.usage.columns),
                    "usage_attempts": sorted(set(result.usage.query("scenario_id == 'flaky'")["attempt"].tolist())),
                    "local_answers": local.scenarios["answer"].tolist(),
                    "cancel_s": cancel_s,
                    "cancel_statuses": sorted(set(slow.scenarios["status"])),
                },
                default=str,
            )
        )
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
