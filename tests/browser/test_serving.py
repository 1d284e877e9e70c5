"""The Serving page in Chromium: the shipped real-vLLM example with its charts, and a damaged upload refused."""

from playwright.sync_api import expect

from browser_helpers import screenshot, wait_idle


def test_serving_page(page, app_url, tmp_path):
    page.goto(f"{app_url}/Serving")
    wait_idle(page)
    expect(page.get_by_text("Speedup from speculation vs concurrency")).to_be_visible(timeout=60_000)
    expect(page.locator('[data-testid="stPlotlyChart"] .main-svg').first).to_be_attached()
    assert page.locator('[data-testid="stPlotlyChart"]').count() == 3
    expect(page.locator('[data-testid="stMetricValue"]').first).to_be_visible()
    expect(page.get_by_text("Shipped example: ngram (γ=4) on vLLM 0.32.0")).to_be_visible()
    assert page.locator('[data-testid="stException"]').count() == 0
    screenshot(page, "serving")

    damaged = tmp_path / "damaged.jsonl"
    damaged.write_text('{"schema": "specviz.engine/1", "role": "speculative"\n')
    page.locator('[data-testid="stFileUploader"]').first.locator('input[type="file"]').set_input_files(str(damaged))
    expect(page.get_by_text("Could not load the engine run")).to_be_visible(timeout=30_000)
    wait_idle(page)
    assert page.locator('[data-testid="stException"]').count() == 0
