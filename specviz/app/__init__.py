"""The Streamlit app's library side: every module that imports streamlit lives here.

`controls` (the pickers, the measured run, the export buttons), `lesson/` (the Lesson page, one file per step),
`sweep_controls`, `autoplay` and `room` (the presenter and the followers), the presenter's `stage`, the
`run_queue` and the deep `links`; `views/` draws figures and tables from records (plotly and pandas, no streamlit).
"""
