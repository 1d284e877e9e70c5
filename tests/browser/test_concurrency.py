"""Two browser sessions on the Rounds page at once, with different drafts and settings.

The server shares one cached target between sessions (and runs one model call at a time); each
session's result must be exactly the run made alone with its own settings: same tokens, same
drafted/accepted structure per round. Results are read from what the user can download (the
replayable JSON export) and compared with `generate` in this process on the same model.
"""

import pytest
from playwright.sync_api import expect

from specviz.config import Decoding
from specviz.decode import generate
from specviz.drafters import build_drafter
from specviz.models import load_model

from browser_helpers import download_json, screenshot, wait_idle

STRUCTURE = ("gamma", "drafted", "n_accepted", "next_token", "next_kind", "emitted")
RECORDED = "Showing a run recorded by the project"


def set_up(page, app_url, draft: str, gamma: int, temperature: float, seed: int) -> None:
    """Each learner's settings through a deep link, as a room hands them out (links are tested in test_room.py)."""
    page.goto(f"{app_url}/Rounds?draft={draft}&gamma={gamma}&max_new=16&temperature={temperature}&seed={seed}")
    wait_idle(page)
    assert page.locator('[data-testid="stSelectbox"]').filter(has_text="Draft").locator("input").input_value() == draft


@pytest.fixture(scope="module")
def target():
    return load_model("default")


def test_two_sessions_at_once_get_the_runs_they_would_get_alone(browser, app_url, target):
    sessions = {  # draft, γ, temperature, seed
        "ngram": (browser.new_context(viewport={"width": 1280, "height": 2000}), 3, 0.8, 3),
        "layerskip:8": (browser.new_context(viewport={"width": 1280, "height": 2000}), 2, 0.0, 0),
    }
    pages = {}
    for draft, (context, gamma, temperature, seed) in sessions.items():
        pages[draft] = page = context.new_page()
        set_up(page, app_url, draft, gamma, temperature, seed)
        expect(page.get_by_text(RECORDED)).to_be_visible()

    for page in pages.values():  # both presses before either run ends
        page.locator(".st-key-rounds-run button").first.click()
    for page in pages.values():
        expect(page.get_by_text(RECORDED)).to_have_count(0, timeout=300_000)
        wait_idle(page, timeout=300_000)
        assert page.locator('[data-testid="stException"]').count() == 0

    for draft, page in pages.items():
        _, gamma, temperature, seed = sessions[draft]
        (record,) = download_json(page).values()
        run = record["spec"]
        assert run["draft"] == draft
        assert (run["settings"]["gamma"], run["settings"]["max_new_tokens"], run["settings"]["seed"]) == (
            gamma,
            16,
            seed,
        )
        assert run["settings"]["sampling"]["temperature"] == pytest.approx(temperature)

        alone = generate(
            target, build_drafter(draft, target, load_model), run["prompt"], Decoding.from_dict(run["settings"])
        )
        assert run["output_ids"] == alone.output_ids, f"{draft}: the session's output differs from the run alone"
        assert [{k: r[k] for k in STRUCTURE} for r in run["rounds"]] == [
            {k: getattr(r, k) for k in STRUCTURE} for r in alone.rounds
        ]
        assert (
            record["baseline"]["output_ids"]
            == generate(target, None, run["prompt"], Decoding.from_dict(run["settings"])).output_ids
        )
        screenshot(page, f"concurrent_{draft.replace(':', '_')}")
    for context, *_ in sessions.values():
        context.close()
