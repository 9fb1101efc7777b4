"""The private PostgreSQL cluster the Prefect server runs on (flows.postgres)."""

import asyncio
import os
import shutil
import tempfile
from pathlib import Path

import asyncpg
import pytest

from flows.postgres import database_url, owner, start_postgres
from flows.server import start_database, stop


@pytest.fixture
def cluster_root():
    """A folder outside pytest's 0700 temp folders (the cluster's owner must reach it)."""
    root = Path(tempfile.mkdtemp(prefix="argen-pg-test-"))
    yield root
    shutil.rmtree(root, ignore_errors=True)


def query(url: str) -> list:
    """Connect as Prefect's server does (asyncpg, the URL's socket) and read a row."""
    host = url.split("host=")[1]
    user = url.split("//")[1].split("@")[0]

    async def run():
        conn = await asyncpg.connect(host=host, user=user, database="prefect")
        try:
            return await conn.fetch("select current_user, current_database()")
        finally:
            await conn.close()

    return asyncio.run(run())


@pytest.mark.slow  # starts a PostgreSQL server twice: the full suite, not make quick
def test_cluster_starts_serves_the_prefect_database_and_restarts(cluster_root, tmp_path):
    proc = start_postgres(cluster_root, tmp_path / "pg.log")
    try:
        url = database_url(cluster_root)
        assert url.startswith("postgresql+asyncpg://")
        assert [tuple(r) for r in query(url)][0][1] == "prefect"
        user = owner()
        data = cluster_root / "data"
        assert data.stat().st_uid == (user.pw_uid if user else os.geteuid())
        assert oct((cluster_root / "run").stat().st_mode & 0o777) == "0o700"
        assert not list(cluster_root.glob("*.tmp"))  # initdb wrote into data.tmp, then renamed
    finally:
        stop(proc)
    assert proc.poll() is not None
    again = start_postgres(cluster_root, tmp_path / "pg.log")  # the existing cluster, kept
    try:
        assert query(database_url(cluster_root))
    finally:
        stop(again)


def test_a_folder_the_owner_cannot_reach_is_a_clear_error(tmp_path):
    """pytest's own temp folders are 0700: under root, postgres cannot enter them."""
    if owner() is None:
        pytest.skip("runs only under root, where the cluster belongs to the postgres user")
    with pytest.raises(RuntimeError, match="postgres user cannot reach"):
        start_postgres(tmp_path / "pg", tmp_path / "pg.log")


def test_server_refuses_a_sqlite_database(cluster_root, tmp_path):
    env = {"PREFECT_API_DATABASE_CONNECTION_URL": "sqlite+aiosqlite:///x.db"}
    with pytest.raises(RuntimeError, match="must name a PostgreSQL database"):
        start_database(env, cluster_root, tmp_path / "pg.log")
    named = {"PREFECT_API_DATABASE_CONNECTION_URL": "postgresql+asyncpg://team@db/prefect"}
    assert start_database(named, cluster_root, tmp_path / "pg.log") is None  # used as given
    assert not (cluster_root / "data").exists()
