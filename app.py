"""Speculative-decoding cost and ROI planner: the Streamlit router.

    streamlit run app.py
"""

import streamlit as st

from i18n import tr
from views.parts import memory as memory_part
from views.sidebar import language as language_box
from views.sidebar import state

language_box.apply()  # this run's language (the link's, the user's pick or the browser's) before any text
st.set_page_config(page_title=tr("Speculative-decoding planner"), layout="wide")
memory_part.return_large_buffers_to_os()

url_problems = state.init()
state.sidebar()

# The default page is served at the app's root ("/"); Streamlit gives it no path of its own, so a typed /plan link
# would find no page. The Plan page is therefore also registered, hidden from the menu, at /plan; the link's query
# string (the scenario) is read either way.
pages = [
    st.Page("views/plan.py", title=tr("Plan"), url_path="home", default=True),
    st.Page("views/methods.py", title=tr("Methods"), url_path="methods"),
    st.Page("views/levers.py", title=tr("Levers"), url_path="levers"),
    st.Page("views/sensitivity.py", title=tr("Sensitivity"), url_path="sensitivity"),
    st.Page("views/traffic.py", title=tr("Traffic"), url_path="traffic"),
    st.Page("views/claims.py", title=tr("Claims"), url_path="claims"),
    st.Page("views/report.py", title=tr("Report"), url_path="report"),
]
pages += [st.Page("views/calibrate.py", title=tr("Calibrate"), url_path="calibrate"),
          st.Page("views/history.py", title=tr("History"), url_path="history")]
pages.append(st.Page("views/plan.py", title=tr("Plan"), url_path="plan", visibility="hidden"))

page = st.navigation(pages)
for problem in url_problems:
    st.warning(problem)
page.run()
state.write_url()
