"""The class's state in one small SQLite file: the room's answers to each question, and the challenges.

Every session of a server reads and writes one `ClassStore` (kept in `st.cache_resource`), so one connection
sits behind one lock; SQLite keeps it on disk, so a learner's reload (a new browser session) finds its answers
and entries again, and a server restart keeps the tallies, the revealed questions and every challenge with its
leaderboard. What lives in the server's memory only (the run queue, the shared measurements in flight, the
presenter's stage) starts afresh after a restart.

A learner is an opaque id (the app keeps it in a browser cookie): no names are stored. No Streamlit here; the
tests drive the store with threads.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .challenge import Challenge, Choice, Result, Row, check_challenge, ranked
from .tally import Tally

_log = logging.getLogger("specviz")

SCHEMA = """
CREATE TABLE IF NOT EXISTS answers (qid TEXT NOT NULL, learner TEXT NOT NULL, choice TEXT NOT NULL, at REAL NOT NULL,
                                    PRIMARY KEY (qid, learner));
CREATE TABLE IF NOT EXISTS revealed (qid TEXT PRIMARY KEY, at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS challenges (id INTEGER PRIMARY KEY AUTOINCREMENT, prompt TEXT NOT NULL,
                                       tokens INTEGER NOT NULL, opened_at REAL NOT NULL, closed_at REAL);
CREATE TABLE IF NOT EXISTS results (challenge INTEGER NOT NULL, choice TEXT NOT NULL, result TEXT NOT NULL,
                                    measurements INTEGER NOT NULL DEFAULT 1, PRIMARY KEY (challenge, choice));
CREATE TABLE IF NOT EXISTS entries (challenge INTEGER NOT NULL, learner TEXT NOT NULL, choice TEXT NOT NULL,
                                    at REAL NOT NULL, PRIMARY KEY (challenge, learner, choice));
"""


class ClassStore:
    """Answers, reveals, challenges, results and entries behind one lock, in the SQLite file at `path`."""

    def __init__(self, path: str | Path, clock: Callable[[], float] = time.time):
        self.path, self._clock = Path(path), clock
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._conn = self._connect()
        except sqlite3.DatabaseError:  # not a database (a damaged file): keep it aside and start afresh
            aside = self.path.with_name(f"{self.path.name}.damaged-{int(self._clock())}")
            self.path.rename(aside)
            _log.warning("the class store %s was damaged; kept as %s, a fresh one started", self.path, aside)
            self._conn = self._connect()

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, check_same_thread=False, timeout=10, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(SCHEMA)
        except sqlite3.DatabaseError:
            conn.close()
            raise
        return conn

    @contextmanager
    def _tx(self, write: bool = True) -> Iterator[sqlite3.Connection]:
        """One transaction, with no other session in between (a read sees one state of the file)."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    # --- the room's predictions -------------------------------------------------------------------------
    def answer(self, qid: str, learner: str, choice: str) -> bool:
        """Count (or change) this learner's answer; False once the question is revealed (answers are final)."""
        with self._tx() as db:
            if db.execute("SELECT 1 FROM revealed WHERE qid = ?", (qid,)).fetchone():
                return False
            db.execute("INSERT OR REPLACE INTO answers VALUES (?, ?, ?, ?)", (qid, learner, choice, self._clock()))
            return True

    def answer_of(self, qid: str, learner: str) -> str | None:
        with self._tx(write=False) as db:
            row = db.execute("SELECT choice FROM answers WHERE qid = ? AND learner = ?", (qid, learner)).fetchone()
        return row[0] if row else None

    def tally(self, qid: str, options: tuple[str, ...]) -> Tally:
        """The counts by option (an answer that is no longer an option is not counted)."""
        with self._tx(write=False) as db:
            counts = dict(db.execute("SELECT choice, COUNT(*) FROM answers WHERE qid = ? GROUP BY choice", (qid,)))
            revealed = db.execute("SELECT 1 FROM revealed WHERE qid = ?", (qid,)).fetchone() is not None
        return Tally(tuple(options), tuple(counts.get(o, 0) for o in options), revealed)

    def reveal(self, qid: str) -> None:
        with self._tx() as db:
            db.execute("INSERT OR IGNORE INTO revealed VALUES (?, ?)", (qid, self._clock()))

    def revealed(self, qid: str) -> bool:
        with self._tx(write=False) as db:
            return db.execute("SELECT 1 FROM revealed WHERE qid = ?", (qid,)).fetchone() is not None

    def reset(self, qid: str | None = None) -> None:
        """Ask the question afresh: its answers and its reveal are gone (every question's, with None)."""
        where, args = ("WHERE qid = ?", (qid,)) if qid is not None else ("", ())
        with self._tx() as db:
            db.execute(f"DELETE FROM answers {where}", args)
            db.execute(f"DELETE FROM revealed {where}", args)

    # --- the drafting challenge ---------------------------------------------------------------------------
    def open_challenge(self, prompt: str, tokens: int) -> Challenge:
        """A new challenge; the one open before it closes. SpecVizError for a prompt or length refused."""
        check_challenge(prompt, tokens)
        now = self._clock()
        with self._tx() as db:
            db.execute("UPDATE challenges SET closed_at = ? WHERE closed_at IS NULL", (now,))
            cid = db.execute("INSERT INTO challenges (prompt, tokens, opened_at) VALUES (?, ?, ?)",
                             (prompt, tokens, now)).lastrowid
        return Challenge(cid, prompt, tokens, now)

    def challenge(self) -> Challenge | None:
        """The latest challenge, open or closed (None before the first)."""
        with self._tx(write=False) as db:
            row = db.execute("SELECT id, prompt, tokens, opened_at, closed_at FROM challenges "
                             "ORDER BY id DESC LIMIT 1").fetchone()
        return Challenge(*row) if row else None

    def close_challenge(self, cid: int) -> None:
        with self._tx() as db:
            db.execute("UPDATE challenges SET closed_at = ? WHERE id = ? AND closed_at IS NULL", (self._clock(), cid))

    def _open(self, db: sqlite3.Connection, cid: int) -> bool:
        return db.execute("SELECT 1 FROM challenges WHERE id = ? AND closed_at IS NULL", (cid,)).fetchone() is not None

    def result(self, cid: int, choice: Choice) -> Result | None:
        """The measurement of this choice in this challenge, if it has one."""
        with self._tx(write=False) as db:
            row = db.execute("SELECT result FROM results WHERE challenge = ? AND choice = ?",
                             (cid, choice.key())).fetchone()
        return Result.from_json(row[0]) if row else None

    def enter(self, cid: int, learner: str, result: Result, measured: bool = True) -> Result | None:
        """This learner's entry of a choice: the result kept for that choice (the first measurement of it stays,
        so identical entries show one figure). `measured` says whether this entry's run was timed for it (False
        when it was served an identical measurement); the board counts the measurements of each choice. None when
        the challenge is closed: the entry is refused."""
        key = result.choice.key()
        with self._tx() as db:
            if not self._open(db, cid):
                return None
            # the session that was served may enter before the one that measured: only a measured entry counts
            new = db.execute(
                "INSERT OR IGNORE INTO results VALUES (?, ?, ?, ?)", (cid, key, result.to_json(), int(measured))
            ).rowcount
            if not new and measured:
                db.execute("UPDATE results SET measurements = measurements + 1 WHERE challenge = ? AND choice = ?",
                           (cid, key))
            db.execute("INSERT OR IGNORE INTO entries VALUES (?, ?, ?, ?)", (cid, learner, key, self._clock()))
            kept = db.execute("SELECT result FROM results WHERE challenge = ? AND choice = ?", (cid, key)).fetchone()
        return Result.from_json(kept[0])

    def leaderboard(self, cid: int, learner: str | None = None) -> list[Row]:
        """Every measured choice of the challenge, ranked; `learner`'s own entries marked."""
        with self._tx(write=False) as db:  # a choice served from a run measured on another page was timed once
            measured = [(Result.from_json(r), n) for r, n in db.execute(
                "SELECT result, MAX(measurements, 1) FROM results WHERE challenge = ?", (cid,))]
            entries = dict(db.execute("SELECT choice, COUNT(*) FROM entries WHERE challenge = ? GROUP BY choice",
                                      (cid,)))
            mine = {c for (c,) in db.execute("SELECT choice FROM entries WHERE challenge = ? AND learner = ?",
                                             (cid, learner))}
        return ranked(measured, entries, mine)

    def last_choice(self, cid: int, learner: str) -> Choice | None:
        """This learner's latest entry (a reloaded page starts from it)."""
        with self._tx(write=False) as db:
            row = db.execute("SELECT choice FROM entries WHERE challenge = ? AND learner = ? ORDER BY at DESC LIMIT 1",
                             (cid, learner)).fetchone()
        return Choice.from_key(row[0]) if row else None
