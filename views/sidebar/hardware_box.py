"""The sidebar's "Your GPU" box: upload or paste a GPU spec (the fields of a hardware.yaml entry, YAML or JSON),
read by profiles/hardware_spec.py into a GPU named `spec:<digest>` and selected for every page. The spec is kept in
the store by that digest (calibration/storage/kept_hardware.py), so the link (`hardware=spec:<digest>`) reopens it on
this server; views.sidebar.state.catalog() adds the session's specs to the catalogue with their borrowed step-time
terms.

Everything a visitor wrote (the spec's label and values, the reader's messages quoting them) is shown with st.text:
plain text, never Markdown or HTML."""

from __future__ import annotations

import streamlit as st

from calibration.storage import kept_hardware
from i18n import tr
from profiles.hardware_spec import MAX_SPEC_BYTES, HardwareSpecError, is_spec_name, with_hardware_spec
from profiles.uploads import read_gpu_spec
from views.sidebar import price as price_box
from views.sidebar.client import client_address

OWN_KEY = "_own_gpus"  # spec:<digest> names this session read or opened (the Hardware list shows them)
UPLOAD_KEY = "hw_box_upload"
PASTE_KEY = "hw_box_paste"
MESSAGE_KEY = "_hw_box_message"  # the last outcome: ("error" | "ok", plain text)


def spec_names() -> tuple[str, ...]:
    """The specs this session uses: the ones it read, and the link's (or the selected) GPU when it is one."""
    ss = st.session_state
    names = list(ss.get(OWN_KEY, []))
    current = ss.get("hardware")
    if is_spec_name(current) and current not in names:
        names.append(current)
    return tuple(names)


def known(name: object) -> bool:
    """A `spec:<digest>` name the store keeps (a link's GPU)."""
    return kept_hardware.resolve(name) is not None


def with_specs(cat, specs: tuple[str, ...]):
    """`cat` with each kept spec among `specs` beside the catalogue's GPUs, with its borrowed step-time terms."""
    for name in specs:
        hw = kept_hardware.resolve(name)
        if hw is not None:
            cat = with_hardware_spec(cat, hw)
    return cat


def label(cat, name: str) -> str:
    hw = cat.hardware[name]
    return f"Your GPU: {hw.label}" if is_spec_name(name) else hw.label


def _use() -> None:
    """The button's callback (before the rerun draws the Hardware list, so it may select the new GPU)."""
    ss = st.session_state
    upload = ss.get(UPLOAD_KEY)
    data = upload.getvalue() if upload is not None else (ss.get(PASTE_KEY) or "").encode("utf-8")
    if not data.strip():
        ss[MESSAGE_KEY] = ("error", "Upload or paste a GPU spec first.")
        return
    try:
        read_gpu_spec(data)  # first in a child process, under the OS limits: keep() parses it again here
        hw, why = kept_hardware.keep(data, visitor=client_address())  # this visitor's share of the store
    except HardwareSpecError as exc:
        ss[MESSAGE_KEY] = ("error", f"Not used: {exc}")
        return
    ss[OWN_KEY] = [*(n for n in ss.get(OWN_KEY, []) if n != hw.name), hw.name]
    ss["hardware"] = hw.name
    ss["price"], ss[price_box.PRICE_SET] = hw.usd_per_gpu_hour_mid, False  # its list midpoint, not entered
    lines = [f"Using {hw.label}.",
             f"{hw.hbm_gb:g} GB at {hw.hbm_bandwidth_gb_s:,.0f} GB/s; dense {hw.bf16_tflops:,.0f} BF16, "
             f"{hw.fp8_tflops:,.0f} FP8" + (f", {hw.fp4_tflops:,.0f} FP4" if hw.fp4_tflops else "") + " TFLOP/s; "
             f"up to {hw.max_tp} GPUs per replica.",
             "Step-time terms are borrowed from the nearest kernel-fitted GPU, with a stated band (the plan's "
             "assumptions name both).",
             f"This link will not reopen it: {why}." if why else "The page's link reopens it on this server."]
    ss[MESSAGE_KEY] = ("ok", "\n".join(lines))


def hardware_box() -> None:
    """Draw the box (inside the sidebar)."""
    ss = st.session_state
    kind, text = ss.get(MESSAGE_KEY) or ("", "")
    with st.expander(tr("Your GPU (spec)"), expanded=kind == "error"):
        st.caption(tr("A GPU the list does not hold: the fields of a hardware.yaml entry (label, hbm_gb, "
                   "hbm_bandwidth_gb_s, bf16_tflops, fp8_tflops, interconnect_gb_s, max_tp, usd_per_gpu_hour, price, "
                   "specs), YAML or JSON; profiles/samples/my_gpu.yaml is one."))
        st.file_uploader(tr("Upload a spec"), type=["yaml", "yml", "json"], key=UPLOAD_KEY)
        st.text_area(tr("or paste it"), key=PASTE_KEY, height=100, max_chars=MAX_SPEC_BYTES)
        st.button(tr("Use this GPU"), key="hw_box_use", on_click=_use)
        if kind == "error":
            st.error(tr("This GPU spec was not used:"))
        if kind:
            st.text(text)  # plain text: the message quotes the visitor's names and values
