"""Pieces the pages share: text helpers (text.py), the report's builders (report.py), the memory and hardware
sections (memory.py, hardware.py) and the Calibrate page's charts (calibrate_charts.py)."""
