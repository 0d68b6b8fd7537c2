"""The command line (`python -m planner ...`): joins the planner with the profiles (catalogue, uploads) and
prints JSON (main.py)."""
