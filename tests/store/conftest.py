"""Fixtures: a store of each kind, and one real PostgreSQL server for the session."""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from aklab.store import EventStore, SqliteStore
from tests.store.pg_server import LocalPostgres, _alive, find_bin


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """A real PostgreSQL server on 127.0.0.1 for the whole session (see pg_server.py)."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip("psycopg is not installed: pip install 'psycopg[binary]' (the 'postgres' extra)")
    bin_dir = find_bin()
    if bin_dir is None:
        pytest.skip("no PostgreSQL binaries under /usr/lib/postgresql/*/bin: apt-get install -y postgresql")
    root = Path(tempfile.mkdtemp(prefix="aklab-pg-"))
    server = LocalPostgres(root, bin_dir)
    try:
        yield server.start()
    finally:
        pid = server.pid
        server.stop()
        assert pid is None or not _alive(pid), f"postgres pid {pid} still running"
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(params=["sqlite", "postgres"])
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_store(store_kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Callable[[], EventStore]]:
    """A factory: ``make_store()`` opens (another connection to) this test's store."""
    opened: list[EventStore] = []
    if store_kind == "sqlite":
        path = tmp_path / "events.sqlite3"

        def make() -> EventStore:
            opened.append(SqliteStore(path))
            return opened[-1]
    else:
        dsn = request.getfixturevalue("postgres_dsn")
        from aklab.store._postgres import PostgresStore

        schema = f"t_{uuid.uuid4().hex[:12]}"  # a fresh schema per test

        def make() -> EventStore:
            opened.append(PostgresStore(dsn, schema=schema))
            return opened[-1]

    yield make
    for s in opened:
        s.close()


@pytest.fixture
def store(make_store: Callable[[], EventStore]) -> EventStore:
    return make_store()
