"""What calibration keeps: the store (store.py over store_file.py and store_schema.py), its record schema
(records.py), calibrated profiles (profiles_store.py, calibrated_catalog.py), and the files kept for shared links
(kept_traffic.py, kept_models.py, kept_hardware.py under kept_quota.py)."""
