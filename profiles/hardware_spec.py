"""A user's own GPU: a YAML (or JSON) file with the fields of one hardware.yaml entry, validated into a Hardware
record named `spec:<digest>` and added to a catalogue with its borrowed step-time terms (planner/physics/borrowed.py).

    label: My GPU 120GB                      # shown with every number
    hbm_gb: 120
    hbm_bandwidth_gb_s: 5000
    bf16_tflops: 1000                        # dense peaks, TFLOP/s; one field per dtype: bf16, fp8, fp4
    fp8_tflops: 2000
    fp4_tflops: 0                            # optional; 0: no FP4 tensor cores
    interconnect_gb_s: 450                   # per-GPU unidirectional, for tensor-parallel all-reduce
    max_tp: 8
    architecture: hopper                     # optional: planner.physics.borrowed.ARCHITECTURES, or nvidia / amd
    scale_up_gpus: 8                         # optional: GPUs in one NVLink / Infinity Fabric domain
    usd_per_gpu_hour: {low: 2.0, high: 4.0}
    price: {source: "our cloud contract", date: 2026-12-01}
    specs: {source: "vendor datasheet", date: 2026-06-01}
    efficiency: {eta_bw: 0.7}                # optional: Efficiency fields over hardware.yaml's defaults (a GPU
                                             # borrowing from its own architecture runs on the donor's eta_*)

profiles/samples/my_gpu.yaml is a complete one. Errors (HardwareSpecError) name the field, the value and what is
allowed, on one line.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import re
from pathlib import Path

import yaml

from planner.types import Hardware
from profiles.catalog import DATA_DIR, BuildContext, Catalog, NamedTable, ProfileError, build, prepare_hardware

MAX_SPEC_BYTES = 64 * 1024  # a hardware record is well under 2 KiB; the cap stops a large or nested document early
SPEC_PREFIX = "spec:"
# the dtypes a peak field may name (`<dtype>_tflops`); fp4 covers NVFP4 and MXFP4 (planner.types.Hardware.peak_tflops)
PEAK_DTYPES = ("bf16", "fp8", "fp4")


class HardwareSpecError(ProfileError):
    """A user's GPU spec that cannot be planned on: the message names the field, the value and what is allowed."""


def is_spec_name(name: object) -> bool:
    return isinstance(name, str) and name.startswith(SPEC_PREFIX)


def _load(data: bytes | str, where: str) -> tuple[dict, str]:
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    if len(raw) > MAX_SPEC_BYTES:
        raise HardwareSpecError(f"{where}: {len(raw):,} bytes: expected a hardware spec of at most "
                                f"{MAX_SPEC_BYTES:,} bytes")
    try:
        text = raw.decode("utf-8")
        doc = json.loads(text) if text.lstrip().startswith("{") else yaml.safe_load(text)
    except (UnicodeDecodeError, json.JSONDecodeError, yaml.YAMLError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise HardwareSpecError(f"{where}: not valid YAML or JSON ({first})") from None
    if not isinstance(doc, dict):
        raise HardwareSpecError(f"{where}: {type(doc).__name__}: expected a mapping of hardware fields "
                                "(label, hbm_gb, hbm_bandwidth_gb_s, ...)")
    return doc, hashlib.sha256(raw).hexdigest()[:12]


@functools.lru_cache(maxsize=1)
def _defaults() -> dict:
    """hardware.yaml's default efficiencies (the `defaults.efficiency` mapping): a spec's efficiency starts there."""
    doc = yaml.safe_load((DATA_DIR / "hardware.yaml").read_text(encoding="utf-8"))
    return dict(doc["defaults"]["efficiency"])


def parse_hardware_spec(data: bytes | str, *, where: str = "hardware spec") -> Hardware:
    """The bytes of a spec file -> a Hardware named `spec:<sha256 prefix>`. Raises HardwareSpecError."""
    doc, digest = _load(data, where)
    name = SPEC_PREFIX + digest
    ctx = BuildContext(where, name)
    for key, value in doc.items():
        m = re.fullmatch(r"(\w+?)_tflops", str(key))
        if m and m.group(1) not in PEAK_DTYPES:
            raise HardwareSpecError(f"{where}: field '{key}' = {value!r}: unknown dtype '{m.group(1)}': expected "
                                    f"one of {', '.join(d + '_tflops' for d in PEAK_DTYPES)} (fp4: NVFP4 / MXFP4)")
    raw = {k: v for k, v in doc.items() if k != "name"}
    raw["name"] = name
    eff = raw.get("efficiency", {})
    if not isinstance(eff, dict):
        raise HardwareSpecError(f"{where}: field 'efficiency' = {eff!r}: expected a mapping of efficiency fields")
    raw["efficiency"] = {**_defaults(), **eff}
    if "kind" in raw:
        raise HardwareSpecError(f"{where}: field 'kind' = {raw['kind']!r}: expected no 'kind' (a spec is a GPU)")
    try:
        raw = prepare_hardware(name, raw, ctx)
        hw = build(Hardware, raw, ctx)
    except HardwareSpecError:
        raise
    except ProfileError as exc:
        raise HardwareSpecError(str(exc)) from None
    if hw.usd_per_gpu_hour_low > hw.usd_per_gpu_hour_high:
        raise HardwareSpecError(f"{where}: field 'usd_per_gpu_hour' = {doc.get('usd_per_gpu_hour')!r}: "
                                "expected low <= high")
    return hw


def read_hardware_spec(path: str | Path) -> Hardware:
    """parse_hardware_spec of a file, reading no more than MAX_SPEC_BYTES + 1 bytes of it."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_SPEC_BYTES + 1)
    except OSError as exc:
        raise HardwareSpecError(f"--hardware-spec={str(path)!r}: cannot read the file ({exc.strerror})") from None
    return parse_hardware_spec(data, where=Path(path).name)


def with_hardware_spec(catalog: Catalog, hw: Hardware) -> Catalog:
    """The catalogue with the user's GPU beside the shipped ones and its borrowed step-time terms (donor, overhead
    scale, band: planner/physics/borrowed.py), as the catalogue's own GPUs without kernel data get them."""
    from profiles.borrowed import BORROWED_YAML, borrowed_fields  # noqa: PLC0415

    table = NamedTable("hardware", {**catalog.hardware, hw.name: hw})
    cat = dataclasses.replace(catalog, hardware=table)
    if not catalog.fitted_efficiency:
        return cat
    doc = yaml.safe_load((DATA_DIR / "fitted" / "steptime_vllm.yaml").read_text(encoding="utf-8")) or {}
    return dataclasses.replace(cat, **borrowed_fields(cat, doc, BORROWED_YAML))
