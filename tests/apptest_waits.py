"""Streamlit's AppTest without two costs of its own, for the page tests (tests/conftest.py installs this).

- Every new AppTest scans all installed distributions for Streamlit components (`scan_component_manifests`): about
  0.27 s each on a 2-core Xeon, and the suite makes over a hundred of them. The packages do not change during a test
  run, so the scan is made once per process.
- A run waits for its script by waking every millisecond (`require_widgets_deltas`), and each wake-up walks the
  run's event list and takes the interpreter lock from the page's own thread. A page test mostly waits for the
  measurement worker, so those wake-ups took CPU the worker needed. Here it wakes every POLL_S instead: a run is seen
  done at most that much later, with the same timeout and the same error.

Nothing a page draws or does changes. When a Streamlit release renames either function, its own version is kept.
"""

from __future__ import annotations

import functools
import time

POLL_S = 0.01


def install() -> None:
    from streamlit.components.v2 import manifest_scanner
    from streamlit.testing.v1 import local_script_runner

    if hasattr(manifest_scanner, "scan_component_manifests"):
        manifest_scanner.scan_component_manifests = functools.cache(manifest_scanner.scan_component_manifests)
    if hasattr(local_script_runner, "require_widgets_deltas"):
        local_script_runner.require_widgets_deltas = _wait_for_the_script


def _wait_for_the_script(runner, timeout: float = 3) -> None:
    """Streamlit's `require_widgets_deltas`, checking every POLL_S."""
    start = time.time()
    while time.time() - start < timeout:
        time.sleep(POLL_S)
        if runner.script_stopped():
            return
    runner.request_stop()  # as Streamlit's: stop the script before saying it timed out
    runner.join()
    raise RuntimeError(f"AppTest script run timed out after {timeout}(s)")
