"""Shared-deployment defaults: `./dev app` and .streamlit/config.toml listen on 127.0.0.1 unless asked, and the
server `./dev app` starts leaves X-Forwarded-For to views/sidebar/client.py (uvicorn's FORWARDED_ALLOW_IPS empty).
The listening socket is read from the kernel's table (/proc/net/tcp), not from what the script prints."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_config_listens_on_loopback():
    cfg = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text(encoding="utf-8"))
    assert cfg["server"]["address"] == "127.0.0.1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> set[str]:
    """IPv4 addresses listening on `port` (state 0A in /proc/net/tcp)."""
    out = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        addr, p = local.split(":")
        if state == "0A" and int(p, 16) == port:
            out.add(socket.inet_ntoa(bytes.fromhex(addr)[::-1]))
    return out


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads Linux's socket table")
@pytest.mark.parametrize(("args", "env", "want"), [
    ((), {}, {"127.0.0.1"}),
    (("--address", "127.0.0.2"), {}, {"127.0.0.2"}),
    ((), {"SPECPLAN_ADDRESS": "127.0.0.3"}, {"127.0.0.3"}),
])
def test_dev_app_listens_where_asked(args, env, want, tmp_path):
    port = _free_port()
    base = {k: v for k, v in os.environ.items() if k not in ("SPECPLAN_ADDRESS", "FORWARDED_ALLOW_IPS")}
    proc = subprocess.Popen([str(ROOT / "dev"), "app", *args, "--server.port", str(port)], cwd=ROOT,
                            env={**base, **env, "SPECPLAN_STORE_URL": f"sqlite:///{tmp_path / 'store.db'}"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.time() + 90
        while time.time() < deadline and not _listening(port) and proc.poll() is None:
            time.sleep(0.3)
        assert _listening(port) == want
        environ = Path(f"/proc/{proc.pid}/environ").read_bytes().split(b"\0")  # `exec`: the pid is the server
        assert b"FORWARDED_ALLOW_IPS=" in environ
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
