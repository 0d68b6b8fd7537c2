"""Values read back from a shared link's query string (views.sidebar.state.Param parsers) that more than one sidebar
box uses."""

from __future__ import annotations

from typing import Any


def url_bool(text: Any) -> bool:
    """'1', 'true', 'yes', 'on' (any case) or True -> True; '0', 'false', 'no', 'off' or False -> False; anything else
    raises ValueError (the link's value is then ignored and said)."""
    if isinstance(text, bool):
        return text
    low = str(text).lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise ValueError(text)
