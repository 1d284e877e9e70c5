"""Waiting, colour and screenshot helpers for the real-browser tests."""

from pathlib import Path

SCREENSHOTS = Path(__file__).resolve().parents[2] / "screenshots"


def wait_idle(page, timeout=180_000):
    """Connected, script finished, no running indicator."""
    page.wait_for_selector('[data-testid="stApp"][data-test-connection-state="CONNECTED"]', timeout=timeout)
    page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=timeout)
    page.wait_for_selector('[data-testid="stStatusWidget"]', state="detached", timeout=timeout)


def background(page, status: str) -> str:
    return page.locator(f"span.sv-{status}").first.evaluate("e => getComputedStyle(e).backgroundColor")


def screenshot(page, name: str) -> Path:
    SCREENSHOTS.mkdir(exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path
