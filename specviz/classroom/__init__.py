"""The room as a class, its pure side (no Streamlit): the learners' predictions tallied, and a drafting challenge.

- `tally`: a lesson question's answers counted across the room, and the sentence that sets them beside the
  measured answer.
- `challenge`: what a challenge is (a prompt and a token count), a learner's entry (drafter, γ, tree budget,
  verification rule), its measured result and the leaderboard that ranks them, with lossy entries marked.
- `store`: both kept in one small SQLite file behind a lock, so that a learner's reload and a server restart
  keep them.

`specviz.app.room` keeps one `ClassStore` per server in `st.cache_resource`; the Lesson page and the Challenge
page draw from it.
"""
