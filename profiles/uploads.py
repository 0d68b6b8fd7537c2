"""The gate every visitor file goes through: each reader (traffic, config.json, a GPU spec, measured acceptance)
runs in a worker process under the operating system's limits (profiles.sandbox), and a file that needs more than
they allow is refused in the reader's own error type. The Traffic page, the sidebar's boxes, the shared-link
reopening of a kept upload and the CLI call these, never the readers directly; the readers' own checks stay the
first line."""

from __future__ import annotations

from planner.types import Hardware
from profiles.hardware_spec import HardwareSpecError, parse_hardware_spec
from profiles.measured_acceptance import MeasuredAcceptance, MeasuredAcceptanceError, read_measured_acceptance
from profiles.model_config import ModelConfigError, ParsedModel, parse_model_config
from profiles.sandbox import Kept, ParseLimits, run_bounded
from profiles.traffic import (
    FileInfo,
    ParseOptions,
    Problem,
    TrafficError,
    TrafficProfile,
    column_values,
    inspect_upload,
    parse_traffic,
)


def _traffic_refusal(why: str) -> TrafficError:
    return TrafficError([Problem(None, None, None, f"a file the server can read within its bounds: {why}")])


def read_traffic(name: str, data: bytes, catalog, options: ParseOptions | None = None, *,
                 limits: ParseLimits | None = None) -> TrafficProfile:
    """parse_traffic under the limits; raises TrafficError only. The fork server holds the catalogue (Kept): a call
    neither pickles nor unpickles it again."""
    return run_bounded(parse_traffic, name, data, Kept(catalog), options=options, refuse=_traffic_refusal,
                       what="traffic file", limits=limits)


def inspect_traffic(name: str, data: bytes, options: ParseOptions | None = None, *,
                    limits: ParseLimits | None = None) -> FileInfo:
    """inspect_upload under the limits (the Traffic page's first look); raises TrafficError only."""
    return run_bounded(inspect_upload, name, data, options, refuse=_traffic_refusal, what="traffic file",
                       limits=limits)


def traffic_column_values(name: str, data: bytes, column: str, options: ParseOptions | None = None, *,
                          limits: ParseLimits | None = None) -> list[tuple[str, int]]:
    """column_values under the limits; raises TrafficError only."""
    return run_bounded(column_values, name, data, column, options, refuse=_traffic_refusal, what="traffic file",
                       limits=limits)


def read_model_config(data: bytes, *, limits: ParseLimits | None = None) -> ParsedModel:
    """parse_model_config under the limits; raises ModelConfigError for anything it cannot model or read."""
    return run_bounded(parse_model_config, data, refuse=lambda why: ModelConfigError(f"config.json: {why}"),
                       what="config.json", limits=limits)


def read_acceptance_file(name: str, data: bytes, *, limits: ParseLimits | None = None) -> MeasuredAcceptance:
    """read_measured_acceptance under the limits; raises MeasuredAcceptanceError naming the file."""
    return run_bounded(read_measured_acceptance, name, data,
                       refuse=lambda why: MeasuredAcceptanceError(f"{name[:120]}: {why}"),
                       what="measured acceptance file", limits=limits)


def read_gpu_spec(data: bytes, *, limits: ParseLimits | None = None) -> Hardware:
    """parse_hardware_spec under the limits (the sidebar's GPU box); raises HardwareSpecError only."""
    return run_bounded(parse_hardware_spec, data, refuse=lambda why: HardwareSpecError(f"hardware spec: {why}"),
                       what="hardware spec", limits=limits)
