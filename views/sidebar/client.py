"""Which client a request comes from, for per-client limits (the Calibrate page's wrong-token rate limit).

The key is the TCP peer of the browser's websocket. `X-Forwarded-For` counts only when that peer is a proxy the
operator listed in $SPECPLAN_TRUSTED_PROXIES (addresses or networks, comma-separated, e.g. "127.0.0.1,10.0.0.0/8");
then the key is the right-most address of the header that is not itself a listed proxy (each proxy appends the
address it saw, so entries left of that one were written by the client and may be anything). A header sent by
anyone else is ignored: a visitor cannot pick its own bucket.

Streamlit 1.67 serves through uvicorn, whose ProxyHeadersMiddleware (uvicorn/middleware/proxy_headers.py) replaces
the peer with an `X-Forwarded-For` entry whenever the peer is in $FORWARDED_ALLOW_IPS (default "127.0.0.1,::1",
uvicorn/config.py), before st.context.ip_address sees it (streamlit/web/server/starlette/starlette_websocket.py).
`./dev app` starts the server with FORWARDED_ALLOW_IPS empty, so the address Streamlit reports is the peer; when
the server was started otherwise, socket_peer() recognises an address that uvicorn may have taken from the header
and uses the proxy it came through instead (a loopback proxy: 127.0.0.1; any other: one shared "unknown" key).
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterable, Sequence

TRUSTED_PROXIES_ENV = "SPECPLAN_TRUSTED_PROXIES"
UVICORN_TRUSTED_ENV = "FORWARDED_ALLOW_IPS"  # uvicorn's own list (uvicorn/config.py)
UVICORN_TRUSTED_DEFAULT = "127.0.0.1,::1"
UNKNOWN = "unknown"  # one key for every client whose address cannot be told apart
LOOPBACK = "127.0.0.1"

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_proxies(text: str, *, field: str = TRUSTED_PROXIES_ENV) -> tuple[Network, ...]:
    """'127.0.0.1, 10.0.0.0/8, ::1' -> networks (an address is a one-address network); '' -> ()."""
    nets = []
    for item in (s.strip() for s in text.split(",")):
        if not item:
            continue
        try:
            nets.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ValueError(f"{field}: {item!r} is not an IP address or network; allowed: comma-separated "
                             "addresses or CIDR networks such as 127.0.0.1, 10.0.0.0/8, ::1") from None
    return tuple(nets)


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """An X-Forwarded-For entry as an address: bare, `v4:port` or `[v6]:port`; None when it is none of these."""
    t = text.strip().strip('"')
    if t.startswith("[") and "]" in t:
        t = t[1:t.index("]")]
    elif t.count(":") == 1:
        t = t.split(":", 1)[0]
    try:
        return ipaddress.ip_address(t)
    except ValueError:
        return None


def _trusted(addr: ipaddress.IPv4Address | ipaddress.IPv6Address | None, proxies: Iterable[Network]) -> bool:
    if addr is None:
        return False
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return any(addr.version == n.version and addr in n for n in proxies)


def _entries(forwarded_for: Sequence[str]) -> list[str]:
    """Every X-Forwarded-For header (in the order received) split into its entries, left to right."""
    return [e.strip() for header in forwarded_for for e in header.split(",") if e.strip()]


def client_key(*, peer: str, forwarded_for: Sequence[str], trusted_proxies: Sequence[Network]) -> str:
    """The client a request stands for: `peer` unless it is a trusted proxy; then the right-most X-Forwarded-For
    entry that is not a trusted proxy (`peer` when the header is absent, or holds only trusted proxies, or its
    entry is not an address)."""
    if not peer or not _trusted(_address(peer), trusted_proxies):
        return peer or UNKNOWN
    for entry in reversed(_entries(forwarded_for)):
        addr = _address(entry)
        if addr is None:
            return peer  # the nearest proxy wrote something that is no address: it names no client
        if not _trusted(addr, trusted_proxies):
            return str(addr.ipv4_mapped or addr) if isinstance(addr, ipaddress.IPv6Address) else str(addr)
    return peer


def socket_peer(*, seen: str, forwarded_for: Sequence[str], server_trusted: str) -> str:
    """The TCP peer behind the address Streamlit reports (`seen`), given the X-Forwarded-For headers and uvicorn's
    trusted list (`server_trusted`, $FORWARDED_ALLOW_IPS). uvicorn replaced the peer by the right-most entry it does
    not trust (the left-most when it trusts them all) only when the peer was one it trusts: when `seen` is that
    entry, the peer was such a host (a loopback proxy when uvicorn trusts loopback only)."""
    entries = _entries(forwarded_for)
    if not entries or not server_trusted.strip():
        return seen
    always = server_trusted.strip() == "*"
    nets = () if always else parse_proxies(server_trusted.replace("*", ""), field=UVICORN_TRUSTED_ENV)
    pick = next((e for e in reversed(entries) if not (always or _trusted(_address(e), nets))), entries[0])
    if _address(pick) != _address(seen) and pick != seen:
        return seen
    if not always and nets and all(n.is_loopback for n in nets):
        return LOOPBACK
    return UNKNOWN


def client_address() -> str:
    """The key of the client of the running session (Streamlit glue for client_key)."""
    import streamlit as st

    from i18n import tr

    try:
        ip = st.context.ip_address
        headers = st.context.headers
        forwarded = list(headers.get_all("X-Forwarded-For")) if len(headers) else []
    except Exception:  # noqa: BLE001 - no request context (bare mode)
        return UNKNOWN
    if not isinstance(ip, str) or not ip:
        # Streamlit reports a loopback peer as None (streamlit/runtime/context.py); no headers: no session at all
        if ip is not None or not len(headers):
            return UNKNOWN
        ip = LOOPBACK
    try:
        peer = socket_peer(seen=ip, forwarded_for=forwarded,
                           server_trusted=os.environ.get(UVICORN_TRUSTED_ENV, UVICORN_TRUSTED_DEFAULT))
        return client_key(peer=peer, forwarded_for=forwarded,
                          trusted_proxies=parse_proxies(os.environ.get(TRUSTED_PROXIES_ENV, "")))
    except ValueError as e:  # a broken server setting: every client shares one key until it is fixed
        st.error(tr("Server setting: {e}", e=e))
        return UNKNOWN
