"""The runs the lesson shows this session: the shipped recordings, or this session's live re-runs of them.

Every step renders at once from the recordings in assets/lesson (no model is loaded); its "Run it live"
button repeats the same runs on this machine through `service.measured_run` and shows them instead, for
this session. `data()` hands a step whichever is current, with the source of each, so that its question,
claim and view read the same runs.
"""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from ...comparison import Comparison
from ...config import Decoding
from ...lab.same_distribution import LabSetup
from ...lesson import recordings
from ...lesson.step import Data
from ...models import DEFAULT_TARGET
from .. import controls, service

STEP, LIVE = "lesson-step", "lesson-live"
LAB = "lab"  # the distribution lab, named beside the recordings' groups for its source and live button
LIVE_LAB_SAMPLES = 150  # per set when the lab is run live: about a minute on 2 CPU cores


def step_shown() -> int:
    """The 1-based step on screen, as the page's navigation set it before the step renders (for widget keys)."""
    return st.session_state[STEP]


@st.cache_resource(show_spinner=False)
def recording() -> recordings.Recording:
    """The shipped recordings, loaded once per process and shared read-only."""
    return recordings.load()


def _live() -> dict:
    return st.session_state.setdefault(LIVE, {"runs": {}, "lab": None, "sources": {}})


def runs(name: str) -> dict[str, Comparison]:
    """The runs of a group, live ones in place of the recordings once run."""
    live = _live()
    return {n: live["runs"].get(n, c) for n, c in recording().group(name).items()}


def source(name: str) -> str:
    """Where a group's runs (or the lab, "lab") come from: "rec", or this session's live run's tag."""
    return _live()["sources"].get(name, "rec")


def data(keys: tuple[str, ...]) -> Data:
    """The runs the steps show now; `keys` are the lesson's steps in order."""
    live = _live()
    return Data(runs, live["lab"] if live["lab"] is not None else recording().lab, source, keys)


def live_button(group_name: str, what: str) -> None:
    """'Run it live': the same runs as the recording, on this machine, through the library."""
    if not st.button(f"▶ Run it live ({what})", key=f"lesson-live-{group_name}-{step_shown()}",
                     help="Repeats this step's runs on this machine and shows them instead of the recording"):
        return
    live = _live()
    with controls.error_box("run it live"):
        if group_name == LAB:
            setup = replace(LabSetup(**recording().lab.setup), samples=LIVE_LAB_SAMPLES)
            bar = st.progress(0.0, text="Sampling…")
            live["lab"] = service.run_job(
                "record_lab", lambda e: bar.progress(e[1] / e[2], text=f"Sampling: {e[1]} of {e[2]} runs"),
                target=DEFAULT_TARGET, setup=setup)
        else:
            info = recording().manifest["runs"]
            for name, c in recording().group(group_name).items():
                settings = Decoding.from_dict(info[name]["settings"])
                live["runs"][name] = service.measured_run(DEFAULT_TARGET, info[name]["draft"], c.spec.prompt, settings)
        live["sources"][group_name] = f"live{len(live['sources']) + 1}-{id(live)}"
        st.rerun()


def provenance(data: Data, group_name: str, what: str = "") -> None:
    """Where the runs shown come from: the recording (machine, date, command) or this session."""
    manifest = recording().manifest
    made_runs = [info for info in manifest["runs"].values() if info["group"] == group_name]
    made = {k: made_runs[0].get(k, manifest[k]) for k in ("made_on", "date", "made_by")} if made_runs else manifest
    if data.source(group_name) == "rec":
        st.caption(f"Recorded by the project ({what or 'real runs'}) on {made['made_on']}, {made['date']}, with "
                   f"`{made['made_by']}`.")
    else:
        shared = [c for c in data.group(group_name).values() if service.shared_label(c)]
        st.caption(f"Run live on this machine in this session ({what or 'real runs'})"
                   + (f"; {len(shared)} of them served from another session's identical measurement on this server."
                      if shared else "."))
