"""What re-runs the plan: the seed article's claims checked against it (claims.py) and the SLO knee (knee.py)."""
