"""Console output for scripts: the conversation as it happens, then a usage table."""

from __future__ import annotations

import sys
import threading
from typing import TextIO

from aklab.agent import AgentMessage
from aklab.core import Message, SentMessage
from aklab.lab.session import Lab

__all__ = ["ConsolePrinter", "run_demo", "stored_line"]


class ConsolePrinter:
    """Prints each message as it is sent (serialised by a lock; scripts only)."""

    def __init__(self, out: TextIO = sys.stdout) -> None:
        self.out = out
        self._lock = threading.Lock()

    def __call__(self, record: Message) -> None:
        if isinstance(record, SentMessage) and isinstance(record.message, AgentMessage):
            msg = record.message
            sender = msg.sender.name if msg.sender else "?"
            recipient = msg.recipient.name if msg.recipient else "?"
            body = msg.content.replace("\n", "\n    ")
            with self._lock:
                print(f"[{sender} → {recipient}] {msg.type}:\n    {body}", file=self.out, flush=True)


def run_demo(message: str, out: TextIO = sys.stdout) -> int:
    import pandas as pd

    with Lab() as lab:
        lab.recorder.listeners.append(ConsolePrinter(out))
        print(f"aklab demo: team {lab.spec.name!r} on the offline demo model\n", file=out)
        replies = lab.ask(message, timeout=120)
        lab.wait(10)
        print("\nUsage:", file=out)
        with pd.option_context("display.width", 120, "display.max_columns", 20):
            print(lab.usage().to_string(index=False), file=out)
        print(stored_line(lab), file=out)
        errors = lab.errors()
        for error in errors:
            print(f"error: {error}", file=out)
        if not replies:
            print("error: no reply reached @Human", file=out)
            return 1
        return 1 if errors else 0


def stored_line(lab: Lab) -> str:
    """Where the exchange was recorded and how to read it back, or why it was not."""
    if lab.store_warning:
        return f"warning: {lab.store_warning}"
    if lab.store is None:
        return "Not recorded: the event store is off (AKLAB_STORE)."
    from aklab.lab.persist import shown_location

    short = lab.team_id[:8]
    return (
        f"Recorded in the event store ({shown_location(lab.store.location)}) as team {short}:\n"
        f"aklab.history() reads it back; %aklab resume {short} takes the team up again in a notebook."
    )
