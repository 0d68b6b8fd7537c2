"""Acceptance: per-position rates and their conversions (rates.py: alpha, tau, acceptance length), the tier a
plan's acceptance comes from (tiers.py), the measured acceptance library and its family fit (library.py),
token trees (trees.py), and the spread of tokens per verifier step with a request's TPOT at a percentile (tails.py)."""
