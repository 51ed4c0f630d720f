"""``ScoreCache``: test runs by (tree hash, spec fingerprint, environment key) in an SQLite file.

The same state is never tested twice with the same spec in the same environment (interpreter,
installed packages, programs, variables, declared input files: see ``envkey``), in one search
or across runs. Several
processes share one file: WAL journal, a busy timeout, and every write in an ``IMMEDIATE``
transaction. A connection is opened per operation, so a cache object is safe to use from
several threads too.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path

from treesearch.errors import ScoringError
from treesearch.scoring.results import FORMAT_VERSION, RunStatus, TestRun
from treesearch.scoring.spec import TestSpec

SCHEMA_VERSION = 2
_BUSY_TIMEOUT_MS = 30_000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    tree        TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    environment TEXT NOT NULL,
    created_at  REAL NOT NULL,
    status      TEXT NOT NULL,
    summary     TEXT NOT NULL,
    command     TEXT NOT NULL,
    seconds     REAL NOT NULL,
    format      INTEGER NOT NULL,
    run         TEXT NOT NULL,
    PRIMARY KEY (tree, fingerprint, environment)
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


@dataclass(frozen=True)
class CacheEntry:
    """One cached run, as listed by ``ScoreCache.entries``."""

    tree: str
    """Tree hash of the tested state."""
    fingerprint: str
    """Fingerprint of the test spec."""
    environment: str
    """Key of the environment the run was made in (``envkey.environment_key``)."""
    created_at: float
    """When the run was stored (seconds since the epoch)."""
    status: str
    """The run's ``RunStatus`` value."""
    summary: str
    """``TestRun.summary()`` of the run."""
    command: str
    """The command as run."""
    seconds: float
    """How long the run took."""


class ScoreCache:
    """Test runs keyed by (tree hash, spec fingerprint, environment key), in the SQLite file
    ``path``."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        """The SQLite file (created with its folder on first use)."""
        self._ready = False

    def __repr__(self) -> str:
        return f"ScoreCache({str(self.path)!r})"

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        try:
            if not self._ready:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise ScoringError(f"cannot open the score cache {self.path}: {exc}") from exc
        with closing(conn):
            try:
                conn.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
                if not self._ready:
                    self._init(conn)
                yield conn
            except sqlite3.Error as exc:
                raise ScoringError(f"score cache {self.path}: {exc}") from exc

    def _init(self, conn: sqlite3.Connection) -> None:
        # Switching to WAL needs a moment alone with the file; the busy handler is not always
        # consulted for it, so another process's first use can make it fail: retry briefly.
        deadline = time.monotonic() + _BUSY_TIMEOUT_MS / 1000
        while True:
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                break
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        conn.execute("PRAGMA synchronous = NORMAL")
        with _transaction(conn):
            has_meta = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'"
            ).fetchone()
            row = (
                conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
                if has_meta
                else None
            )
            if row is not None and row[0] == "1":
                # Schema 1 keyed runs without their environment: those rows cannot be trusted
                # under another interpreter or package set, so they go.
                conn.execute("DROP TABLE IF EXISTS runs")
                conn.execute("DELETE FROM meta WHERE key = 'schema'")
                row = None
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            if row is None:
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES ('schema', ?)", (str(SCHEMA_VERSION),)
                )
            elif row[0] != str(SCHEMA_VERSION):
                raise ScoringError(
                    f"score cache {self.path} has schema {row[0]}, this treesearch writes "
                    f"{SCHEMA_VERSION}: clear it (`treesearch cache clear`) or delete the file"
                )
        self._ready = True

    def get(self, tree: str, fingerprint: str, environment: str = "") -> TestRun | None:
        """The cached run of ``tree`` under the spec ``fingerprint`` in ``environment``, or
        ``None``.

        A row written by another format version, or unreadable, is a miss.
        """
        with self._connect() as conn:
            row = conn.execute(
                "SELECT format, run FROM runs WHERE tree = ? AND fingerprint = ? "
                "AND environment = ?",
                (tree, fingerprint, environment),
            ).fetchone()
        if row is None or row[0] != FORMAT_VERSION:
            return None
        try:
            return TestRun.from_dict(json.loads(row[1]))
        except (ValueError, ScoringError):
            return None

    def put(self, tree: str, fingerprint: str, run: TestRun, environment: str = "") -> None:
        """Store (or replace) the run of ``tree`` under ``fingerprint`` in ``environment``."""
        if not tree or not fingerprint:
            raise ScoringError("a cached run needs a tree hash and a spec fingerprint")
        data = json.dumps(run.to_dict(), separators=(",", ":"))
        with self._connect() as conn, _transaction(conn):
            conn.execute(
                "INSERT OR REPLACE INTO runs (tree, fingerprint, environment, created_at, status, "
                "summary, command, seconds, format, run) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    tree,
                    fingerprint,
                    environment,
                    time.time(),
                    run.status.value,
                    run.summary(),
                    run.command,
                    run.seconds,
                    FORMAT_VERSION,
                    data,
                ),
            )

    def entries(self, tree: str | None = None, *, spec: TestSpec | None = None) -> list[CacheEntry]:
        """Cached runs, newest first; only those of ``tree`` (a hash or a prefix of one of at
        least 4 characters) and/or of ``spec`` when given."""
        where, args = _filter(tree, spec)
        with self._connect() as conn:
            rows = conn.execute(
                "SELECT tree, fingerprint, environment, created_at, status, summary, command, "
                "seconds "
                f"FROM runs{where} ORDER BY created_at DESC",
                args,
            ).fetchall()
        return [CacheEntry(*row) for row in rows]

    def clear(self, tree: str | None = None, *, spec: TestSpec | None = None) -> int:
        """Delete cached runs (all of them, or those of ``tree``/``spec``); returns how many."""
        where, args = _filter(tree, spec)
        with self._connect() as conn, _transaction(conn):
            cursor = conn.execute(f"DELETE FROM runs{where}", args)
            return cursor.rowcount

    def __len__(self) -> int:
        with self._connect() as conn:
            (count,) = conn.execute("SELECT COUNT(*) FROM runs").fetchone()
        return int(count)


def _filter(tree: str | None, spec: TestSpec | None) -> tuple[str, list[str]]:
    clauses: list[str] = []
    args: list[str] = []
    if tree is not None:
        tree = tree.strip().lower()
        if len(tree) < 4 or any(c not in "0123456789abcdef" for c in tree):
            raise ScoringError(f"not a tree hash or a prefix of at least 4 hex digits: {tree!r}")
        clauses.append("tree >= ? AND tree < ?")
        args += [tree, tree + "g"]  # every hex string with this prefix sorts in between
    if spec is not None:
        clauses.append("fingerprint = ?")
        args.append(spec.fingerprint())
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), args


@contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def worth_caching(run: TestRun) -> bool:
    """Whether a full run of a state may be cached: a command that could not start says nothing
    about the state; everything else does (a timeout too: the same state would hang again)."""
    return not (run.status is RunStatus.CRASHED and run.exit_code is None and not run.timed_out)
