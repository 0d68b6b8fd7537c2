"""Where and when a measurement runs: the job entry point (jobs.py), runners (runners.py, ray_loopback.py),
admission and access (admission.py, access.py), and a running job's progress in words (progress.py)."""
