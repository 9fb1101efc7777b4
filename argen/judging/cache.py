"""A persistent judgement cache in SQLite: re-scoring the same items costs no request.

Keys hash everything that can change a judgement: backend, model, base URL, rubric version,
request parameters, prompt and response. Only successful judgements are stored. WAL mode and a
busy timeout make it safe for several processes writing at once; `claim` makes a second process
judging the same items wait for the first and read its judgements instead of asking again.
"""

import fcntl
import json
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import closing, contextmanager
from pathlib import Path
from typing import NoReturn

from argen.errors import ArgenError
from argen.hashing import json_sha256

_SCHEMA = """
CREATE TABLE IF NOT EXISTS judgements (
    key TEXT PRIMARY KEY,
    judge TEXT NOT NULL,
    raw TEXT NOT NULL,
    created REAL NOT NULL
)
"""


LOCK_STRIPES = 256
"""Lock files per cache: items hash onto one of them, so the folder never grows."""


def cache_key(identity: Mapping, prompt: str, response: str) -> str:
    """The key of one judgement: the judge's identity plus the exact texts."""
    return json_sha256({"judge": dict(identity), "prompt": prompt, "response": response})


OPEN_ATTEMPTS = 60
"""Tries to open a cache another process holds busy (about 90 s in all)."""


def _busy(exc: sqlite3.OperationalError) -> bool:
    """Whether SQLite refused because another connection holds the file, not because of it."""
    return "locked" in str(exc) or "busy" in str(exc)


def _decode(raw: object) -> object:
    """A stored row's JSON value; None when the row is damaged (not JSON text)."""
    try:
        return json.loads(raw) if isinstance(raw, str | bytes) else None
    except ValueError:
        return None


class JudgementCache:
    """Raw judge fields by cache key, in one SQLite file."""

    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        for attempt in range(OPEN_ATTEMPTS):
            try:
                self._open()
                return
            except sqlite3.OperationalError as exc:
                # another process (a training rank) is creating or switching the same file
                # to WAL: busy, not damaged; the switch does not wait on the busy timeout
                if not _busy(exc) or attempt == OPEN_ATTEMPTS - 1:
                    self._damaged(exc)
                time.sleep(0.05 * (attempt + 1))
            except sqlite3.DatabaseError as exc:  # not a database, or not this cache's table
                self._damaged(exc)

    def _open(self) -> None:
        with closing(self._connect()) as db:
            if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                db.execute("PRAGMA journal_mode=WAL")
            db.execute(_SCHEMA)
            db.execute("SELECT key, raw FROM judgements LIMIT 1").fetchall()

    def _damaged(self, exc: Exception) -> NoReturn:
        raise ArgenError(
            f"the judge cache {self.path} is damaged ({exc}); delete it (judgements are asked "
            "again) or set judge.cache=false"
        ) from None

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=60, isolation_level=None)

    def get_many(self, keys: Iterable[str]) -> dict[str, object]:
        """The cached raw judgements among `keys`, as stored: the caller checks their fields
        (`rubric.raw_problem`); a row whose text is not JSON at all is left out (a miss)."""
        keys = list(dict.fromkeys(keys))
        found: dict[str, object] = {}
        with closing(self._connect()) as db:
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = db.execute(f"SELECT key, raw FROM judgements WHERE key IN ({marks})", chunk)
                found.update(
                    (key, value) for key, raw in rows if (value := _decode(raw)) is not None
                )
        return found

    def put_many(self, judge: str, entries: Mapping[str, Mapping]) -> None:
        """Store successful raw judgements (one transaction)."""
        if not entries:
            return
        now = time.time()
        rows = [(k, judge, json.dumps(dict(v), sort_keys=True), now) for k, v in entries.items()]
        try:
            with closing(self._connect()) as db:
                db.execute("BEGIN IMMEDIATE")
                db.executemany("INSERT OR REPLACE INTO judgements VALUES (?, ?, ?, ?)", rows)
                db.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            if "full" not in str(exc) and "readonly" not in str(exc):
                raise
            raise ArgenError(f"cannot write the judge cache {self.path}: {exc}") from exc

    @contextmanager
    def claim(self, name: str) -> Iterator[None]:
        """Hold the lock for `name` (a hash of a batch of items about to be judged): a second
        process judging the same batch waits here, then finds it cached. The kernel releases
        the lock when its holder dies, so a killed run never blocks another."""
        folder = self.path.with_name(self.path.name + ".locks")
        folder.mkdir(exist_ok=True)
        stripe = int(name[:8], 16) % LOCK_STRIPES
        fd = os.open(folder / f"{stripe:03d}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def __len__(self) -> int:
        with closing(self._connect()) as db:
            return db.execute("SELECT COUNT(*) FROM judgements").fetchone()[0]
