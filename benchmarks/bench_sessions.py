"""Load benchmark (prints figures; no assertions): concurrent sessions opening the Plan page of the real app.

    python benchmarks/bench_sessions.py                  # 10 then 50 sessions
    python benchmarks/bench_sessions.py --sessions 100 --browsers 4
    python benchmarks/bench_sessions.py --server-option server.fileWatcherType=auto   # as before config.toml's "none"

Starts `streamlit run app.py` on a free loopback port with its own store (like tests/app/test_browser.py), opens
one page first (cold caches), then for each session count opens that many fresh browser contexts at once (each a
new Streamlit session: no cookies, no shared cache) spread over a few headless Chromium processes, and times each
from navigation until the page's main result is rendered (the "Recommendation:" line and the first metric). All
sessions of a round stay open until the round ends, so the server holds them together. Printed per round: page
time p50 / p95 / max, timeouts, the server's resident memory (RSS of the streamlit process: before, peak while
polled every 0.1 s, after the sessions closed) and its CPU seconds (user + system) per session.

The browsers run on the same machine as the server: on a small machine the page times are mostly the browsers'
own work (each context loads and runs Streamlit's frontend), the server's share is its CPU seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-dev-shm-usage"]
PAGE = "/"  # the Plan page (the app's default page)
CLK_TCK = os.sysconf("SC_CLK_TCK")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(store_dir: Path, options: list[str] = ()) -> tuple[subprocess.Popen, str]:
    """`streamlit run app.py` on a free loopback port; `options` are KEY=VALUE Streamlit settings on top of
    .streamlit/config.toml."""
    port = _free_port()
    extra = [a for kv in options for a in (f"--{kv.split('=', 1)[0]}", kv.split("=", 1)[1])]
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
         "--server.address", "127.0.0.1", "--server.port", str(port), "--browser.gatherUsageStats", "false", *extra],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(ROOT), "SPECPLAN_STORE_URL": f"sqlite:///{store_dir / 'store.db'}"})
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 90
    while time.time() < deadline:
        try:
            urllib.request.urlopen(url + "/_stcore/health", timeout=2)
            return proc, url
        except OSError:
            time.sleep(0.5)
    proc.kill()
    raise RuntimeError("streamlit did not start")


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime (fields 14 and 15 of proc(5))


class PeakRss:
    """The largest RSS of `pid` seen while polling every `every_s` seconds."""

    def __init__(self, pid: int, every_s: float = 0.1):
        self.pid, self.every_s, self.peak = pid, every_s, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_bytes(self.pid))
            self._stop.wait(self.every_s)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_bytes(self.pid))


async def _open(browser, url: str, timeout_s: float, opened: list):
    """Seconds from navigation until the Plan page's main result is rendered; None on a timeout or an error."""
    ctx = await browser.new_context(viewport={"width": 1400, "height": 1000})
    opened.append(ctx)
    page = await ctx.new_page()
    t0 = time.perf_counter()
    try:
        await page.goto(url + PAGE, wait_until="commit", timeout=timeout_s * 1000)
        left = lambda: max(1.0, timeout_s - (time.perf_counter() - t0)) * 1000  # noqa: E731
        await page.locator("[data-testid=stMarkdownContainer] p", has_text="Recommendation:").first.wait_for(
            timeout=left())
        await page.locator("[data-testid=stMetricValue]").first.wait_for(timeout=left())
        return time.perf_counter() - t0
    except Exception:  # noqa: BLE001 - a timeout or a crashed page counts as not opened
        return None


def _pct(xs: list[float], q: float) -> float:
    """Nearest-rank percentile."""
    s = sorted(xs)
    return s[max(0, math.ceil(q / 100 * len(s)) - 1)] if s else float("nan")


async def run_round(browsers, url: str, n: int, timeout_s: float, pid: int) -> dict:
    opened: list = []
    before = rss_bytes(pid)
    cpu0 = cpu_s(pid)
    t0 = time.perf_counter()
    with PeakRss(pid) as peak:
        times = await asyncio.gather(*(_open(browsers[i % len(browsers)], url, timeout_s, opened) for i in range(n)))
        wall = time.perf_counter() - t0
        cpu = cpu_s(pid) - cpu0
        await asyncio.gather(*(c.close() for c in opened))
    await asyncio.sleep(3.0)
    ok = [t for t in times if t is not None]
    return {"n": n, "ok": ok, "timeouts": n - len(ok), "wall_s": wall, "cpu_s": cpu, "before": before,
            "peak": peak.peak, "after": rss_bytes(pid), "load": os.getloadavg()[0]}


def _line(r: dict) -> str:
    ok = r["ok"]
    mib = 2 ** 20
    return (f"{r['n']:>4} sessions: page time p50 {_pct(ok, 50):6.1f} s, p95 {_pct(ok, 95):6.1f} s, max "
            f"{max(ok, default=float('nan')):6.1f} s; {r['timeouts']} timed out; round {r['wall_s']:.1f} s; server "
            f"RSS {r['before'] / mib:,.0f} -> peak {r['peak'] / mib:,.0f} MiB (after closing {r['after'] / mib:,.0f}"
            f" MiB); server CPU {r['cpu_s']:.1f} s ({r['cpu_s'] / r['n']:.2f} s per session); load average after "
            f"{r['load']:.1f}")


async def main(sessions: list[int], n_browsers: int, timeout_s: float, options: list[str]) -> None:
    from playwright.async_api import async_playwright

    with tempfile.TemporaryDirectory() as tmp:
        proc, url = start_server(Path(tmp), options)
        try:
            async with async_playwright() as p:
                browsers = [await p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
                            for _ in range(n_browsers)]
                print(f"server {url} (pid {proc.pid}{', ' + ' '.join(options) if options else ''}), {n_browsers} "
                      f"Chromium processes, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; "
                      f"server RSS at start {rss_bytes(proc.pid) / 2**20:,.0f} MiB")
                first = await run_round(browsers, url, 1, timeout_s, proc.pid)
                print("first open (cold caches): " + _line(first).split(": ", 1)[1])
                for n in sessions:
                    print(_line(await run_round(browsers, url, n, timeout_s, proc.pid)), flush=True)
                for b in browsers:
                    await b.close()
        finally:
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", default="10,50", help="comma-separated session counts, one round each")
    ap.add_argument("--browsers", type=int, default=2, help="Chromium processes the sessions are spread over")
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds before a page counts as timed out")
    ap.add_argument("--server-option", action="append", default=[], metavar="KEY=VALUE",
                    help="a Streamlit setting for the server, e.g. server.fileWatcherType=auto (repeatable)")
    a = ap.parse_args()
    if not Path(CHROMIUM).exists():
        sys.exit(f"{CHROMIUM} is not installed (./dev setup installs it)")
    asyncio.run(main([int(x) for x in a.sessions.split(",")], a.browsers, a.timeout, a.server_option))
