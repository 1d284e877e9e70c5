"""Two sessions press Run on Home with the same settings: the second is served the first's measurement,
labelled shared; ticking "Measure afresh" times it again (the real embedded target, 16 tokens)."""

import pytest
from streamlit.testing.v1 import AppTest

from specviz.app import service
from specviz.app.shared_runs import SharedRuns

pytestmark = pytest.mark.slow


def home_run(fresh: bool = False) -> AppTest:
    at = AppTest.from_file("../../app.py", default_timeout=300)
    at.query_params["max_new"] = "16"
    at.query_params["prompt"] = "Name three colours of the rainbow."
    at.run()
    if fresh:
        at.checkbox(key="home-fresh").check().run()
    at.button(key="home-run").click().run()
    assert not at.exception and not at.error
    return at


def shared_notes(at: AppTest) -> list[str]:
    return [i.value for i in at.info if i.value.startswith("Shared measurement")]


def test_an_identical_run_is_served_shared_and_a_fresh_one_is_measured_again(one_pair):
    service.service().shared = SharedRuns()  # nothing measured yet on this server
    first = home_run()
    assert shared_notes(first) == []  # it measured its own run
    second = home_run()
    assert second.session_state["home-result"] is first.session_state["home-result"]
    notes = shared_notes(second)
    assert len(notes) == 1 and "measured on this server at" in notes[0] and "UTC" in notes[0]
    third = home_run(fresh=True)
    assert third.session_state["home-result"] is not first.session_state["home-result"]
    assert shared_notes(third) == []
    assert third.session_state["home-result"].spec.output_ids == first.session_state["home-result"].spec.output_ids
