"""The sidebar and the state every page shares: scenario inputs and the URL round trip (state.py), the model,
GPU and acceptance upload boxes, the price input, the TTFT SLO (slo_box.py), and the visitor's address (client.py)."""
