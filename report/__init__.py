"""The board report: one to three pages a CFO can forward (report.board builds its content from the Plan as a typed
record; report.board_html and report.board_pdf render that record, no number computed there). No Streamlit: the
Report page and the CLI (`python -m planner report`) both write it."""
