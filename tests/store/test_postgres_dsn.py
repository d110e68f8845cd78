"""A team on PostgreSQL whose DSN carries a password: the password reaches the server and
nothing else (not the lab's status, the store's location, the stored records or team rows)."""

from __future__ import annotations

import uuid

from aklab.lab import Lab
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
