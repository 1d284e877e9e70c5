"""SpecViz Home: the idea in one picture, a recorded run at once, and a live run in one click."""

from dataclasses import replace

import streamlit as st

from specviz.app import controls, links, race_controls, room, service
from specviz.app.views import figures, tokens
from specviz.config import Decoding
from specviz.models import DEFAULT_TARGET

st.set_page_config(page_title="SpecViz — speculative decoding, seen and measured", page_icon="🔎", layout="wide")
controls.page_intro(
    "SpecViz — see and measure speculative decoding",
    "A small **draft** model guesses the next γ tokens; the large **target** model checks all of them in "
    "**one** forward pass; the longest agreeing prefix is kept, the first disagreement is replaced by the "
    "target's own token — so the output is exactly the target's, produced in fewer target passes.",
)
PAGE = room.page_id(__file__)
room.room_bar(PAGE)
LENGTHS = (16, 32, 64)
LINK = [links.Param("home-prompt", "prompt"), links.Param("home-tokens", "max_new", int, choices=lambda: LENGTHS)]
links.restore(LINK)

T = tokens.token_span
st.html(
    tokens.CSS
    + '<div class="sv-text" style="display:grid;grid-template-columns:auto 1fr;gap:0.4rem 1rem;align-items:center">'
    + "<b>1 · draft proposes γ=4</b><div>The cat "
    + "".join(T(w, "drafted", "proposed by the draft") for w in (" sat", " on", " a", " mat"))
    + "</div><b>2 · target verifies in one pass</b><div>p(sat)=0.62 ≥ q · p(on)=0.71 ≥ q · p(a)=0.05 &lt; "
      "q(a)=0.40</div>"
    + "<b>3 · keep prefix, resample</b><div>The cat "
    + T(" sat", "accepted", "accepted")
    + T(" on", "accepted", "accepted")
    + T(" a", "rejected", "rejected")
    + T(" mat", "rejected", "discarded with it")
    + T(" the", "resampled", "drawn from norm(max(0, p − q))")
    + "</div><b>or, all kept</b><div>The cat "
    + "".join(T(w, "accepted", "accepted") for w in (" sat", " on", " the", " mat"))
    + T(".", "bonus", "bonus token from the target's last position")
    + "</div></div>"
)
controls.legend()

st.subheader("The race: the same answer, sooner")
st.write(
    "The target alone and speculative runs of the same prompt, replayed at the pace they were measured: the "
    "target alone delivers one token per step, speculative decoding a burst per round."
)
race_controls.show_shipped("home")
room.publish(PAGE, {"home-race": race_controls.published("home")})

st.subheader("A recorded run")
demo = controls.load_demo()
if demo is not None:
    ok, message = figures.fidelity(demo)
    made = controls.demo_info()
    tree = demo.spec.settings.get("tree", {})
    st.caption(
        f"{demo.spec.draft} drafting for {demo.spec.target}, γ={demo.spec.settings['gamma']}"
        f"{', a tree of ' + str(tree['budget']) + ' nodes' if tree.get('budget') else ''}, recorded on "
        f"{made.get('made_on', demo.spec.device)}{', ' + made['date'] if 'date' in made else ''}. {message}. "
        f"Prompt: {demo.spec.prompt[:120]}"
    )
    st.html(tokens.output_html(demo.spec))
    controls.headline(demo)

st.subheader("Your turn: a live run of the default pair")
# The recorded run's drafter and settings, on its exact prompt (line breaks included), at the length picked.
recorded = Decoding.from_dict(demo.spec.settings) if demo else Decoding()
draft = demo.spec.draft if demo else controls.draft_options()[0]
prompt = st.text_area(
    "Prompt",
    value=demo.spec.prompt if demo else "Explain speculative decoding in one paragraph.",
    key="home-prompt",
    height=110,
)
length = st.select_slider("New tokens", LENGTHS, 64, key="home-tokens", help="A shorter run finishes sooner")
links.share(LINK)
run_col, fresh_col, link_col = st.columns([4, 1, 1])
links.link_box(link_col)
fresh = service.fresh_checkbox("home-fresh", fresh_col)
shape = f", tree of {recorded.tree.budget}" if recorded.tree.on else ""
if run_col.button(
    f"Run {draft} → {DEFAULT_TARGET} (γ={recorded.gamma}{shape}, {length} tokens)", type="primary", key="home-run"
):
    with controls.error_box("run"):
        settings = replace(recorded, max_new_tokens=length)
        st.session_state["home-result"] = service.measured_run(DEFAULT_TARGET, draft, prompt, settings, fresh=fresh)
live = st.session_state.get("home-result")
if live is not None:
    ok, message = figures.fidelity(live)
    (st.success if ok else st.warning)(message)
    service.shared_note(live)
    st.html(tokens.output_html(live.spec))
    controls.headline(live)
    st.page_link("pages/1_Rounds.py", label="Step through it round by round →")

st.divider()
st.markdown(
    "**Pages**: *Rounds* (every token of a run) · *Draft length* (sweep γ) · *Compare drafts* · "
    "*Verification tolerance* (speed vs quality) · *Theory* (the formula and a worksheet) · "
    "*Serving* (a vLLM server under load, beside the lab) · *Challenge* (a room's drafting challenge, ranked live)."
)
# Start the measurement worker last (it loads the default target; the first time it converts the GGUF file): the
# page above is already shown, and the first Run finds the worker ready.
with controls.error_box("start the measurement worker"):
    service.start_worker()
