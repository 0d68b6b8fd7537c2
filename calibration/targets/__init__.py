"""What can be measured: the admin-owned registry (registry.py, registry.yaml), the catalogue the calibration side
sees (catalog.py), real model assets (model_assets.py), whether a target fits memory (memory_fit.py), cost-only and
trained heads (heads.py, head_formats.py, trained_heads.py, speculators_train.py), and prompts from an uploaded
traffic export (traffic_prompts.py)."""
