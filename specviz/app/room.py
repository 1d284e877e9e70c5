"""A room full of learners: room mode, the presenter and the follow-along, in the browser.

- Room mode (`SPECVIZ_ROOM=1`, or `bash scripts/app.sh --room`) locks the server down for learners:
  the pickers offer only the shipped and registered models (nothing typed), and distillation is the
  presenter's. Measured runs wait in one visible line (`service.in_line`).
- The presenter opens any page with `?presenter=KEY`, the key the teacher set at launch
  (`SPECVIZ_PRESENTER_KEY` or `--presenter-key`). The session keeps every power, shows large type
  and publishes where it is (page, position, run) to the one shared `Stage`. A browser session ends
  with a reload or a typed address, so the browser also keeps a cookie holding an HMAC of the key
  (never the key): a new session of that browser is the presenter's again until "Stop presenting".
- A learner opens the follow link (`?follow=1`): a fragment polls the stage twice a second and moves
  the learner's page to the presenter's. Closing the tab and opening the link again rejoins.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from pathlib import Path
from urllib.parse import urlsplit

import streamlit as st

from .stage import Slide, Stage

ROOM_ENV = "SPECVIZ_ROOM"
KEY_ENV = "SPECVIZ_PRESENTER_KEY"
APP_DIR = Path(__file__).resolve().parents[2]
FOLLOW_POLL_S = 0.5  # a follower sees a new step within this plus one page redraw
_PRESENTER, _FOLLOW, _FOLLOWED, _GOTO = "_room-presenter", "_room-follow", "_room-followed-version", "_room-goto"
_COOKIE, _COOKIE_SET, _COOKIE_CLEAR = "specviz-presenter", "_room-cookie-written", "_room-cookie-clear"
COOKIE_HOURS = 12  # a workshop day; "Stop presenting" ends it sooner
BIG_TYPE = """<style>
html { font-size: 21px !important; }
[data-testid="stMainBlockContainer"] p, [data-testid="stMainBlockContainer"] li { font-size: 1.2rem; }
</style>"""


def room_mode() -> bool:
    return os.environ.get(ROOM_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def presenter_key() -> str:
    return os.environ.get(KEY_ENV, "").strip()


def is_presenter() -> bool:
    return bool(st.session_state.get(_PRESENTER))


def locked() -> bool:
    """True for a learner in room mode: no typed models, no distillation."""
    return room_mode() and not is_presenter()


def following() -> bool:
    return bool(st.session_state.get(_FOLLOW)) and not is_presenter()


@st.cache_resource(show_spinner=False)
def stage() -> Stage:
    """The presenter's current slide, one per server, shared by every session."""
    return Stage()


def page_id(script: str) -> str:
    """A page's script as `st.switch_page` takes it: "home.py", "pages/1_Rounds.py"."""
    path = Path(script).resolve()
    return str(path.relative_to(APP_DIR)) if path.is_relative_to(APP_DIR) else path.name


def presenter_token(key: str) -> str:
    """What the presenter's browser keeps in its cookie: proof of the key that does not reveal it."""
    return hmac.new(key.encode(), b"specviz presenter", hashlib.sha256).hexdigest()


def _cookie(max_age: int, value: str = "") -> None:
    """Write (or with max_age 0, delete) the presenter cookie in this browser; value is hex, nothing to escape."""
    st.html(f'<script>document.cookie = "{_COOKIE}={value}; path=/; max-age={max_age}; SameSite=Strict";</script>',
            unsafe_allow_javascript=True)


def admit() -> None:
    """Read `?presenter=KEY` and `?follow=1` once (the key is then removed from the address bar), or a
    presenter cookie that this browser was given with the key."""
    query, key = st.query_params, presenter_key()
    if "presenter" in query:
        given = query["presenter"]
        del query["presenter"]  # never left on a projected screen
        if key and hmac.compare_digest(given.encode(), key.encode()):
            st.session_state[_PRESENTER] = True
        else:
            st.error("That presenter key is not this room's (or no key was set at launch): you are a learner here.",
                     icon="🔒")
    elif key and _PRESENTER not in st.session_state:  # a new session (a reload, a typed address) of this browser
        cookie = st.context.cookies.get(_COOKIE, "")
        st.session_state[_PRESENTER] = bool(cookie) and hmac.compare_digest(cookie, presenter_token(key))
    if is_presenter() and not st.session_state.get(_COOKIE_SET):
        with st.sidebar:
            _cookie(COOKIE_HOURS * 3600, presenter_token(key))
        st.session_state[_COOKIE_SET] = True
    if st.session_state.pop(_COOKIE_CLEAR, False):
        with st.sidebar:
            _cookie(0)
    if query.get("follow") == "1":
        st.session_state[_FOLLOW] = True


def stop_presenting() -> None:
    """The button's callback: a learner from now on, in this session and (the cookie goes) the next."""
    st.session_state.update({_PRESENTER: False, _COOKIE_SET: False, _COOKIE_CLEAR: True})


def room_bar(page: str) -> None:
    """The room's part of every page (`page` is its `page_id`): presenter tools and big type, or the
    learner's follow-along."""
    admit()
    if is_presenter():
        st.markdown(BIG_TYPE, unsafe_allow_html=True)  # st.html keeps its CSS to itself
        now = stage().current()
        if now is None or now.page != page:  # a new page; the page itself publishes its position
            publish(page)
        with st.sidebar:
            st.success("**Presenting.** Learners follow you with this link:", icon="🎤")
            st.code(follow_link(), language=None)
            st.caption("Keys: ← → step through the rounds (Rounds page) or the lesson (Lesson page); Home jumps to "
                       "the first round.")
            st.button("Stop presenting", key="room-stop-presenting", on_click=stop_presenting,
                      help="This browser becomes a learner's again (it forgets the key)")
    elif following():
        goto = st.session_state.pop(_GOTO, None)
        if goto is not None and goto != page:
            st.switch_page(goto)
        with st.sidebar:
            _follow(page)
    elif room_mode():
        st.sidebar.caption("Room mode: the models on offer are the room's; a presenter leads.")


def follow_link() -> str:
    parts = urlsplit(str(st.context.url or "http://localhost:8501"))
    return f"{parts.scheme}://{parts.netloc}/?follow=1"


def publish(page: str, state: dict | None = None) -> None:
    """The presenter's session shows this page (and these session-state entries) to the followers.
    A lesson page calls `publish("pages/…", {"lesson-step": 3})` with its step; only a presenter publishes."""
    if is_presenter():
        stage().publish(page, state or {})


def _apply(slide: Slide) -> None:
    """Copy the slide into this session and redraw the whole page (or open the presenter's page)."""
    for key, value in slide.state.items():
        st.session_state[key] = value
    st.session_state[_FOLLOWED] = slide.version
    st.session_state[_GOTO] = slide.page
    st.rerun()  # app-wide; `room_bar` switches page outside the fragment, where st.switch_page is reliable


@st.fragment(run_every=FOLLOW_POLL_S)
def _follow(page: str) -> None:
    """Poll the stage; move this page to the presenter's slide when it changes."""
    slide = stage().current()
    st.info("**Following the presenter.** This page moves with theirs.", icon="👀")
    if st.button("Stop following", key="room-unfollow"):
        st.session_state[_FOLLOW] = False
        st.rerun()
    if slide is None:
        st.caption("The presenter has not started yet.")
    elif slide.version != st.session_state.get(_FOLLOWED) or slide.page != page:
        _apply(slide)
