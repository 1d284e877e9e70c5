"""SpecViz's entry point (`streamlit run app.py`): the page list, with Home first and the pages in file order.

Home is `home.py`; every other page is a script in pages/, titled and linked from its file name
(`pages/1_Rounds.py` is "Rounds" at /Rounds), as Streamlit names the pages of a pages/ folder.
"""

from pathlib import Path

import streamlit as st

HERE = Path(__file__).parent
home = st.Page("home.py", title="Home", default=True)
pages = [st.Page(f"pages/{script.name}") for script in sorted((HERE / "pages").glob("*.py"))]
st.navigation([home, *pages]).run()
