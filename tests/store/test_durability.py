"""An append is durable when it returns: a process killed right after keeps every record it was told of."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from aklab.store import SqliteStore

WRITER = """
import sys
from aklab.core import SentMessage
from aklab.agent import AgentMessage
from aklab.store import SqliteStore
store = SqliteStore(sys.argv[1])
i = 0
while True:  # until killed
    seq = store.append(SentMessage(message=AgentMessage(content=f"m{i}")), sys.argv[2])
    print(seq, flush=True)
    i += 1
"""


def test_records_appended_before_a_sigkill_are_all_there(tmp_path: Path) -> None:
    path = tmp_path / "events.sqlite3"
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), team],
            stdout=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).parents[2],
        )
        for team in ("a", "b")  # two kernels on one file
    ]
    told: dict[str, list[int]] = {"a": [], "b": []}
    try:
        for team, writer in zip(("a", "b"), writers, strict=True):
            assert writer.stdout is not None
            for _ in range(200):  # each line is printed after its commit returned
                told[team].append(int(writer.stdout.readline()))
    finally:
        for writer in writers:
            os.kill(writer.pid, signal.SIGKILL)
            writer.wait(timeout=30)
            assert writer.stdout is not None
            writer.stdout.close()
    assert Path(f"{path}-wal").exists()  # nothing was checkpointed on the way out
    with SqliteStore(path) as store:
        for team in ("a", "b"):
            stored = [r.seq for r in store.records(team)]
            assert stored[: len(told[team])] == told[team]  # every record it was told of, in order
            contents = [r.message().message.content for r in store.records(team)]  # type: ignore[attr-defined]
            assert contents == [f"m{i}" for i in range(len(contents))]
