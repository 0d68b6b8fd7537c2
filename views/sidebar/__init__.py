"""The sidebar and the state every page shares: scenario inputs and the URL round trip (state.py), the model,
GPU and acceptance upload boxes, the price input, and the visitor's address (client.py)."""
