"""The demo model needs no provider SDK: a lab runs where ``openai`` is not installed (the
Binder environment installs aklab without it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import sys
sys.modules["openai"] = None  # importing it now raises ImportError, as if it were not installed
from aklab.lab import Lab
with Lab(store=False) as lab:
    replies = lab.ask("Plan the next sprint.", timeout=60)
    print(replies[-1].type, bool(replies[-1].content))
"""


def test_a_lab_on_the_demo_model_answers_without_the_openai_package() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "response True"
