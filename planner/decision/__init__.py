"""The decision: recommend or stay, and why (verdict.py), levers and their payback (levers.py), the cheapest GPU
type (hardware_choice.py), and the assumptions the answer shows (assumptions.py)."""
