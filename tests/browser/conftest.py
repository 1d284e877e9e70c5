"""Real-browser fixtures: a Streamlit server on a free port and Debian's Chromium via Playwright."""

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import expect

from browser_helpers import ARTIFACTS

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
HERE = Path(__file__).resolve().parent
# Playwright's `expect` retries for 5 s by default: a rerun of a page with charts can take longer on a
# loaded 2-core machine. What is checked stays the same; only the patience grows.
expect.set_options(timeout=20_000)


def pytest_collection_modifyitems(items):
    for item in items:  # every test in this folder is a browser test, whatever its name
        if HERE in item.path.resolve().parents:
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian's chromium is missing: run scripts/install.sh dev (the README's test command does)")
    return {
        **browser_type_launch_args,
        "executable_path": CHROMIUM,
        "args": ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"],
    }


# The browsers share the server's two cores here, where in a room each learner's browser runs on a machine of its
# own: Streamlit's animations (the running indicator, spinners) would repaint at 60 frames a second in software and
# take the CPU the server and its worker need. Every context of the suite draws them still.
STILL = """
document.addEventListener("DOMContentLoaded", () => {
  const style = document.createElement("style");
  style.textContent = "*, *::before, *::after { animation: none !important; transition: none !important; }";
  document.head.appendChild(style);
});
"""


@pytest.fixture(scope="session")
def browser(browser):
    """pytest-playwright's browser, whose every new context (the tests' own and the `page` fixture's) draws still."""
    new_context = browser.new_context

    def still_context(*args, **kwargs):
        context = new_context(*args, **kwargs)
        context.add_init_script(STILL)
        return context

    browser.new_context = still_context
    return browser


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args):
    return {**browser_context_args, "viewport": {"width": 1280, "height": 2000}}


# Timed pairs per measured run on the test servers (SPECVIZ_PAIRS): one where a test is about what a page shows
# and how sessions share a server, not about the pairing, which core and AppTest tests check at the app's default of
# 3 and the session server's pages show over 2. SPECVIZ_TEST_PAIRS=3 times them as the app does: the benchmarks
# and the screenshot script that run these tests set it.
QUICK_PAIRS = int(os.environ.get("SPECVIZ_TEST_PAIRS", "1"))


@contextlib.contextmanager
def serve(env: dict | None = None, log_name: str = "streamlit.log", pairs: int | None = None):
    """A Streamlit server for app.py on a free port, yielding (url, process); terminated afterwards.

    `pairs`: the timed pairs of each measured run (SPECVIZ_PAIRS); None leaves the app's default.

    The server keeps its priority (SPECVIZ_SERVER_NICE=0 unless the environment sets it): a real server yields to its
    measurement worker, and here it would also yield to the other pytest worker's tests, which share its session's
    scheduling group (in the first suite run after the worker lowered every thread of its server, a learner's page
    stayed 30 s behind its presenter's). The lowering itself is tested in tests/app/test_worker.py.

    Nor does it add pairs on a busy machine (SPECVIZ_BUSY_PAIRS=0 unless the environment sets it): beside the other
    pytest worker every run would count as busy and take longer, and the pages' tests count the pairs they show.
    The added pairs are tested in tests/core/test_busy.py and tests/app/test_page_rounds.py."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    log = open(ARTIFACTS / log_name, "w")
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            "app.py",
            "--server.headless",
            "true",
            "--server.address",
            "127.0.0.1",
            "--server.port",
            str(port),
            "--browser.gatherUsageStats",
            "false",
            "--server.fileWatcherType",
            "none",
        ],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "SPECVIZ_SERVER_NICE": os.environ.get("SPECVIZ_SERVER_NICE", "0"),
             "SPECVIZ_BUSY_PAIRS": os.environ.get("SPECVIZ_BUSY_PAIRS", "0"),
             **({"SPECVIZ_PAIRS": str(pairs)} if pairs else {}), **(env or {})},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail(f"the Streamlit server did not become healthy in 60 s; see artifacts/{log_name}")
        yield url, server
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:  # a run still measuring holds the process: end it
            server.kill()
            server.wait(timeout=20)
        log.close()


@pytest.fixture(scope="session")
def app_url():
    with serve(pairs=2) as (url, _):  # two pairs: a median and a spread to show, in two thirds of the default's time
        yield url


ROOM_KEY = "teacher-7f3a"  # the presenter key of the room server below


@pytest.fixture(scope="session")
def room_url():
    """A server in room mode with a presenter key, as `bash scripts/app.sh --room --presenter-key …` starts it, shared
    by the room's modules (the race followed, links, presenter and followers). Each test opens its presenter first,
    so a slide an earlier test left on the stage is replaced before any follower looks."""
    with serve({"SPECVIZ_ROOM": "1", "SPECVIZ_PRESENTER_KEY": ROOM_KEY}, "streamlit-room.log", QUICK_PAIRS) as (url, _):
        yield url


@pytest.fixture(scope="session")
def lesson_server():
    """A server for the lesson's browser tests: "no model loaded" is a claim about the whole app process, and the
    session-wide server above has loaded the target by the time they run. The lesson's modules share this one (each
    server costs a Python start with torch and transformers imported)."""
    with streamlit_server("streamlit-lesson.log") as url:
        yield url


@contextlib.contextmanager
def streamlit_server(log_name: str = "streamlit.log"):
    """A server of its own for a test module; its URL."""
    with serve(log_name=log_name, pairs=QUICK_PAIRS) as (url, _):
        yield url
