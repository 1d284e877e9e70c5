"""Lesson: speculative decoding in twelve steps, on real recorded runs; predict first, then see what the target did."""

import streamlit as st

from specviz import ui, ui_lesson, ui_room

st.set_page_config(page_title="Lesson · SpecViz", page_icon="🔎", layout="wide")
ui.page_intro(
    "Lesson — speculative decoding, step by step",
    "Twelve steps on real runs of SmolLM2-135M recorded by the project: every step shows at once, with no model "
    "loaded. At each step predict first, then see what the target did. Keys: → next, ← back.",
)
PAGE = ui_room.page_id(__file__)
ui_room.room_bar(PAGE)
step = ui_lesson.navigation()
ui_room.publish(PAGE, {ui_lesson.STEP: step})  # a presenter's step moves the followers' lessons
with ui.error_box("show this step"):
    ui_lesson.render(step)
