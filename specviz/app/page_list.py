"""Keep app.py's page list (Home first) when a learner opens a page's own address first.

Streamlit decides once per server process whether the app is a `pages/` folder app: while no
script has called `st.navigation`, a request for /Rounds runs pages/1_Rounds.py on its own, with a
page list made from the folder, whose first entry is the main script's file name ("app"). Once
app.py has run, the process uses its `st.navigation` list. A room's deep links open pages
directly, so on a fresh server every learner saw "app" in place of "Home" until someone opened
the front page. A page that finds itself run the folder way switches the process over and runs
again through app.py. This reads one attribute of Streamlit's PagesManager (1.67), the only
place that decision is kept.
"""

from __future__ import annotations

import streamlit as st


def use_app_navigation() -> None:
    """Rerun through app.py (its page list, Home first) if this page was run as a pages/ folder page."""
    try:
        from streamlit.runtime.pages_manager import PagesManager
    except ImportError:  # another Streamlit: its own page handling stands
        return
    if getattr(PagesManager, "uses_pages_directory", None):
        PagesManager.uses_pages_directory = False
        st.rerun()
