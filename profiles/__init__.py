"""Profiles: YAML data for hardware, models, methods, workloads, languages, levers and prices."""

from profiles.catalog import (
    Catalog,
    ProfileError,
    UnknownNameError,
    cpu_hardware,
    hardware_for_device,
    load_catalog,
    unknown_name,
)

__all__ = ["Catalog", "ProfileError", "UnknownNameError", "cpu_hardware", "hardware_for_device", "load_catalog",
           "unknown_name"]
