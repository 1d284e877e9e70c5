"""The class's state for this server, and who this learner is.

One `ClassStore` per server (`st.cache_resource`), in the SQLite file `SPECVIZ_CLASS_STORE` names, by default
`class.sqlite3` in SpecViz's cache folder: the room's answers, the reveals, the challenges and their leaderboards
outlive a reload and a server restart. A learner is an opaque random id kept in a browser cookie for a workshop
day, so a reload (a new Streamlit session) or a second tab of the same browser counts as the same learner, and no
name is ever asked or stored.
"""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path

import streamlit as st

from ..classroom.store import ClassStore
from ..models import cache_dir
from . import room

STORE_ENV = "SPECVIZ_CLASS_STORE"
# How often a tally or a leaderboard on screen is read again and redrawn: on the screen the room watches (the
# presenter's, or anyone's outside room mode) every 3 s, on each learner's own every 6 s. Each redraw costs a browser
# tens of milliseconds of CPU: a class of 30 learners redraws 5 times a second in all instead of 10.
LIVE_S = 3.0
LEARNER_LIVE_S = 6.0
_COOKIE, _ME, _WRITTEN = "specviz-learner", "_class-learner", "_class-learner-cookie"
COOKIE_HOURS = 12  # a workshop day
_ID = re.compile(r"^[0-9a-f]{32}$")


def live_s() -> float:
    """How often this session's tally or leaderboard is read again (LIVE_S, or LEARNER_LIVE_S for a learner)."""
    return LEARNER_LIVE_S if room.locked() else LIVE_S


def live(func):
    """`func` as a fragment that reads the store again every `live_s()` seconds (a tally, a leaderboard)."""
    return st.fragment(func, run_every=live_s())


def store_path() -> Path:
    return Path(os.environ.get(STORE_ENV) or cache_dir() / "class.sqlite3")


@st.cache_resource(show_spinner=False)
def store() -> ClassStore:
    """The server's class store, shared by every session (one connection behind one lock)."""
    return ClassStore(store_path())


def learner() -> str:
    """This browser's learner id: from its cookie, else a new one written into the cookie (once per session)."""
    me = st.session_state.get(_ME)
    if me is None:
        cookie = st.context.cookies.get(_COOKIE, "")
        me = st.session_state[_ME] = cookie if isinstance(cookie, str) and _ID.match(cookie) else uuid.uuid4().hex
    if not st.session_state.get(_WRITTEN):
        with st.sidebar:  # an id of hex digits: nothing to escape
            st.html(f'<script>document.cookie = "{_COOKIE}={me}; path=/; max-age={COOKIE_HOURS * 3600}; '
                    'SameSite=Strict";</script>', unsafe_allow_javascript=True)
        st.session_state[_WRITTEN] = True
    return me
