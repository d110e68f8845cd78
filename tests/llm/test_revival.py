"""aklab.llm.revival: a request refused by aklab's own server waits while it starts again,
and only then; the end-to-end ask is in tests/llm/test_local_auto.py."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from aklab.llm import revival
from tests.fakeserver import FakeOpenAI

URL = "http://127.0.0.1:45123/v1"
REQUEST = "http://127.0.0.1:45123/v1/chat/completions"


class _Server:
    def __init__(self, running: bool = True) -> None:
        self.running = running


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    yield
    revival.given_up(URL)


def _wait_in_thread(monkeypatch: pytest.MonkeyPatch, url: str = REQUEST) -> tuple[threading.Thread, list[bool]]:
    """Calls wait_until_serving on a thread; returns once it waits for a report."""
    result: list[bool] = []
    waiting = threading.Event()
    real_wait = revival._changed.wait

    def wait(remaining: float | None = None) -> bool:
        waiting.set()
        return real_wait(remaining)

    monkeypatch.setattr(revival._changed, "wait", wait)
    thread = threading.Thread(target=lambda: result.append(revival.wait_until_serving(url, 30)))
    thread.start()
    assert waiting.wait(30)
    return thread, result


def test_an_address_aklab_does_not_serve_is_not_waited_for() -> None:
    assert revival.wait_until_serving(REQUEST, 30) is False
    assert revival.wait_until_serving("http://127.0.0.1:9/v1/models", 30) is False


def test_a_running_server_of_aklabs_is_tried_again_at_once() -> None:
    revival.serving(URL, _Server())
    assert revival.wait_until_serving(REQUEST, 30) is True
    assert revival.wait_until_serving("http://localhost:45123/v1", 30) is False  # another host: not the same key


def test_a_request_waits_while_the_server_starts_again_then_is_tried_again(monkeypatch: pytest.MonkeyPatch) -> None:
    revival.serving(URL, _Server())
    revival.restarting(URL)
    thread, result = _wait_in_thread(monkeypatch)
    assert result == []  # still waiting
    revival.serving(URL, _Server())
    thread.join(30)
    assert result == [True]


def test_a_dead_server_not_yet_reported_counts_as_starting_again(monkeypatch: pytest.MonkeyPatch) -> None:
    dead = _Server(running=False)  # exited; its watcher has not woken up yet
    revival.serving(URL, dead)
    thread, result = _wait_in_thread(monkeypatch)
    revival.restarting(URL)
    assert result == []
    revival.serving(URL, _Server())
    thread.join(30)
    assert result == [True]


def test_giving_up_ends_the_wait_with_no_retry(monkeypatch: pytest.MonkeyPatch) -> None:
    revival.restarting(URL)
    thread, result = _wait_in_thread(monkeypatch)
    revival.given_up(URL)
    thread.join(30)
    assert result == [False]


def test_the_wait_is_bounded() -> None:
    revival.restarting(URL)  # nothing will ever report it
    assert revival.wait_until_serving(REQUEST, 0.05) is False


# -- a server in another process (a batch's driver) ---------------------------------------


@pytest.fixture
def elsewhere() -> Iterator[str]:
    """The base URL of a loopback port nothing listens on yet, registered as aklab's server
    in another process."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    revival.served_elsewhere(url)
    yield url
    revival.given_up(url)


def test_a_server_in_another_process_is_waited_for_until_its_address_answers(
    elsewhere: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    thread, result = _wait_in_thread(monkeypatch, f"{elsewhere}/chat/completions")
    assert result == []  # nothing answers there yet: still waiting
    port = int(elsewhere.rsplit(":", 1)[1].split("/")[0])
    with FakeOpenAI(port=port):  # the driver's server back on its port
        thread.join(30)
    assert result == [True]


def test_the_wait_for_a_server_in_another_process_is_bounded(elsewhere: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(revival, "ELSEWHERE_WAIT", 0.2)  # the driver gave up: nothing will answer
    assert revival.wait_until_serving(f"{elsewhere}/chat/completions", 30) is False


def test_a_server_this_process_runs_is_not_taken_for_one_elsewhere() -> None:
    here = _Server()
    revival.serving(URL, here)
    revival.served_elsewhere(URL)
    assert revival._servers["127.0.0.1:45123"] is here
    revival.restarting(URL)
    revival.served_elsewhere(URL)
    assert revival._servers["127.0.0.1:45123"] is None  # still starting again here
