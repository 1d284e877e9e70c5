"""Lesson: speculative decoding step by step, on real recorded runs; predict first, then see what the target did."""

import streamlit as st

from specviz.app import controls, lesson, race_controls, room

st.set_page_config(page_title="Lesson · SpecViz", page_icon="🔎", layout="wide")
controls.page_intro(
    "Lesson — speculative decoding, step by step",
    f"{len(lesson.STEPS)} steps on real runs of SmolLM2-135M recorded by the project: every step shows at once, with "
    f"no "
    "model loaded. At each step predict first, then see what the target did. Keys: → next, ← back.",
)
PAGE = room.page_id(__file__)
room.room_bar(PAGE)
step = lesson.navigation()
room.publish(PAGE, {lesson.STEP: step})  # a presenter's step moves the followers' lessons
if step == 1:  # the opening picture: the same answer, sooner
    st.subheader("The race: the target alone against speculative decoding, at their measured pace")
    race_controls.show_shipped("lesson")
with controls.error_box("show this step"):
    lesson.render(step)
