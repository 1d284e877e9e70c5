"""The measurement worker: one process that owns the models and times runs away from the web server.

A timed run that shares its process with a web server shares the interpreter and the cores with
everything the server does for other visitors (page scripts, reruns, the first load of a model), and
its figures show that work, not the run: the app's speedups once stood 1.4 times above the command
line's. Here the server keeps no model. It sends a job (a name from `jobs.JOBS` and plain arguments)
to one worker process and gets back records; the worker runs one job at a time, so two timings never
overlap, and every timed comparison is paired (`measure.compare`).

The worker is a fresh interpreter (`python -m specviz.worker.process FD`), not a fork of the server (safe with CUDA and
with the server's threads) and not `multiprocessing`'s spawn either: spawn re-runs the parent's main module in the
child, and inside a Streamlit script run that is the page. Both ends hold one socket pair as a
`multiprocessing.connection.Connection`. Messages, as pickled tuples:

    server -> worker   ("setup", sys_path, loader, preload, aliases, server_nice, server_pid) first, then
                       ("job", id, name, kwargs) · ("cancel", id) · ("stop",)
    worker -> server   ("ready", pid, machine) · ("event", id, payload) · ("done", id, result, learned)
                       · ("cancelled", id) · ("error", id, kind, message)

`learned` counts the runs of drafters that learn across runs in this worker (`jobs.WorkerState`); shared
measurements key on it. A worker that dies is noticed by the next poll: the job raises `WorkerDied`
and the next job starts a fresh worker. No Streamlit here: `specviz.app.service` holds one `Worker`
per server and draws the notices.
"""

from __future__ import annotations

import importlib
import itertools
import logging
import os
import queue
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from .. import errors
from ..errors import SpecVizError

_log = logging.getLogger("specviz")

LOADER = "specviz.models:load_model"  # how the worker loads a model by name ("module:function")
CANCEL_GRACE_S = 60.0  # a cancelled job that has not stopped by then (a long run in flight) ends with its worker
POLL_S = 0.25  # how often a waiting page hears from the worker (and can notice that its visitor left)


class WorkerDied(SpecVizError):
    """The worker process ended while a job was in flight (killed, out of memory, a crash)."""


class Cancelled(Exception):
    """The job was given up by the page that asked for it (the visitor left, or pressed Stop)."""


