"""Acceptance: per-position rates and their conversions (rates.py: alpha, tau, acceptance length), the tier a
plan's acceptance comes from (tiers.py), the measured acceptance library and its family fit (library.py), and
token trees (trees.py)."""
