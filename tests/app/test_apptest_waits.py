"""The suite's quicker AppTest waits (tests/apptest_waits.py) keep Streamlit's answers: done when the script stops,
and a stop and the same error when it does not stop in time."""

import pytest
from streamlit.components.v2 import manifest_scanner
from streamlit.testing.v1 import local_script_runner

import apptest_waits


class Runner:
    def __init__(self, stops_after: int | None):
        self.checks, self.stops_after, self.stopped, self.joined = 0, stops_after, False, False

    def script_stopped(self) -> bool:
        self.checks += 1
        return self.stops_after is not None and self.checks >= self.stops_after

    def request_stop(self) -> None:
        self.stopped = True

    def join(self) -> None:
        self.joined = True


def test_the_suite_runs_with_them_installed():
    assert local_script_runner.require_widgets_deltas is apptest_waits._wait_for_the_script
    assert manifest_scanner.scan_component_manifests() is manifest_scanner.scan_component_manifests()  # scanned once


def test_a_script_that_stops_is_seen_done():
    runner = Runner(stops_after=3)
    apptest_waits._wait_for_the_script(runner, timeout=5)
    assert runner.checks == 3 and not runner.stopped


def test_a_script_that_runs_on_is_stopped_and_reported_as_streamlit_does():
    runner = Runner(stops_after=None)
    with pytest.raises(RuntimeError, match=r"AppTest script run timed out after 0.05\(s\)"):
        apptest_waits._wait_for_the_script(runner, timeout=0.05)
    assert runner.stopped and runner.joined and 1 <= runner.checks <= 6  # every 10 ms, not every millisecond
