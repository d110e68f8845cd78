from __future__ import annotations

import pytest

from aklab.core import Activity, Mailbox


def test_the_mailbox_is_fifo_and_counts_tagged_messages() -> None:
    box = Mailbox()
    box.classifier = lambda m: m == "cancel"
    for item in ["a", "cancel", "b", "cancel"]:
        box.put(item)
    assert box.has_tagged() and len(box) == 4
    assert box.get() == "a"
    removed = box.remove(lambda m: True, tagged_only=True)
    assert removed == ["cancel", "cancel"]
    assert not box.has_tagged()
    assert list(box.messages()) == ["b"]


def test_remove_reports_each_removed_message() -> None:
    box = Mailbox()
    seen: list[str] = []
    box.on_remove = seen.append
    box.put("x")
    box.put("y")
    box.remove(lambda m: m == "y")
    assert seen == ["y"] and list(box.messages()) == ["x"]


def test_activity_reaches_idle_only_when_all_work_ended() -> None:
    activity = Activity()
    activity.begin(2)
    assert not activity.wait_idle(0.01)
    activity.end()
    assert not activity.wait_idle(0.01)
    activity.end()
    assert activity.wait_idle(0.01)


def test_arrivals_after_costs_only_the_new_arrivals() -> None:
    box = Mailbox()
    for item in ["a", "b"]:
        box.put(item)
    seen, seq = box.arrivals_after(0)
    assert seen == ["a", "b"] and seq == 2
    box.put("c")
    assert box.get() == "a"
    assert box.arrivals_after(seq) == (["c"], 3)
    assert box.arrivals_after(3) == ([], 3)


def test_a_tagged_arrival_is_announced_on_the_putting_thread_after_it_is_queued() -> None:
    box = Mailbox()
    box.classifier = lambda m: m == "cancel"
    seen: list[tuple[str, int]] = []
    box.on_tagged = lambda: seen.append(("tagged", len(box)))
    box.put("a")
    box.put("cancel")
    assert seen == [("tagged", 2)]


def test_a_closed_mailbox_refuses_mail_and_hands_over_what_was_waiting_once() -> None:
    import pykka

    box = Mailbox()
    box.put("a")
    assert box.close() == ["a"]
    assert box.close() == []
    with pytest.raises(pykka.ActorDeadError):
        box.put("b")
    assert list(box.messages()) == ["a"]  # left for pykka to answer any asker


def test_an_ask_to_a_closed_mailbox_gets_actor_dead_in_its_future() -> None:
    from types import SimpleNamespace

    import pykka

    box = Mailbox()
    box.close()
    future = pykka.ThreadingFuture[None]()
    box.put(SimpleNamespace(message="question", reply_to=future))
    with pytest.raises(pykka.ActorDeadError):
        future.get(timeout=1)
