"""The Challenge page's parts: the presenter opens a challenge, each learner enters a choice, a live leaderboard.

An entry is measured like every run of the app: `service.measured_run` puts it in the one line (a waiting learner
sees its place), an identical run being measured is joined, and a choice already measured in this challenge is
not run again at all. The result goes to the class store (`class_state`), which keeps the leaderboard across
reloads and restarts; the board on every screen reads it again every few seconds (`class_state.live_s`).
"""

from __future__ import annotations

import streamlit as st

from ..classroom.challenge import RULES, Challenge, Choice, Result, csv_text, headline
from ..config import APP_MAX_GAMMA, APP_MAX_TREE_BUDGET, CHALLENGE_MAX_PROMPT_CHARS, CHALLENGE_TOKENS
from ..models import DEFAULT_TARGET
from . import class_state, controls, links, room, service
from .views.class_views import leaderboard_frame

DEFAULT_PROMPT = "Why does the Moon appear to change shape over the course of a month?"
_NOTE = "challenge-note"  # what this session's last entry came to: (challenge id, kind, text), until the next one
LINK = [
    links.Param("challenge-drafter", "drafter", choices=controls.draft_options),
    links.Param("challenge-gamma", "gamma", int, limits=(1, APP_MAX_GAMMA)),
    links.Param("challenge-tree", "tree", int, limits=(0, APP_MAX_TREE_BUDGET)),
    links.Param("challenge-rule", "rule", choices=lambda: RULES),
]
RULE_HELP = ("exact is lossless (the target's own output). relaxed accepts a draft within τ nats of the target's "
             "best token and in its top 3: faster, but the output drifts, and the board says by how much.")


def presenter_panel(now: Challenge | None) -> None:
    """Open a challenge (prompt and token count), close it, export its board."""
    store = class_state.store()
    with st.container(border=True, key="challenge-presenter"):
        st.markdown("**Presenter: run a challenge**")
        if "challenge-new-prompt" not in st.session_state:
            st.session_state["challenge-new-prompt"] = DEFAULT_PROMPT
        prompt = st.text_area(f"Challenge prompt (at most {CHALLENGE_MAX_PROMPT_CHARS:,} characters)",
                              key="challenge-new-prompt", height=90)
        tokens = st.select_slider("New tokens per entry", CHALLENGE_TOKENS, 32, key="challenge-new-tokens")
        c1, c2, c3 = st.columns(3)
        if c1.button("Open a new challenge", key="challenge-open", type="primary",
                     help="Every learner's entry continues this prompt; an open challenge closes"):
            with controls.error_box("open the challenge"):
                store.open_challenge(prompt, tokens)
                st.rerun()
        if now is not None and now.open:
            c2.button("Close the challenge", key="challenge-close", on_click=store.close_challenge, args=(now.id,),
                      help="No more entries; the board is final")
        if now is not None:
            c3.download_button("Leaderboard (CSV)", csv_text(store.leaderboard(now.id)),
                               f"challenge-{now.id}-leaderboard.csv", "text/csv", key="challenge-csv",
                               help="The board as it stands when the page was drawn (final once closed); no names")


def entry_form(now: Challenge) -> Choice:
    """The learner's choice: drafter, γ, tree budget and verification rule (kept in the URL)."""
    links.restore(LINK)
    c1, c2, c3, c4 = st.columns(4)
    drafter = c1.selectbox("Drafter", controls.draft_options(), key="challenge-drafter")
    gamma = c2.slider("Draft length γ", 1, APP_MAX_GAMMA, 4, key="challenge-gamma")
    tree = c3.slider("Tree budget (0 = a chain of γ)", 0, APP_MAX_TREE_BUDGET, 0, key="challenge-tree",
                     help="N drafts a tree of N nodes, γ deep, verified in one forward")
    rule = c4.selectbox("Verification", list(RULES), key="challenge-rule", help=RULE_HELP)
    links.share(LINK)
    return Choice(drafter, gamma, tree, rule)


