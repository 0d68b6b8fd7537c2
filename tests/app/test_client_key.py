"""The client key behind the Calibrate page's rate limit (views/sidebar/client.py): a visitor's own X-Forwarded-For
never picks its bucket; a chain through the operator's trusted proxies names the client the nearest proxy saw. The
server side is uvicorn's real ProxyHeadersMiddleware (the one Streamlit 1.67 runs), so the address Streamlit would
report is uvicorn's, not this module's."""

from __future__ import annotations

import asyncio

import pytest

from views.sidebar.client import LOOPBACK, UNKNOWN, client_key, parse_proxies, socket_peer

NONE = parse_proxies("")
LOCAL = parse_proxies("127.0.0.1,::1")
TWO_HOPS = parse_proxies("127.0.0.1, 10.0.0.0/8")


@pytest.mark.parametrize(("peer", "xff", "trusted", "want"), [
    # an untrusted peer: whatever it writes is ignored
    ("203.0.113.7", ["6.6.6.6"], NONE, "203.0.113.7"),
    ("203.0.113.7", ["6.6.6.6"], LOCAL, "203.0.113.7"),
    ("203.0.113.7", ["127.0.0.1"], LOCAL, "203.0.113.7"),
    ("198.51.100.2", [], TWO_HOPS, "198.51.100.2"),
    # a trusted proxy appends the address it saw: the spoofed entries left of it do not count
    ("127.0.0.1", ["6.6.6.6, 203.0.113.7"], LOCAL, "203.0.113.7"),
    ("127.0.0.1", ["6.6.6.6", "203.0.113.7"], LOCAL, "203.0.113.7"),  # the same header twice
    # two trusted hops: the right-most address that is no trusted proxy
    ("127.0.0.1", ["1.2.3.4, 198.51.100.9, 10.1.2.3"], TWO_HOPS, "198.51.100.9"),
    ("127.0.0.1", ["1.2.3.4, 198.51.100.9", "10.1.2.3"], TWO_HOPS, "198.51.100.9"),
    # a client claiming to be a trusted proxy is skipped like one, the next address to the left is the client's
    ("127.0.0.1", ["10.9.9.9"], TWO_HOPS, "127.0.0.1"),
    # ports and IPv6 forms a proxy may write
    ("127.0.0.1", ["203.0.113.7:5555"], LOCAL, "203.0.113.7"),
    ("::1", ["[2001:db8::1]:443"], LOCAL, "2001:db8::1"),
    ("::ffff:127.0.0.1", ["203.0.113.7"], LOCAL, "203.0.113.7"),
    # a nearest entry that is no address names no client: the proxy itself is the key
    ("127.0.0.1", ["203.0.113.7, unknown"], LOCAL, "127.0.0.1"),
    ("127.0.0.1", [], LOCAL, "127.0.0.1"),
    ("", ["6.6.6.6"], LOCAL, UNKNOWN),
])
def test_client_key(peer, xff, trusted, want):
    assert client_key(peer=peer, forwarded_for=xff, trusted_proxies=trusted) == want


def test_a_rotating_spoofed_header_keeps_one_key():
    keys = {client_key(peer="203.0.113.7", forwarded_for=[f"6.6.6.{i}"], trusted_proxies=LOCAL) for i in range(50)}
    assert keys == {"203.0.113.7"}


def test_a_bad_trusted_proxy_list_names_the_setting_and_the_value():
    with pytest.raises(ValueError, match=r"SPECPLAN_TRUSTED_PROXIES: 'proxy\.local' is not an IP address"):
        parse_proxies("127.0.0.1, proxy.local")


def _uvicorn_sees(peer: str, headers: list[tuple[str, str]], forwarded_allow_ips: str) -> str:
    """The client address uvicorn's ProxyHeadersMiddleware hands the app (Streamlit's websocket.client.host)."""
    from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

    seen = {}

    async def app(scope, receive, send):
        seen["host"] = scope["client"][0]

    scope = {"type": "websocket", "client": (peer, 50000), "scheme": "ws",
             "headers": [(k.lower().encode(), v.encode()) for k, v in headers]}
    asyncio.run(ProxyHeadersMiddleware(app, trusted_hosts=forwarded_allow_ips)(scope, None, None))
    return seen["host"]


@pytest.mark.parametrize(("peer", "xff", "uvicorn_trusts", "ours", "want"), [
    # uvicorn's default (loopback trusted): a local process spoofing the header still lands in the loopback bucket
    ("127.0.0.1", "6.6.6.6", "127.0.0.1,::1", "", LOOPBACK),
    ("127.0.0.1", "6.6.6.6", "127.0.0.1,::1", "10.0.0.0/8", LOOPBACK),
    # ... unless the operator trusts the loopback proxy too: then its chain names the client
    ("127.0.0.1", "6.6.6.6, 203.0.113.7", "127.0.0.1,::1", "127.0.0.1", "203.0.113.7"),
    # a remote peer: uvicorn leaves it, so does the key
    ("203.0.113.7", "6.6.6.6", "127.0.0.1,::1", "", "203.0.113.7"),
    # ... but one naming itself looks exactly like a rewrite: it may share the loopback key (one more key at most,
    # never a fresh one per request; with FORWARDED_ALLOW_IPS empty there is nothing to undo)
    ("203.0.113.7", "203.0.113.7", "127.0.0.1,::1", "", LOOPBACK),
    ("203.0.113.7", "203.0.113.7", "", "", "203.0.113.7"),
    # `./dev app` (FORWARDED_ALLOW_IPS empty): uvicorn reports the peer itself
    ("127.0.0.1", "6.6.6.6", "", "", "127.0.0.1"),
    ("127.0.0.1", "6.6.6.6, 203.0.113.7", "", "127.0.0.1", "203.0.113.7"),
    ("10.0.0.5", "6.6.6.6, 198.51.100.9", "", "10.0.0.0/8", "198.51.100.9"),
    # uvicorn trusting everyone: no peer can be known, every such client shares one key
    ("203.0.113.7", "6.6.6.6", "*", "", UNKNOWN),
])
def test_the_key_behind_uvicorns_proxy_handling(peer, xff, uvicorn_trusts, ours, want):
    seen = _uvicorn_sees(peer, [("X-Forwarded-For", xff)], uvicorn_trusts)
    got = client_key(peer=socket_peer(seen=seen, forwarded_for=[xff], server_trusted=uvicorn_trusts),
                     forwarded_for=[xff], trusted_proxies=parse_proxies(ours))
    assert got == want, (seen, got)
