"""Picklable pieces for batch tests: checks that fail once, kill their worker once, or score."""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from pathlib import Path

from aklab.llm import ModelConfig

#: A demo model that thinks for a minute per request: an attempt on it hangs until stopped.
SLOW = ModelConfig(demo_latency=60.0)


@dataclass(frozen=True)
class FailsOnce:
    """Raises on the first call (per marker file), then scores 1.0: a flaky scenario."""

    marker: str

    def __call__(self, answer: str) -> float:
        path = Path(self.marker)
        if not path.exists():
            path.write_text("failed once")
            raise RuntimeError("flaky check failed on purpose")
        return 1.0


@dataclass(frozen=True)
class KillsWorkerOnce:
    """Kills its own process with SIGKILL on the first call (per marker file): a worker that dies."""

    marker: str

    def __call__(self, answer: str) -> bool:
        path = Path(self.marker)
        if not path.exists():
            path.write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
        return True


@dataclass(frozen=True)
class WordCount:
    """An evaluator object in the pydantic-evals shape: ``evaluate(ctx)``."""

    minimum: int

    def evaluate(self, ctx: object) -> dict[str, object]:
        output = getattr(ctx, "output", "")
        return {"long_enough": len(output.split()) >= self.minimum, "mentions_input": 1.0}