class Worker:
    """The server's side of the worker: starts it, sends one job at a time, relays its events.

    `loader` names the function that loads a model by name in the worker ("module:function", imported there);
    `preload` names models the worker loads as it starts, before it says it is ready; `aliases` maps a name the
    pages use to the name the loader gets (a test's tiny model folder for "default"). `server_nice` > 0 has the
    worker lower the web server's priority that many steps under its own once it runs (see `yield_to_the_worker`).
    """

    def __init__(self, loader: str = LOADER, preload: tuple[str, ...] = (), aliases: dict[str, str] | None = None,
                 cancel_grace: float = CANCEL_GRACE_S, server_nice: int = 0):
        self.loader, self.preload, self.cancel_grace = loader, tuple(preload), cancel_grace
        self.aliases = dict(aliases or {})
        self.server_nice = server_nice  # > 0: the worker lowers the process that started it this far under itself
        self._lock = threading.Lock()  # one job in flight; the run queue keeps sessions in line before this
        self._ids = itertools.count(1)
        self._process: subprocess.Popen | None = None
        self._conn: Connection | None = None
        self._ready = False
        self.started_at: float | None = None
        self.machine: str | None = None
        self.learned: tuple[int | None, Any] = (None, None)  # (worker pid, what its drafters learned)
        self.starts = 0  # workers started so far (a restart after a death counts)

    # --- the process ---------------------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def ready(self) -> bool:
        """Started, imported, preloaded and waiting for jobs."""
        return self.alive and self._ready

    def start(self) -> None:
        """Start the worker unless it runs (returns at once: the worker says when it is ready)."""
        with self._lock:
            self._start()

    def _start(self) -> None:
        if self.alive:
            return
        self._close()
        mine, theirs = socket.socketpair()
        package_root = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))}
        self._process = subprocess.Popen([sys.executable, "-m", "specviz.worker.process", str(theirs.fileno())],
                                         pass_fds=[theirs.fileno()], env=env, stdin=subprocess.DEVNULL)
        theirs.close()
        self._conn = Connection(mine.detach())
        self._conn.send(("setup", list(sys.path), self.loader, self.preload, self.aliases, self.server_nice,
                         os.getpid()))
        self._ready, self.started_at, self.learned = False, time.monotonic(), (self._process.pid, None)
        self.starts += 1

    def stop(self, timeout: float = 5.0) -> None:
        """End the worker (it starts again with the next job)."""
        with self._lock:
            self._stop(timeout)

    def _stop(self, timeout: float = 5.0) -> None:
        process = self._process
        if process is not None and process.poll() is None:
            try:
                self._conn.send(("stop",))
                process.wait(timeout)
            except (OSError, ValueError, subprocess.TimeoutExpired):
                process.kill()
                process.wait(timeout)
        self._close()
        self._process, self._ready = None, False

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = None

    # --- jobs ----------------------------------------------------------------------------------------
    def run(self, job: str, kwargs: dict | None = None, on_event: Callable[[Any], None] | None = None,
            cancelled: Callable[[], bool] | None = None, on_wait: Callable[[float], None] | None = None,
            poll: float = POLL_S) -> Any:
        """Run one job in the worker and return its result; its events go to `on_event` as they come.

        `cancelled()` is asked at every poll: once true the worker is asked to stop the job (it stops between
        timed pairs or sweep points) and `Cancelled` is raised; a job that does not stop within the grace
        ends with its worker. `on_wait(seconds)` hears how long the worker has been starting, while it starts.
        Raises the job's SpecVizError, or `WorkerDied` when the worker ends meanwhile.
        """
        with self._lock:
            self._start()
            job_id = next(self._ids)
            self._send(("job", job_id, job, kwargs or {}))
            asked_to_stop: float | None = None
            finished = False
            try:
                while True:
                    message = self._receive(poll)
                    # The page is asked at every message, not only when none came: a job whose events flow faster
                    # than the poll would otherwise never hear that its page gave it up.
                    if asked_to_stop is None and cancelled is not None and cancelled():
                        _log.info("job %s (%s) given up by the page that asked for it", job_id, job)
                        self._send(("cancel", job_id))
                        asked_to_stop = time.monotonic()
                    if message is None:  # nothing came: check on the worker
                        if self._process.poll() is not None:
                            raise self._died()
                        if not self._ready and on_wait is not None:
                            on_wait(time.monotonic() - self.started_at)
                        if asked_to_stop is not None and time.monotonic() - asked_to_stop > self.cancel_grace:
                            self._stop(timeout=1.0)
                            finished = True
                            raise Cancelled(job)
                        continue
                    kind = message[0]
                    if kind == "ready":
                        self._ready, self.machine = True, message[2]
                        continue
                    if message[1] != job_id:  # a late word about a job given up earlier
                        continue
                    if kind == "event":
                        if on_event is not None and asked_to_stop is None:
                            on_event(message[2])
                        continue
                    finished = True
                    if kind == "done":
                        self.learned = (self.pid, message[3])
                        if asked_to_stop is not None:  # it ended before the worker heard: the page still gave it up
                            raise Cancelled(job)
                        return message[2]
                    if kind == "cancelled":
                        raise Cancelled(job)
                    raise _error(message[2], message[3])
            finally:
                if not finished and self.alive:  # the page left mid-job (an exception in on_event, a stop)
                    _log.info("job %s (%s) left by its page mid-job", job_id, job)
                    self._send(("cancel", job_id))

    def _send(self, message: tuple) -> None:
        try:
            self._conn.send(message)
        except (OSError, ValueError):
            raise self._died() from None

    def _receive(self, timeout: float):
        try:
            if self._conn.poll(timeout):
                return self._conn.recv()
        except (EOFError, OSError):
            raise self._died() from None
        return None

    def _died(self) -> WorkerDied:
        process = self._process
        code = None
        if process is not None:
            try:
                code = process.wait(2.0)
            except subprocess.TimeoutExpired:  # the connection broke but the process hangs on: end it
                process.kill()
                code = process.wait(2.0)
        self._close()
        self._process, self._ready = None, False
        _log.error("the measurement worker ended (exit code %s)", code)
        return WorkerDied(
            f"the measurement worker stopped during this run (exit code {code}), so nothing was measured; "
            "it starts again with the next run: press Run again"
        )


def _error(kind: str, message: str) -> Exception:
    """The worker's error as the page should see it: a SpecVizError of the same class where there is one."""
    cls = getattr(errors, kind, None)
    if isinstance(cls, type) and issubclass(cls, SpecVizError):
        return cls(message)
    return SpecVizError(message)


