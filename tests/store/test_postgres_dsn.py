"""A team on PostgreSQL whose DSN carries a password: the password reaches the server and
nothing else (not the lab's status, the store's location, the stored records or team rows)."""

from __future__ import annotations

import socket
import uuid

import pytest

from aklab.lab import Lab
from aklab.store import StoreError
from aklab.store._postgres import PostgresStore

PASSWORD = "pw-" + uuid.uuid4().hex  # the local test server trusts 127.0.0.1: it is sent, then unused


def test_a_password_in_the_dsn_is_shown_and_stored_nowhere(postgres_dsn: str) -> None:
    from psycopg.conninfo import make_conninfo

    dsn = make_conninfo(postgres_dsn, password=PASSWORD)
    assert PASSWORD in dsn
    schema = f"t_{uuid.uuid4().hex[:12]}"
    with PostgresStore(dsn, schema=schema) as store:
        assert PASSWORD not in store.location and "postgresql://" in store.location
        with Lab(store=store) as lab:
            result = lab.ask("What is 2+2?")
            assert "@Manager (response)" in result.as_text()
            status = lab.status()
            team_id = lab.team_id
        assert f"store: {store.location}" in status and PASSWORD not in status
        records = store.records(team_id)
        assert len(records) > 5
        assert all(PASSWORD not in str(r.payload) for r in records)
        [team] = [t for t in store.teams() if t.team_id == team_id]
        assert PASSWORD not in repr(team)


def test_a_server_that_is_not_running_is_said_in_one_line() -> None:
    """libpq's hint came on a second line ("\\n\\tIs the server running on that host..."), so
    the store line of lab.status() ran over two lines."""
    pytest.importorskip("psycopg")
    with socket.socket() as sock:  # a loopback port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    dsn = f"postgresql://aklab@127.0.0.1:{port}/aklab_test"
    with pytest.raises(StoreError) as caught:
        PostgresStore(dsn)
    said = str(caught.value)
    assert "\n" not in said and "cannot connect" in said and "Is the server running" in said
    with Lab(store=dsn) as lab:
        (line,) = [line for line in lab.status().splitlines() if line.startswith("store:")]
    assert "Is the server running" in line and line.endswith("the team runs in memory only")
