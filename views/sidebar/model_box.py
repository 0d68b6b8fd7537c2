"""The sidebar's "Your model" box: upload or paste a Hugging Face config.json, parsed by profiles/model_config.py
into a catalogue model named `config:<digest>` and selected for every page. The config is kept in the store by that
digest (calibration/storage/kept_models.py), so the link (`model=config:<digest>`) reopens it on this server.

Everything a visitor wrote (the config's names and values, the parser's messages quoting them) is shown with
st.text: plain text, never Markdown or HTML."""

from __future__ import annotations

import streamlit as st

from calibration.storage import kept_models
from i18n import tr
from profiles.model_config import MAX_CONFIG_BYTES, ModelConfigError, is_config_name
from profiles.uploads import read_model_config
from views.sidebar.client import client_address

OWN_KEY = "_own_models"  # config:<digest> names this session parsed or opened (the model list shows them)
UPLOAD_KEY = "model_box_upload"
PASTE_KEY = "model_box_paste"
MESSAGE_KEY = "_model_box_message"  # the last outcome: ("error" | "ok", plain text)


def model_names() -> tuple[str, ...]:
    """The parsed configs this session uses: the ones it parsed or opened, and the link's (or the selected) model
    when it names one."""
    ss = st.session_state
    names = list(ss.get(OWN_KEY, []))
    current = ss.get("model")
    if isinstance(current, str) and is_config_name(current) and current not in names:
        names.append(current)
    return tuple(names)


def known(name: object) -> bool:
    """A `config:<digest>` name the store keeps (a link's model)."""
    return isinstance(name, str) and is_config_name(name) and kept_models.resolve(name) is not None


def with_models(cat, names: tuple[str, ...]):
    """`cat` with each kept config among `names` beside the catalogue's models (Catalog.with_models)."""
    extra = {}
    for name in names:
        spec = kept_models.resolve(name) if name not in cat.models else None
        if spec is not None:
            extra[name] = spec
    return cat.with_models(extra) if extra else cat


def model_options(cat) -> list[str]:
    """The Model list: the catalogue's own models, then this session's (and the link's) parsed configs."""
    ss = st.session_state
    own = [n for n in ss.get(OWN_KEY, []) if n in cat.models]
    current = ss.get("model")
    if isinstance(current, str) and is_config_name(current) and current not in own and current in cat.models:
        own.append(current)
        ss[OWN_KEY] = own
    return list(cat.models) + own


def label(cat, name: str) -> str:
    model = cat.models[name]
    return f"Your model: {model.label}" if is_config_name(name) else model.label


def _use() -> None:
    """The button's callback (before the rerun draws the Model list, so it may select the new model)."""
    ss = st.session_state
    upload = ss.get(UPLOAD_KEY)
    data = upload.getvalue() if upload is not None else (ss.get(PASTE_KEY) or "").encode("utf-8")
    if not data.strip():
        ss[MESSAGE_KEY] = ("error", "Upload or paste a config.json first.")
        return
    try:
        read_model_config(data)  # first in a child process, under the OS limits: keep() parses it again here
        parsed, why = kept_models.keep(data, visitor=client_address(),  # this visitor's share of the store
                                       file_name=upload.name if upload is not None else "")
    except ModelConfigError as exc:
        ss[MESSAGE_KEY] = ("error", f"Not used: {exc}")
        return
    spec = parsed.spec
    ss[OWN_KEY] = [*(n for n in ss.get(OWN_KEY, []) if n != spec.name), spec.name]
    ss["model"] = spec.name
    if parsed.weight_dtype:
        ss["dtype"] = parsed.weight_dtype
    full = spec.layers - spec.sliding_window_layers
    windowed = f" on its {full} full-attention layers (the other layers hold a window)" if full < spec.layers else ""
    lines = [f"Using {spec.label}.",
             f"{spec.layers} layers, {spec.total_params_b:,.2f}B parameters, {spec.active_params_b:,.2f}B active per "
             f"token, KV cache {full * spec.kv_elements_per_token_per_layer * 2 / 1024:,.1f} KiB per token in BF16"
             f"{windowed}.",
             *(f"- {n}" for n in parsed.notes)]
    if parsed.weight_dtype:
        lines.append(f"Weights set to {parsed.weight_dtype} (its quantization_config).")
    lines.append(f"This link will not reopen it: {why}." if why else "The page's link reopens it on this server.")
    ss[MESSAGE_KEY] = ("ok", "\n".join(lines))


def model_box(cat) -> None:
    """Draw the box (inside the sidebar)."""
    ss = st.session_state
    kind, text = ss.get(MESSAGE_KEY) or ("", "")
    with st.expander(tr("Your model (config.json)"), expanded=kind == "error"):
        st.caption(tr("A Hugging Face config.json: dense or MoE, GQA or MLA, sliding-window or linear-attention layers, "
                   "native MTP. Parameters, KV cache and experts are counted from it."))
        st.file_uploader(tr("Upload config.json"), type=["json"], key=UPLOAD_KEY)
        st.text_area(tr("or paste it"), key=PASTE_KEY, height=100, max_chars=MAX_CONFIG_BYTES)
        st.button(tr("Use this model"), key="model_box_use", on_click=_use)
        if kind == "error":
            st.error(tr("This config.json was not used:"))
        if kind:
            st.text(text)  # plain text: the message quotes the visitor's names and values