def enter(now: Challenge, choice: Choice) -> None:
    """Measure this choice on the challenge's prompt (unless this challenge already has it) and enter it."""
    store, me = class_state.store(), class_state.learner()
    choice.check(controls.draft_options())
    kept = store.result(now.id, choice)
    if kept is not None:
        store.enter(now.id, me, kept, measured=False)
        st.session_state[_NOTE] = (now.id, "info", f"**{choice.label()}** was already measured in this challenge "
                                           f"({kept.spread}): your entry joins it, with no new run.")
        return
    comparison = service.measured_run(DEFAULT_TARGET, choice.drafter, now.prompt, choice.settings(now.tokens))
    shared = service.shared_label(comparison) is not None
    result = store.enter(now.id, me, Result.of(choice, comparison), measured=not shared)
    if result is None:
        st.session_state[_NOTE] = (now.id, "warning", "The presenter closed the challenge while your run was measured: "
                                              "it was not entered.")
        return
    how = " (served from an identical run measured for another session)" if shared else ""
    st.session_state[_NOTE] = (now.id, "success", f"Entered: **{choice.label()}**, {result.spread}{how}; output "
                                          f"{result.drift()}.")


def last_note(now: Challenge) -> None:
    """What this session's last entry in this challenge came to."""
    cid, kind, text = st.session_state.get(_NOTE, (None, "", ""))
    if cid == now.id:
        getattr(st, kind)(text)


def leaderboard(shown: Challenge | None) -> None:
    """The board, read again every few seconds; the page is redrawn when a challenge opens or closes."""
    class_state.live(_board)(shown)


def _board(shown: Challenge | None) -> None:
    store = class_state.store()
    now = store.challenge()
    if (now is None) != (shown is None) or (now is not None and (now.id, now.open) != (shown.id, shown.open)):
        st.rerun()
    if shown is None:
        return
    rows = store.leaderboard(shown.id, class_state.learner())
    st.subheader("Leaderboard" + ("" if shown.open else " (final)"))
    st.markdown(headline(rows))
    if rows:
        st.table(leaderboard_frame(rows))
        entries = sum(r.entries for r in rows)
        st.caption(f"{len(rows)} measured choice{'s' if len(rows) != 1 else ''}, {entries} "
                   f"entr{'ies' if entries != 1 else 'y'} · updated live · ranked by measured speedup; ⚠ marks a "
                   "lossy entry (a relaxed rule, or an output that is not the target's own), with its drift; "
                   "*timed* counts the measurements of a choice (identical entries share one); ★ marks yours.")


def page() -> None:
    """The whole page below its title: presenter tools, the challenge, the learner's entry, the board."""
    store = class_state.store()
    class_state.learner()  # the cookie that keeps this learner's entries across a reload
    for param in LINK:  # keep the learner's picks through a run that does not draw them (no challenge open)
        if param.key in st.session_state:
            st.session_state[param.key] = st.session_state[param.key]
    now = store.challenge()
    if room.is_presenter() or not room.room_mode():
        presenter_panel(now)
    if now is None:
        st.info("No challenge yet: the presenter opens one on a prompt and a token count. This page shows it as "
                "soon as it opens.", icon="🏁")
    else:
        st.subheader(f"Challenge {now.id}: continue this prompt for {now.tokens} new tokens"
                     + ("" if now.open else " — closed"))
        st.markdown("> " + now.prompt.replace("\n", "\n> "))
        if now.open:
            choice = entry_form(now)
            if st.button("Run my entry", key="challenge-run", type="primary",
                         help="Timed in pairs with the target alone, in the line like every measured run"):
                st.session_state.pop(_NOTE, None)
                with controls.error_box("enter this choice"):
                    enter(now, choice)
        else:
            st.info("This challenge is closed: the board below is final.", icon="🏁")
        last_note(now)
    leaderboard(now)
