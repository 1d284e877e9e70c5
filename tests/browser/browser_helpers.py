"""Waiting, colour and screenshot helpers for the real-browser tests."""

import contextlib
import json
import os
from pathlib import Path

import psutil

# What the tests leave behind (screenshots, server logs, measured figures): an ignored folder, so a test
# run never changes the tree. The README's pictures are made on purpose by scripts/readme_screenshots.sh.
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"
SCREENSHOTS = ARTIFACTS / "screenshots"


def wait_idle(page, timeout=180_000):
    """Connected, script finished, no running indicator."""
    page.wait_for_selector('[data-testid="stApp"][data-test-connection-state="CONNECTED"]', timeout=timeout)
    page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=timeout)
    page.wait_for_selector('[data-testid="stStatusWidget"]', state="detached", timeout=timeout)


def background(page, status: str) -> str:
    return page.locator(f"span.sv-{status}").first.evaluate("e => getComputedStyle(e).backgroundColor")


# Pictures are taken when asked for (SPECVIZ_SCREENSHOTS=1: scripts/readme_screenshots.sh sets it). In a plain run a
# picture nobody looks at costs Chromium a full raster of a 1280x2000 page (about 1 to 2 core-seconds each, some 30 in
# the suite); a failing test's page is still captured by pytest-playwright (`--screenshot only-on-failure` in
# scripts/test.sh).
TAKE_SCREENSHOTS = os.environ.get("SPECVIZ_SCREENSHOTS", "") == "1"


def screenshot(page_or_element, name: str) -> Path | None:
    """A page (or one element of it) as artifacts/screenshots/NAME.png, when pictures are asked for."""
    if not TAKE_SCREENSHOTS:
        return None
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page_or_element.screenshot(path=str(path))
    return path


def keep_figures(name: str, figures: dict) -> Path:
    """Figures a test measured, kept beside its screenshots as artifacts/NAME.json."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.json"
    path.write_text(json.dumps(figures, indent=1))
    return path


def slider(page, label: str, index: int = 0):
    """The thumb of a Streamlit slider found by its label (index picks a thumb of a range slider)."""
    return page.locator('[data-testid="stSlider"]').filter(has_text=label).get_by_role("slider").nth(index)


def press(page, label: str, key: str, times: int = 1, index: int = 0) -> None:
    """Move a slider with the keyboard (Home, End, arrows), then wait for the rerun."""
    thumb = slider(page, label, index)
    thumb.focus()
    for _ in range(times):
        thumb.press(key)
    wait_idle(page)


def choose(page, label: str, option: str) -> None:
    """Pick an option of a Streamlit selectbox found by its label."""
    page.locator('[data-testid="stSelectbox"]').filter(has_text=label).click()
    page.get_by_role("option", name=option, exact=True).click()
    wait_idle(page)


def type_number(page, label: str, value: int) -> None:
    box = page.locator('[data-testid="stNumberInput"]').filter(has_text=label).locator("input")
    box.fill(str(value))
    box.press("Enter")
    wait_idle(page)


def download_json(page, button: str = "Runs (JSON, replayable)") -> dict:
    """What a JSON download button of the page hands the user, parsed."""
    with page.expect_download() as info:
        page.get_by_role("button", name=button).click()
    return json.loads(Path(info.value.path()).read_text(encoding="utf-8"))


def browsers_cpu_seconds() -> float:
    """CPU seconds so far of every Chromium process and Playwright's driver (node) on this machine."""
    total = 0.0
    for proc in psutil.process_iter(["name"]):
        if any(name in (proc.info["name"] or "") for name in ("chrom", "node")):
            with contextlib.suppress(psutil.Error):
                total += sum(proc.cpu_times()[:2])
    return total
