"""Fits of stored runs: acceptance and step time (fit.py), the planner's model applied to the runs (predict.py),
what drafting costs per method (head_cost.py, method_costs.py), the report (report.py, plain_report.py), and the nightly
regression rule (regress.py)."""