# --- the worker's side ----------------------------------------------------------------------------------
def serve(conn: Connection) -> None:
    """The worker process: load what is asked, then run jobs one at a time until told to stop."""
    _, sys_path, loader, preload, aliases, server_nice, server = conn.recv()
    sys.path[:] = sys_path  # the server's: a loader of its own (a test's tiny models) imports as it does there
    yield_to_parent(server, server_nice)
    from . import jobs  # heavy imports (torch, transformers) happen here, in the worker only

    module, _, name = loader.partition(":")
    load_model = getattr(importlib.import_module(module), name)
    models: dict[str, Any] = {}

    def load(model: str):
        if model not in models:
            models[model] = load_model(aliases.get(model, model))
        return models[model]

    incoming: queue.Queue = queue.Queue()
    cancel = threading.Event()
    current = [None]
    given_up: set[int] = set()  # jobs cancelled before they started

    def listen() -> None:  # cancel requests arrive while a job runs
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):  # the server went away
                incoming.put(None)
                return
            if message[0] == "cancel":
                if message[1] == current[0]:
                    cancel.set()
                else:
                    given_up.add(message[1])
            elif message[0] == "stop":
                incoming.put(None)
                return
            else:
                incoming.put(message)

    threading.Thread(target=listen, name="specviz-requests", daemon=True).start()
    for model in preload:
        try:
            load(model)
        except SpecVizError as exc:  # the jobs that need it will say so
            _log.warning("the measurement worker could not preload %s: %s", model, exc)
    from ..lab.measure import machine

    state = jobs.WorkerState()
    conn.send(("ready", os.getpid(), machine()))
    try:
        while (message := incoming.get()) is not None:
            yield_to_parent(server, server_nice)  # the server's threads started since the last job
            _run_one(conn, message, jobs, load, state, cancel, current, given_up)
    except (BrokenPipeError, EOFError, OSError):  # the server went away mid-job: nobody to answer
        pass


def yield_to_parent(server: int, below: int) -> None:
    """`yield_to_the_worker(server, below)` while `server`, the process that started this worker, is still its parent.
    A worker whose server has exited belongs to the system's first process (or a subreaper), which it must never
    lower: a server stopped while it started a worker once left a sandbox's init at niceness 10."""
    if below > 0 and os.getppid() == server:
        yield_to_the_worker(server, below)


def yield_to_the_worker(server: int, below: int) -> None:
    """Lower the web server's priority to `below` steps under the worker's own (niceness at most 19), never raising it.

    On a machine of two cores the server's work for other visitors (page scripts, reruns, a replay's ticks) took a
    core's worth from a timed run as it came and went, and pairs of timings measured minutes apart from each other.
    A server at niceness 10 beside a worker at 0 gets about a tenth of the CPU while the worker times a run, and all
    of it otherwise: pages redraw more slowly during a measurement, and the measurement does not carry the pages'
    load. A process may always lower the priority of its own user's processes, so this needs no privilege; the
    worker lowers its parent rather than the server itself, because a child starts at its parent's niceness and
    could not go back.

    On Linux a niceness belongs to a thread, not to the process: setting the server's pid alone reached its main
    thread only, and the threads it had started before (Streamlit's pools, torch's, the page that started the
    worker) kept working at full priority beside the timed run. So every thread of the server is lowered, and the
    worker does it again before each job (`serve`), for threads started since; a thread starts at the niceness of
    the thread that starts it, so those started by lowered threads are lowered already. For the same reason a worker
    started again after one died starts at the lowered server's niceness, not at 0; the server then goes `below`
    steps under it (10 → 19), which keeps most of the gap (CPU weights of 110 against 15, where 0 against 10 is 1024
    against 110).
    """
    nice = min(19, os.getpriority(os.PRIO_PROCESS, 0) + below)
    for thread in _threads(server):
        try:
            if os.getpriority(os.PRIO_PROCESS, thread) < nice:
                os.setpriority(os.PRIO_PROCESS, thread, nice)
        except ProcessLookupError:  # the thread ended meanwhile
            continue
        except OSError as exc:  # not permitted here: measurements still pair, only without the priority
            _log.warning("the measurement worker could not lower the web server's priority: %s", exc)
            return


def _threads(pid: int) -> list[int]:
    """The ids of a process's threads (Linux's /proc), or the process alone where they cannot be listed."""
    try:
        return sorted(int(name) for name in os.listdir(f"/proc/{pid}/task"))
    except (OSError, ValueError):
        return [pid]


def _run_one(
    conn: Connection, message: tuple, jobs, load, state, cancel: threading.Event, current: list, given_up: set[int]
) -> None:
    """Run one job and answer: its result, that it was cancelled, or its error in one line."""
    _, job_id, job, kwargs = message
    cancel.clear()
    current[0] = job_id
    if job_id in given_up:
        given_up.discard(job_id)
        conn.send(("cancelled", job_id))
        return
    context = jobs.Context(load, lambda payload: conn.send(("event", job_id, payload)), cancel.is_set, state)
    try:
        result = jobs.JOBS[job](context, **kwargs)
        answer = ("cancelled", job_id) if cancel.is_set() else ("done", job_id, result, state.learned())
    except SpecVizError as exc:
        answer = ("error", job_id, type(exc).__name__, str(exc))
    except (BrokenPipeError, EOFError):
        raise
    except Exception as exc:  # noqa: BLE001 — the page gets one line, the server log the traceback
        traceback.print_exc()
        answer = ("error", job_id, "SpecVizError", jobs.unexpected(exc))
    finally:
        current[0] = None
    conn.send(answer)


if __name__ == "__main__":
    serve(Connection(int(sys.argv[1])))
