"""What every measuring path shares: engine settings (engine_settings.py), the engine's own check of a
configuration (engine_check.py), child processes that never outlive their parent (procs.py), the measurement
protocol (protocol.py), readers of the engine's metrics (metrics.py) and the machine's load (machine_load.py)."""
