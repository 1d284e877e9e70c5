"""Challenge: the room races its own drafting choices on one prompt, on a live leaderboard."""

import streamlit as st

from specviz.app import controls, drafting_challenge, room

st.set_page_config(page_title="Challenge · SpecViz", page_icon="🏁", layout="wide")
controls.page_intro(
    "Challenge — who drafts fastest?",
    "The presenter opens a challenge on a prompt and a token count. Pick a drafter, γ, a tree budget and a "
    "verification rule, and press Run: your choice is timed in pairs with the target alone on this server and joins "
    "the room's leaderboard. Identical choices share one measurement. A relaxed rule is faster but lossy, and the "
    "board says how far its output drifted.",
)
room.room_bar(room.page_id(__file__))
drafting_challenge.page()
