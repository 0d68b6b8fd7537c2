"""How sure: the tornado and the Monte Carlo over every assumption with its measured error (sensitivity.py), the
risk of switching (risk.py), and payback under the draws (payback_draws.py)."""
